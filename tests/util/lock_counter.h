// Counts the locks the calling thread takes through pthread_mutex_lock, the
// call under every std::mutex (and so under gpupool's own Mutex). A test
// binary that links lock_counter.cc defines pthread_mutex_lock itself,
// counts, and forwards to the C library's: the shard locks a pooled cycle
// takes are then a deterministic cost a test can pin, as the runtime calls
// counted by SimBackend are. SimBackend's own locks (absl::Mutex) do not go
// through pthread_mutex_lock and are not counted.
//
// Only for binaries built without sanitizers: ThreadSanitizer intercepts the
// same call.

#ifndef GPUPOOL_TESTS_UTIL_LOCK_COUNTER_H_
#define GPUPOOL_TESTS_UTIL_LOCK_COUNTER_H_

#include <cstdint>

namespace gpupool::testing {

// Locks taken by the calling thread so far.
int64_t ThreadLocks();

// Whether the count works in this binary: locking a std::mutex is seen.
bool LockCounterLive();

}  // namespace gpupool::testing

#endif  // GPUPOOL_TESTS_UTIL_LOCK_COUNTER_H_
