// Latency histograms and pool counters; see gpupool/pool_stats.h.

#include "gpupool/pool_stats.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpupool {
namespace {

int BucketOf(int64_t ns) {
  if (ns <= 1) return 0;
  int bucket = 63 - __builtin_clzll(static_cast<uint64_t>(ns));
  return std::min(bucket, LatencyHistogram::kBuckets - 1);
}

}  // namespace

void LatencyHistogram::Record(absl::Duration latency) {
  int64_t ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(latency));
  ++buckets_[BucketOf(ns)];
  ++count_;
  total_ns_ += ns;
  max_ns_ = std::max(max_ns_, ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  total_ns_ += other.total_ns_;
  max_ns_ = std::max(max_ns_, other.max_ns_);
}

absl::Duration LatencyHistogram::mean() const {
  return count_ == 0 ? absl::ZeroDuration()
                     : absl::Nanoseconds(total_ns_ / count_);
}

absl::Duration LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return absl::ZeroDuration();
  q = std::clamp(q, 0.0, 1.0);
  int64_t rank = static_cast<int64_t>(std::ceil(q * count_));
  if (rank < 1) rank = 1;
  int64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      return std::min(absl::Nanoseconds(int64_t{2} << i), max());
    }
  }
  return max();
}

std::string LatencyHistogram::ToString() const {
  if (count_ == 0) return "n=0";
  return absl::StrCat("n=", count_, " mean=", absl::FormatDuration(mean()),
                      " p50<=", absl::FormatDuration(Percentile(0.5)),
                      " p99<=", absl::FormatDuration(Percentile(0.99)),
                      " max=", absl::FormatDuration(max()));
}

PoolStats& PoolStats::operator+=(const PoolStats& other) {
  acquired += other.acquired;
  created += other.created;
  reused += other.reused;
  destroyed += other.destroyed;
  discarded_faulty += other.discarded_faulty;
  dropped += other.dropped;
  leaked += other.leaked;
  acquire_timeouts += other.acquire_timeouts;
  in_use += other.in_use;
  idle += other.idle;
  draining += other.draining;
  peak_in_use += other.peak_in_use;
  create_latency.Merge(other.create_latency);
  destroy_latency.Merge(other.destroy_latency);
  return *this;
}

double PoolStats::hit_rate() const {
  return acquired == 0 ? 0.0 : static_cast<double>(reused) / acquired;
}

std::string PoolStats::ToString() const {
  return absl::StrFormat(
      "acquired=%d created=%d reused=%d (hit %.1f%%) destroyed=%d "
      "discarded_faulty=%d dropped=%d leaked=%d timeouts=%d in_use=%d "
      "idle=%d draining=%d peak_in_use=%d create{%s} destroy{%s}",
      acquired, created, reused, 100.0 * hit_rate(), destroyed,
      discarded_faulty, dropped, leaked, acquire_timeouts, in_use, idle,
      draining, peak_in_use, create_latency.ToString(),
      destroy_latency.ToString());
}

std::string OutstandingLease::ToString() const {
  return absl::StrCat(resource, " dev", device, " {", key, "} #", lease_id,
                      " acquired at ", where.file_name(), ":", where.line());
}

}  // namespace gpupool
