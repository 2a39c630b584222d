// The report of cache_report.h: shard stats summed, plus the hooks'.

#include "src/allocation/cache_report.h"

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

AllocationCacheStats CacheStats(const AllocationCacheCore& core) {
  AllocationCacheStats total;
  if (core.Forked()) return total;
  for (const auto& shard : core.shards()) total += shard->Stats();
  core.AddCaptureStats(/*device=*/-1, &total);
  return total;
}

AllocationCacheStats CacheStats(const AllocationCacheCore& core, int device) {
  AllocationCacheStats total;
  if (core.Forked() || !core.lifetime().InRange(device)) return total;
  total += core.Shard(device, MemoryKind::kDevice).Stats();
  total += core.Shard(device, MemoryKind::kPinnedHost).Stats();
  core.AddCaptureStats(device, &total);
  return total;
}

AllocationCacheStats CacheStats(const AllocationCacheCore& core, int device,
                                MemoryKind kind) {
  if (core.Forked() || !core.lifetime().InRange(device) || !IsKnownKind(kind))
    return {};
  AllocationCacheStats stats = core.Shard(device, kind).Stats();
  if (kind == MemoryKind::kDevice) core.AddCaptureStats(device, &stats);
  return stats;
}

std::vector<OutstandingLease> CacheOutstandingLeases(
    const AllocationCacheCore& core) {
  std::vector<OutstandingLease> out;
  if (core.Forked()) return out;
  for (const auto& shard : core.shards()) shard->AppendOutstanding(&out);
  if (const FreeGate* gate = core.free_gate()) {
    gate->AppendOutstanding(&out);
  }
  return out;
}

std::string CacheDebugString(const AllocationCacheCore& core) {
  std::string out = absl::StrFormat(
      "allocation cache over %s (%d devices, max_cached_bytes=%s, "
      "max_cached_block_bytes=%d, cross_stream=%s)",
      std::string(core.backend().name()), core.lifetime().device_count(),
      core.options().max_cached_bytes == static_cast<size_t>(-1)
          ? std::string("unbounded")
          : absl::StrCat(core.options().max_cached_bytes),
      core.options().max_cached_block_bytes,
      PolicyName(core.options().cross_stream));
  if (core.Forked()) return absl::StrCat(out, " [forked: unusable]");
  if (!core.lifetime().device_count_status().ok()) {
    absl::StrAppend(&out, " [",
                    MessageWithoutFault(core.lifetime().device_count_status()),
                    "]");
  }
  absl::StrAppend(&out, "\n  total: ", CacheStats(core).ToString());
  for (const auto& shard : core.shards()) {
    const AllocationCacheStats stats = shard->Stats();
    if (stats.runtime_allocations == 0 && stats.failed_allocations == 0) {
      continue;
    }
    absl::StrAppend(&out, "\n  dev", shard->device(), " ",
                    MemoryKindName(shard->kind()),
                    core.poisoned(shard->device()) ? " POISONED" : "", ": ",
                    stats.ToString());
  }
  if (const CaptureRouter* router = core.capture_router()) {
    absl::StrAppend(&out, router->DebugString());
  }
  return out;
}

}  // namespace gpupool::internal
