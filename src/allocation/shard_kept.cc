// What an allocation shard keeps outside its free index, under its lock:
// the stable buffers (AcquireStable: claims, over stable_entries.h; the
// runtime side is in stable.cc), the blocks kept out of use (held, or a
// capture router's) and the blocks parked with their fence deferred
// (parked.h); and the listings of what the shard holds: its
// statistics, the leases out (leak reports) and every block and stable
// buffer (snapshots).

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/optimization.h"
#include "absl/strings/str_cat.h"
#include "src/allocation/segment.h"
#include "src/allocation/shard.h"

namespace gpupool::internal {

StableBuffer* AllocationShard::StableEntryLocked(absl::string_view name) {
  StableBuffer* buffer = stable_.Entry(name);
  // Entries are never erased, so the pointer stays valid while we wait.
  mu_.Await(absl::Condition(
      +[](StableBuffer* b) { return !b->busy; }, buffer));
  return buffer;
}

AllocationShard::StableClaim AllocationShard::ClaimStable(
    absl::string_view name, size_t bytes, uint64_t generation,
    BlockVector* stale) {
  StableClaim claim;
  SettledLock lock(this);
  StableBuffer* buffer = StableEntryLocked(name);
  TakeStaleLocked(generation, stale);
  if (buffer->ptr != nullptr && bytes <= buffer->capacity) {
    claim.existing = buffer->ptr;
    return claim;
  }
  buffer->busy = true;  // others wait until FinishStable
  claim.buffer = buffer;
  return claim;
}

void* AllocationShard::FinishStable(StableBuffer* buffer, void* ptr,
                                    size_t capacity, uint64_t generation) {
  SettledLock lock(this);
  buffer->busy = false;
  // TakeStaleLocked skipped the entry while it was busy: a buffer of a
  // generation that died meanwhile is dropped here.
  if (buffer->ptr != nullptr && buffer->generation != generation) {
    stable_.Take(buffer);
    ledger_.Retire(RetireReason::kDropped);
  }
  if (ptr == nullptr) return nullptr;
  ledger_.Admit();  // the new runtime allocation enters the shard's care
  void* old = stable_.Replace(buffer, ptr, capacity, generation);
  // Claimed before another thread's poison, recovery and sweep: the next
  // sweep takes it.
  swept_.NoteStale(generation);
  return old;
}

void* AllocationShard::TakeStable(absl::string_view name, uint64_t generation,
                                  BlockVector* stale) {
  SettledLock lock(this);
  StableBuffer* buffer = StableEntryLocked(name);
  TakeStaleLocked(generation, stale);
  return stable_.Take(buffer);
}

void AllocationShard::ForEachBlock(
    absl::FunctionRef<void(const AllocationBlock&, BlockUse)> visit,
    absl::FunctionRef<void(absl::string_view, const StableBuffer&)> stable)
    const {
  SettledLock lock(this);
  in_use_.ForEach([&visit](const AllocationBlock& block) {
    // A block being fenced is still the parked block it was.
    visit(block, block.fencing ? BlockUse::kPending : BlockUse::kLeased);
  });
  index_.ForEachListed([&visit](const AllocationBlock& block, bool pending) {
    visit(block, pending ? BlockUse::kPending : BlockUse::kFree);
  });
  // Parked: cached, its fence (recorded before anything else gets it) still
  // to come.
  parked_.ForEach([&visit](const AllocationBlock& block) {
    visit(block, BlockUse::kPending);
  });
  for (const AllocationBlock* block = retiring_.front(); block != nullptr;
       block = PrimaryList::Next(block)) {
    visit(*block, BlockUse::kRetiring);
  }
  for (const AllocationBlock* block = leaked_parts_.front(); block != nullptr;
       block = PrimaryList::Next(block)) {
    visit(*block, BlockUse::kLeaked);
  }
  stable_.ForEach(
      [&stable](absl::string_view name, const StableBuffer& buffer) {
        if (buffer.ptr != nullptr) stable(name, buffer);
      });
}

// --- Kept blocks -------------------------------------------------------------

void AllocationShard::LeaseKept(AllocationBlock* block,
                                const LeaseRequest& request, bool hit) {
  SettledLock lock(this);
  if (hit) ++stats_.hits;
  NoteCrossing(block, request);
  LeaseLocked(block, request);
}

void AllocationShard::Reinstate(AllocationBlock* block) {
  SettledLock lock(this);
  block->requested = 0;
  block->lease_id = 0;
  AddInUseLocked(block);
}

void AllocationShard::TakeOutOfUse(AllocationBlock* block) {
  SettledLock lock(this);
  RemoveInUseLocked(block);
}

// --- Parked blocks -----------------------------------------------------------

bool AllocationShard::Park(AllocationBlock* block, uint64_t generation,
                           AllocationBlock** to_poll) {
  SettledLock lock(this);
  // From a release (to_poll given), only a whole segment: a part goes to
  // the free index, to merge with its free neighbours at its release. A
  // block fenced later (FenceParked) may be parked again whatever it is.
  if (closed_ || DeadLocked(*block, generation) ||
      (to_poll != nullptr && !IsWholeSegment(block)) ||
      !CountCachedLocked(*block)) {
    return false;
  }
  RemoveInUseLocked(block);
  parked_.Add(block);
  any_parked_.store(true, std::memory_order_relaxed);
  // One retiring block checked per release, as TakeBack does.
  if (to_poll != nullptr) *to_poll = TakeOldestRetiringLocked();
  return true;
}

void AllocationShard::ListFencedParkedLocked() {
  BlockVector fenced;
  parked_.TakeFenced(&fenced);
  any_parked_.store(!parked_.empty(), std::memory_order_relaxed);
  // Oldest first, as they were released. Whole segments (Park), counted as
  // cached already: listed as they are, with nothing to merge.
  for (auto it = fenced.rbegin(); it != fenced.rend(); ++it) {
    (*it)->listed_at = lease_count_;
    index_.Insert(*it, /*oldest=*/false);
  }
}

void AllocationShard::UncacheParkedLocked(const AllocationBlock& block) {
  UncountCachedLocked(block);
  any_parked_.store(!parked_.empty(), std::memory_order_relaxed);
}

AllocationBlock* AllocationShard::TakeParkedLocked(
    const LeaseRequest& request) {
  AllocationBlock* block = parked_.Take(request.stream, request.lease_bytes);
  if (block == nullptr) return nullptr;
  UncacheParkedLocked(*block);
  ++stats_.hits;
  block->fence_at_release = false;  // back on its own stream
  LeaseLocked(block, request);
  return block;
}

AllocationBlock* AllocationShard::TakeParked(const LeaseRequest& request,
                                             uint64_t generation,
                                             BlockVector* stale,
                                             bool* deferred_left,
                                             UncheckedLease* unchecked) {
  MutexLock lock(&mu_);
  // A slot block the request cannot take back stays there for the request's
  // next step (TakeCached, or the fence of the deferred blocks, which
  // settles it first), unless it is leased unchecked (as TakeCached would).
  AllocationBlock* block = TakeSlotLocked(request, generation, SlotMiss::kLeave,
                                          /*candidates=*/nullptr, unchecked);
  TakeStaleLocked(generation, stale);
  if (block != nullptr) return block;
  if (unchecked != nullptr && unchecked->block != nullptr) {
    *deferred_left = false;  // nothing else was cached
    return nullptr;
  }
  block = TakeParkedLocked(request);
  const AllocationBlock* in_slot = slot_.Peek();
  *deferred_left = parked_.any_unfenced() ||
                   (in_slot != nullptr && in_slot->release_stream == nullptr);
  return block;
}

// --- The release slot --------------------------------------------------------

bool AllocationShard::Stash(AllocationBlock* block, uint64_t generation) {
  if (!block->whole_in_use || block->generation != generation ||
      any_retiring_.load(std::memory_order_relaxed) || slot_.occupied()) {
    return false;
  }
  // Capped, its bytes count against the cap from now, as Park's would.
  if (SlotReserves() && !cached_bytes_.Reserve(block->size)) return false;
  // The lease's hold goes with the block (set before the offer: once the
  // block is in the slot it is not ours to write).
  block->slot_hold = true;
  if (slot_.Offer(block)) return true;  // touch nothing after this
  // Refused, it is parked the ordinary way (which a closed shard refuses).
  block->slot_hold = false;
  UnreserveSlotBlock(*block);
  return false;
}

void AllocationShard::SettleSlot() { SettledLock lock(this); }

void AllocationShard::SettleSlotLocked() {
  // Nothing more once closed: the slot is too (TakeEverything).
  if (closed_) return;
  if (AllocationBlock* block = slot_.Take()) ParkFromSlotLocked(block);
}

void AllocationShard::ParkFromSlotLocked(AllocationBlock* block) {
  DropSlotHoldLocked(block);
  // Counted as Park counts it; Stash reserved a capped cache's bytes, and
  // an uncapped count cannot fail.
  ++stats_.blocks_cached;
  stats_.bytes_cached += static_cast<int64_t>(block->size);
  if (!SlotReserves()) cached_bytes_.Add(block->size);
  RemoveInUseLocked(block);
  parked_.Add(block);
  any_parked_.store(true, std::memory_order_relaxed);
  NoteStaleLocked(*block);  // stashed before a sweep it missed
}

AllocationBlock* AllocationShard::TakeSlotLocked(const LeaseRequest& request,
                                                 uint64_t generation,
                                                 SlotMiss miss,
                                                 BlockVector* candidates,
                                                 UncheckedLease* unchecked) {
  if (closed_) return nullptr;
  AllocationBlock* block = slot_.Take();
  if (block == nullptr) return nullptr;
  if (ABSL_PREDICT_FALSE(block->size != request.lease_bytes ||
                         block->generation != generation ||
                         block->uses.front() != request.stream)) {
    return SlotMissLocked(block, request, generation, miss, candidates,
                          unchecked);
  }
  // Park and TakeParkedLocked, less what cancels out: never counted as
  // cached, in use throughout (on its one stream, so its uses stay; merged
  // with nothing, so it has no spare events), the newest lease first.
  UnreserveSlotBlock(*block);
  ++stats_.hits;
  block->fence_at_release = false;  // back on its own stream
  in_use_.Relend(block, request.bytes);
  StampLeaseLocked(block, request);
  return block;
}

AllocationBlock* AllocationShard::SlotMissLocked(
    AllocationBlock* block, const LeaseRequest& request, uint64_t generation,
    SlotMiss miss, BlockVector* candidates, UncheckedLease* unchecked) {
  const bool current = block->generation == generation;
  // Of another stream (else a hit) and all that is cached: the lone-lane
  // shortcut (TakeCached) without the lane, the candidate that parking it
  // and taking it out again would give.
  const bool lone = current && block->size == request.lease_bytes &&
                    block->release_stream != nullptr && parked_.empty() &&
                    index_.empty();
  if (lone && unchecked != nullptr && block->uses.size() <= 1) {
    // Its hold goes to the lease (UncheckedLease).
    LeaseUncheckedLocked(block, request, unchecked);
    return nullptr;
  }
  if (current && miss == SlotMiss::kLeave) {
    // Back where it was, unless a release filled the slot meanwhile.
    if (slot_.PutBack(block)) return nullptr;
  }
  if (lone && miss == SlotMiss::kCandidate) {
    // Its hold goes with it: to its lease if the request chooses it, else
    // dropped as the candidate is settled (SettleCandidates).
    UnreserveSlotBlock(*block);
    RemoveInUseLocked(block);
    block->listed_at = lease_count_;
    candidates->push_back(block);
    return nullptr;
  }
  ParkFromSlotLocked(block);
  return nullptr;
}

void AllocationShard::LeaseUncheckedLocked(AllocationBlock* block,
                                           const LeaseRequest& request,
                                           UncheckedLease* unchecked) {
  UncheckedLease& saved = *unchecked;
  saved.block = block;
  saved.requested = block->requested;
  saved.stream = block->stream;
  saved.release_stream = block->release_stream;
  saved.use = block->uses.empty() ? nullptr : block->uses.front();
  saved.lease_id = block->lease_id;
  saved.where = block->where;
  saved.leased_unix_ns = block->leased_unix_ns;
  saved.leased_at = block->leased_at;
  saved.fence_at_release = block->fence_at_release;
  // TakeSlotLocked's hit, on another stream: whole and of the lease size
  // (nothing to split), fenced (no spare events to lend).
  UnreserveSlotBlock(*block);
  ++stats_.hits;
  if (saved.waits) ++stats_.cross_stream_waits;
  NoteCrossing(block, request);
  block->uses.clear();
  if (request.stream != nullptr) block->uses.push_back(request.stream);
  in_use_.Relend(block, request.bytes);
  StampLeaseLocked(block, request);
}

void AllocationShard::Unpark(std::optional<NativeStream> stream,
                             bool deferred_only, BlockVector* out) {
  SettledLock lock(this);
  const size_t first = out->size();
  if (deferred_only) {
    parked_.TakeIf(
        [stream](const AllocationBlock& block) {
          return block.release_stream == nullptr &&
                 (!stream.has_value() || block.uses.front() == *stream);
        },
        out);
  } else {
    parked_.TakeAll(stream, out);
  }
  for (size_t i = first; i < out->size(); ++i) {
    AllocationBlock* block = (*out)[i];
    UncacheParkedLocked(*block);
    // In use again, as the lease that released it was: the caller releases
    // it (TakeBack, or Park again), which takes it out of the gauges once
    // more. Until then observers see it cached, as it was.
    AddInUseLocked(block);
    in_use_.StartFencing(block);
  }
}

int64_t AllocationShard::TakeStaleParkedLocked(uint64_t generation,
                                               BlockVector* out) {
  if (parked_.empty()) return 0;
  const size_t first = out->size();
  parked_.TakeIf(
      [generation](const AllocationBlock& block) {
        return block.generation < generation;
      },
      out);
  int64_t dropped = 0;
  for (size_t i = first; i < out->size(); ++i) {
    UncacheParkedLocked(*(*out)[i]);
    dropped += DetachFromSegment((*out)[i]);
  }
  return dropped;
}

void AllocationShard::TakeFencedParkedLocked(BlockVector* out) {
  const size_t first = out->size();
  parked_.TakeFenced(out);
  for (size_t i = first; i < out->size(); ++i) UncacheParkedLocked(*(*out)[i]);
}

void AllocationShard::LeakParkedLocked(BlockVector* out) {
  if (parked_.empty()) return;
  const size_t first = out->size();
  parked_.TakeAll(std::nullopt, out);
  int64_t leaked = 0;
  for (size_t i = first; i < out->size(); ++i) {
    UncacheParkedLocked(*(*out)[i]);
    leaked += LeaveLocked((*out)[i], RetireReason::kLeaked);
  }
  ledger_.Retire(RetireReason::kLeaked, leaked);
}

// --- Listings ----------------------------------------------------------------

AllocationCacheStats AllocationShard::Stats() const {
  SettledLock lock(this);
  AllocationCacheStats stats = stats_;
  // Blocks being fenced count as the cached blocks they were (Unpark).
  in_use_.AddTo(&stats);
  stable_.AddTo(&stats);
  stats.runtime_allocations = ledger_.admitted();
  stats.runtime_frees = ledger_.departed(RetireReason::kDestroyed);
  stats.blocks_dropped = ledger_.departed(RetireReason::kDropped);
  stats.blocks_leaked = ledger_.departed(RetireReason::kLeaked);
  return stats;
}

void AllocationShard::AppendOutstanding(
    std::vector<OutstandingLease>* out) const {
  SettledLock lock(this);
  in_use_.ForEachLeaseNewestFirst([this, out](const AllocationBlock& block) {
    out->push_back(OutstandingLease{
        "allocation", device_,
        absl::StrCat(MemoryKindName(kind_), " ", block.requested, " bytes"),
        block.lease_id, block.where});
  });
}

}  // namespace gpupool::internal
