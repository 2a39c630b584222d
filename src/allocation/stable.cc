// Stable buffers of the allocation cache (AcquireStable / ReleaseStable):
// device memory by name whose address never moves while it holds enough
// bytes. The bookkeeping is the shard's (shard_stable.cc); this
// file makes the runtime calls, with no lock held.

#include "absl/strings/str_cat.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/size_classes.h"

namespace gpupool::internal {

absl::StatusOr<void*> AllocationCacheCore::AcquireStable(absl::string_view name,
                                                         int device,
                                                         size_t bytes) {
  if (absl::Status usable = CheckUsable(device, "StableBuffers::Acquire");
      !usable.ok()) {
    return usable;
  }
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        "StableBuffers::Acquire: bytes must be > 0");
  }
  AllocationShard& shard = Shard(device, MemoryKind::kDevice);
  // Rounded like cached blocks, so that a slightly larger request later
  // still fits and the address does not move.
  const size_t capacity = bytes <= options_.max_cached_block_bytes
                              ? RoundUpToSizeClass(bytes)
                              : bytes;
  BlockVector stale;
  const AllocationShard::StableClaim claim =
      shard.ClaimStable(name, bytes, generation(device), &stale);
  DeleteBlocks(stale);
  if (claim.existing != nullptr) return claim.existing;
  return FinishStable(shard, claim.buffer, bytes, capacity);
}

absl::Status AllocationCacheCore::ReleaseStable(absl::string_view name,
                                                int device) {
  if (absl::Status usable = CheckUsable(device, "StableBuffers::Release");
      !usable.ok()) {
    return usable;
  }
  AllocationShard& shard = Shard(device, MemoryKind::kDevice);
  BlockVector stale;
  void* ptr = shard.TakeStable(name, generation(device), &stale);
  DeleteBlocks(stale);
  if (ptr == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("StableBuffers::Release: no stable buffer named \"", name,
                     "\" on device ", device));
  }
  return FreeStableMemory(shard, ptr);
}

absl::StatusOr<void*> AllocationCacheCore::FinishStable(AllocationShard& shard,
                                                        StableBuffer* buffer,
                                                        size_t bytes,
                                                        size_t capacity) {
  // The new buffer first: if it cannot be had, the name keeps the old one.
  const int device = shard.device();
  const uint64_t buffer_generation = generation(device);
  absl::StatusOr<void*> ptr = poisoned(device)
                                  ? absl::StatusOr<void*>(AllocationFailed(
                                        shard, lifetime_.PoisonedError(device)))
                                  : RuntimeAllocate(shard, bytes, capacity);
  void* old =
      shard.FinishStable(buffer, ptr.ok() ? *ptr : nullptr, capacity,
                         ptr.ok() ? buffer_generation : generation(device));
  if (old == nullptr) return ptr;
  // A failed free of the old buffer leaks it; the new one serves. A sticky
  // fault there killed the device, the new buffer with it: say so.
  FreeStableMemory(shard, old).IgnoreError();
  if (poisoned(device)) {
    return AllocationFailed(shard, lifetime_.PoisonedError(device));
  }
  return ptr;
}

}  // namespace gpupool::internal
