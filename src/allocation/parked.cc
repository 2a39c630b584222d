// Blocks parked with their fence deferred; see parked.h.

#include "src/allocation/parked.h"

#include <algorithm>

namespace gpupool::internal {
namespace {

// How many of a stream's newest parked blocks a request looks at: a
// steady loop asks again for what it just released.
constexpr int kScan = 4;

}  // namespace

ParkedBlocks::Lane* ParkedBlocks::Find(NativeStream stream) {
  for (Lane& lane : lanes_) {
    if (lane.stream == stream) return &lane;
  }
  return nullptr;
}

void ParkedBlocks::Add(AllocationBlock* block) {
  const NativeStream stream = block->uses.front();
  Lane* lane = Find(stream);
  if (lane == nullptr) {
    lanes_.push_back(Lane{stream, {}});
    lane = &lanes_.back();
  }
  lane->blocks.PushFront(block);
}

void ParkedBlocks::Prune() {
  lanes_.erase(
      std::remove_if(lanes_.begin(), lanes_.end(),
                     [](const Lane& lane) { return lane.blocks.empty(); }),
      lanes_.end());
}

AllocationBlock* ParkedBlocks::Take(NativeStream stream, size_t bytes) {
  Lane* lane = Find(stream);
  if (lane == nullptr) return nullptr;
  int seen = 0;
  for (AllocationBlock* block = lane->blocks.front();
       block != nullptr && seen < kScan;
       block = PrimaryList::Next(block), ++seen) {
    if (block->size != bytes) continue;
    lane->blocks.Remove(block);
    if (lane->blocks.empty()) Prune();
    return block;
  }
  return nullptr;
}

void ParkedBlocks::TakeAll(std::optional<NativeStream> stream,
                           BlockVector* out) {
  for (Lane& lane : lanes_) {
    if (stream.has_value() && lane.stream != *stream) continue;
    while (AllocationBlock* block = lane.blocks.PopFront()) {
      out->push_back(block);
    }
  }
  Prune();
}

void ParkedBlocks::TakeIf(
    absl::FunctionRef<bool(const AllocationBlock&)> leaves, BlockVector* out) {
  for (Lane& lane : lanes_) {
    for (AllocationBlock* block = lane.blocks.front(); block != nullptr;) {
      AllocationBlock* next = PrimaryList::Next(block);
      if (leaves(*block)) {
        lane.blocks.Remove(block);
        out->push_back(block);
      }
      block = next;
    }
  }
  Prune();
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
