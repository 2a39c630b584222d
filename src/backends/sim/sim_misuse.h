// SimMisuseLog: where the simulator reports misuse (use after destroy, double
// destroy, wrong device, foreign handles, leaks): counted, logged in order and
// handed to SimOptions::on_misuse.
//
// Thread safety: all methods may be called concurrently. The hook runs with
// no internal lock held (it may call back into the backend): a misuse found
// under a lock is held by a Reporter and reported when the Reporter, declared
// before the lock, is destroyed after it.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_MISUSE_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_MISUSE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace gpupool {
namespace sim_internal {

class SimMisuseLog {
 public:
  // Holds a misuse found under an internal lock and reports it on
  // destruction. Declared before the lock, it is destroyed after it.
  class Reporter {
   public:
    explicit Reporter(SimMisuseLog& log) : log_(log) {}
    Reporter(const Reporter&) = delete;
    Reporter& operator=(const Reporter&) = delete;
    ~Reporter();
    // Records `message`; returns the kCaller status the primitive returns.
    absl::Status Flag(std::string message);

   private:
    SimMisuseLog& log_;
    std::string message_;
  };

  // `hook` is called once per misuse; empty: print to stderr.
  explicit SimMisuseLog(std::function<void(absl::string_view)> hook);
  SimMisuseLog(const SimMisuseLog&) = delete;
  SimMisuseLog& operator=(const SimMisuseLog&) = delete;

  // Counts and logs `message` and runs the hook. Call it without holding any
  // internal lock.
  void Report(std::string message);

  int64_t count() const { return count_.load(std::memory_order_relaxed); }
  std::vector<std::string> messages() const;

 private:
  const std::function<void(absl::string_view)> hook_;
  std::atomic<int64_t> count_{0};
  mutable absl::Mutex mu_;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_MISUSE_H_
