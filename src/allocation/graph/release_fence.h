// The fence a graph pool's release leaves for the blocks it cannot give back
// at once: leases still out then, and every block of a pool whose graphs
// release it later. Recorded when the release names its replay streams
// (one set of ready events on them per such block), so that a lease that
// comes back afterwards, or a collection long after, is fenced on the
// replays without touching those streams again: the user may destroy them
// as soon as the release returns.
//
// Thread safety: none of its own; a pool keeps it under its mutex. Recording
// makes runtime calls and is done with no lock held.

#ifndef GPUPOOL_SRC_ALLOCATION_GRAPH_RELEASE_FENCE_H_
#define GPUPOOL_SRC_ALLOCATION_GRAPH_RELEASE_FENCE_H_

#include <cstdint>
#include <vector>

#include "gpupool/backend.h"
#include "src/allocation/block.h"

namespace gpupool::internal {

class AllocationCacheCore;

class ReleaseFence {
 public:
  ReleaseFence() = default;

  // `count` sets of ready events on `streams` of `device`, recorded now.
  static ReleaseFence Record(AllocationCacheCore& core, int device,
                             const std::vector<NativeStream>& streams,
                             int64_t count);

  // One block's share of the fence.
  struct Share {
    enum class Kind {
      kEvents,  // give it back with `events` (none: nothing to wait for,
                // or the device is dead and the give-back drops it)
      kHold,    // a replay stream captured at the release: hold it out of
                // reuse until the cache frees everything
      kLeak,    // unprovable (a fault; or more blocks came than counted):
                // never reuse or free it
    };
    Kind kind = Kind::kEvents;
    BlockEvents events;
  };
  Share Take();

 private:
  BlockState state_ = BlockState::kIdle;
  bool hold_ = false;
  std::vector<BlockEvents> sets_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_GRAPH_RELEASE_FENCE_H_
