// What an allocation shard keeps outside its free index, under its lock:
// the stable buffers (AcquireStable: entries, claims and counters; the
// runtime side is in stable.cc), the blocks kept out of use (held, or a
// capture router's) and the blocks parked with their fence deferred
// (parked.h); and the listings of what the shard holds: its
// statistics, the leases out (leak reports) and every block and stable
// buffer (snapshots).

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/allocation/segment.h"
#include "src/allocation/shard.h"

namespace gpupool::internal {

StableBuffer* AllocationShard::StableEntryLocked(absl::string_view name) {
  std::unique_ptr<StableBuffer>& slot = stable_[name];
  if (slot == nullptr) slot = std::make_unique<StableBuffer>();
  StableBuffer* buffer = slot.get();
  // Entries are never erased, so the pointer stays valid while we wait.
  mu_.Await(absl::Condition(
      +[](StableBuffer* b) { return !b->busy; }, buffer));
  return buffer;
}

AllocationShard::StableClaim AllocationShard::ClaimStable(
    absl::string_view name, size_t bytes, uint64_t generation,
    BlockVector* stale) {
  StableClaim claim;
  MutexLock lock(&mu_);
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
  MutexLock lock(&mu_);
  buffer->busy = false;
  // TakeStaleLocked skipped the entry while it was busy: a buffer of a
  // generation that died meanwhile is dropped here.
  void* old = nullptr;
  if (buffer->ptr != nullptr && buffer->generation != generation) {
    TakeStableLocked(buffer);
    ledger_.Retire(RetireReason::kDropped);
  }
  if (ptr == nullptr) return nullptr;
  old = TakeStableLocked(buffer);
  buffer->ptr = ptr;
  buffer->capacity = capacity;
  buffer->generation = generation;
  ++stats_.stable_allocations;
  stats_.bytes_stable += static_cast<int64_t>(capacity);
  if (old != nullptr) ++stats_.stable_reallocations;
  return old;
}

void* AllocationShard::TakeStable(absl::string_view name, uint64_t generation,
                                  BlockVector* stale) {
  MutexLock lock(&mu_);
  StableBuffer* buffer = StableEntryLocked(name);
  TakeStaleLocked(generation, stale);
  return TakeStableLocked(buffer);
}

void* AllocationShard::TakeStableLocked(StableBuffer* buffer) {
  void* ptr = buffer->ptr;
  if (ptr != nullptr) {
    --stats_.stable_allocations;
    stats_.bytes_stable -= static_cast<int64_t>(buffer->capacity);
  }
  buffer->ptr = nullptr;
  buffer->capacity = 0;
  return ptr;
}

void AllocationShard::ForEachBlock(
    absl::FunctionRef<void(const AllocationBlock&, BlockUse)> visit,
    absl::FunctionRef<void(absl::string_view, const StableBuffer&)> stable)
    const {
  MutexLock lock(&mu_);
  for (const AllocationBlock* block = in_use_.front(); block != nullptr;
       block = PrimaryList::Next(block)) {
    visit(*block, BlockUse::kLeased);
  }
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
  for (const auto& [name, buffer] : stable_) {
    if (buffer->ptr != nullptr) stable(name, *buffer);
  }
}

// --- Kept blocks -------------------------------------------------------------

void AllocationShard::LeaseKept(AllocationBlock* block,
                                const LeaseRequest& request, bool hit) {
  MutexLock lock(&mu_);
  if (hit) ++stats_.hits;
  NoteCrossing(block, request);
  LeaseLocked(block, request);
}

void AllocationShard::Reinstate(AllocationBlock* block) {
  MutexLock lock(&mu_);
  block->requested = 0;
  block->lease_id = 0;
  AddInUseLocked(block);
}

void AllocationShard::TakeOutOfUse(AllocationBlock* block) {
  MutexLock lock(&mu_);
  RemoveInUseLocked(block);
}

// --- Parked blocks -----------------------------------------------------------

bool AllocationShard::Park(AllocationBlock* block, uint64_t generation,
                           AllocationBlock** to_poll) {
  MutexLock lock(&mu_);
  // From a release (to_poll given), only a whole segment: a part goes to
  // the free index, to merge with its free neighbours at its release. A
  // block fenced later (FenceParked) may be parked again whatever it is.
  if (closed_ || block->generation != generation ||
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
                                             bool* deferred_left) {
  MutexLock lock(&mu_);
  TakeStaleLocked(generation, stale);
  AllocationBlock* block = TakeParkedLocked(request);
  *deferred_left = parked_.any_unfenced();
  return block;
}

void AllocationShard::Unpark(std::optional<NativeStream> stream,
                             bool deferred_only, BlockVector* out) {
  MutexLock lock(&mu_);
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
    // it (TakeBack), which takes it out of the gauges once more.
    AddInUseLocked(block);
  }
}

int64_t AllocationShard::TakeStaleParkedLocked(uint64_t generation,
                                               BlockVector* out) {
  if (parked_.empty()) return 0;
  const size_t first = out->size();
  parked_.TakeIf(
      [generation](const AllocationBlock& block) {
        return block.generation != generation;
      },
      out);
  int64_t dropped = 0;
  for (size_t i = first; i < out->size(); ++i) {
    UncacheParkedLocked(*(*out)[i]);
    dropped += DetachFromSegment((*out)[i]);
  }
  return dropped;
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
  MutexLock lock(&mu_);
  AllocationCacheStats stats = stats_;
  stats.runtime_allocations = ledger_.admitted();
  stats.runtime_frees = ledger_.departed(RetireReason::kDestroyed);
  stats.blocks_dropped = ledger_.departed(RetireReason::kDropped);
  stats.blocks_leaked = ledger_.departed(RetireReason::kLeaked);
  return stats;
}

void AllocationShard::AppendOutstanding(
    std::vector<OutstandingLease>* out) const {
  MutexLock lock(&mu_);
  for (const AllocationBlock* block = in_use_.front(); block != nullptr;
       block = PrimaryList::Next(block)) {
    out->push_back(OutstandingLease{
        "allocation", device_,
        absl::StrCat(MemoryKindName(kind_), " ", block->requested, " bytes"),
        block->lease_id, block->where});
  }
}

}  // namespace gpupool::internal
