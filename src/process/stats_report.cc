// The GPUPOOL_STATS=1 exit report; see stats_report.h.

#include "src/process/stats_report.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/pool_stats.h"
#include "gpupool/pools.h"

namespace gpupool::internal {
namespace {

std::string PoolLine(absl::string_view name, const PoolStats& stats) {
  return absl::StrFormat(
      "  %-12s acquired=%d created=%d reused=%d destroyed=%d hit_rate=%.1f%% "
      "in_use=%d idle=%d peak_in_use=%d\n",
      name, stats.acquired, stats.created, stats.reused, stats.destroyed,
      100.0 * stats.hit_rate(), stats.in_use, stats.idle, stats.peak_in_use);
}

// "1.50 MiB"; exact bytes below 1 KiB.
std::string Bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, " B")
                   : absl::StrFormat("%.2f %s", value, kUnits[unit]);
}

std::string AllocationLine(const AllocationCacheStats& stats) {
  return absl::StrFormat(
      "  %-12s hits=%d misses=%d hit_rate=%.1f%% uncached=%d oom_retries=%d "
      "in_use=%d (%s) cached=%s peak_in_use=%s reserved=%s\n",
      "allocations", stats.hits, stats.misses, 100.0 * stats.hit_rate(),
      stats.uncached_allocations, stats.oom_retries, stats.allocations_in_use,
      Bytes(stats.bytes_in_use), Bytes(stats.bytes_cached),
      Bytes(stats.peak_bytes_in_use), Bytes(stats.bytes_reserved()));
}

}  // namespace

std::string PoolsStatsReport(Pools& pools) {
  std::string report =
      absl::StrCat("gpupool stats at exit (backend ",
                   std::string(pools.backend().name()), "):\n");
  absl::StrAppend(&report, PoolLine("streams", pools.streams().GetStats()),
                  PoolLine("events", pools.events().GetStats()),
                  AllocationLine(pools.allocations().GetStats()));
  // Leases acquired inside the library (this folder) are gpupool's own, e.g.
  // the ready events the allocation cache keeps with cached blocks.
  const absl::string_view this_file = __FILE__;
  const absl::string_view core_dir =
      this_file.substr(0, this_file.rfind('/') + 1);
  std::vector<OutstandingLease> leases;
  int internal_leases = 0;
  for (OutstandingLease& lease : pools.GetOutstandingLeases()) {
    if (absl::StartsWith(lease.where.file_name(), core_dir)) {
      ++internal_leases;
    } else {
      leases.push_back(std::move(lease));
    }
  }
  absl::StrAppend(&report, "leases still out: ", leases.size(), " (+",
                  internal_leases, " held by gpupool itself)\n");
  for (const OutstandingLease& lease : leases) {
    absl::StrAppend(&report, "  ", lease.ToString(), "\n");
  }
  absl::StrAppend(&report, "detail:\n", pools.DebugString(), "\n");
  return report;
}

}  // namespace gpupool::internal
