// A shard's same-stream lanes: whole segments released on their one stream,
// parked under it, for a request on that stream for the same lease size to take
// back first — stream order makes that reuse safe without a check. Two
// kinds, by the cache's policy:
//   deferred (AllocationCacheOptions::defer_same_stream_fences): parked with
//     no runtime call, their ready event not recorded (release_stream
//     unset). Such a block is fenced (its event recorded on its stream, then
//     released as any other) before anything else may have it: the first
//     request no parked block serves, Trim, the out-of-memory chain and the
//     give-back, the cache's end, or AllocationCache::FenceStream. Under that
//     policy a block leased across streams (fence_at_release) is parked
//     fenced, as below.
//   fenced (the default): parked once its ready event is recorded on its
//     stream (release_stream set), so that a same-stream cycle skips the
//     free index. A request its lane does not serve lists every fenced
//     parked block in the free index (no runtime call) before searching it;
//     the paths above do the same.
//
// Not thread-safe: the shard that owns it guards it with its lock. It holds
// blocks, never owns them.

#ifndef GPUPOOL_SRC_ALLOCATION_PARKED_H_
#define GPUPOOL_SRC_ALLOCATION_PARKED_H_

#include <cstddef>
#include <optional>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "gpupool/backend.h"
#include "src/allocation/block.h"

namespace gpupool::internal {

class ParkedBlocks {
 public:
  ParkedBlocks() = default;
  ParkedBlocks(const ParkedBlocks&) = delete;
  ParkedBlocks& operator=(const ParkedBlocks&) = delete;

  bool empty() const { return count_ == 0; }
  // Whether a parked block's fence is deferred (release_stream unset).
  bool any_unfenced() const { return unfenced_ != 0; }

  // Parks `block`, used on exactly one stream (`block->uses`), under it.
  void Add(AllocationBlock* block);
  // The newest block parked on `stream` of exactly `bytes` (among the few
  // newest of that stream), taken out; nullptr when there is none.
  AllocationBlock* Take(NativeStream stream, size_t bytes);
  // The one block parked, taken out, when exactly one is, it is fenced, on
  // another stream than `stream` and of exactly `bytes`; else nullptr.
  AllocationBlock* TakeSoleFencedElsewhere(NativeStream stream, size_t bytes);
  // Takes out every block parked on `stream`, or every block when nullopt.
  void TakeAll(std::optional<NativeStream> stream, BlockVector* out);
  // Takes out every fenced block (release_stream set), each lane's newest
  // first.
  void TakeFenced(BlockVector* out);
  // Takes out every block `leaves` selects.
  void TakeIf(absl::FunctionRef<bool(const AllocationBlock&)> leaves,
              BlockVector* out);
  void ForEach(absl::FunctionRef<void(const AllocationBlock&)> visit) const;

 private:
  // One stream's parked blocks, newest first.
  struct Lane {
    NativeStream stream = nullptr;
    PrimaryList blocks;
  };

  Lane* Find(NativeStream stream);
  // A lane for `stream`, which has none: an empty one (renamed), else a new
  // one. Empty lanes stay, so that a steady cycle (park, take, park...)
  // neither adds nor drops one; past kMaxLanes the empty ones go.
  Lane* NewLane(NativeStream stream);

  // How many of a stream's newest parked blocks a request looks at: a
  // steady loop asks again for what it just released.
  static constexpr int kScan = 4;

  // The counts below, for a block parked or taken out.
  void CountIn(const AllocationBlock& block) {
    ++count_;
    if (block.release_stream == nullptr) ++unfenced_;
  }
  void CountOut(const AllocationBlock& block) {
    --count_;
    if (block.release_stream == nullptr) --unfenced_;
  }

  // Few streams at a time: a linear search beats a hash.
  absl::InlinedVector<Lane, 4> lanes_;
  size_t count_ = 0;     // blocks parked, over every lane
  size_t unfenced_ = 0;  // of them, those whose fence is deferred
};

// --- The parked cycle, inline (the shard's lock is held) ----------------

inline ParkedBlocks::Lane* ParkedBlocks::Find(NativeStream stream) {
  for (Lane& lane : lanes_) {
    if (lane.stream == stream) return &lane;
  }
  return nullptr;
}

inline void ParkedBlocks::Add(AllocationBlock* block) {
  const NativeStream stream = block->uses.front();
  Lane* lane = Find(stream);
  if (lane == nullptr) lane = NewLane(stream);
  lane->blocks.PushFront(block);
  CountIn(*block);
}

inline AllocationBlock* ParkedBlocks::Take(NativeStream stream, size_t bytes) {
  Lane* lane = Find(stream);
  if (lane == nullptr) return nullptr;
  int seen = 0;
  for (AllocationBlock* block = lane->blocks.front();
       block != nullptr && seen < kScan;
       block = PrimaryList::Next(block), ++seen) {
    if (block->size != bytes) continue;
    lane->blocks.Remove(block);
    CountOut(*block);
    return block;
  }
  return nullptr;
}

inline AllocationBlock* ParkedBlocks::TakeSoleFencedElsewhere(
    NativeStream stream, size_t bytes) {
  if (count_ != 1) return nullptr;
  for (Lane& lane : lanes_) {
    AllocationBlock* block = lane.blocks.front();
    if (block == nullptr) continue;
    if (lane.stream == stream || block->size != bytes ||
        block->release_stream == nullptr) {
      return nullptr;
    }
    lane.blocks.Remove(block);
    CountOut(*block);
    return block;
  }
  return nullptr;
}

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_PARKED_H_
