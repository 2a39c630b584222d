// One block of runtime memory owned by the allocation cache, and the
// intrusive lists that index it. A block is always in exactly one place: a
// lease (in use), a shard's free index (cached), a shard's retiring list, or
// in the hands of one thread between two of these.
//
// A runtime allocation (a segment) holds one or more blocks, linked in
// address order through `prev_in_segment` / `next_in_segment`; a block with
// neither is a whole segment, the only kind ever freed through the runtime.
// Those two links, `free_listed`, and the size of a block split or merged are
// changed only under its shard's lock.

#ifndef GPUPOOL_SRC_ALLOCATION_BLOCK_H_
#define GPUPOOL_SRC_ALLOCATION_BLOCK_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/source_location.h"

namespace gpupool::internal {

struct AllocationBlock;

// A block's events: one per stream it was used on, or a merged block's
// few (at most kMaxFenceEvents, segment.h). Four inline, so that a merge, and
// a lease that takes a merge's spares to its events, stay off the heap: with
// two, a cycle of changing sizes grew one of them on the heap about once per
// cycle.
using BlockEvents = absl::InlinedVector<PooledEvent, 4>;

// Moves every event of `from` to the end of `to` and empties `from`: one
// move per event, where assigning an InlinedVector goes through its general
// (and several times dearer) path.
inline void MoveEvents(BlockEvents& from, BlockEvents& to) {
  for (PooledEvent& event : from) to.push_back(std::move(event));
  from.clear();
}

// What became of a block whose safety had to be proven with the runtime.
enum class BlockState {
  kIdle,     // no work of its uses is pending (or the new stream waits on it)
  kPending,  // some work may still be pending: keep it, check later
  kDrop,     // the device is dead (poisoned): forget it without a call
  kLeak,     // unprovable (bad event or stream, runtime unloading): forget it
};

// Links of a block in one intrusive list. Intrusive so that moving a block
// between lists never allocates and removal from the middle is O(1).
struct BlockLinks {
  AllocationBlock* prev = nullptr;
  AllocationBlock* next = nullptr;
};

struct AllocationBlock {
  // --- Fixed for the life of the block ---
  void* ptr = nullptr;
  // Bytes of the block: a class size when leased from a split or a new
  // segment; any multiple of 128 bytes once merged.
  size_t size = 0;
  // Its size class (the free index's class while cached); -1: uncached
  // (above max_cached_block_bytes), never split or merged.
  int size_class = -1;
  int device = -1;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t generation = 0;  // DeviceHealth generation it was allocated in
  // The capture router's record of the pool that owns the block (hooks.h);
  // null for the general cache. Set while a pool holds it, leased or free;
  // opaque to the core.
  std::shared_ptr<void> owner;
  // The owner's tag within it (a graph pool's recording); opaque to the core.
  uint64_t owner_tag = 0;

  // --- While leased ---
  size_t requested = 0;
  NativeStream stream = nullptr;  // Allocate's stream
  // Streams whose work may use the memory: `stream` plus RecordUse, distinct,
  // never nullptr.
  absl::InlinedVector<NativeStream, 2> uses;
  uint64_t lease_id = 0;
  SourceLocation where;
  int64_t leased_unix_ns = 0;  // 0: not recorded (LeaseRequest)

  // --- While cached or retiring ---
  // The single stream all pending events were recorded on (same-stream reuse
  // is safe at once); nullptr when used on several streams.
  NativeStream release_stream = nullptr;
  // Ready events recorded at release, one per used stream; empty when the
  // block is idle for every stream.
  BlockEvents events;

  // --- Its segment (under the shard's lock) ---
  AllocationBlock* prev_in_segment = nullptr;  // the block just below
  AllocationBlock* next_in_segment = nullptr;  // the block just above
  bool free_listed = false;                    // in the shard's free index
  // The record of a leaked part (its last use was never proven complete),
  // kept in its place so that the segment never looks whole again: the rest
  // may be reused, but the segment never goes back to the runtime.
  bool leaked_part = false;
  // Leased to another stream than its previous lease's: with deferred
  // fences, its release records its ready event at once (parked fenced), as
  // a buffer passed between streams is wanted by the other one next. (Here,
  // beside the other flags, it takes no room of its own.)
  bool fence_at_release = false;
  // A whole segment when it entered use (AllocationShard::AddInUseLocked):
  // what AllocationShard::Stash reads without the lock. A leased block
  // stays what it was (only free blocks are split or merged), but its
  // neighbours' links may change under the lock meanwhile.
  bool whole_in_use = false;
  // In the release slot with the hold its lease had on the shard's lease
  // owner (AllocationShard::Stash): the next lease of the block takes that
  // hold over (AllocationCacheCore::MakeLease), anything else that takes
  // the block out of the slot drops it (AllocationShard::DropSlotHoldLocked;
  // a cross-stream candidate's when it is settled unchosen).
  bool slot_hold = false;
  // Taken off its lane to have its fence recorded (AllocationShard::Unpark):
  // in the in-use list for the release that follows, but counted and shown
  // as the cached block it still is until then. Its `events` and
  // `release_stream` are the fencer's (written outside the lock) meanwhile.
  bool fencing = false;
  // While listed pending on one stream: that stream's lists in the free
  // index (opaque here), so that unlisting needs no second lookup.
  void* stream_lists = nullptr;
  // The shard's lease count when it was last leased, and when it was last
  // listed free: every event of a listed block was recorded before
  // `listed_at`, every event of a released one after its `leased_at`. The
  // leak report lists leases by `leased_at`, the newest first (InUseList).
  uint64_t leased_at = 0;
  uint64_t listed_at = 0;
  // Events no longer part of the fence (a merge found them covered by a
  // later event on the same stream): spares for the block's next lease.
  BlockEvents spare_events;

  // `links` is the block's place in the in-use, ready, pending or retiring
  // list; `stream_links` in its stream's list while pending on one stream.
  BlockLinks links;
  BlockLinks stream_links;
};

// A doubly linked list threaded through `AllocationBlock::*kLinks`; front is
// the newest for LIFO use, back the oldest. Does not own its blocks.
template <BlockLinks AllocationBlock::*kLinks>
class BlockList {
 public:
  bool empty() const { return front_ == nullptr; }
  size_t size() const { return size_; }
  AllocationBlock* front() const { return front_; }
  AllocationBlock* back() const { return back_; }
  static AllocationBlock* Next(const AllocationBlock* block) {
    return (block->*kLinks).next;
  }

  void PushFront(AllocationBlock* block) {
    BlockLinks& links = block->*kLinks;
    links.prev = nullptr;
    links.next = front_;
    if (front_ != nullptr) {
      (front_->*kLinks).prev = block;
    } else {
      back_ = block;
    }
    front_ = block;
    ++size_;
  }

  void PushBack(AllocationBlock* block) {
    BlockLinks& links = block->*kLinks;
    links.next = nullptr;
    links.prev = back_;
    if (back_ != nullptr) {
      (back_->*kLinks).next = block;
    } else {
      front_ = block;
    }
    back_ = block;
    ++size_;
  }

  // `block` must be in this list.
  void Remove(AllocationBlock* block) {
    BlockLinks& links = block->*kLinks;
    if (links.prev != nullptr) {
      (links.prev->*kLinks).next = links.next;
    } else {
      front_ = links.next;
    }
    if (links.next != nullptr) {
      (links.next->*kLinks).prev = links.prev;
    } else {
      back_ = links.prev;
    }
    links = BlockLinks{};
    --size_;
  }

  AllocationBlock* PopFront() {
    AllocationBlock* block = front_;
    if (block != nullptr) Remove(block);
    return block;
  }

  AllocationBlock* PopBack() {
    AllocationBlock* block = back_;
    if (block != nullptr) Remove(block);
    return block;
  }

 private:
  AllocationBlock* front_ = nullptr;
  AllocationBlock* back_ = nullptr;
  size_t size_ = 0;
};

// Blocks a call hands back or passes on: a few at a time on the hot paths
// (candidates to check, stale blocks), kept inline to spare a heap
// allocation per Allocate.
using BlockVector = absl::InlinedVector<AllocationBlock*, 4>;

// Deletes host records (their events go back to their EventPool). Called
// without the cache's and its shards' locks: the EventPool takes its own.
void DeleteEachBlock(const BlockVector& blocks);
inline void DeleteBlocks(const BlockVector& blocks) {
  if (!blocks.empty()) DeleteEachBlock(blocks);  // the hot path has none
}

using PrimaryList = BlockList<&AllocationBlock::links>;
using StreamList = BlockList<&AllocationBlock::stream_links>;

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_BLOCK_H_
