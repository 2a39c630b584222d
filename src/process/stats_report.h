// The GPUPOOL_STATS=1 report printed at exit: one summary line per pool
// (streams and events: created, reused, destroyed, hit rate; allocations: hits,
// misses, hit rate, bytes), the leases still out with their acquire sites,
// then every pool's per-key detail.

#ifndef GPUPOOL_SRC_PROCESS_STATS_REPORT_H_
#define GPUPOOL_SRC_PROCESS_STATS_REPORT_H_

#include <string>

#include "gpupool/pools.h"

namespace gpupool::internal {

// The report for `pools`, newline-terminated. Thread-safe (reads snapshots).
std::string PoolsStatsReport(Pools& pools);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_PROCESS_STATS_REPORT_H_
