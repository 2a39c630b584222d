// The stable buffers of stable.h: claims, growth and release.

#include "src/allocation/stable.h"

#include "absl/strings/str_cat.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/oom_chain.h"
#include "src/allocation/size_classes.h"

namespace gpupool::internal {

namespace {

// Allocates the claimed buffer's new memory, then frees the memory it
// replaces.
absl::StatusOr<void*> FinishStable(AllocationCacheCore& core,
                                   AllocationShard& shard, StableBuffer* buffer,
                                   size_t bytes, size_t capacity) {
  // The new buffer first: if it cannot be had, the name keeps the old one.
  const int device = shard.device();
  const uint64_t buffer_generation = core.generation(device);
  absl::StatusOr<void*> ptr =
      core.poisoned(device) ? absl::StatusOr<void*>(core.AllocationFailed(
                                  shard, core.PoisonedError(device)))
                            : RuntimeAllocate(core, shard, bytes, capacity);
  void* old = shard.FinishStable(
      buffer, ptr.ok() ? *ptr : nullptr, capacity,
      ptr.ok() ? buffer_generation : core.generation(device));
  if (old == nullptr) return ptr;
  // A failed free of the old buffer leaks it; the new one serves. A sticky
  // fault there killed the device, the new buffer with it: say so.
  core.FreeStableMemory(shard, old).IgnoreError();
  if (core.poisoned(device)) {
    return core.AllocationFailed(shard, core.PoisonedError(device));
  }
  return ptr;
}

}  // namespace

absl::StatusOr<void*> AcquireStable(AllocationCacheCore& core,
                                    absl::string_view name, int device,
                                    size_t bytes) {
  if (absl::Status usable = core.CheckUsable(device, "StableBuffers::Acquire");
      !usable.ok()) {
    return usable;
  }
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        "StableBuffers::Acquire: bytes must be > 0");
  }
  AllocationShard& shard = core.Shard(device, MemoryKind::kDevice);
  // Rounded like cached blocks, so that a slightly larger request later
  // still fits and the address does not move.
  const size_t capacity = bytes <= core.options().max_cached_block_bytes
                              ? RoundUpToSizeClass(bytes)
                              : bytes;
  BlockVector stale;
  const AllocationShard::StableClaim claim =
      shard.ClaimStable(name, bytes, core.generation(device), &stale);
  DeleteBlocks(stale);
  if (claim.existing != nullptr) return claim.existing;
  return FinishStable(core, shard, claim.buffer, bytes, capacity);
}

absl::Status ReleaseStable(AllocationCacheCore& core, absl::string_view name,
                           int device) {
  if (absl::Status usable = core.CheckUsable(device, "StableBuffers::Release");
      !usable.ok()) {
    return usable;
  }
  AllocationShard& shard = core.Shard(device, MemoryKind::kDevice);
  BlockVector stale;
  void* ptr = shard.TakeStable(name, core.generation(device), &stale);
  DeleteBlocks(stale);
  if (ptr == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("StableBuffers::Release: no stable buffer named \"", name,
                     "\" on device ", device));
  }
  return core.FreeStableMemory(shard, ptr);
}

}  // namespace gpupool::internal
