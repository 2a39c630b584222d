// The stable buffers (AcquireStable) of an allocation shard: their entries,
// claims and counters, under the shard's lock (the runtime side is in
// stable.cc); and the listings of what the shard holds: the leases out (leak
// reports) and every block and stable buffer (snapshots).

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
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
