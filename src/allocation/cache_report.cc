// What the allocation cache tells about itself: stats per (device, kind),
// per device and in total, the leases still out, and DebugString.

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/allocation/cache_core.h"

namespace gpupool::internal {
namespace {

absl::string_view PolicyName(CrossStreamPolicy policy) {
  return policy == CrossStreamPolicy::kWaitOnStream ? "wait_on_stream"
                                                    : "wait_for_completion";
}

bool IsKnownKind(MemoryKind kind) {
  return kind == MemoryKind::kDevice || kind == MemoryKind::kPinnedHost;
}

}  // namespace

AllocationCacheStats AllocationCacheCore::GetStats() const {
  AllocationCacheStats total;
  if (Forked()) return total;
  for (const auto& shard : shards_) total += shard->Stats();
  AddCaptureStats(/*device=*/-1, &total);
  return total;
}

AllocationCacheStats AllocationCacheCore::GetStats(int device) const {
  AllocationCacheStats total;
  if (Forked() || !lifetime_.InRange(device)) return total;
  total += Shard(device, MemoryKind::kDevice).Stats();
  total += Shard(device, MemoryKind::kPinnedHost).Stats();
  AddCaptureStats(device, &total);
  return total;
}

AllocationCacheStats AllocationCacheCore::GetStats(int device,
                                                   MemoryKind kind) const {
  if (Forked() || !lifetime_.InRange(device) || !IsKnownKind(kind)) return {};
  AllocationCacheStats stats = Shard(device, kind).Stats();
  if (kind == MemoryKind::kDevice) AddCaptureStats(device, &stats);
  return stats;
}

std::vector<OutstandingLease> AllocationCacheCore::GetOutstandingLeases()
    const {
  std::vector<OutstandingLease> out;
  if (Forked()) return out;
  for (const auto& shard : shards_) shard->AppendOutstanding(&out);
  if (const FreeGate* gate = free_gate_.load(std::memory_order_acquire)) {
    gate->AppendOutstanding(&out);
  }
  return out;
}

std::string AllocationCacheCore::DebugString() const {
  std::string out = absl::StrFormat(
      "allocation cache over %s (%d devices, max_cached_bytes=%s, "
      "max_cached_block_bytes=%d, cross_stream=%s)",
      std::string(backend_.name()), lifetime_.device_count(),
      options_.max_cached_bytes == static_cast<size_t>(-1)
          ? std::string("unbounded")
          : absl::StrCat(options_.max_cached_bytes),
      options_.max_cached_block_bytes, PolicyName(options_.cross_stream));
  if (Forked()) return absl::StrCat(out, " [forked: unusable]");
  if (!lifetime_.device_count_status().ok()) {
    absl::StrAppend(&out, " [",
                    lifetime_.device_count_status().ToString(
                        absl::StatusToStringMode::kWithNoExtraData),
                    "]");
  }
  absl::StrAppend(&out, "\n  total: ", GetStats().ToString());
  for (const auto& shard : shards_) {
    const AllocationCacheStats stats = shard->Stats();
    if (stats.runtime_allocations == 0 && stats.failed_allocations == 0) {
      continue;
    }
    absl::StrAppend(
        &out, "\n  dev", shard->device(), " ", MemoryKindName(shard->kind()),
        poisoned(shard->device()) ? " POISONED" : "", ": ", stats.ToString());
  }
  if (const CaptureRouter* router =
          capture_router_.load(std::memory_order_acquire)) {
    absl::StrAppend(&out, router->DebugString());
  }
  return out;
}

void AllocationCacheCore::AddCaptureStats(int device,
                                          AllocationCacheStats* stats) const {
  if (const CaptureRouter* router =
          capture_router_.load(std::memory_order_acquire)) {
    router->AddStats(device, stats);
  }
  MutexLock lock(&held_mu_);
  for (const AllocationBlock* block : held_for_captures_) {
    if (device >= 0 && block->device != device) continue;
    ++stats->blocks_held_for_captures;
    stats->bytes_held_for_captures += static_cast<int64_t>(block->size);
  }
}

}  // namespace gpupool::internal
