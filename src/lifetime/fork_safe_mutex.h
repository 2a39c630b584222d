// ForkSafeMutex: a lock that may be held across fork() and released (or
// re-initialised) in the child. Deliberately not an absl::Mutex: an Abseil
// built without NDEBUG (Debian's) runs deadlock detection inside Lock/Unlock
// under a process-wide spinlock, which another parent thread may hold at fork
// time — the child's Unlock would then spin forever inside fork(). A pthread
// mutex has no such state.

#ifndef GPUPOOL_SRC_LIFETIME_FORK_SAFE_MUTEX_H_
#define GPUPOOL_SRC_LIFETIME_FORK_SAFE_MUTEX_H_

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace gpupool {

class ABSL_LOCKABLE ForkSafeMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE ForkSafeLock {
 public:
  explicit ForkSafeLock(ForkSafeMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  ~ForkSafeLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  ForkSafeLock(const ForkSafeLock&) = delete;
  ForkSafeLock& operator=(const ForkSafeLock&) = delete;

 private:
  ForkSafeMutex* const mu_;
};

}  // namespace gpupool

#endif  // GPUPOOL_SRC_LIFETIME_FORK_SAFE_MUTEX_H_
