// gpupool/pool_stats.h — counters and latency histograms of a handle pool.
//
// A plain value snapshot: `StreamPool::GetStats()` and `EventPool::GetStats()`
// return one per key or summed over all keys. Field names are part of the
// public contract.

#ifndef GPUPOOL_POOL_STATS_H_
#define GPUPOOL_POOL_STATS_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "gpupool/export.h"
#include "gpupool/source_location.h"

namespace gpupool {

// Log2-bucketed latency histogram (bucket i holds [2^i, 2^(i+1)) ns).
class GPUPOOL_EXPORT LatencyHistogram {
 public:
  static constexpr int kBuckets = 40;
  void Record(absl::Duration latency);
  void Merge(const LatencyHistogram& other);
  int64_t count() const { return count_; }
  absl::Duration total() const { return absl::Nanoseconds(total_ns_); }
  absl::Duration max() const { return absl::Nanoseconds(max_ns_); }
  absl::Duration mean() const;
  // Upper bound of the bucket holding quantile q in [0, 1].
  absl::Duration Percentile(double q) const;
  const std::array<int64_t, kBuckets>& buckets() const { return buckets_; }
  // "n=12 mean=3.4ms p50<=4.2ms p99<=8.4ms max=3.9ms"
  std::string ToString() const;

 private:
  std::array<int64_t, kBuckets> buckets_{};
  int64_t count_ = 0;
  int64_t total_ns_ = 0;
  int64_t max_ns_ = 0;
};

// Counters of a stream or event pool.
struct GPUPOOL_EXPORT PoolStats {
  int64_t acquired = 0;          // successful acquires
  int64_t created = 0;           // handles created through the runtime
  int64_t reused = 0;            // acquires served from idle or drained
  int64_t destroyed = 0;         // handles destroyed through the runtime
  int64_t discarded_faulty = 0;  // of destroyed: faulty, capturing or Discard()
  int64_t dropped = 0;           // forgotten without a runtime call (poisoned
                                 // or stale device generation)
  int64_t leaked = 0;            // left to the OS: exit, shutdown, fork, or
                                 // returned after the pool was destroyed
  int64_t acquire_timeouts = 0;  // ResourceExhausted from max_live_per_key
  int64_t in_use = 0;            // leases out now
  int64_t idle = 0;              // ready for reuse now
  int64_t draining = 0;          // returned with work pending
  int64_t peak_in_use = 0;       // high-water mark of in_use (per key; the
                                 // total sums the per-key peaks)
  // How long the runtime's creates and destroys took. Destroys are timed
  // while the pool lives (Trim, the exit drain, a faulted return); its
  // destruction, after which nothing can read them, destroys its idle
  // handles untimed.
  LatencyHistogram create_latency;
  LatencyHistogram destroy_latency;

  PoolStats& operator+=(const PoolStats& other);
  // Fraction of acquires served without creating (0 when none).
  double hit_rate() const;
  std::string ToString() const;
};

// One (device, config) key of a stream or event pool and its counters.
struct GPUPOOL_EXPORT PoolKeyStats {
  int device = -1;
  std::string config;  // the config's ToString()
  PoolStats stats;
};

// A lease still out, for leak reports: what, where it was acquired.
struct GPUPOOL_EXPORT OutstandingLease {
  std::string resource;  // "stream", "event", "allocation"
  int device = -1;
  std::string key;  // config or memory kind
  uint64_t lease_id = 0;
  SourceLocation where;
  std::string ToString() const;  // "stream dev0 {priority=0,...} #12 at f.cc:7"
};

using StreamPoolStats = PoolStats;
using EventPoolStats = PoolStats;

}  // namespace gpupool

#endif  // GPUPOOL_POOL_STATS_H_
