// gpupool/prewarm.h — the outcome of an asynchronous Prewarm.

#ifndef GPUPOOL_PREWARM_H_
#define GPUPOOL_PREWARM_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace gpupool {

namespace internal {
struct PrewarmState;
}  // namespace internal

// Copyable handle on a background prewarm. Thread-safe.
class PrewarmTicket {
 public:
  PrewarmTicket() = default;
  explicit PrewarmTicket(std::shared_ptr<internal::PrewarmState> state)
      : state_(std::move(state)) {}
  // Blocks until the prewarm finished; its status (OK when it was empty).
  absl::Status Wait() const;
  // Waits at most `timeout`; DeadlineExceeded if it is still running.
  absl::Status WaitFor(absl::Duration timeout) const;
  bool done() const;

 private:
  std::shared_ptr<internal::PrewarmState> state_;
};

}  // namespace gpupool

#endif  // GPUPOOL_PREWARM_H_
