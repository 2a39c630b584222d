// Runtime allocation for the allocation cache, with the OOM chain: a runtime
// out-of-memory frees only as much of the (device, kind)'s wholly free
// cached segments as the request lacks (the smallest segment that covers it,
// else the largest first; waiting for their pending work) and the retiring
// ones, retries once, then reports what holds the memory. Never aborts.

#ifndef GPUPOOL_SRC_ALLOCATION_OOM_CHAIN_H_
#define GPUPOOL_SRC_ALLOCATION_OOM_CHAIN_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/shard.h"

namespace gpupool::internal {

// Backend::Allocate of `bytes` (`requested` rounded) for `shard`. A counted
// kOutOfMemory (ResourceExhausted) or the runtime's own failure; a sticky
// error poisons the device and comes back as FailedPrecondition. The memory
// enters the shard's care (its count of runtime allocations) with the
// locked step that takes it: AllocationShard::LeaseNew or FinishStable.
absl::StatusOr<void*> RuntimeAllocate(AllocationCacheCore& core,
                                      AllocationShard& shard, size_t requested,
                                      size_t bytes);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_OOM_CHAIN_H_
