// The AllocationCache over the process lifetime on SimBackend: bad input,
// poisoning, releases after the cache is gone, exit and fork.

#include "gpupool/event_pool.h"
#include "gpupool/stable_buffers.h"
#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::RunInForkedChild;
using ::gpupool::testing::StatusIs;
using ::testing::HasSubstr;

TEST_F(AllocationCacheSimTest, BadInputIsRejectedAndNothingLeaks) {
  auto cache = NewCache();
  EXPECT_THAT(cache->Allocate(0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bytes")));
  EXPECT_THAT(
      cache->Allocate(-1, 64),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device")));
  EXPECT_THAT(
      cache->Allocate(2, 64),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 2)")));
  EXPECT_THAT(
      cache->Allocate(0, 64, static_cast<MemoryKind>(7)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MemoryKind")));
  EXPECT_EQ(sim_.calls(SimOp::kAllocate), 0);

  absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, 100);
  ASSERT_THAT(allocation, IsOk());
  EXPECT_TRUE(*allocation);
  EXPECT_NE(allocation->lease_id(), 0u);
  allocation->Release();
  EXPECT_FALSE(*allocation);
  EXPECT_EQ(allocation->data(), nullptr);
  EXPECT_EQ(allocation->device(), -1);
  allocation->Release();               // double release: a no-op
  allocation->RecordUse(NewStream());  // on an empty lease: a no-op
  AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.blocks_cached, 1);

  // Moving transfers ownership exactly once.
  absl::StatusOr<PooledAllocation> source = cache->Allocate(0, 100);
  ASSERT_THAT(source, IsOk());
  PooledAllocation moved = *std::move(source);
  EXPECT_FALSE(*source);  // NOLINT: checking the moved-from state
  source->Release();
  EXPECT_EQ(cache->GetStats().allocations_in_use, 1);
  PooledAllocation assigned;
  assigned = std::move(moved);
  EXPECT_EQ(cache->GetStats().allocations_in_use, 1);
  assigned = PooledAllocation();
  stats = cache->GetStats();
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.runtime_allocations, 1);
}

TEST_F(AllocationCacheSimTest, OutstandingLeasesSayWhereTheyWereAcquired) {
  auto cache = NewCache();
  auto allocation = cache->Allocate(1, 4096, MemoryKind::kPinnedHost);
  const int line = __LINE__ - 1;
  ASSERT_THAT(allocation, IsOk());
  std::vector<OutstandingLease> leases = cache->GetOutstandingLeases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].resource, "allocation");
  EXPECT_EQ(leases[0].device, 1);
  EXPECT_EQ(leases[0].lease_id, allocation->lease_id());
  EXPECT_THAT(leases[0].key, HasSubstr("4096"));
  EXPECT_THAT(leases[0].where.file_name(),
              HasSubstr("allocation_cache_test.cc"));
  EXPECT_EQ(static_cast<int>(leases[0].where.line()), line);
  allocation->Release();
  EXPECT_TRUE(cache->GetOutstandingLeases().empty());
}

// --- poisoning
// -----------------------------------------------------------------

TEST_F(AllocationCacheSimTest, StickyErrorPoisonsAndLaterDropsNeedNoCalls) {
  auto cache = NewCache();
  NativeStream a = NewStream(0);
  absl::StatusOr<PooledAllocation> outstanding =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
  ASSERT_THAT(outstanding, IsOk());
  ASSERT_THAT(cache->Allocate(0, 4096), IsOk());  // cached, idle
  {
    absl::StatusOr<PooledAllocation> pending =
        cache->Allocate(0, 8192, MemoryKind::kDevice, a);
    ASSERT_THAT(pending, IsOk());
    sim_.SubmitWork(a, absl::InfiniteDuration());
  }  // cached with a pending event
  ASSERT_THAT(gpupool::StableBuffers(*cache).Acquire("ipc", 0, kMiB), IsOk());

  sim_.PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  // A new class reaches the runtime, which reports the sticky error.
  EXPECT_THAT(cache->Allocate(0, 3 * kMiB),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cudaErrorIllegalAddress")));
  EXPECT_TRUE(health_->is_poisoned(0));
  const int64_t calls = sim_.calls_on_device(0);
  // From now on nothing on device 0 calls the runtime.
  EXPECT_THAT(cache->Allocate(0, 4096),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cudaErrorIllegalAddress")));
  EXPECT_THAT(gpupool::StableBuffers(*cache).Acquire("ipc", 0, kMiB),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  outstanding->Release();
  EXPECT_THAT(cache->Trim(0), IsOk());
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.stable_allocations, 0);
  EXPECT_EQ(stats.blocks_dropped, 4);  // idle, pending, released, stable
  // Device 1 is unaffected.
  ASSERT_THAT(cache->Allocate(1, 4096), IsOk());
  cache.reset();
  EXPECT_EQ(sim_.calls_on_device(0), calls);

  // After a reset, a new generation starts from scratch.
  sim_.ResetDevice(0);
  ASSERT_THAT(health_->Recover(0), IsOk());
  streams_.clear();  // ResetDevice destroyed them
  auto fresh = NewCache();
  EXPECT_THAT(fresh->Allocate(0, 4096), IsOk());
}

TEST_F(AllocationCacheSimTest, PoisonSeenByAnotherPoolDropsCachedBlocks) {
  // Both blocks stay cached (no give-back before the second's miss).
  AllocationCacheOptions options;
  options.give_back_above_percent = -1;
  auto cache = NewCache(options);
  ASSERT_THAT(cache->Allocate(0, 4096), IsOk());
  absl::StatusOr<PooledAllocation> outstanding = cache->Allocate(0, 8192);
  ASSERT_THAT(outstanding, IsOk());
  // Another pool sharing the health object saw the sticky error.
  sim_.PoisonDevice(0, absl::InternalError("hipErrorLaunchFailure"));
  health_->Poison(0, absl::InternalError("hipErrorLaunchFailure"));
  const int64_t calls = sim_.calls_on_device(0);
  EXPECT_THAT(cache->Allocate(0, 4096),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("hipErrorLaunchFailure")));
  outstanding->Release();
  EXPECT_EQ(sim_.calls_on_device(0), calls);
  EXPECT_EQ(cache->GetStats(0).blocks_dropped, 2);

  // Blocks of the old generation are never handed out after recovery.
  sim_.ResetDevice(0);
  ASSERT_THAT(health_->Recover(0), IsOk());
  absl::StatusOr<PooledAllocation> fresh = cache->Allocate(0, 4096);
  ASSERT_THAT(fresh, IsOk());
  EXPECT_EQ(cache->GetStats(0).misses, 3);
}

TEST_F(AllocationCacheSimTest, ReleaseAfterTheCacheIsGoneLeaksWithoutCalls) {
  SimOptions options;
  options.device_count = 1;
  int64_t misuse = 0;
  options.on_misuse = [&misuse](absl::string_view) { ++misuse; };
  SimBackend sim(options);
  {
    EventPool events(sim);
    absl::StatusOr<PooledAllocation> survivor;
    {
      AllocationCache cache(sim, events);
      survivor = cache.Allocate(0, 4096);
      ASSERT_THAT(survivor, IsOk());
    }
    const int64_t calls = sim.total_calls();
    survivor->Release();
    EXPECT_FALSE(*survivor);
    EXPECT_EQ(sim.total_calls(), calls);
  }
  // Exactly that block was left to the OS.
  EXPECT_EQ(sim.live_allocations(0), 1);
  EXPECT_EQ(misuse, 0);
  sim.ResetDevice(0);
}

// --- exit and fork -----------------------------------------------------------

// In a death-test child: the exit sequence frees what is cached while the
// runtime lives; afterwards releases leak and allocations are refused.
int ExitSequenceChild() {
  SimOptions options;
  options.device_count = 1;
  SimBackend sim(options);
  EventPool events(sim);
  AllocationCache cache(sim, events);
  absl::StatusOr<PooledAllocation> outstanding = cache.Allocate(0, 8192);
  if (!outstanding.ok()) return 10;
  if (!cache.Allocate(0, 4096).ok()) return 11;  // cached
  if (!gpupool::StableBuffers(cache).Acquire("ipc", 0, 4096).ok()) return 12;
  internal::RunExitSequenceForTesting();
  if (sim.allocations_freed() != 2) return 13;  // cached + stable
  const int64_t calls = sim.total_calls();
  outstanding->Release();
  if (sim.total_calls() != calls) return 14;
  absl::StatusOr<PooledAllocation> refused = cache.Allocate(0, 4096);
  if (refused.status().code() != absl::StatusCode::kFailedPrecondition) {
    return 15;
  }
  if (cache.GetStats().blocks_leaked != 1) return 16;
  return 0;
}

TEST(AllocationCacheLifecycleTest, ExitFreesCachedBlocksThenLeaks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(ExitSequenceChild()), ::testing::ExitedWithCode(0), "");
}

TEST_F(AllocationCacheSimTest, ForkedChildRefusesAndLeaksWithoutCalls) {
  auto cache = NewCache();
  absl::StatusOr<PooledAllocation> inherited = cache->Allocate(0, 4096);
  ASSERT_THAT(inherited, IsOk());
  ASSERT_THAT(cache->Allocate(0, 8192), IsOk());  // cached
  const int code = RunInForkedChild([&] {
    const int64_t calls = sim_.total_calls();
    absl::StatusOr<PooledAllocation> refused = cache->Allocate(0, 8192);
    if (refused.status().code() != absl::StatusCode::kFailedPrecondition) {
      return 1;
    }
    if (refused.status().message().find("fork") == absl::string_view::npos) {
      return 2;
    }
    if (gpupool::StableBuffers(*cache).Acquire("x", 0, 1).status().code() !=
        absl::StatusCode::kFailedPrecondition) {
      return 3;
    }
    inherited->Release();  // leaked: no lock, no runtime call
    if (cache->Trim(0).code() != absl::StatusCode::kFailedPrecondition) {
      return 4;
    }
    cache.reset();
    if (sim_.total_calls() != calls) return 5;
    return 0;
  });
  EXPECT_EQ(code, 0);
  // The parent is unaffected.
  inherited->Release();
  EXPECT_EQ(cache->GetStats().blocks_cached, 2);
  EXPECT_THAT(cache->Allocate(0, 4096), IsOk());
}

}  // namespace
}  // namespace gpupool
