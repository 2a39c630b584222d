// gpupool/pool_options.h — sizing and validation options of a handle pool.

#ifndef GPUPOOL_POOL_OPTIONS_H_
#define GPUPOOL_POOL_OPTIONS_H_

#include <functional>

#include "absl/time/time.h"
#include "gpupool/export.h"

namespace gpupool {

struct GPUPOOL_EXPORT PoolOptions {
  // Idle handles kept per (device, config); returns beyond it destroy.
  int max_idle_per_key = 64;
  // Bound on handles alive per key (leased + idle + draining + being
  // created); 0 = unbounded. When reached, Acquire waits up to
  // `acquire_timeout`, then returns ResourceExhausted.
  int max_live_per_key = 0;
  absl::Duration acquire_timeout = absl::Seconds(5);
  // Query an idle handle before handing it out as well. Off by default: a
  // handle is idle only because its query at return found it complete and
  // healthy, and nobody can enqueue on it while it sits idle. On costs one
  // runtime query per reused handle (on a GPU a sizeable fraction of a
  // create; doubles the runtime calls of an event cycle) and catches only
  // faults that arrive asynchronously while the handle is idle. Handles
  // returned with work pending are always queried before reuse.
  bool validate_on_acquire = false;
  // Returned-while-busy handles checked (one query each) per Acquire before
  // creating a new one.
  int drain_checks_per_acquire = 2;
  // Remember where each lease was acquired (file:line), for leak reports.
  bool track_lease_sites = true;
  // Called with each handle just before the pool destroys it (trimmed, over
  // max_idle_per_key, faulted, or at the pool's end), on the destroying
  // thread, with no lock of the pool held; it must not call back into this
  // pool. For a stream pool beside an AllocationCache that defers fences
  // (AllocationCacheOptions::defer_same_stream_fences), the cache's
  // FenceStream: Pools sets that itself.
  std::function<void(int device, void* handle)> before_destroy;
};

using StreamPoolOptions = PoolOptions;
using EventPoolOptions = PoolOptions;

}  // namespace gpupool

#endif  // GPUPOOL_POOL_OPTIONS_H_
