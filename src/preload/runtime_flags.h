// Stream and event flags as the HIP and CUDA runtime APIs define them (the
// same values in both; each backend static_asserts them against its vendor
// header), and the pool configs they map to. What the pools cannot key on
// exactly goes to the runtime untouched.

#ifndef GPUPOOL_SRC_PRELOAD_RUNTIME_FLAGS_H_
#define GPUPOOL_SRC_PRELOAD_RUNTIME_FLAGS_H_

#include "gpupool/backend.h"

namespace gpupool::preload_internal {

inline constexpr unsigned kStreamNonBlocking = 0x1;
inline constexpr unsigned kEventBlockingSync = 0x1;
inline constexpr unsigned kEventDisableTiming = 0x2;
inline constexpr unsigned kEventInterprocess = 0x4;
// hipErrorNotInitialized / cudaErrorInitializationError: returned when the
// runtime's own function is nowhere in the process.
inline constexpr int kErrorNotInitialized = 3;

// Stream flags the pools key on; any other bit goes to the runtime as is.
inline bool PoolableStreamFlags(unsigned flags) {
  return (flags & ~kStreamNonBlocking) == 0;
}

// Event flags the pools key on. Interprocess events are never pooled: their
// IPC handle may live on in another process.
inline bool PoolableEventFlags(unsigned flags) {
  return (flags & ~(kEventBlockingSync | kEventDisableTiming)) == 0;
}

inline StreamConfig StreamConfigOf(unsigned flags, int priority) {
  StreamConfig config;
  config.non_blocking = (flags & kStreamNonBlocking) != 0;
  config.priority = priority;
  return config;
}

inline EventConfig EventConfigOf(unsigned flags) {
  EventConfig config;
  config.disable_timing = (flags & kEventDisableTiming) != 0;
  config.blocking_sync = (flags & kEventBlockingSync) != 0;
  config.interprocess = (flags & kEventInterprocess) != 0;
  return config;
}

}  // namespace gpupool::preload_internal

#endif  // GPUPOOL_SRC_PRELOAD_RUNTIME_FLAGS_H_
