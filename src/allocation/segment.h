// Blocks of a segment (one runtime allocation): split, merge and unlink, the
// bounded remainder policy, and how fences combine. Pure functions over
// blocks; the caller holds the lock of the blocks' shard.

#ifndef GPUPOOL_SRC_ALLOCATION_SEGMENT_H_
#define GPUPOOL_SRC_ALLOCATION_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "src/allocation/block.h"

namespace gpupool::internal {

// The bounded remainder policy. A block is split only when the rest is at
// least kMinSplitRemainder bytes (smaller rests stay with the lease), and a
// block larger than kSplitAnyBelow serves only requests of at least
// 1 / max_split_ratio of its size (AllocationCacheOptions::max_split_ratio;
// 0: any), so that a large free block is not shredded for small requests
// (they get segments of their own).
inline constexpr size_t kMinSplitRemainder = 512;
inline constexpr size_t kSplitAnyBelow = size_t{1} << 20;
// A merge that would leave a block with more events than this is not made
// (the blocks stay side by side): a fence stays a handful of events.
inline constexpr size_t kMaxFenceEvents = 4;

// Host records of blocks, recycled: a split makes one and a merge drops one
// on the allocation path, which would otherwise be a heap allocation and a
// free per cycle of changing sizes. Not thread-safe (a shard's, under its
// lock).
class BlockRecords {
 public:
  BlockRecords() = default;
  BlockRecords(const BlockRecords&) = delete;
  BlockRecords& operator=(const BlockRecords&) = delete;
  ~BlockRecords() {
    for (AllocationBlock* block : free_) delete block;
  }
  AllocationBlock* New() {
    if (free_.empty()) return new AllocationBlock();
    AllocationBlock* block = free_.back();
    free_.pop_back();
    return block;
  }
  // `block` holds no events and no owner.
  void Recycle(AllocationBlock* block) {
    if (free_.size() >= kMaxFree) {
      delete block;
      return;
    }
    // Destroyed and built anew in place: cheaper than assigning a fresh
    // record, whose containers would be assigned element by element.
    block->~AllocationBlock();
    new (block) AllocationBlock();
    free_.push_back(block);
  }

 private:
  static constexpr size_t kMaxFree = 64;
  std::vector<AllocationBlock*> free_;
};

inline bool IsWholeSegment(const AllocationBlock* block) {
  return block->prev_in_segment == nullptr && block->next_in_segment == nullptr;
}

// `block` when the policy (`max_split_ratio`) lets it serve a request of
// `bytes` (a class size), else nullptr (also for nullptr).
inline AllocationBlock* ServingOrNull(AllocationBlock* block, size_t bytes,
                                      size_t max_split_ratio) {
  if (block == nullptr) return nullptr;
  const bool fits = block->size <= kSplitAnyBelow || max_split_ratio == 0 ||
                    block->size / max_split_ratio <= bytes;
  return fits ? block : nullptr;
}

// Cuts `block` to `bytes` when the rest is at least kMinSplitRemainder and
// returns the rest, a new block just above it in its segment (nullptr: not
// cut). The rest takes the block's events and release stream when
// `rest_takes_events` (the block's fence still guards it); else it has none.
AllocationBlock* SplitBlock(AllocationBlock* block, size_t bytes,
                            bool rest_takes_events, BlockRecords* records);

// Spare events a shard keeps for leases that have none (segment-independent,
// per device and kind), at most kMaxStashedSpares.
inline constexpr size_t kMaxStashedSpares = 64;
using SpareEvents = std::vector<PooledEvent>;

// Whether `released` (as for AbsorbAbove) makes `other`'s events spares.
inline bool Covers(const AllocationBlock* released,
                   const AllocationBlock* other) {
  return released != nullptr && released != other &&
         released->events.size() == 1 && released->release_stream != nullptr &&
         !other->events.empty() &&
         other->release_stream == released->release_stream &&
         other->listed_at < released->leased_at;
}

// Whether `low` and the block just above it, `high`, may merge (`released`:
// as for AbsorbAbove).
inline bool CanMerge(const AllocationBlock* low, const AllocationBlock* high,
                     const AllocationBlock* released = nullptr) {
  if (low->generation != high->generation || low->owner != nullptr ||
      high->owner != nullptr) {
    return false;
  }
  return Covers(released, low) || Covers(released, high) ||
         low->events.size() + high->events.size() <= kMaxFenceEvents;
}
// Merges `high` into `low` (its neighbour below) and deletes `high`'s record
// (its events move to `low`). The merged fence holds both halves' events
// and is pending on one stream alone only when each half was pending there
// or ready — except that where `released` (one of the two, just released
// with a single event on stream S) was leased after the other was listed
// with events on S alone, its event was recorded after all of those: they
// become spares and the fence is `released`'s event alone. Such spares go
// to `stash` (the shard's, nullptr: none) while it has room, else stay with
// the block.
void AbsorbAbove(AllocationBlock* low, AllocationBlock* high,
                 const AllocationBlock* released, BlockRecords* records,
                 SpareEvents* stash = nullptr);

// Merges `block` (not listed) with the free-listed blocks beside it while
// CanMerge allows, calling `unlist` on each neighbour before it merges;
// returns the merged block. `released`: `block` was just released, so its
// single event may cover its neighbours' (AbsorbAbove), whose events then go
// to `stash` while it has room (the caller checked that the block's
// generation is alive: a dead one's events must never be lent).
AllocationBlock* MergeFreeNeighbours(
    AllocationBlock* block, bool released, BlockRecords* records,
    absl::FunctionRef<void(AllocationBlock*)> unlist,
    SpareEvents* stash = nullptr);

// The first free-listed block of a run of two or more in its segment.
bool IsRunHead(const AllocationBlock* block);
// Merges the free-listed blocks above `head` (not listed) into it, fence
// bound or not, calling `unlist` on each first.
void MergeRun(AllocationBlock* head, BlockRecords* records,
              absl::FunctionRef<void(AllocationBlock*)> unlist);

// Moves `block`'s spares beyond one into `stash` while it has room.
void StashSparesSlow(AllocationBlock* block, SpareEvents* stash);
inline void StashSpares(AllocationBlock* block, SpareEvents* stash) {
  if (block->spare_events.size() > 1) StashSparesSlow(block, stash);
}
// Gives a block about to be leased with no event at all one from `stash`
// (re-recorded at its release instead of one taken from the EventPool).
void LendSpareSlow(AllocationBlock* block, SpareEvents* stash);
inline void LendSpare(AllocationBlock* block, SpareEvents* stash) {
  if (block->events.empty() && block->spare_events.empty() && !stash->empty()) {
    LendSpareSlow(block, stash);
  }
}

// A record holding every event of `stash` (emptied), for the caller to
// delete outside the lock (returning them to their EventPool), or nullptr
// when the stash is empty: how the stash leaves with a dead generation.
AllocationBlock* CarryOut(SpareEvents* stash, BlockRecords* records);

// Unlinks `block` from its segment's neighbours: true when it was the
// segment's last block.
bool DetachFromSegment(AllocationBlock* block);
// Detaches each of `blocks`: the number of segments whose last block it was.
int64_t DetachAll(absl::Span<AllocationBlock* const> blocks);
// Unlinks `block` from its segment: true when the segment departs with it
// (the caller counts it then). A dropped part's segment died with its
// context (the rest are dropped too, never freed), but a `leaked` part may
// still be in use: freeing the segment with the rest would free it under
// that use. So a leaked part of a segment leaves a record in its place
// (AllocationBlock::leaked_part, from `records`, kept on `pins`): the
// segment departs, leaked, with its first leaked part, its other blocks
// still serve leases, and it never looks whole again.
bool LeaveSegment(AllocationBlock* block, bool leaked, BlockRecords* records,
                  BlockList<&AllocationBlock::links>* pins);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_SEGMENT_H_
