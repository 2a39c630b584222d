// Stable buffers of the AllocationCache (StableBuffers::Acquire) on SimBackend.

#include "gpupool/stable_buffers.h"
#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::testing::HasSubstr;

// The stable buffer's address, or nullptr on error.
void* Stable(AllocationCache& cache, absl::string_view name, int device,
             size_t bytes) {
  absl::StatusOr<void*> ptr = gpupool::StableBuffers(cache).Acquire(
      std::string_view(name.data(), name.size()), device, bytes);
  EXPECT_THAT(ptr, IsOk());
  return ptr.ok() ? *ptr : nullptr;
}

TEST_F(AllocationCacheSimTest, StableBuffersKeepTheirAddress) {
  auto cache = NewCache();
  absl::StatusOr<void*> first =
      gpupool::StableBuffers(*cache).Acquire("nccl-buffer", 0, kMiB);
  ASSERT_THAT(first, IsOk());
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<void*> again =
        gpupool::StableBuffers(*cache).Acquire("nccl-buffer", 0, kMiB);
    ASSERT_THAT(again, IsOk());
    ASSERT_EQ(*again, *first);
  }
  // Smaller, or larger within the rounded capacity (1 MiB): same address.
  EXPECT_EQ(Stable(*cache, "nccl-buffer", 0, 4096), *first);
  // Another device or another name: another buffer.
  absl::StatusOr<void*> other_device =
      gpupool::StableBuffers(*cache).Acquire("nccl-buffer", 1, kMiB);
  absl::StatusOr<void*> other_name =
      gpupool::StableBuffers(*cache).Acquire("scratch", 0, kMiB);
  ASSERT_THAT(other_device, IsOk());
  ASSERT_THAT(other_name, IsOk());
  EXPECT_NE(*other_device, *first);
  EXPECT_NE(*other_name, *first);
  EXPECT_EQ(cache->GetStats().stable_reallocations, 0);
  EXPECT_EQ(sim_.allocations_made(), 3);

  // Growing moves it, frees the old one, and says so.
  absl::StatusOr<void*> grown =
      gpupool::StableBuffers(*cache).Acquire("nccl-buffer", 0, 2 * kMiB);
  ASSERT_THAT(grown, IsOk());
  EXPECT_NE(*grown, *first);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.stable_reallocations, 1);
  EXPECT_EQ(stats.stable_allocations, 2);
  EXPECT_EQ(stats.bytes_stable, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(sim_.allocations_freed(), 1);
  EXPECT_EQ(Stable(*cache, "nccl-buffer", 0, kMiB), *grown);
  // Stable buffers are not cache entries: Trim leaves them alone.
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(Stable(*cache, "nccl-buffer", 0, kMiB), *grown);
  EXPECT_EQ(cache->GetStats(0).stable_allocations, 2);

  EXPECT_THAT(gpupool::StableBuffers(*cache).Release("scratch", 0), IsOk());
  EXPECT_THAT(gpupool::StableBuffers(*cache).Release("scratch", 0),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("scratch")));
  EXPECT_THAT(gpupool::StableBuffers(*cache).Acquire("x", 0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(gpupool::StableBuffers(*cache).Acquire("x", 5, 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(AllocationCacheSimTest, ConcurrentStableCallersAgreeOnOneBuffer) {
  auto cache = NewCache();
  std::vector<void*> seen(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        absl::StatusOr<void*> ptr =
            gpupool::StableBuffers(*cache).Acquire("shared", 1, 8192);
        ASSERT_THAT(ptr, IsOk());
        if (i == 0) seen[t] = *ptr;
        ASSERT_EQ(*ptr, seen[t]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (void* ptr : seen) EXPECT_EQ(ptr, seen[0]);
  EXPECT_EQ(cache->GetStats(1).runtime_allocations, 1);
}

TEST_F(AllocationCacheSimTest, FailedGrowthKeepsTheOldBuffer) {
  auto cache = NewCache();
  void* first = Stable(*cache, "ipc", 0, kMiB);
  ASSERT_NE(first, nullptr);
  // Larger than the device (80 GiB): the new buffer cannot be had.
  EXPECT_THAT(
      gpupool::StableBuffers(*cache).Acquire("ipc", 0, size_t{81} << 30),
      StatusIs(absl::StatusCode::kResourceExhausted));
  // The name still holds its old buffer, at its old address.
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.stable_allocations, 1);
  EXPECT_EQ(stats.bytes_stable, static_cast<int64_t>(kMiB));
  EXPECT_EQ(stats.stable_reallocations, 0);
  EXPECT_EQ(sim_.allocations_freed(), 0);
  EXPECT_EQ(sim_.live_allocations(0), 1);
  EXPECT_EQ(Stable(*cache, "ipc", 0, kMiB), first);
  EXPECT_EQ(sim_.allocations_made(), 1);
}

}  // namespace
}  // namespace gpupool
