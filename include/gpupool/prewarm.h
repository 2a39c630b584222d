// gpupool/prewarm.h — the outcome of an asynchronous Prewarm.

#ifndef GPUPOOL_PREWARM_H_
#define GPUPOOL_PREWARM_H_

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gpupool/export.h"

namespace gpupool {

namespace internal {
struct PrewarmState;
template <typename Kind>
class KeyedPool;
}  // namespace internal

// Copyable handle on a background prewarm. Thread-safe.
class GPUPOOL_EXPORT PrewarmTicket {
 public:
  // An empty ticket: done, Wait() returns OK. Tickets that track a prewarm
  // come from StreamPool::PrewarmAsync and EventPool::PrewarmAsync only.
  PrewarmTicket() = default;
  // Blocks until the prewarm finished; its status (OK when it was empty).
  absl::Status Wait() const;
  // Waits at most `timeout`; DeadlineExceeded if it is still running.
  absl::Status WaitFor(absl::Duration timeout) const;
  bool done() const;

 private:
  template <typename Kind>
  friend class internal::KeyedPool;
  explicit PrewarmTicket(std::shared_ptr<internal::PrewarmState> state)
      : state_(std::move(state)) {}

  std::shared_ptr<internal::PrewarmState> state_;
};

}  // namespace gpupool

#endif  // GPUPOOL_PREWARM_H_
