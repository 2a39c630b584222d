// The OOM chain of the AllocationCache on SimBackend: trim and retry once,
// wait for pending cached blocks, and the numbers in the final error.

#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST_F(AllocationCacheSimTest, OutOfMemoryTrimsTheCacheAndRetriesOnce) {
  // The OOM chain alone gives memory back here (no give-back before a miss).
  AllocationCacheOptions options;
  options.give_back_above_percent = -1;
  auto cache = NewCache(options);
  sim_.SetMemoryLimit(0, 4 * kMiB);
  {
    std::vector<PooledAllocation> held;
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(0, 2 * kMiB);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
  }
  EXPECT_EQ(cache->GetStats(0).bytes_cached, static_cast<int64_t>(4 * kMiB));
  // 3 MiB fits only once the cached 4 MiB are gone.
  absl::StatusOr<PooledAllocation> big = cache->Allocate(0, 3 * kMiB);
  ASSERT_THAT(big, IsOk());
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.oom_retries, 1);
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(stats.runtime_frees, 2);
  EXPECT_EQ(stats.failed_allocations, 0);
  EXPECT_EQ(stats.bytes_in_use, static_cast<int64_t>(3 * kMiB));
}

TEST_F(AllocationCacheSimTest, OutOfMemoryWaitsForPendingCachedBlocks) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  sim_.SetMemoryLimit(0, 2 * kMiB);
  {
    absl::StatusOr<PooledAllocation> allocation =
        cache->Allocate(0, 2 * kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(allocation, IsOk());
    sim_.SubmitWork(a, absl::Milliseconds(200));
  }
  // A different class: the pending 2 MiB block must be waited for and freed.
  absl::StatusOr<PooledAllocation> other = cache->Allocate(0, 1536 * kKiB);
  ASSERT_THAT(other, IsOk());
  EXPECT_FALSE(sim_.has_pending_work(a));
  EXPECT_EQ(cache->GetStats(0).oom_retries, 1);
  EXPECT_GE(sim_.calls(SimOp::kEventSynchronize), 1);
}

TEST_F(AllocationCacheSimTest, OutOfMemoryAfterRetryReportsTheNumbers) {
  // The OOM chain alone gives memory back here (no give-back before a miss).
  AllocationCacheOptions options;
  options.give_back_above_percent = -1;
  auto cache = NewCache(options);
  sim_.SetMemoryLimit(0, 4 * kMiB);
  absl::StatusOr<PooledAllocation> held = cache->Allocate(0, 2 * kMiB);
  ASSERT_THAT(held, IsOk());
  ASSERT_THAT(cache->Allocate(0, 2 * kMiB), IsOk());  // now cached
  // 2.5 MiB requested, rounded to 3 MiB: even with the cache emptied only
  // 2 MiB are free.
  absl::StatusOr<PooledAllocation> failed =
      cache->Allocate(0, 2 * kMiB + 512 * kKiB + 1);
  EXPECT_THAT(
      failed,
      StatusIs(
          absl::StatusCode::kResourceExhausted,
          AllOf(HasSubstr("device 0"),
                HasSubstr("requested 2.50 MiB (2621441 bytes)"),
                HasSubstr("rounded to 3.00 MiB (3145728 bytes)"),
                HasSubstr("in use 2.00 MiB (2097152 bytes) (1 allocations, "
                          "stable buffers 0 bytes)"),
                HasSubstr("cached 0 bytes, largest free block 0 bytes"),
                HasSubstr("held for captures 0 bytes"),
                HasSubstr("device free 2.00 MiB (2097152 bytes) of "
                          "4.00 MiB (4194304 bytes)"),
                HasSubstr("after freeing 2.00 MiB (2097152 bytes) of cached "
                          "blocks"))))
      << failed.status();
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.oom_retries, 1);
  EXPECT_EQ(stats.failed_allocations, 1);
  // Consistent afterwards: in use and live runtime memory agree, and what
  // fits still works.
  EXPECT_EQ(stats.bytes_in_use, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(sim_.bytes_allocated(0), 2 * kMiB);
  absl::StatusOr<PooledAllocation> fits = cache->Allocate(0, 2 * kMiB);
  ASSERT_THAT(fits, IsOk());
  EXPECT_EQ(cache->GetStats(0).allocations_in_use, 2);
}

TEST_F(AllocationCacheSimTest, AbsurdSizesFailWithNumbersAndKeepTheCacheWarm) {
  auto cache = NewCache();
  ASSERT_THAT(cache->Allocate(0, kMiB), IsOk());  // cached
  for (size_t bytes : {size_t{1} << 50, std::numeric_limits<size_t>::max(),
                       (size_t{80} << 30) + 1}) {
    absl::StatusOr<PooledAllocation> absurd = cache->Allocate(0, bytes);
    EXPECT_THAT(absurd,
                StatusIs(absl::StatusCode::kResourceExhausted,
                         AllOf(HasSubstr(absl::StrCat(bytes, " bytes")),
                               HasSubstr("of 80.00 GiB (85899345920 bytes)"))));
  }
  // Trimming could not have helped: nothing was freed, nothing retried.
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.oom_retries, 0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.failed_allocations, 3);
  EXPECT_EQ(sim_.calls(SimOp::kFree), 0);
}

}  // namespace
}  // namespace gpupool
