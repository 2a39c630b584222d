// Shared state behind a PrewarmTicket: the background prewarm's outcome.

#ifndef GPUPOOL_SRC_CORE_PREWARM_STATE_H_
#define GPUPOOL_SRC_CORE_PREWARM_STATE_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace gpupool::internal {

struct PrewarmState {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);

  void Finish(absl::Status result) {
    absl::MutexLock lock(&mu);
    status = std::move(result);
    done = true;
  }
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_CORE_PREWARM_STATE_H_
