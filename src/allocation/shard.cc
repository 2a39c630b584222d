// The sealed (device, MemoryKind) shard of the allocation cache; see
// shard.h. Stable buffers, kept and parked blocks and the listings are in
// shard_kept.cc.

#include "src/allocation/shard.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "src/allocation/segment.h"
#include "src/allocation/size_classes.h"

namespace gpupool::internal {
AllocationShard::AllocationShard(int device, MemoryKind kind,
                                 int size_class_count, size_t max_split_ratio,
                                 size_t max_cached_bytes,
                                 std::atomic<size_t>* device_cached_bytes)
    : device_(device),
      kind_(kind),
      cached_bytes_(max_cached_bytes, device_cached_bytes),
      index_(size_class_count, max_split_ratio) {}

// No lock: nothing else references a shard being destroyed; a fork() child's
// lock may be held forever by a thread that no longer exists.
AllocationShard::~AllocationShard() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  BlockVector blocks;
  TakeAllCachedLocked(&blocks);
  TakeAllRetiringLocked(&blocks);
  parked_.TakeAll(std::nullopt, &blocks);
  DeleteBlocks(blocks);
  while (AllocationBlock* pin = leaked_parts_.PopFront()) delete pin;
  // Leased blocks belong to their leases, which hold this shard alive.
}

// --- Allocate ----------------------------------------------------------------

AllocationBlock* AllocationShard::TakeCached(
    const LeaseRequest& request, int pending_checks, uint64_t generation,
    BlockVector* candidates, BlockVector* stale, UncheckedLease* unchecked) {
  MutexLock lock(&mu_);
  AllocationBlock* slot_hit = TakeSlotLocked(
      request, generation,
      pending_checks > 0 ? SlotMiss::kCandidate : SlotMiss::kPark, candidates,
      unchecked);
  TakeStaleLocked(generation, stale);
  if (slot_hit != nullptr || !candidates->empty()) return slot_hit;
  if (unchecked != nullptr && unchecked->block != nullptr) return nullptr;
  if (!parked_.empty()) {
    // The request's lane first (parked.h), then what is fenced there goes
    // into the index, so that the search below sees every cached block.
    if (AllocationBlock* parked = TakeParkedLocked(request)) return parked;
    // Another stream's lone fenced block of this size, and nothing in the
    // index: the search below would list it and give it as its one
    // candidate (the ping-pong of one buffer between two streams). Given
    // as that candidate at once.
    if (pending_checks > 0 && index_.empty()) {
      if (AllocationBlock* sole = parked_.TakeSoleFencedElsewhere(
              request.stream, request.lease_bytes)) {
        UncacheParkedLocked(*sole);
        sole->listed_at = lease_count_;
        candidates->push_back(sole);
        return nullptr;
      }
    }
    ListFencedParkedLocked();
  }
  AllocationBlock* block = index_.FindBestFit(
      request.lease_bytes, request.stream, /*with_pending=*/pending_checks > 0);
  if (block != nullptr && FreeIndex::UsableAtOnce(block, request.stream)) {
    RemoveCachedLocked(block);
    // Pending on the request's stream alone: the rest keeps the fence (the
    // lease is ordered after it by its stream). Ready: nothing to keep.
    SplitLocked(block, request.lease_bytes, /*rest_takes_events=*/true);
    ++stats_.hits;
    NoteCrossing(block, request);
    LeaseLocked(block, request);
    return block;
  }
  // Not usable at once, the best fit is the oldest pending block (given
  // only when pending_checks > 0): the first to check.
  if (block != nullptr) {
    RemoveCachedLocked(block);
    candidates->push_back(block);
  }
  while (static_cast<int>(candidates->size()) < pending_checks) {
    AllocationBlock* candidate = TakeOldestPendingLocked(request.lease_bytes);
    if (candidate == nullptr) break;
    candidates->push_back(candidate);
  }
  return nullptr;
}

AllocationBlock* AllocationShard::SettleOthersLocked(AllocationBlock* chosen,
                                                     const BlockVector& keep,
                                                     const BlockVector& dropped,
                                                     const BlockVector& leaked,
                                                     uint64_t generation,
                                                     BlockVector* garbage) {
  int64_t dropped_count = DetachAll(dropped);
  int64_t leaked_count = 0;
  for (AllocationBlock* block : leaked)
    leaked_count += LeaveLocked(block, RetireReason::kLeaked);
  garbage->insert(garbage->end(), dropped.begin(), dropped.end());
  garbage->insert(garbage->end(), leaked.begin(), leaked.end());
  for (auto it = keep.rbegin(); it != keep.rend(); ++it) {  // oldest, in order
    if (DeadLocked(**it, generation)) {
      dropped_count += DetachFromSegment(*it);
      garbage->push_back(*it);
    } else if (AllocationBlock* over = AddCachedLocked(*it, /*oldest=*/true)) {
      AddRetiringLocked(over);
    }
  }
  if (chosen != nullptr && DeadLocked(*chosen, generation)) {
    dropped_count += DetachFromSegment(chosen);
    garbage->push_back(chosen);
    chosen = nullptr;
  }
  ledger_.Retire(RetireReason::kDropped, dropped_count);
  ledger_.Retire(RetireReason::kLeaked, leaked_count);
  return chosen;
}

AllocationBlock* AllocationShard::SettleCandidates(
    AllocationBlock* chosen, bool waited, const BlockVector& keep,
    const BlockVector& dropped, const BlockVector& leaked,
    const LeaseRequest& request, uint64_t generation, BlockVector* garbage) {
  SettledLock lock(this);
  // The usual cross-stream hit has one candidate, complete (or waited on):
  // nothing else to settle.
  if (!keep.empty() || !dropped.empty() || !leaked.empty() ||
      (chosen != nullptr && DeadLocked(*chosen, generation))) {
    // A candidate taken from the release slot carried its lease's hold:
    // only the chosen one's lease takes it over.
    for (const BlockVector* others : {&keep, &dropped, &leaked}) {
      for (AllocationBlock* block : *others) DropSlotHoldLocked(block);
    }
    AllocationBlock* const candidate = chosen;
    chosen =
        SettleOthersLocked(chosen, keep, dropped, leaked, generation, garbage);
    if (chosen == nullptr && candidate != nullptr) {
      DropSlotHoldLocked(candidate);  // dead: in `garbage`, not yet deleted
    }
  }
  if (chosen != nullptr) {
    // Waited on: the rest stays fenced by the events. Queried complete: the
    // rest is ready and the lease keeps them as spares.
    SplitLocked(chosen, request.lease_bytes,
                /*rest_takes_events=*/waited);
    ++stats_.hits;
    if (waited) ++stats_.cross_stream_waits;
    NoteCrossing(chosen, request);
    LeaseLocked(chosen, request);
  }
  return chosen;
}

void AllocationShard::UndoUncheckedLease(const UncheckedLease& unchecked,
                                         BlockState state, uint64_t generation,
                                         BlockVector* garbage) {
  SettledLock lock(this);
  AllocationBlock* block = unchecked.block;
  --stats_.hits;
  if (unchecked.waits) --stats_.cross_stream_waits;
  in_use_.Relend(block, unchecked.requested);  // the gauges, as released
  RemoveInUseLocked(block);
  block->stream = unchecked.stream;
  block->release_stream = unchecked.release_stream;
  block->uses.clear();
  if (unchecked.use != nullptr) block->uses.push_back(unchecked.use);
  block->lease_id = unchecked.lease_id;
  block->where = unchecked.where;
  block->leased_unix_ns = unchecked.leased_unix_ns;
  block->leased_at = unchecked.leased_at;
  block->fence_at_release = unchecked.fence_at_release;
  // Settled as the candidate it would have been, unchosen.
  DropSlotHoldLocked(block);
  const BlockVector one = {block};
  const BlockVector none;
  const bool kept = state == BlockState::kIdle || state == BlockState::kPending;
  SettleOthersLocked(/*chosen=*/nullptr, kept ? one : none,
                     state == BlockState::kDrop ? one : none,
                     state == BlockState::kLeak ? one : none, generation,
                     garbage);
}

void AllocationShard::LeaseNew(AllocationBlock* block,
                               const LeaseRequest& request,
                               CacheCounter tally) {
  SettledLock lock(this);
  ledger_.Admit();
  ++(tally == CacheCounter::kUncached ? stats_.uncached_allocations
                                      : stats_.misses);
  LeaseLocked(block, request);
}

// --- Release -----------------------------------------------------------------

AllocationShard::AfterReturn AllocationShard::TakeBack(AllocationBlock* block,
                                                       BlockState state,
                                                       uint64_t generation) {
  AfterReturn taken;
  SettledLock lock(this);
  RemoveInUseLocked(block);
  const bool keep = state == BlockState::kIdle || state == BlockState::kPending;
  if (keep && closed_) {
    state = BlockState::kLeak;  // the cache was destroyed meanwhile
  } else if (keep && DeadLocked(*block, generation)) {
    // Poisoned while we recorded, or, after our read of `generation`,
    // poisoned, recovered and swept by another thread.
    state = BlockState::kDrop;
  }
  if (state == BlockState::kDrop || state == BlockState::kLeak) {
    const RetireReason how = state == BlockState::kDrop ? RetireReason::kDropped
                                                        : RetireReason::kLeaked;
    if (LeaveLocked(block, how)) ledger_.Retire(how);
    taken.to_delete = block;
    return taken;
  }
  StashSpares(block, &spare_events_);
  taken.to_poll = TakeOldestRetiringLocked();
  if (block->size_class >= 0) {
    // Merged, or over the cap.
    block = AddCachedLocked(block, /*oldest=*/false, /*released=*/true);
  }
  if (block != nullptr) {
    // Uncached or over the cap: free it, but never while the GPU may still
    // use it — retire it until its events complete.
    if (block->events.empty()) {
      taken.to_free = block;
    } else {
      AddRetiringLocked(block);
    }
  }
  return taken;
}

// --- Cached lists ------------------------------------------------------------

AllocationBlock* AllocationShard::AddCachedLocked(AllocationBlock* block,
                                                  bool oldest, bool released) {
  NoteStaleLocked(*block);
  if (!IsWholeSegment(block)) block = MergeLocked(block, released);
  block->listed_at = lease_count_;
  if (!CountCachedLocked(*block)) return block;
  index_.Insert(block, oldest);
  return nullptr;
}

AllocationBlock* AllocationShard::MergeLocked(AllocationBlock* block,
                                              bool released) {
  // Only a released block covers its neighbours' events, and TakeBack, the
  // one caller that passes `released`, found its generation alive.
  return MergeFreeNeighbours(
      block, released, &records_,
      [this](AllocationBlock* neighbour) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        RemoveCachedLocked(neighbour);  // called under mu_, by us
      },
      released ? &spare_events_ : nullptr);
}

void AllocationShard::SplitLocked(AllocationBlock* block, size_t bytes,
                                  bool rest_takes_events) {
  if (block->size < bytes + kMinSplitRemainder) return;  // the common case
  if (AllocationBlock* rest =
          SplitBlock(block, bytes, rest_takes_events, &records_)) {
    AddCachedLocked(rest, /*oldest=*/false);  // part of a segment: kept
  }
}

void AllocationShard::RemoveCachedLocked(AllocationBlock* block) {
  index_.Remove(block);
  UncountCachedLocked(*block);
}

AllocationBlock* AllocationShard::TakeOldestPendingLocked(size_t bytes) {
  AllocationBlock* block = ServingOrNull(index_.FindOldestPending(bytes), bytes,
                                         index_.max_split_ratio());
  if (block != nullptr) RemoveCachedLocked(block);
  return block;
}

void AllocationShard::CoalesceLocked() {
  // Runs of free blocks the fence bound kept apart (kMaxFenceEvents) merge
  // now: whatever frees them waits on every event anyway.
  BlockVector runs;
  index_.ForEachLargestFirst([&](AllocationBlock* block)
                                 ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                   if (IsRunHead(block)) runs.push_back(block);
                                   return true;
                                 });
  for (AllocationBlock* head : runs) {
    // The run's bytes stay cached: only its blocks are fewer.
    index_.Remove(head);
    MergeRun(head, &records_,
             [this](AllocationBlock* next)
                 ABSL_NO_THREAD_SAFETY_ANALYSIS {  // under mu_, by us
                   index_.Remove(next);
                   --stats_.blocks_cached;
                 });
    index_.Insert(head, /*oldest=*/false);
  }
}

size_t AllocationShard::TakeCachedLocked(size_t bytes, bool best_match,
                                         size_t smaller_than,
                                         BlockVector* out) {
  CoalesceLocked();
  size_t taken = 0;
  AllocationBlock* best = best_match ? index_.SmallestWholeOf(bytes) : nullptr;
  if (best != nullptr) {
    RemoveCachedLocked(best);
    out->push_back(best);
    return best->size;
  }
  index_.ForEachLargestFirst(
      [&](AllocationBlock* block) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        if (taken >= bytes) return false;
        if (IsWholeSegment(block) && block->size < smaller_than) {
          RemoveCachedLocked(block);
          taken += block->size;
          out->push_back(block);
        }
        return true;
      });
  return taken;
}

void AllocationShard::TakeAllCachedLocked(BlockVector* out) {  // no merging
  index_.ForEachLargestFirst([&](AllocationBlock* block)
                                 ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                   RemoveCachedLocked(block);
                                   out->push_back(block);
                                   return true;
                                 });
}

// --- Retiring ----------------------------------------------------------------

void AllocationShard::AddRetiringLocked(AllocationBlock* block) {
  NoteStaleLocked(*block);
  retiring_.PushBack(block);
  NoteRetiringLocked();
  ++stats_.blocks_retiring;
  stats_.bytes_retiring += static_cast<int64_t>(block->size);
}

AllocationBlock* AllocationShard::TakeOldestRetiringLocked() {
  AllocationBlock* block = retiring_.PopFront();
  NoteRetiringLocked();
  if (block != nullptr) {
    --stats_.blocks_retiring;
    stats_.bytes_retiring -= static_cast<int64_t>(block->size);
  }
  return block;
}

void AllocationShard::TakeAllRetiringLocked(BlockVector* out) {
  while (AllocationBlock* block = TakeOldestRetiringLocked()) {
    out->push_back(block);
  }
}

AllocationBlock* AllocationShard::TakeOldestRetiring() {
  // Read first without the lock, as Stash reads it: a miss with nothing
  // retiring (the usual case) takes no lock to find so; a block retired by
  // another thread meanwhile waits for the next poll.
  if (!any_retiring_.load(std::memory_order_relaxed)) return nullptr;
  SettledLock lock(this);
  return TakeOldestRetiringLocked();
}

void AllocationShard::RestoreRetiring(AllocationBlock* block) {
  SettledLock lock(this);
  retiring_.PushFront(block);
  NoteRetiringLocked();
  ++stats_.blocks_retiring;
  stats_.bytes_retiring += static_cast<int64_t>(block->size);
}

// --- Freeing -----------------------------------------------------------------

void AllocationShard::TakeForRelease(size_t bytes, bool with_retiring,
                                     bool best_match, size_t smaller_than,
                                     uint64_t generation, BlockVector* out,
                                     BlockVector* stale) {
  SettledLock lock(this);
  TakeStaleLocked(generation, stale);
  if (bytes > 0) TakeCachedLocked(bytes, best_match, smaller_than, out);
  if (!with_retiring) return;  // else Trim or the OOM chain: spares go too
  TakeAllRetiringLocked(out);
  if (AllocationBlock* c = CarryOut(&spare_events_, &records_)) {
    stale->push_back(c);
  }
}

void AllocationShard::KeepIfParts(BlockVector* blocks) {
  SettledLock lock(this);
  size_t wholes = 0;
  for (AllocationBlock* block : *blocks) {
    if (!IsWholeSegment(block)) {
      block->events.clear();  // idle: the caller proved its events complete
      block->release_stream = nullptr;
      block = AddCachedLocked(block, /*oldest=*/false);
    }
    if (block != nullptr) (*blocks)[wholes++] = block;
  }
  blocks->resize(wholes);
}

void AllocationShard::Forget(AllocationBlock* block, RetireReason how) {
  SettledLock lock(this);
  if (LeaveLocked(block, how)) ledger_.Retire(how);
}

void AllocationShard::TakeEverything(bool close, bool leak, uint64_t generation,
                                     BlockVector* blocks,
                                     std::vector<void*>* stable,
                                     SpareEvents* spares, BlockVector* stale) {
  SettledLock lock(this);
  if (close) {
    // A block stashed since the settling is parked (freed below with the
    // lane blocks fenced at their release; leaked, as a release after the
    // cache's end is, if its fence is still deferred); no stash succeeds
    // after this.
    if (AllocationBlock* late = slot_.Close()) ParkFromSlotLocked(late);
    closed_ = true;
  }
  TakeStaleLocked(generation, stale);
  const size_t first_block = blocks->size();
  const size_t first_stable = stable->size();
  // Parts of segments still partly leased stay listed (freed with their
  // segment, or leaked with it once the shard is closed).
  TakeCachedLocked(static_cast<size_t>(-1), /*best_match=*/false,
                   /*smaller_than=*/static_cast<size_t>(-1), blocks);
  TakeFencedParkedLocked(blocks);
  TakeAllRetiringLocked(blocks);
  LeakParkedLocked(stale);
  spares->swap(spare_events_);
  stable_.TakeIf([](const StableBuffer&) { return true; }, stable);
  if (leak) {
    ledger_.Retire(RetireReason::kLeaked,
                   static_cast<int64_t>(blocks->size() - first_block +
                                        stable->size() - first_stable));
  }
}

void AllocationShard::TakeStale(uint64_t generation, BlockVector* stale) {
  SettledLock lock(this);
  TakeStaleLocked(generation, stale);
}

void AllocationShard::TakeStaleSlowLocked(uint64_t generation,
                                          BlockVector* out) {
  bool new_generation = false;
  // What is older than the newest generation swept goes, whatever
  // generation the caller read.
  generation = swept_.BeginSweep(generation, &new_generation);
  // Stashed events may be the dead generation's: out, uncounted (not blocks).
  if (new_generation) {
    if (AllocationBlock* carrier = CarryOut(&spare_events_, &records_)) {
      out->push_back(carrier);
    }
  }
  int64_t dropped = TakeStaleParkedLocked(generation, out);
  auto drop = [&](AllocationBlock* block) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (block->generation >= generation) return true;
    RemoveCachedLocked(block);
    dropped += DetachFromSegment(block);  // once per segment: its last block
    out->push_back(block);
    return true;
  };
  index_.ForEachLargestFirst(drop);
  for (AllocationBlock* block = retiring_.front(); block != nullptr;) {
    AllocationBlock* next = PrimaryList::Next(block);
    if (block->generation < generation) {
      retiring_.Remove(block);
      NoteRetiringLocked();
      --stats_.blocks_retiring;
      stats_.bytes_retiring -= static_cast<int64_t>(block->size);
      out->push_back(block);
      ++dropped;
    }
    block = next;
  }
  dropped += stable_.TakeIf([generation](const StableBuffer& buffer) {
    return buffer.generation < generation;
  });
  ledger_.Retire(RetireReason::kDropped, dropped);
}

// --- Counting ----------------------------------------------------------------

void AllocationShard::Count(CacheCounter tally) {
  // In CacheCounter's order.
  static constexpr int64_t AllocationCacheStats::*kCounters[] = {
      &AllocationCacheStats::misses,
      &AllocationCacheStats::uncached_allocations,
      &AllocationCacheStats::oom_retries,
      &AllocationCacheStats::failed_allocations};
  SettledLock lock(this);
  ++(stats_.*kCounters[static_cast<int>(tally)]);
}

void AllocationShard::Retire(RetireReason how, int64_t count) {
  SettledLock lock(this);
  ledger_.Retire(how, count);
}

}  // namespace gpupool::internal
