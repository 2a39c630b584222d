// AllocationCache conformance: the same checks on every built backend
// (SimBackend always; CUDA and HIP when their runtime finds a device).

#include "gpupool/event_pool.h"
#include "gpupool/stable_buffers.h"
#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::testing::HasSubstr;

class AllocationCacheConformanceTest
    : public ::gpupool::testing::BackendParamTest {
 protected:
  AllocationCacheConformanceTest() : BackendParamTest(/*sim_devices=*/2) {}

  void SetUp() override {
    BackendParamTest::SetUp();
    if (IsSkipped()) return;
    events_ = std::make_unique<EventPool>(*backend_);
  }
  void TearDown() override { events_.reset(); }

  std::unique_ptr<EventPool> events_;
};

TEST_P(AllocationCacheConformanceTest, ReuseLoopAllocatesOncePerSizeClass) {
  AllocationCache cache(*backend_, *events_);
  // Six distinct classes: 512, 640, 1024, 4096, 112 KiB, 1.25 MiB.
  const std::vector<size_t> sizes = {3, 513, 1000, 4096, 100000, kMiB + 1};
  for (int i = 0; i < 1000; ++i) {
    std::vector<PooledAllocation> held;
    for (size_t bytes : sizes) {
      absl::StatusOr<PooledAllocation> allocation = cache.Allocate(0, bytes);
      ASSERT_THAT(allocation, IsOk());
      ASSERT_NE(allocation->data(), nullptr);
      EXPECT_EQ(allocation->size(), bytes);
      EXPECT_GE(allocation->capacity(), bytes);
      held.push_back(*std::move(allocation));
    }
  }
  const AllocationCacheStats stats = cache.GetStats();
  EXPECT_EQ(stats.misses, 6);
  EXPECT_EQ(stats.runtime_allocations, 6);
  EXPECT_EQ(stats.hits, 6 * 999);
  EXPECT_EQ(stats.blocks_cached, 6);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.bytes_cached,
            static_cast<int64_t>(512 + 640 + 1024 + 4096 + 114688 + kMiB +
                                 256 * kKiB));
}

TEST_P(AllocationCacheConformanceTest, StableBufferNeverMoves) {
  AllocationCache cache(*backend_, *events_);
  absl::StatusOr<void*> first =
      gpupool::StableBuffers(cache).Acquire("ipc", 0, kMiB);
  ASSERT_THAT(first, IsOk());
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<void*> again =
        gpupool::StableBuffers(cache).Acquire("ipc", 0, kMiB);
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(*again, *first);
  }
  EXPECT_EQ(cache.GetStats().runtime_allocations, 1);
}

TEST_P(AllocationCacheConformanceTest, BadInputGetsClearStatuses) {
  AllocationCache cache(*backend_, *events_);
  EXPECT_THAT(cache.Allocate(0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cache.Allocate(-1, 64),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cache.Allocate(1 << 20, 64),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cache.Allocate(0, size_t{1} << 56),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("requested 72057594037927936 bytes")));
  EXPECT_EQ(cache.GetStats().runtime_allocations, 0);
}

TEST_P(AllocationCacheConformanceTest, TrimFreesEverythingCached) {
  AllocationCache cache(*backend_, *events_);
  {
    std::vector<PooledAllocation> held;
    for (size_t bytes : {kMiB, kMiB, 2 * kMiB}) {
      absl::StatusOr<PooledAllocation> allocation = cache.Allocate(0, bytes);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
  }
  EXPECT_EQ(cache.GetStats(0).bytes_cached, static_cast<int64_t>(4 * kMiB));
  EXPECT_THAT(cache.Trim(0), IsOk());
  EXPECT_EQ(cache.GetStats(0).bytes_cached, 0);
  EXPECT_EQ(cache.GetStats().runtime_frees, 3);
}

INSTANTIATE_TEST_SUITE_P(Backends, AllocationCacheConformanceTest,
                         ::testing::Values("sim", "cuda", "hip"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpupool
