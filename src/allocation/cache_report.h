// What the allocation cache tells about itself: stats per (device, kind),
// per device and in total, the leases still out, and its debug string. Each
// takes every shard's lock in turn, briefly; none makes a runtime call.

#ifndef GPUPOOL_SRC_ALLOCATION_CACHE_REPORT_H_
#define GPUPOOL_SRC_ALLOCATION_CACHE_REPORT_H_

#include <string>
#include <vector>

#include "gpupool/allocation_cache.h"
#include "src/allocation/cache_core.h"

namespace gpupool::internal {

// Totals over every device and kind; zero in a forked child.
AllocationCacheStats CacheStats(const AllocationCacheCore& core);
// One device's (both kinds); zero for a device out of range.
AllocationCacheStats CacheStats(const AllocationCacheCore& core, int device);
// One (device, kind); zero for one out of range or an unknown kind.
AllocationCacheStats CacheStats(const AllocationCacheCore& core, int device,
                                MemoryKind kind);
// Every lease still out, the features' own included.
std::vector<OutstandingLease> CacheOutstandingLeases(
    const AllocationCacheCore& core);
std::string CacheDebugString(const AllocationCacheCore& core);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_CACHE_REPORT_H_
