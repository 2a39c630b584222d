// PrewarmTicket: waits on a background prewarm; see gpupool/prewarm.h.

#include "gpupool/prewarm.h"

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "src/pools/prewarm_state.h"

namespace gpupool {

absl::Status PrewarmTicket::Wait() const {
  return WaitFor(absl::InfiniteDuration());
}

absl::Status PrewarmTicket::WaitFor(absl::Duration timeout) const {
  if (state_ == nullptr) return absl::OkStatus();
  // Finished: no lock (see PrewarmState::finished).
  if (state_->finished.load(std::memory_order_acquire)) {
    return state_->final_status();
  }
  absl::MutexLock lock(&state_->mu);
  if (!state_->mu.AwaitWithTimeout(absl::Condition(&state_->done), timeout)) {
    return absl::DeadlineExceededError("prewarm still running");
  }
  return state_->status;
}

bool PrewarmTicket::done() const {
  if (state_ == nullptr) return true;
  return state_->finished.load(std::memory_order_acquire);
}

}  // namespace gpupool
