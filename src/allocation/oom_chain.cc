// Runtime allocation for the allocation cache, with the OOM chain: a runtime
// out-of-memory frees this (device, kind)'s cached blocks (waiting for their
// pending work), retries once, then reports the numbers. Never aborts.

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/allocation/cache_core.h"

namespace gpupool::internal {

absl::StatusOr<void*> AllocationCacheCore::RuntimeAllocate(
    AllocationShard& shard, size_t requested, size_t bytes) {
  const int device = shard.device();
  absl::StatusOr<void*> ptr = backend_.Allocate(device, bytes, shard.kind());
  if (ptr.ok()) {
    shard.Admit();
    return ptr;
  }
  if (FaultOf(ptr.status()) != Fault::kOutOfMemory) {
    return AllocationFailed(shard, ptr.status());
  }
  absl::StatusOr<MemoryInfo> info = backend_.GetMemoryInfo(device);
  if (!info.ok() && FaultOf(info.status()) == Fault::kDevice) {
    return AllocationFailed(shard, info.status());
  }
  if (shard.kind() == MemoryKind::kDevice && info.ok() &&
      bytes > info->total_bytes) {
    // Trimming cannot help: keep the cache warm.
    return AllocationFailed(
        shard, OutOfMemoryError(shard, requested, bytes, info, 0, false,
                                ptr.status()));
  }
  const Released released =
      ReleaseCached(shard, static_cast<size_t>(-1), /*with_retiring=*/true);
  shard.Count(Tally::kOomRetry);
  if (poisoned(device)) {
    return AllocationFailed(shard, lifetime_.PoisonedError(device));
  }
  ptr = backend_.Allocate(device, bytes, shard.kind());
  if (ptr.ok()) {
    shard.Admit();
    return ptr;
  }
  if (FaultOf(ptr.status()) != Fault::kOutOfMemory) {
    return AllocationFailed(shard, ptr.status());
  }
  info = backend_.GetMemoryInfo(device);
  return AllocationFailed(
      shard, OutOfMemoryError(shard, requested, bytes, info, released.bytes,
                              true, ptr.status()));
}

absl::Status AllocationCacheCore::AllocationFailed(AllocationShard& shard,
                                                   absl::Status status) {
  if (FaultOf(status) == Fault::kDevice) {
    device_health().Poison(shard.device(), status);
    status = lifetime_.PoisonedError(shard.device());
  }
  shard.Count(Tally::kFailedAllocation);
  return status;
}

absl::Status AllocationCacheCore::OutOfMemoryError(
    AllocationShard& shard, size_t requested, size_t rounded,
    const absl::StatusOr<MemoryInfo>& info, size_t released, bool retried,
    const absl::Status& runtime) {
  const AllocationCacheStats stats = shard.Stats();
  // What graph pools and held captures keep out of reuse counts too.
  AllocationCacheStats capture;
  if (shard.kind() == MemoryKind::kDevice) {
    AddCaptureStats(shard.device(), &capture);
  }
  std::string memory =
      info.ok() ? absl::StrFormat("device free %d bytes of %d bytes total",
                                  info->free_bytes, info->total_bytes)
                : absl::StrCat("device free/total unknown (",
                               info.status().ToString(
                                   absl::StatusToStringMode::kWithNoExtraData),
                               ")");
  return absl::ResourceExhaustedError(absl::StrFormat(
      "AllocationCache: out of %s memory on device %d: requested %d bytes, "
      "rounded to %d bytes; in use %d bytes (%d allocations), cached %d "
      "bytes, in graph pools %d bytes, held for captures %d bytes; %s; %s; "
      "runtime: %s",
      MemoryKindName(shard.kind()), shard.device(), requested, rounded,
      stats.bytes_in_use + stats.bytes_stable, stats.allocations_in_use,
      stats.bytes_cached, capture.bytes_in_graph_pools,
      capture.bytes_held_for_captures, memory,
      retried ? absl::StrFormat("retried once after freeing %d cached bytes",
                                released)
              : std::string("larger than the device, not retried"),
      runtime.message()));
}

}  // namespace gpupool::internal
