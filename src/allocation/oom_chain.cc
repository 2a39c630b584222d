// The OOM chain of oom_chain.h, and the message that explains an
// out-of-memory: in use, cached, held, the device's free bytes.

#include "src/allocation/oom_chain.h"

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/allocation/cache_core.h"

namespace gpupool::internal {

namespace {

absl::Status OutOfMemoryError(const AllocationCacheCore& core,
                              AllocationShard& shard, size_t requested,
                              size_t rounded,
                              const absl::StatusOr<MemoryInfo>& info,
                              size_t released, bool retried,
                              const absl::Status& runtime) {
  const AllocationCacheStats stats = shard.Stats();
  // What the capture router's pools and held captures keep out of reuse
  // counts too.
  AllocationCacheStats capture;
  std::string routed;
  if (shard.kind() == MemoryKind::kDevice) {
    core.AddCaptureStats(shard.device(), &capture);
    if (const CaptureRouter* router = core.capture_router()) {
      routed = router->DescribeHeld(shard.device());
    }
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
      "bytes, %sheld for captures %d bytes; %s; %s; runtime: %s",
      MemoryKindName(shard.kind()), shard.device(), requested, rounded,
      stats.bytes_in_use + stats.bytes_stable, stats.allocations_in_use,
      stats.bytes_cached, routed.empty() ? routed : absl::StrCat(routed, ", "),
      capture.bytes_held_for_captures, memory,
      retried ? absl::StrFormat("retried once after freeing %d cached bytes",
                                released)
              : std::string("larger than the device, not retried"),
      runtime.message()));
}

}  // namespace

absl::StatusOr<void*> RuntimeAllocate(AllocationCacheCore& core,
                                      AllocationShard& shard, size_t requested,
                                      size_t bytes) {
  const int device = shard.device();
  Backend& backend = core.backend();
  absl::StatusOr<void*> ptr = backend.Allocate(device, bytes, shard.kind());
  if (ptr.ok()) {
    shard.Admit();
    return ptr;
  }
  if (FaultOf(ptr.status()) != Fault::kOutOfMemory) {
    return core.AllocationFailed(shard, ptr.status());
  }
  absl::StatusOr<MemoryInfo> info = backend.GetMemoryInfo(device);
  if (!info.ok() && FaultOf(info.status()) == Fault::kDevice) {
    return core.AllocationFailed(shard, info.status());
  }
  if (shard.kind() == MemoryKind::kDevice && info.ok() &&
      bytes > info->total_bytes) {
    // Trimming cannot help: keep the cache warm.
    return core.AllocationFailed(
        shard, OutOfMemoryError(core, shard, requested, bytes, info, 0, false,
                                ptr.status()));
  }
  // Free only what the request needs: the bytes the device lacks for it
  // (all of it where the device's free bytes are unknown or beside the
  // point, as for pinned host memory), from wholly free segments.
  size_t needed = bytes;
  if (shard.kind() == MemoryKind::kDevice && info.ok() &&
      info->free_bytes < bytes) {
    needed = bytes - info->free_bytes;
  }
  const size_t released = core.ReleaseCachedFor(shard, needed);
  shard.Count(CacheCounter::kOomRetry);
  if (core.poisoned(device)) {
    return core.AllocationFailed(shard, core.PoisonedError(device));
  }
  ptr = backend.Allocate(device, bytes, shard.kind());
  if (ptr.ok()) {
    shard.Admit();
    return ptr;
  }
  if (FaultOf(ptr.status()) != Fault::kOutOfMemory) {
    return core.AllocationFailed(shard, ptr.status());
  }
  info = backend.GetMemoryInfo(device);
  return core.AllocationFailed(
      shard, OutOfMemoryError(core, shard, requested, bytes, info, released,
                              true, ptr.status()));
}

}  // namespace gpupool::internal
