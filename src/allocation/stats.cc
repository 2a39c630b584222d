// AllocationCacheStats: sums and the one-line summary.

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpupool/allocation_cache.h"

namespace gpupool {
namespace {

// "512 B", "1.25 MiB": exact below 1 KiB, three significant digits above.
std::string HumanBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024 && bytes > -1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = -1;
  while ((value >= 1024 || value <= -1024) && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", value, kUnits[unit]);
}

}  // namespace

AllocationCacheStats& AllocationCacheStats::operator+=(
    const AllocationCacheStats& other) {
  allocations_in_use += other.allocations_in_use;
  bytes_in_use += other.bytes_in_use;
  bytes_requested += other.bytes_requested;
  bytes_rounded += other.bytes_rounded;
  peak_bytes_in_use += other.peak_bytes_in_use;
  blocks_cached += other.blocks_cached;
  bytes_cached += other.bytes_cached;
  blocks_retiring += other.blocks_retiring;
  bytes_retiring += other.bytes_retiring;
  stable_allocations += other.stable_allocations;
  bytes_stable += other.bytes_stable;
  hits += other.hits;
  misses += other.misses;
  uncached_allocations += other.uncached_allocations;
  cross_stream_waits += other.cross_stream_waits;
  oom_retries += other.oom_retries;
  failed_allocations += other.failed_allocations;
  runtime_allocations += other.runtime_allocations;
  runtime_frees += other.runtime_frees;
  stable_reallocations += other.stable_reallocations;
  blocks_dropped += other.blocks_dropped;
  blocks_leaked += other.blocks_leaked;
  return *this;
}

double AllocationCacheStats::hit_rate() const {
  const int64_t cacheable = hits + misses;
  return cacheable == 0
             ? 0.0
             : static_cast<double>(hits) / static_cast<double>(cacheable);
}

int64_t AllocationCacheStats::bytes_reserved() const {
  return bytes_in_use + bytes_cached + bytes_retiring + bytes_stable;
}

std::string AllocationCacheStats::ToString() const {
  std::string out = absl::StrFormat(
      "in_use=%d (%s, requested %s) peak=%s cached=%d (%s) hits=%d "
      "misses=%d hit_rate=%.1f%% uncached=%d runtime_alloc=%d "
      "runtime_free=%d",
      allocations_in_use, HumanBytes(bytes_in_use), HumanBytes(bytes_requested),
      HumanBytes(peak_bytes_in_use), blocks_cached, HumanBytes(bytes_cached),
      hits, misses, 100.0 * hit_rate(), uncached_allocations,
      runtime_allocations, runtime_frees);
  // Rare events only when they happened, to keep the common line short.
  if (blocks_retiring != 0) {
    absl::StrAppend(&out, " retiring=", blocks_retiring, " (",
                    HumanBytes(bytes_retiring), ")");
  }
  if (stable_allocations != 0 || stable_reallocations != 0) {
    absl::StrAppend(&out, " stable=", stable_allocations, " (",
                    HumanBytes(bytes_stable),
                    ", reallocations=", stable_reallocations, ")");
  }
  if (cross_stream_waits != 0) {
    absl::StrAppend(&out, " cross_stream_waits=", cross_stream_waits);
  }
  if (oom_retries != 0) absl::StrAppend(&out, " oom_retries=", oom_retries);
  if (failed_allocations != 0) {
    absl::StrAppend(&out, " failed=", failed_allocations);
  }
  if (blocks_dropped != 0) absl::StrAppend(&out, " dropped=", blocks_dropped);
  if (blocks_leaked != 0) absl::StrAppend(&out, " leaked=", blocks_leaked);
  return out;
}

}  // namespace gpupool
