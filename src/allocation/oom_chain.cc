// The OOM chain of oom_chain.h, and the message that explains an
// out-of-memory: in use, cached, held, the device's free bytes.

#include "src/allocation/oom_chain.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/hooks.h"
#include "src/base/readable_bytes.h"

namespace gpupool::internal {

namespace {

// "3.00 MiB (3145728 bytes)"; exact alone below 1 KiB and above 2^63.
std::string Bytes(uint64_t bytes) {
  if (bytes < 1024 || bytes > uint64_t{std::numeric_limits<int64_t>::max()}) {
    return absl::StrCat(bytes, " bytes");
  }
  return absl::StrCat(ReadableBytes(static_cast<int64_t>(bytes)), " (", bytes,
                      " bytes)");
}

// The largest block the shard holds free (ready) now.
uint64_t LargestFreeBlock(const AllocationShard& shard) {
  uint64_t largest = 0;
  shard.ForEachBlock(
      [&largest](const AllocationBlock& block, BlockUse use) {
        if (use == BlockUse::kFree && block.size > largest) {
          largest = block.size;
        }
      },
      [](absl::string_view, const StableBuffer&) {});
  return largest;
}

// One line: what was asked, what the cache holds and where (leased, stable,
// cached and its largest free block, the features' holdings), what the
// device has, what the chain did, what the runtime said.
absl::Status OutOfMemoryError(const AllocationCacheCore& core,
                              AllocationShard& shard, size_t requested,
                              size_t rounded,
                              const absl::StatusOr<MemoryInfo>& info,
                              size_t released, bool retried,
                              const absl::Status& runtime) {
  const AllocationCacheStats stats = shard.Stats();
  // What the features keep out of reuse counts too.
  AllocationCacheStats capture;
  std::string held;
  if (shard.kind() == MemoryKind::kDevice) {
    core.AddCaptureStats(shard.device(), &capture);
    if (const CaptureRouter* router = core.capture_router()) {
      absl::StrAppend(&held, ", ", router->DescribeHeld(shard.device()));
    }
    absl::StrAppend(&held, ", held for captures ",
                    Bytes(capture.bytes_held_for_captures));
    if (const FreeGate* gate = core.free_gate()) {
      const std::string shared = gate->DescribeHeld(shard.device());
      if (!shared.empty()) absl::StrAppend(&held, ", ", shared);
    }
  }
  const std::string memory =
      info.ok() ? absl::StrCat("device free ", Bytes(info->free_bytes), " of ",
                               Bytes(info->total_bytes))
                : absl::StrCat("device free/total unknown (",
                               MessageWithoutFault(info.status()), ")");
  return absl::ResourceExhaustedError(absl::StrCat(
      "AllocationCache: out of ", MemoryKindName(shard.kind()),
      " memory on device ", shard.device(), ": requested ", Bytes(requested),
      ", rounded to ", Bytes(rounded), "; in use ",
      Bytes(stats.bytes_in_use + stats.bytes_stable), " (",
      stats.allocations_in_use, " allocations, stable buffers ",
      Bytes(stats.bytes_stable), "), cached ", Bytes(stats.bytes_cached),
      ", largest free block ", Bytes(LargestFreeBlock(shard)), held, "; ",
      memory, "; ",
      retried ? absl::StrCat("retried once after freeing ", Bytes(released),
                             " of cached blocks")
              : std::string("larger than the device, not retried"),
      "; runtime: ", MessageWithoutFault(runtime)));
}

// Runtime memory obtained: traced when the trace is on, and marked for the
// lease this thread makes next (an allocation, not a reuse).
void Traced(const AllocationCacheCore& core, const AllocationShard& shard,
            size_t bytes, const void* ptr) {
  if (TraceRing* trace = core.trace()) {
    trace->RuntimeMalloc(shard.device(), shard.kind(), bytes, ptr);
    MarkRuntimeMalloc();
  }
}

}  // namespace

absl::StatusOr<void*> RuntimeAllocate(AllocationCacheCore& core,
                                      AllocationShard& shard, size_t requested,
                                      size_t bytes) {
  const int device = shard.device();
  Backend& backend = core.backend();
  absl::StatusOr<void*> ptr = backend.Allocate(device, bytes, shard.kind());
  if (ptr.ok()) {
    Traced(core, shard, bytes, *ptr);
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
    if (TraceRing* trace = core.trace()) {
      trace->Note(TraceOp::kOom, device, shard.kind(), requested);
    }
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
  if (TraceRing* trace = core.trace()) {
    trace->Note(TraceOp::kOomRetry, device, shard.kind(), released);
  }
  if (core.poisoned(device)) {
    return core.AllocationFailed(shard, core.PoisonedError(device));
  }
  ptr = backend.Allocate(device, bytes, shard.kind());
  if (ptr.ok()) {
    Traced(core, shard, bytes, *ptr);
    return ptr;
  }
  if (FaultOf(ptr.status()) != Fault::kOutOfMemory) {
    return core.AllocationFailed(shard, ptr.status());
  }
  info = backend.GetMemoryInfo(device);
  if (TraceRing* trace = core.trace()) {
    trace->Note(TraceOp::kOom, device, shard.kind(), requested);
  }
  return core.AllocationFailed(
      shard, OutOfMemoryError(core, shard, requested, bytes, info, released,
                              true, ptr.status()));
}

}  // namespace gpupool::internal
