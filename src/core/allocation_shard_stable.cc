// The stable buffers (AcquireStable) of an allocation shard: their entries,
// claims and counters, under the shard's lock. The runtime side is in
// allocation_stable.cc.

#include <memory>
#include <string>

#include "src/core/allocation_shard.h"

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
  absl::MutexLock lock(&mu_);
  StableBuffer* buffer = StableEntryLocked(name);
  TakeStaleLocked(generation, stale);
  if (buffer->ptr != nullptr && bytes <= buffer->capacity) {
    claim.existing = buffer->ptr;
    return claim;
  }
  claim.old = TakeStableLocked(buffer);
  buffer->busy = true;  // others wait until FinishStable
  claim.buffer = buffer;
  return claim;
}

void AllocationShard::FinishStable(StableBuffer* buffer, void* ptr,
                                   size_t capacity, uint64_t generation,
                                   bool grew) {
  absl::MutexLock lock(&mu_);
  buffer->busy = false;
  if (ptr == nullptr) return;
  buffer->ptr = ptr;
  buffer->capacity = capacity;
  buffer->generation = generation;
  ++stats_.stable_allocations;
  stats_.bytes_stable += static_cast<int64_t>(capacity);
  if (grew) ++stats_.stable_reallocations;
}

void* AllocationShard::TakeStable(absl::string_view name, uint64_t generation,
                                  BlockVector* stale) {
  absl::MutexLock lock(&mu_);
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

}  // namespace gpupool::internal
