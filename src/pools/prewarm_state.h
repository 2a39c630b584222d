// Shared state behind a PrewarmTicket: the background prewarm's outcome.

#ifndef GPUPOOL_SRC_POOLS_PREWARM_STATE_H_
#define GPUPOOL_SRC_POOLS_PREWARM_STATE_H_

#include <atomic>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace gpupool::internal {

struct PrewarmState {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
  // Set (release) once `status` is final and never written again: a finished
  // ticket is read without the lock, which a fork()ed child must never take
  // (with Abseil's deadlock detection on, any absl::Mutex operation takes a
  // process-wide lock another parent thread may have held at fork time).
  std::atomic<bool> finished{false};

  void Finish(absl::Status result) {
    absl::MutexLock lock(&mu);
    status = std::move(result);
    done = true;
    finished.store(true, std::memory_order_release);
  }
  // For a state no other thread can see yet: a ticket born finished (bad
  // input, forked, exiting) takes no lock.
  void FinishUnshared(absl::Status result) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    status = std::move(result);
    done = true;
    finished.store(true, std::memory_order_release);
  }
  // Only after `finished` was seen true.
  const absl::Status& final_status() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return status;
  }
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_POOLS_PREWARM_STATE_H_
