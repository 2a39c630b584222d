// Blocks parked with their fence deferred; see parked.h.

#include "src/allocation/parked.h"

#include <algorithm>

namespace gpupool::internal {
namespace {

// Lanes kept, empty or not, before the empty ones are dropped.
constexpr size_t kMaxLanes = 8;

}  // namespace

ParkedBlocks::Lane* ParkedBlocks::NewLane(NativeStream stream) {
  for (Lane& lane : lanes_) {
    if (lane.blocks.empty()) {
      lane.stream = stream;
      return &lane;
    }
  }
  if (lanes_.size() >= kMaxLanes) {
    lanes_.erase(
        std::remove_if(lanes_.begin(), lanes_.end(),
                       [](const Lane& lane) { return lane.blocks.empty(); }),
        lanes_.end());
  }
  lanes_.push_back(Lane{stream, {}});
  return &lanes_.back();
}

void ParkedBlocks::TakeAll(std::optional<NativeStream> stream,
                           BlockVector* out) {
  for (Lane& lane : lanes_) {
    if (stream.has_value() && lane.stream != *stream) continue;
    while (AllocationBlock* block = lane.blocks.PopFront()) {
      out->push_back(block);
      CountOut(*block);
    }
  }
}

void ParkedBlocks::TakeFenced(BlockVector* out) {
  for (Lane& lane : lanes_) {
    for (AllocationBlock* block = lane.blocks.front(); block != nullptr;) {
      AllocationBlock* next = PrimaryList::Next(block);
      if (block->release_stream != nullptr) {
        lane.blocks.Remove(block);
        out->push_back(block);
        CountOut(*block);
      }
      block = next;
    }
  }
}

void ParkedBlocks::TakeIf(
    absl::FunctionRef<bool(const AllocationBlock&)> leaves, BlockVector* out) {
  for (Lane& lane : lanes_) {
    for (AllocationBlock* block = lane.blocks.front(); block != nullptr;) {
      AllocationBlock* next = PrimaryList::Next(block);
      if (leaves(*block)) {
        lane.blocks.Remove(block);
        out->push_back(block);
        CountOut(*block);
      }
      block = next;
    }
  }
}

void ParkedBlocks::ForEach(
    absl::FunctionRef<void(const AllocationBlock&)> visit) const {
  for (const Lane& lane : lanes_) {
    for (const AllocationBlock* block = lane.blocks.front(); block != nullptr;
         block = PrimaryList::Next(block)) {
      visit(*block);
    }
  }
}

}  // namespace gpupool::internal
