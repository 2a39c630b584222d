// How a block released on other streams is proven safe on the request's
// stream before it is leased there: its ready events queried complete, or
// (CrossStreamPolicy::kWaitOnStream) waited on by the request's stream.
// Every check is a runtime call made with no shard lock held; the shard
// settles the outcome under its lock (SettleCandidates, UndoUncheckedLease).
// The allocation policy (cache_core.cc) calls it at step 3 of Allocate.

#ifndef GPUPOOL_SRC_ALLOCATION_CROSS_STREAM_H_
#define GPUPOOL_SRC_ALLOCATION_CROSS_STREAM_H_

#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "src/allocation/block.h"
#include "src/allocation/shard.h"
#include "src/allocation/stream_fence.h"

namespace gpupool::internal {

class CrossStreamCheck {
 public:
  CrossStreamCheck(StreamOrderFence& fence, DeviceHealth& health,
                   CrossStreamPolicy policy)
      : fence_(fence), health_(health), policy_(policy) {}
  CrossStreamCheck(const CrossStreamCheck&) = delete;
  CrossStreamCheck& operator=(const CrossStreamCheck&) = delete;

  // Whether a request on `stream` waits on another stream's events instead
  // of querying them.
  bool WaitsOn(NativeStream stream) const {
    return stream != nullptr && policy_ == CrossStreamPolicy::kWaitOnStream;
  }

  // Checks `candidates` (taken oldest first) until one is usable on the
  // request's stream, and has the shard settle them all: the leased block,
  // or nullptr.
  AllocationBlock* TakeFromCandidates(AllocationShard& shard,
                                      const BlockVector& candidates,
                                      const LeaseRequest& request);

  // Queries the events of a lease made unchecked (AllocationShard::
  // TakeCached): the leased block when they completed and its generation
  // lives on, else nullptr with the lease undone.
  AllocationBlock* CheckUncheckedLease(AllocationShard& shard,
                                       const UncheckedLease& unchecked);

 private:
  StreamOrderFence& fence_;
  DeviceHealth& health_;
  const CrossStreamPolicy policy_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_CROSS_STREAM_H_
