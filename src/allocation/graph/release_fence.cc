// A graph pool's release fence (graph/release_fence.h).

#include "src/allocation/graph/release_fence.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "src/allocation/cache_core.h"

namespace gpupool::internal {

ReleaseFence ReleaseFence::Record(AllocationCacheCore& core, int device,
                                  const std::vector<NativeStream>& streams,
                                  int64_t count) {
  ReleaseFence fence;
  if (streams.empty()) return fence;  // nothing replays: no event needed
  const std::optional<BlockState> state =
      core.RecordFences(device, streams, count, &fence.sets_);
  if (state.has_value()) {
    fence.state_ = *state;
  } else {
    fence.hold_ = true;
  }
  return fence;
}

ReleaseFence::Share ReleaseFence::Take() {
  Share share;
  if (hold_) {
    share.kind = Share::Kind::kHold;
    return share;
  }
  switch (state_) {
    case BlockState::kIdle:
    case BlockState::kDrop:  // the give-back drops it without a call
      return share;
    case BlockState::kLeak:
      share.kind = Share::Kind::kLeak;
      return share;
    case BlockState::kPending:
      break;
  }
  if (sets_.empty()) {
    share.kind = Share::Kind::kLeak;
    return share;
  }
  share.events = std::move(sets_.back());
  sets_.pop_back();
  return share;
}

}  // namespace gpupool::internal
