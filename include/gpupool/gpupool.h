// gpupool/gpupool.h — umbrella header: everything a user needs.
//
// gpupool is a library of process-lifetime GPU resource pools: streams,
// events and device/pinned memory, keyed by device and config, over a
// backend-abstracted core (CUDA, HIP, and a simulated runtime for tests).
// Start with `ProcessPools()` (pools.h) or build a `StreamPool` over any
// `Backend`.

#ifndef GPUPOOL_GPUPOOL_H_
#define GPUPOOL_GPUPOOL_H_

#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/config.h"
#include "gpupool/cuda_backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/graph_pool.h"
#include "gpupool/hip_backend.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/pool_options.h"
#include "gpupool/pool_stats.h"
#include "gpupool/pools.h"
#include "gpupool/sim_backend.h"
#include "gpupool/snapshot.h"
#include "gpupool/stable_buffers.h"
#include "gpupool/stream_pool.h"

#endif  // GPUPOOL_GPUPOOL_H_
