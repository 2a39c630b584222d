// The GPUPOOL_STATS=1 exit report; see stats_report.h.

#include "src/process/stats_report.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/pool_stats.h"
#include "gpupool/pools.h"

namespace gpupool::internal {
namespace {

// The leases of `leases` that gpupool holds itself (SourceLocation::Internal).
int InternalLeases(const std::vector<OutstandingLease>& leases) {
  int internal = 0;
  for (const OutstandingLease& lease : leases) {
    if (lease.where.is_internal()) ++internal;
  }
  return internal;
}

// `in_use` counts every lease out, gpupool's own included; those are named so
// that the line agrees with "leases still out" below, which lists only the
// user's.
std::string PoolLine(absl::string_view name, const PoolStats& stats,
                     int internal) {
  const std::string own =
      internal > 0 ? absl::StrCat(" (", internal, " held by gpupool)") : "";
  return absl::StrFormat(
      "  %-12s acquired=%d created=%d reused=%d destroyed=%d hit_rate=%.1f%% "
      "in_use=%d%s idle=%d peak_in_use=%d\n",
      name, stats.acquired, stats.created, stats.reused, stats.destroyed,
      100.0 * stats.hit_rate(), stats.in_use, own, stats.idle,
      stats.peak_in_use);
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
  // gpupool's own leases: the ready events the allocation cache keeps with
  // its blocks (and, under the preload, the handles it serves).
  const int internal_streams =
      InternalLeases(pools.streams().GetOutstandingLeases());
  const int internal_events =
      InternalLeases(pools.events().GetOutstandingLeases());
  const int internal_allocations =
      InternalLeases(pools.allocations().GetOutstandingLeases());
  absl::StrAppend(
      &report,
      PoolLine("streams", pools.streams().GetStats(), internal_streams),
      PoolLine("events", pools.events().GetStats(), internal_events),
      AllocationLine(pools.allocations().GetStats()));
  const std::vector<OutstandingLease> leases = pools.GetOutstandingLeases();
  absl::StrAppend(&report, "leases still out: ", leases.size(), " (+",
                  internal_streams + internal_events + internal_allocations,
                  " held by gpupool itself)\n");
  for (const OutstandingLease& lease : leases) {
    absl::StrAppend(&report, "  ", lease.ToString(), "\n");
  }
  absl::StrAppend(&report, "detail:\n", pools.DebugString(), "\n");
  return report;
}

}  // namespace gpupool::internal
