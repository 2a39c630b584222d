// examples/client_lifecycle/client_model.h — a PJRT-style runtime client's
// GPU resources, built and torn down the way a client does it, either with
// raw runtime calls or from gpupool's pools.
//
// Per device a client holds 1 compute, 1 host-to-device, 4 device-to-host,
// 4 device-to-device and 4 extra streams (14: 8 devices x 14 = the 112
// streams of the seed report), 16 events and a scratch allocation. A test
// binary that builds a client per test pays this on every test; with pools
// only the first client pays.
//
// Shared by the demo (gpupool_demo) and client_lifecycle_bench so that both
// measure the same thing. Thread-compatible: one lifecycle per thread.

#ifndef GPUPOOL_EXAMPLES_CLIENT_LIFECYCLE_CLIENT_MODEL_H_
#define GPUPOOL_EXAMPLES_CLIENT_LIFECYCLE_CLIENT_MODEL_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/stream_pool.h"

namespace gpupool::examples {

// What one client holds per device.
struct ClientShape {
  int compute_streams = 1;
  int host_to_device_streams = 1;
  int device_to_host_streams = 4;
  int device_to_device_streams = 4;
  int extra_streams = 4;
  int events = 16;
  // 0: no scratch allocation.
  size_t scratch_bytes = size_t{64} << 20;

  int streams_per_device() const {
    return compute_streams + host_to_device_streams + device_to_host_streams +
           device_to_device_streams + extra_streams;
  }
};

// Runtime calls a lifecycle made, to show what pooling saved.
struct LifecycleCounts {
  int64_t streams_created = 0;
  int64_t events_created = 0;
  int64_t allocations_made = 0;
  LifecycleCounts& operator+=(const LifecycleCounts& other);
};

// The pools a pooled client draws from. `allocations` may be null (no
// scratch allocation is then made).
struct ClientPools {
  StreamPool* streams = nullptr;
  EventPool* events = nullptr;
  AllocationCache* allocations = nullptr;
};

// Builds a client on devices [0, devices) with raw Backend calls and tears it
// down (destroying in reverse order, as a client's destructor does). On an
// error everything already created is destroyed and the first error returned.
// `counts` (optional) accumulates the creations made.
absl::Status RunRawLifecycle(Backend& backend, int devices,
                             const ClientShape& shape,
                             LifecycleCounts* counts = nullptr);

// The same client built from `pools` and returned to them. `counts` is not
// touched: what the runtime did shows in the pools' stats.
absl::Status RunPooledLifecycle(const ClientPools& pools, int devices,
                                const ClientShape& shape);

}  // namespace gpupool::examples

#endif  // GPUPOOL_EXAMPLES_CLIENT_LIFECYCLE_CLIENT_MODEL_H_
