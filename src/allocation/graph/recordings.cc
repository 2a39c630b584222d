// A graph pool's recordings (graph/recordings.h).

#include "src/allocation/graph/recordings.h"

#include <vector>

namespace gpupool::internal {

std::vector<AllocationBlock*> PoolRecordings::SettleOver(
    std::vector<AllocationBlock*>& free) {
  std::vector<AllocationBlock*> out;
  auto keep = free.begin();
  for (AllocationBlock* block : free) {
    if (!Over(block->owner_tag)) {
      *keep++ = block;
    } else if (block->events.empty()) {
      // Only the over recording's captures used it, and their launches are
      // complete: a later capture may reuse it on its release stream.
      block->owner_tag = kIdle;
      *keep++ = block;
    } else {
      out.push_back(block);  // used outside a capture: fenced by its events
    }
  }
  free.erase(keep, free.end());
  return out;
}

}  // namespace gpupool::internal
