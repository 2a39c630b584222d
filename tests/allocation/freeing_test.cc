// Freeing and retiring in the AllocationCache on SimBackend: the
// max_cached_bytes cap, Trim, retiring blocks with pending work, requests
// too large to cache, and the give-back before the cache grows.

#include <functional>
#include <utility>
#include <vector>

#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;

TEST_F(AllocationCacheSimTest, CapFreesReleasesBeyondIt) {
  auto cache = NewCache({.max_cached_bytes = 3 * kMiB});
  {
    std::vector<PooledAllocation> held;
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, kMiB);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
  }
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(stats.blocks_cached, 3);
  EXPECT_EQ(stats.runtime_frees, 1);
  EXPECT_EQ(sim_.live_allocations(0), 3);
  // The cap is per device: both kinds count.
  absl::StatusOr<PooledAllocation> pinned =
      cache->Allocate(0, 512 * kKiB, MemoryKind::kPinnedHost);
  ASSERT_THAT(pinned, IsOk());
  pinned->Release();
  EXPECT_EQ(cache->GetStats(0).bytes_cached, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 2);
  // Device 1 has its own budget.
  absl::StatusOr<PooledAllocation> other = cache->Allocate(1, 2 * kMiB);
  ASSERT_THAT(other, IsOk());
  other->Release();
  EXPECT_EQ(cache->GetStats(1).bytes_cached, static_cast<int64_t>(2 * kMiB));
}

TEST_F(AllocationCacheSimTest, TrimLeavesExactlyTheExpectedBytes) {
  auto cache = NewCache();
  {
    std::vector<PooledAllocation> held;
    for (size_t bytes : {kMiB, kMiB, kMiB, 2 * kMiB}) {
      absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, bytes);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
    absl::StatusOr<PooledAllocation> pinned =
        cache->Allocate(0, 512 * kKiB, MemoryKind::kPinnedHost);
    ASSERT_THAT(pinned, IsOk());
    held.push_back(*std::move(pinned));
  }
  EXPECT_EQ(cache->GetStats(0).bytes_cached,
            static_cast<int64_t>(5 * kMiB + 512 * kKiB));
  // Largest first: the 2 MiB block, then one 1 MiB block.
  ASSERT_THAT(cache->Trim(0, 3 * kMiB), IsOk());
  EXPECT_EQ(cache->GetStats(0).bytes_cached,
            static_cast<int64_t>(2 * kMiB + 512 * kKiB));
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 2);
  // Device memory goes before pinned host memory.
  ASSERT_THAT(cache->Trim(0, 512 * kKiB), IsOk());
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kDevice).bytes_cached, 0);
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kPinnedHost).bytes_cached,
            static_cast<int64_t>(512 * kKiB));
  // A keep above what is cached frees nothing.
  ASSERT_THAT(cache->Trim(0, 100 * kMiB), IsOk());
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 4);
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(cache->GetStats(0).bytes_cached, 0);
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 5);
  EXPECT_EQ(sim_.live_allocations(0), 0);
  EXPECT_THAT(cache->Trim(2), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(AllocationCacheSimTest, TrimWaitsForPendingWorkBeforeFreeing) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  const absl::Time start = absl::Now();
  {
    absl::StatusOr<PooledAllocation> allocation =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(allocation, IsOk());
    sim_.SubmitWork(a, absl::Milliseconds(200));
  }
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_FALSE(sim_.has_pending_work(a));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_GE(sim_.calls(SimOp::kEventSynchronize), 1);
  EXPECT_EQ(cache->GetStats(0).bytes_cached, 0);
  EXPECT_EQ(sim_.live_allocations(0), 0);
}

// A freed block's ready event was queried (or synchronized) complete by the
// cache: its EventPool keeps it without a query of its own, one query per
// block in all, and hands it out again without creating one.
TEST_F(AllocationCacheSimTest, AFreedBlocksEventGoesBackIdleWithoutAQuery) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  ASSERT_EQ(AllocateAndReleaseMany(*cache, a, 3).size(), 3u);
  ASSERT_EQ(sim_.calls(SimOp::kEventRecord), 3);
  ASSERT_EQ(events_->GetStats().in_use, 3);
  const int64_t queries = sim_.calls(SimOp::kEventQuery);
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery) - queries, 3);
  EXPECT_EQ(sim_.calls(SimOp::kFree), 3);
  EventPoolStats pool = events_->GetStats();
  EXPECT_EQ(pool.in_use, 0);
  EXPECT_EQ(pool.idle, 3);
  const int64_t created = pool.created;
  absl::StatusOr<PooledEvent> event = events_->Acquire(0);
  ASSERT_THAT(event, IsOk());
  EXPECT_EQ(events_->GetStats().created, created);
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery) - queries, 3);
}

// The same after a wait: a block whose work was still running when Trim
// came is synchronized, and its event goes back idle without a query.
TEST_F(AllocationCacheSimTest, ASynchronizedBlocksEventGoesBackWithoutAQuery) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  ASSERT_NE(AllocateAndRelease(*cache, a, absl::Milliseconds(20)), nullptr);
  const int64_t queries = sim_.calls(SimOp::kEventQuery);
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(sim_.calls(SimOp::kEventSynchronize), 1);
  // The one query found it pending; none after the synchronize.
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery) - queries, 1);
  EXPECT_EQ(events_->GetStats().idle, 1);
  EXPECT_EQ(sim_.live_allocations(0), 0);
}

TEST_F(AllocationCacheSimTest, OverCapBlockWithPendingWorkRetiresFirst) {
  auto cache = NewCache({.max_cached_bytes = kMiB + 4096});
  NativeStream a = NewStream();
  ASSERT_EQ(
      AllocateAndReleaseMany(*cache, a, 2, absl::InfiniteDuration()).size(),
      2u);
  // One is cached; the other must not be freed while the GPU may use it.
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.blocks_retiring, 1);
  EXPECT_EQ(stats.bytes_retiring, static_cast<int64_t>(kMiB));
  EXPECT_EQ(sim_.calls(SimOp::kFree), 0);
  // Still pending: a miss and a release poll it and keep it.
  ASSERT_THAT(cache->Allocate(0, 4096), IsOk());
  EXPECT_EQ(cache->GetStats(0).blocks_retiring, 1);
  EXPECT_EQ(cache->GetStats(0).blocks_cached, 2);
  sim_.CompleteAllWork();
  // The next release notices the work finished and frees it.
  ASSERT_THAT(cache->Allocate(0, 4096), IsOk());
  EXPECT_EQ(cache->GetStats(0).hits, 1);
  stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_retiring, 0);
  EXPECT_EQ(stats.runtime_frees, 1);
}

TEST_F(AllocationCacheSimTest, LargeRequestsBypassTheCache) {
  auto cache = NewCache({.max_cached_block_bytes = kMiB});
  NativeStream a = NewStream();
  {
    absl::StatusOr<PooledAllocation> big = cache->Allocate(0, kMiB + 1);
    ASSERT_THAT(big, IsOk());
    EXPECT_EQ(big->capacity(), kMiB + 1);  // exact: never cached
  }
  AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.uncached_allocations, 1);
  EXPECT_EQ(stats.misses, 0);
  EXPECT_EQ(stats.runtime_frees, 1);
  EXPECT_EQ(stats.blocks_cached, 0);
  // With pending work it is freed only once that work completed.
  {
    absl::StatusOr<PooledAllocation> big =
        cache->Allocate(0, 3 * kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(big, IsOk());
    sim_.SubmitWork(a, absl::InfiniteDuration());
  }
  EXPECT_EQ(cache->GetStats().blocks_retiring, 1);
  EXPECT_EQ(cache->GetStats().runtime_frees, 1);
  sim_.CompleteAllWork();
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(cache->GetStats().blocks_retiring, 0);
  EXPECT_EQ(cache->GetStats().runtime_frees, 2);
  // Exactly at the threshold is still cached.
  ASSERT_THAT(cache->Allocate(0, kMiB), IsOk());
  EXPECT_EQ(cache->GetStats().blocks_cached, 1);
}

// Before the cache asks the runtime for more, wholly free segments too small
// for the request are exchanged while it would hold more than
// give_back_above_percent (default 10) above the most it has had in use:
// only that excess, so a workload below its peak keeps what the peak needed.
TEST_F(AllocationCacheSimTest, GiveBackKeepsWithinTheBudgetOfThePeak) {
  auto cache = NewCache();
  std::vector<PooledAllocation> held;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, 10 * kMiB);
    ASSERT_THAT(allocation, IsOk());
    held.push_back(*std::move(allocation));
  }
  held.resize(4);  // 40 MiB in use after a peak of 100 MiB
  ASSERT_THAT(cache->Trim(0, 40 * kMiB), IsOk());
  ASSERT_EQ(sim_.bytes_allocated(0), 80 * kMiB);
  // 92 MiB held is within 110% of the peak: nothing is given back.
  absl::StatusOr<PooledAllocation> twelve = cache->Allocate(0, 12 * kMiB);
  ASSERT_THAT(twelve, IsOk());
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 2);  // Trim's
  EXPECT_EQ(sim_.bytes_allocated(0), 92 * kMiB);
  // 116 MiB would not be: one 10 MiB segment goes (6 MiB over), not 24 MiB.
  absl::StatusOr<PooledAllocation> big = cache->Allocate(0, 24 * kMiB);
  ASSERT_THAT(big, IsOk());
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 3);
  EXPECT_EQ(sim_.bytes_allocated(0), 106 * kMiB);
}

// A block too large to cache grows the memory held as a new segment does:
// the same exchange comes first.
TEST_F(AllocationCacheSimTest, UncachedAllocationExchangesLikeAMiss) {
  auto cache = NewCache({.max_cached_block_bytes = 16 * kMiB});
  {
    std::vector<PooledAllocation> peak;
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(0, 8 * kMiB);
      ASSERT_THAT(allocation, IsOk());
      peak.push_back(*std::move(allocation));
    }
  }  // four 8 MiB segments cached after a peak of 32 MiB
  absl::StatusOr<PooledAllocation> big = cache->Allocate(0, 24 * kMiB);
  ASSERT_THAT(big, IsOk());
  // 56 MiB against a budget of 35.2: three segments go (20.8 MiB over).
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.uncached_allocations, 1);
  EXPECT_EQ(stats.runtime_frees, 3);
  EXPECT_EQ(sim_.bytes_allocated(0), 32 * kMiB);
}

// A SimBackend that runs `on_query` once, inside the next QueryEvent: another
// thread's release landing while Allocate checks a pending block outside the
// shard lock.
class QueryHookSim : public SimBackend {
 public:
  using SimBackend::SimBackend;
  absl::Status QueryEvent(int device, NativeEvent event) override {
    if (std::function<void()> hook = std::exchange(on_query, nullptr)) hook();
    return SimBackend::QueryEvent(device, event);
  }
  std::function<void()> on_query;
};

TEST(AllocationCacheCapTest, CheckedBlockPutBackStaysWithinTheCap) {
  QueryHookSim sim(::gpupool::testing::StrictSimOptions(/*devices=*/1));
  NativeStream a = *sim.CreateStream(0, {});
  NativeStream b = *sim.CreateStream(0, {});
  {
    EventPool events(sim);
    AllocationCache cache(sim, events, {.max_cached_bytes = kMiB});
    absl::StatusOr<PooledAllocation> idle = cache.Allocate(0, kMiB);
    ASSERT_THAT(idle, IsOk());
    void* const idle_block = idle->data();
    void* pending = nullptr;
    {
      absl::StatusOr<PooledAllocation> on_a =
          cache.Allocate(0, kMiB, MemoryKind::kDevice, a);
      ASSERT_THAT(on_a, IsOk());
      pending = on_a->data();
      sim.SubmitWork(a, absl::InfiniteDuration());
    }
    ASSERT_EQ(cache.GetStats(0).bytes_cached, static_cast<int64_t>(kMiB));
    // While the pending block is out for its check, a release fills the cap.
    sim.on_query = [&] { idle->Release(); };
    absl::StatusOr<PooledAllocation> on_b =
        cache.Allocate(0, kMiB, MemoryKind::kDevice, b);
    ASSERT_THAT(on_b, IsOk());
    // The block released meanwhile serves the request (the checked one is
    // still busy), with no new segment.
    EXPECT_NE(on_b->data(), pending);
    EXPECT_EQ(on_b->data(), idle_block);
    EXPECT_EQ(sim.allocations_made(), 2);
    // The still-pending block found no room: it retires (freed once A's work
    // completes) instead of pushing the cache past max_cached_bytes.
    AllocationCacheStats stats = cache.GetStats(0);
    EXPECT_EQ(stats.bytes_cached, 0);
    EXPECT_EQ(stats.blocks_cached, 0);
    EXPECT_EQ(stats.blocks_retiring, 1);
    EXPECT_EQ(stats.bytes_retiring, static_cast<int64_t>(kMiB));
    on_b->Release();
    sim.CompleteAllWork();
    ASSERT_THAT(cache.Trim(), IsOk());
    EXPECT_EQ(sim.live_allocations(0), 0);
  }
  EXPECT_THAT(sim.DestroyStream(0, a), IsOk());
  EXPECT_THAT(sim.DestroyStream(0, b), IsOk());
  EXPECT_EQ(sim.misuse_count(), 0);
  EXPECT_THAT(sim.CheckNoLeaks(), IsOk());
}

}  // namespace
}  // namespace gpupool
