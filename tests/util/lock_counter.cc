// The pthread_mutex_lock of a lock-counting test binary (lock_counter.h).

#include "tests/util/lock_counter.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>  // NOLINT(build/c++11): what the count is checked against

namespace {

using LockFunction = int (*)(pthread_mutex_t*);

// Initial-exec TLS of the executable: no allocation, no lock to reach it.
__thread int64_t thread_locks = 0;

std::atomic<LockFunction> c_library_lock{nullptr};

LockFunction CLibraryLock() {
  LockFunction lock = c_library_lock.load(std::memory_order_acquire);
  if (lock == nullptr) {
    // dlsym takes the loader's own lock, not this function.
    lock =
        reinterpret_cast<LockFunction>(dlsym(RTLD_NEXT, "pthread_mutex_lock"));
    c_library_lock.store(lock, std::memory_order_release);
  }
  return lock;
}

}  // namespace

extern "C" int pthread_mutex_lock(pthread_mutex_t* mutex) noexcept {
  ++thread_locks;
  return CLibraryLock()(mutex);
}

namespace gpupool::testing {

int64_t ThreadLocks() { return thread_locks; }

bool LockCounterLive() {
  std::mutex probe;
  const int64_t before = ThreadLocks();
  probe.lock();
  probe.unlock();
  return ThreadLocks() == before + 1;
}

}  // namespace gpupool::testing
