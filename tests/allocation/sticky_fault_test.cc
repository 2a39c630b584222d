// The allocation cache after a sticky fault: its batch releases, Allocate
// and the cross-stream hand-over stop calling the runtime for the device at
// once. Found by the fault matrix (fault_matrix_test.cc), pinned here on
// their own. A kDevice fault injected with FailNext does not poison the
// simulated device by itself; each test counts the calls made after it and
// poisons the sim at the end (as a real sticky error would have) so its leak
// check exempts the handles that were rightly dropped.

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::StrictSimOptions;

constexpr size_t kSmall = 4096;
constexpr size_t kMedium = 16384;
constexpr size_t kLarge = 32768;

absl::Status StickyFault() {
  return FaultError(Fault::kDevice, absl::StatusCode::kInternal,
                    "cudaErrorIllegalAddress (injected)");
}

// The cache's batch release (Trim, OOM chain, destructor, exit) waited on the
// events of later blocks after an earlier one's sticky fault.
TEST(AllocationCacheStickyFaultTest,
     CacheBatchReleaseStopsWaitingAfterStickyFault) {
  SimBackend sim(StrictSimOptions(1));
  {
    EventPool events(sim);
    AllocationCache cache(events.backend(), events);
    absl::StatusOr<NativeStream> stream = sim.CreateStream(0, {});
    ASSERT_TRUE(stream.ok());
    std::vector<PooledAllocation> blocks;
    for (size_t bytes : {kMedium, kLarge}) {
      absl::StatusOr<PooledAllocation> block =
          cache.Allocate(0, bytes, MemoryKind::kDevice, *stream);
      ASSERT_TRUE(block.ok());
      blocks.push_back(*std::move(block));
    }
    sim.SubmitWork(*stream, absl::Seconds(30));
    blocks.clear();  // released while the stream is busy: pending
    ASSERT_EQ(cache.GetStats().blocks_cached, 2);
    sim.FailNext(SimOp::kEventSynchronize, StickyFault(), 0);
    EXPECT_TRUE(cache.Trim(0).ok());
    EXPECT_EQ(sim.calls(SimOp::kEventSynchronize), 1);  // not 30 s of waiting
    EXPECT_EQ(cache.GetStats().blocks_dropped, 2);
    sim.PoisonDevice(0, StickyFault());
  }
  EXPECT_EQ(sim.misuse_count(), 0);
}

// Allocate went on to a runtime allocation after polling a retired block had
// poisoned the device.
TEST(AllocationCacheStickyFaultTest,
     AllocateDoesNotAllocateOnADeviceItJustPoisoned) {
  SimBackend sim(StrictSimOptions(1));
  {
    EventPool events(sim);
    AllocationCache cache(sim, events, {.max_cached_bytes = 0});
    absl::StatusOr<NativeStream> stream = sim.CreateStream(0, {});
    ASSERT_TRUE(stream.ok());
    ASSERT_TRUE(cache.Allocate(0, kSmall, MemoryKind::kDevice, *stream).ok());
    ASSERT_EQ(cache.GetStats().blocks_retiring, 1);
    const int64_t allocations = sim.calls(SimOp::kAllocate);
    sim.FailNext(SimOp::kEventQuery, StickyFault(), 0);
    EXPECT_EQ(cache.Allocate(0, kSmall).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(sim.calls(SimOp::kAllocate), allocations);
    sim.PoisonDevice(0, StickyFault());
  }
  EXPECT_EQ(sim.misuse_count(), 0);
}

// With CrossStreamPolicy::kWaitOnStream a sticky (or shutdown) fault of
// StreamWaitEvent fell back to querying the event anyway.
TEST(AllocationCacheStickyFaultTest,
     StreamWaitStickyFaultIsNotFollowedByAQuery) {
  SimBackend sim(StrictSimOptions(1));
  {
    EventPool events(sim);
    AllocationCache cache(sim, events,
                          {.cross_stream = CrossStreamPolicy::kWaitOnStream});
    absl::StatusOr<NativeStream> a = sim.CreateStream(0, {});
    absl::StatusOr<NativeStream> b = sim.CreateStream(0, {});
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(cache.Allocate(0, kSmall, MemoryKind::kDevice, *a).ok());
    const int64_t queries = sim.calls(SimOp::kEventQuery);
    sim.FailNext(SimOp::kStreamWaitEvent, StickyFault(), 0);
    EXPECT_EQ(
        cache.Allocate(0, kSmall, MemoryKind::kDevice, *b).status().code(),
        absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(sim.calls(SimOp::kEventQuery), queries);
    sim.PoisonDevice(0, StickyFault());
  }
  EXPECT_EQ(sim.misuse_count(), 0);
}

// The release slot's block leased to another stream before its event is
// queried: a sticky fault of that query poisons the device, and the block
// is dropped, never leased, with no runtime allocation after it.
TEST(AllocationCacheStickyFaultTest,
     AnotherStreamsQueryMeetingAStickyFaultLeasesNothing) {
  SimBackend sim(StrictSimOptions(1));
  {
    EventPool events(sim);
    AllocationCache cache(sim, events);
    absl::StatusOr<NativeStream> a = sim.CreateStream(0, {});
    absl::StatusOr<NativeStream> b = sim.CreateStream(0, {});
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(cache.Allocate(0, kSmall, MemoryKind::kDevice, *a).ok());
    const int64_t allocations = sim.calls(SimOp::kAllocate);
    sim.FailNext(SimOp::kEventQuery, StickyFault(), 0);
    EXPECT_EQ(
        cache.Allocate(0, kSmall, MemoryKind::kDevice, *b).status().code(),
        absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(sim.calls(SimOp::kAllocate), allocations);
    const AllocationCacheStats stats = cache.GetStats(0);
    EXPECT_EQ(stats.hits, 0);
    EXPECT_EQ(stats.allocations_in_use, 0);
    EXPECT_EQ(stats.blocks_cached, 0);
    EXPECT_EQ(stats.blocks_dropped, 1);
    EXPECT_TRUE(cache.GetOutstandingLeases().empty());
    sim.PoisonDevice(0, StickyFault());
  }
  EXPECT_EQ(sim.misuse_count(), 0);
}

}  // namespace
}  // namespace gpupool
