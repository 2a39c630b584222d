// gpupool's hot-path lock: std::mutex with Abseil's thread-safety
// annotations, in the manner of leveldb's port::Mutex.
//
// Why not absl::Mutex: an Abseil built without NDEBUG (Debian's packaged one,
// for instance) runs deadlock detection inside every Lock and Unlock, under
// one process-wide spinlock. Every pool operation would then serialise all
// threads of the process on that lock, whatever shard they touch; the setting
// that turns it off is process-wide, and gpupool never changes it for the
// user. A pthread mutex has no global state, which also makes destroying one
// in a fork()ed child safe.
//
// `Await`/`AwaitWithDeadline` keep absl::Mutex's condition semantics: the
// condition is re-evaluated whenever the lock is released while a thread
// waits. The price when nobody waits is one integer test per Unlock.

#ifndef GPUPOOL_SRC_LIFETIME_MUTEX_H_
#define GPUPOOL_SRC_LIFETIME_MUTEX_H_

#include <condition_variable>  // NOLINT(build/c++11): see the file comment
#include <mutex>               // NOLINT(build/c++11): see the file comment

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpupool::internal {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    if (waiters_ != 0) changed_.notify_all();
    mu_.unlock();
  }

  // Blocks (lock released meanwhile) until `condition` holds.
  void Await(const absl::Condition& condition)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitWithDeadline(condition, absl::InfiniteFuture());
  }

  // As Await, giving up at `deadline`; returns whether `condition` holds.
  bool AwaitWithDeadline(const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    if (condition.Eval()) return true;
    // The caller holds mu_; the condition variable needs it as a unique_lock
    // for the duration of the wait only.
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    // Blocking releases the lock: like an Unlock, it must let the other
    // waiters re-check, since this thread may have changed what they wait
    // for. Only now: waking up and re-evaluating changes nothing.
    if (waiters_ != 0) changed_.notify_all();
    ++waiters_;
    bool holds = false;
    while (!(holds = condition.Eval())) {
      if (deadline == absl::InfiniteFuture()) {
        changed_.wait(lock);
      } else if (changed_.wait_until(lock, absl::ToChronoTime(deadline)) ==
                 std::cv_status::timeout) {
        holds = condition.Eval();
        break;
      }
    }
    --waiters_;
    lock.release();  // still held: the caller unlocks
    return holds;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int waiters_ = 0;  // threads in Await*, under mu_
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_LIFETIME_MUTEX_H_
