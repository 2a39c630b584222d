// Pool statistics (gpupool/pool_stats.h): the log2 latency histogram's
// bucket placement and summaries, and the creation/destruction histograms a
// pool keeps, on SimBackend profiles whose latencies are known. The sim
// sleeps at least its profile's latency, so every sample lies at or above
// that latency's bucket; counts are exact.

#include "gpupool/pool_stats.h"

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StrictSimOptions;
using ::testing::HasSubstr;

// The bucket holding `d`: bucket i holds [2^i, 2^(i+1)) ns.
int BucketFor(absl::Duration d) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  int bucket = 0;
  while (bucket + 1 < LatencyHistogram::kBuckets &&
         (int64_t{2} << bucket) <= ns) {
    ++bucket;
  }
  return bucket;
}

int64_t SamplesBelow(const LatencyHistogram& h, int bucket) {
  int64_t n = 0;
  for (int i = 0; i < bucket; ++i) n += h.buckets()[i];
  return n;
}

int64_t SumOfBuckets(const LatencyHistogram& h) {
  return SamplesBelow(h, LatencyHistogram::kBuckets);
}

TEST(LatencyHistogramTest, EachSampleLandsInItsLog2Bucket) {
  LatencyHistogram h;
  h.Record(absl::Nanoseconds(0));     // bucket 0 (clamped)
  h.Record(absl::Nanoseconds(1));     // bucket 0
  h.Record(absl::Nanoseconds(3));     // [2, 4): bucket 1
  h.Record(absl::Nanoseconds(1000));  // [512, 1024): bucket 9
  h.Record(absl::Nanoseconds(1024));  // [1024, 2048): bucket 10
  h.Record(absl::Milliseconds(1));    // 1e6 ns: [2^19, 2^20): bucket 19
  h.Record(absl::Nanoseconds(-5));    // negative counts as 0: bucket 0
  h.Record(absl::Hours(1));           // beyond the last bucket: bucket 39
  EXPECT_EQ(h.count(), 8);
  EXPECT_EQ(SumOfBuckets(h), 8);
  EXPECT_EQ(h.buckets()[0], 3);
  EXPECT_EQ(h.buckets()[1], 1);
  EXPECT_EQ(h.buckets()[9], 1);
  EXPECT_EQ(h.buckets()[10], 1);
  EXPECT_EQ(h.buckets()[19], 1);
  EXPECT_EQ(h.buckets()[LatencyHistogram::kBuckets - 1], 1);
  EXPECT_EQ(h.max(), absl::Hours(1));
  EXPECT_EQ(h.total(),
            absl::Nanoseconds(1 + 3 + 1000 + 1024 + 1000000) + absl::Hours(1));
}

TEST(LatencyHistogramTest, SummariesComeFromTheBuckets) {
  LatencyHistogram h;
  EXPECT_EQ(h.ToString(), "n=0");
  EXPECT_EQ(h.Percentile(0.5), absl::ZeroDuration());
  for (int i = 0; i < 99; ++i) h.Record(absl::Microseconds(3));  // bucket 11
  h.Record(absl::Milliseconds(5));  // 5e6 ns: bucket 22
  EXPECT_EQ(h.mean(),
            (absl::Microseconds(3) * 99 + absl::Milliseconds(5)) / 100);
  // The upper bound of the quantile's bucket (never above the max).
  EXPECT_EQ(h.Percentile(0.5), absl::Nanoseconds(int64_t{2} << 11));
  EXPECT_EQ(h.Percentile(0.99), absl::Nanoseconds(int64_t{2} << 11));
  EXPECT_EQ(h.Percentile(1.0), absl::Milliseconds(5));
  EXPECT_EQ(h.ToString(),
            "n=100 mean=52.97us p50<=4.096us p99<=4.096us "
            "max=5ms");
}

TEST(LatencyHistogramTest, MergeAddsBucketByBucket) {
  LatencyHistogram a;
  LatencyHistogram b;
  a.Record(absl::Nanoseconds(5));   // bucket 2
  b.Record(absl::Nanoseconds(6));   // bucket 2
  b.Record(absl::Microseconds(2));  // bucket 10
  a.Merge(b);
  EXPECT_EQ(a.count(), 3);
  EXPECT_EQ(a.buckets()[2], 2);
  EXPECT_EQ(a.buckets()[10], 1);
  EXPECT_EQ(a.max(), absl::Microseconds(2));
  EXPECT_EQ(a.total(), absl::Nanoseconds(2011));
}

class PoolLatencyTest : public ::testing::Test {
 protected:
  static SimProfile Profile() {
    SimProfile profile = SimProfile::Instant();
    profile.name = "known-latencies";
    profile.stream_create = absl::Milliseconds(2);   // bucket 20
    profile.stream_destroy = absl::Milliseconds(1);  // bucket 19
    profile.event_create = absl::Microseconds(300);  // bucket 18
    profile.event_destroy = absl::Microseconds(70);  // bucket 16
    return profile;
  }
  void TearDown() override {
    EXPECT_EQ(sim_.misuse_count(), 0);
    EXPECT_THAT(sim_.CheckNoLeaks(), IsOk());
  }
  SimBackend sim_{StrictSimOptions(/*devices=*/2, Profile())};
};

TEST_F(PoolLatencyTest, StreamPoolRecordsEveryCreationAndDestruction) {
  ASSERT_EQ(BucketFor(absl::Milliseconds(2)), 20);
  ASSERT_EQ(BucketFor(absl::Milliseconds(1)), 19);
  {
    StreamPool pool(sim_);
    ASSERT_THAT(pool.Prewarm(0, {}, 3), IsOk());
    ASSERT_THAT(pool.Prewarm(1, {.priority = -1}, 2), IsOk());
    {
      // Reuse creates nothing, so it records nothing.
      absl::StatusOr<PooledStream> reused = pool.Acquire(0);
      ASSERT_THAT(reused, IsOk());
    }
    StreamPoolStats stats = pool.GetStats();
    EXPECT_EQ(stats.create_latency.count(), 5);
    EXPECT_EQ(SumOfBuckets(stats.create_latency), 5);
    EXPECT_EQ(SamplesBelow(stats.create_latency, 20), 0);
    EXPECT_GE(stats.create_latency.total(), absl::Milliseconds(10));
    EXPECT_EQ(stats.destroy_latency.count(), 0);
    // Per key: each key's histogram holds its own samples only.
    EXPECT_EQ(pool.GetStats(0, {}).create_latency.count(), 3);
    EXPECT_EQ(pool.GetStats(1, {.priority = -1}).create_latency.count(), 2);

    pool.Trim(0);
    stats = pool.GetStats();
    EXPECT_EQ(stats.destroy_latency.count(), 3);
    EXPECT_EQ(SumOfBuckets(stats.destroy_latency), 3);
    EXPECT_EQ(SamplesBelow(stats.destroy_latency, 19), 0);
    EXPECT_EQ(stats.create_latency.count(), 5);  // unchanged
    // The histograms are in the pool's description.
    EXPECT_THAT(pool.DebugString(), HasSubstr("n=5"));
    EXPECT_THAT(stats.ToString(), HasSubstr("n=3"));
  }
}

TEST_F(PoolLatencyTest, EventPoolRecordsEveryCreationAndDestruction) {
  EventPool pool(sim_);
  {
    absl::StatusOr<PooledEvent> a = pool.Acquire(0);
    absl::StatusOr<PooledEvent> b = pool.Acquire(0);
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    b->Discard();  // destroyed now
  }
  EventPoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.create_latency.count(), 2);
  EXPECT_EQ(SamplesBelow(stats.create_latency, 18), 0);
  EXPECT_EQ(stats.destroy_latency.count(), 1);
  EXPECT_EQ(SamplesBelow(stats.destroy_latency, 16), 0);
  pool.Trim();
  stats = pool.GetStats();
  EXPECT_EQ(stats.destroy_latency.count(), 2);
  EXPECT_EQ(SumOfBuckets(stats.destroy_latency), 2);
  EXPECT_EQ(SamplesBelow(stats.destroy_latency, 16), 0);
}

}  // namespace
}  // namespace gpupool
