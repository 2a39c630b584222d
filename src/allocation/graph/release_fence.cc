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
  for (int64_t i = 0; i < count; ++i) {
    BlockEvents events;
    const std::optional<BlockState> recorded =
        core.RecordFence(device, streams, &events);
    if (!recorded.has_value()) {
      fence.hold_ = true;
      fence.sets_.clear();
      return fence;
    }
    const BlockState state = *recorded;
    if (state == BlockState::kDrop || state == BlockState::kLeak) {
      fence.state_ = state;
      fence.sets_.clear();
      return fence;
    }
    if (state == BlockState::kPending) fence.state_ = BlockState::kPending;
    fence.sets_.push_back(std::move(events));
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
