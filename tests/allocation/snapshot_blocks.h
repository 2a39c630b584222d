// Test helpers over a MemorySnapshot: the blocks of one (device, kind), and
// how many of them are in a given use.

#ifndef GPUPOOL_TESTS_ALLOCATION_SNAPSHOT_BLOCKS_H_
#define GPUPOOL_TESTS_ALLOCATION_SNAPSHOT_BLOCKS_H_

#include <vector>

#include "gpupool/allocation_cache.h"
#include "gpupool/snapshot.h"

namespace gpupool::testing {

// Every block of every segment of `device`'s `kind` memory.
inline std::vector<BlockSnapshot> SnapshotBlocks(
    const MemorySnapshot& snapshot, int device,
    MemoryKind kind = MemoryKind::kDevice) {
  std::vector<BlockSnapshot> out;
  for (const MemoryKindSnapshot& memory : snapshot.devices[device].memory) {
    if (memory.kind != kind) continue;
    for (const SegmentSnapshot& segment : memory.segments) {
      for (const BlockSnapshot& block : segment.blocks) out.push_back(block);
    }
  }
  return out;
}

inline int CountBlocks(const std::vector<BlockSnapshot>& blocks, BlockUse use) {
  int n = 0;
  for (const BlockSnapshot& block : blocks) n += block.use == use;
  return n;
}

}  // namespace gpupool::testing

#endif  // GPUPOOL_TESTS_ALLOCATION_SNAPSHOT_BLOCKS_H_
