// The allocation policy of the AllocationCache on SimBackend: one runtime
// allocation per size class, blocks never shared across devices or kinds,
// and the requested/rounded byte counters.

#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST_F(AllocationCacheSimTest, ReuseLoopCallsTheRuntimeOncePerSizeClass) {
  auto cache = NewCache();
  NativeStream stream = NewStream();
  const std::vector<size_t> sizes = {3, 513, 1000, 4096, 100000, kMiB + 1};
  for (int i = 0; i < 1000; ++i) {
    std::vector<PooledAllocation> held;
    for (size_t bytes : sizes) {
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(0, bytes, MemoryKind::kDevice, stream);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
  }
  const AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.misses, 6);
  EXPECT_EQ(stats.hits, 6 * 999);
  EXPECT_EQ(sim_.allocations_made(), 6);
  EXPECT_EQ(sim_.calls(SimOp::kAllocate), 6);
  EXPECT_EQ(sim_.calls(SimOp::kFree), 0);
  cache.reset();
  EXPECT_EQ(sim_.allocations_freed(), 6);
}

TEST_F(AllocationCacheSimTest, SizesOfOneClassShareABlock) {
  auto cache = NewCache();
  void* first = nullptr;
  for (size_t bytes : {513, 600, 639, 640}) {
    absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, bytes);
    ASSERT_THAT(allocation, IsOk());
    EXPECT_EQ(allocation->capacity(), 640u);
    if (first == nullptr) first = allocation->data();
    EXPECT_EQ(allocation->data(), first);
  }
  EXPECT_EQ(cache->GetStats().misses, 1);
  // 641 is the next class: a new block.
  absl::StatusOr<PooledAllocation> next = cache->Allocate(0, 641);
  ASSERT_THAT(next, IsOk());
  EXPECT_NE(next->data(), first);
  EXPECT_EQ(next->capacity(), 768u);
}

TEST_F(AllocationCacheSimTest, DevicesAndKindsNeverShareBlocks) {
  auto cache = NewCache();
  std::vector<void*> seen;
  for (int device : {0, 1}) {
    for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(device, 4096, kind);
      ASSERT_THAT(allocation, IsOk());
      EXPECT_EQ(allocation->device(), device);
      EXPECT_EQ(allocation->kind(), kind);
      seen.push_back(allocation->data());
    }
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(cache->GetStats().misses, 4);
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kPinnedHost).blocks_cached, 1);
  EXPECT_EQ(cache->GetStats(1).blocks_cached, 2);
  EXPECT_EQ(sim_.bytes_allocated(1, MemoryKind::kPinnedHost), 4096u);
}

TEST_F(AllocationCacheSimTest, StatsTrackRequestedAndRoundedBytes) {
  auto cache = NewCache();
  absl::StatusOr<PooledAllocation> a = cache->Allocate(0, 1000);
  absl::StatusOr<PooledAllocation> b = cache->Allocate(1, 513);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  AllocationCacheStats total = cache->GetStats();
  EXPECT_EQ(total.allocations_in_use, 2);
  EXPECT_EQ(total.bytes_requested, 1513);
  EXPECT_EQ(total.bytes_rounded, 1024 + 640);
  EXPECT_EQ(total.bytes_in_use, 1024 + 640);
  EXPECT_EQ(total.peak_bytes_in_use, 1024 + 640);
  AllocationCacheStats sum = cache->GetStats(0);
  sum += cache->GetStats(1);
  EXPECT_EQ(sum.bytes_in_use, total.bytes_in_use);
  EXPECT_EQ(sum.misses, total.misses);
  a->Release();
  total = cache->GetStats();
  EXPECT_EQ(total.bytes_in_use, 640);
  EXPECT_EQ(total.bytes_requested, 513);
  EXPECT_EQ(total.bytes_cached, 1024);
  EXPECT_EQ(total.peak_bytes_in_use, 1024 + 640);
  EXPECT_THAT(total.ToString(),
              AllOf(HasSubstr("in_use=1"), HasSubstr("cached=1"),
                    HasSubstr("misses=2")));
  EXPECT_THAT(cache->DebugString(),
              AllOf(HasSubstr("allocation cache over sim"),
                    HasSubstr("dev0 device"), HasSubstr("dev1 device")));
}

}  // namespace
}  // namespace gpupool
