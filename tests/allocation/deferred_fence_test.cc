// AllocationCacheOptions::defer_same_stream_fences on SimBackend: a
// same-stream cycle makes no runtime call, and a parked block is fenced (its
// ready event recorded on its stream) before another stream, a new segment,
// Trim, FenceStream or the cache's end may have it; a dead device drops it
// without a call, and a capturing stream keeps it parked.

#include "gpupool/snapshot.h"
#include "tests/allocation/sim_fixture.h"
#include "tests/allocation/snapshot_blocks.h"

namespace gpupool {
namespace {

using ::gpupool::testing::CountBlocks;
using ::gpupool::testing::IsOk;
using ::gpupool::testing::SnapshotBlocks;

AllocationCacheOptions Deferred() {
  AllocationCacheOptions options;
  options.defer_same_stream_fences = true;
  return options;
}

// `block`, released with work still running (`sim` has it), must not go to
// a request on `stream` while that work runs (a second segment then); once
// it completed, the next request there gets it, with no new segment.
void ExpectGivenOnlyOnceItsWorkCompleted(SimBackend& sim,
                                         AllocationCache& cache,
                                         NativeStream stream, void* block) {
  absl::StatusOr<PooledAllocation> early =
      cache.Allocate(0, kMiB, MemoryKind::kDevice, stream);
  ASSERT_THAT(early, IsOk());
  EXPECT_NE(early->data(), block);
  EXPECT_EQ(cache.GetStats(0).runtime_allocations, 2);
  sim.CompleteAllWork();
  absl::StatusOr<PooledAllocation> later =
      cache.Allocate(0, kMiB, MemoryKind::kDevice, stream);
  ASSERT_THAT(later, IsOk());
  EXPECT_EQ(later->data(), block);
  EXPECT_EQ(cache.GetStats(0).runtime_allocations, 2);
}

TEST_F(AllocationCacheSimTest, DeferredSameStreamCycleMakesNoRuntimeCall) {
  auto cache = NewCache(Deferred());
  NativeStream a = NewStream();
  void* first = AllocateAndRelease(*cache, a);
  ASSERT_NE(first, nullptr);
  const int64_t calls = sim_.total_calls();
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<PooledAllocation> lease =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(lease, IsOk());
    EXPECT_EQ(lease->data(), first);
    sim_.SubmitWork(a, absl::InfiniteDuration());  // the stream's kernel
  }
  EXPECT_EQ(sim_.total_calls(), calls) << "5 same-stream cycles";
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.hits, 5);
  EXPECT_EQ(stats.runtime_allocations, 1);
  // Parked, it counts as cached and no lease is out.
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(kMiB));
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_TRUE(cache->GetOutstandingLeases().empty());
  sim_.CompleteAllWork();
}

TEST_F(AllocationCacheSimTest, DeferredBlockGoesToAnotherStreamOnlyFenced) {
  auto cache = NewCache(Deferred());
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = AllocateAndRelease(*cache, a, absl::InfiniteDuration());
  ASSERT_NE(block, nullptr);
  // B's request fences A's parked block (an event recorded on A, behind the
  // running work) and must not get it while that work runs; once A's work
  // completed, the fenced block may go to B.
  ExpectGivenOnlyOnceItsWorkCompleted(sim_, *cache, b, block);
}

// A buffer passed between two streams: after its first crossing, each
// release records its ready event at once (fenced at release, as without
// deferred fences), so that the other stream's request queries it and
// fences nothing: one record and one query per cycle, no capture check.
TEST_F(AllocationCacheSimTest,
       DeferredBufferPassedBetweenStreamsIsFencedAtRelease) {
  auto cache = NewCache(Deferred());
  NativeStream streams[2] = {NewStream(), NewStream()};
  void* block = AllocateAndRelease(*cache, streams[0]);
  ASSERT_NE(block, nullptr);
  const int64_t checks = sim_.calls(SimOp::kCaptureStatus);
  const int64_t records = sim_.calls(SimOp::kEventRecord);
  const int64_t queries = sim_.calls(SimOp::kEventQuery);
  // The first crossing fences the parked block (a capture check and a
  // record on stream 0), queries it, and its release on stream 1 records.
  ASSERT_EQ(AllocateAndRelease(*cache, streams[1]), block);
  EXPECT_EQ(sim_.calls(SimOp::kCaptureStatus) - checks, 1);
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord) - records, 2);
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery) - queries, 1);
  constexpr int kCycles = 6;
  for (int i = 0; i < kCycles; ++i) {
    ASSERT_EQ(AllocateAndRelease(*cache, streams[i % 2]), block);
  }
  EXPECT_EQ(sim_.calls(SimOp::kCaptureStatus) - checks, 1);
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord) - records, 2 + kCycles);
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery) - queries, 1 + kCycles);
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_allocations, 1);
  EXPECT_EQ(stats.hits, 1 + kCycles);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.allocations_in_use, 0);
}

// Its event recorded at release, such a buffer still waits for the work of
// the stream that released it before the other stream may have it.
TEST_F(AllocationCacheSimTest, DeferredBufferFencedAtReleaseWaitsForItsWork) {
  auto cache = NewCache(Deferred());
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = AllocateAndRelease(*cache, a);
  ASSERT_EQ(AllocateAndRelease(*cache, b, absl::InfiniteDuration()), block);
  ExpectGivenOnlyOnceItsWorkCompleted(sim_, *cache, a, block);
}

// Back on the stream that released it, the buffer's fence is deferred again:
// its same-stream cycles make no runtime call.
TEST_F(AllocationCacheSimTest, DeferredBufferBackOnOneStreamDefersAgain) {
  auto cache = NewCache(Deferred());
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = AllocateAndRelease(*cache, a);
  ASSERT_EQ(AllocateAndRelease(*cache, b), block);  // fenced at release
  const int64_t calls = sim_.total_calls();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(AllocateAndRelease(*cache, b), block);
  }
  EXPECT_EQ(sim_.total_calls(), calls) << "3 same-stream cycles";
  EXPECT_EQ(cache->GetStats(0).runtime_allocations, 1);
}

TEST_F(AllocationCacheSimTest, DeferredBlockOfAnotherSizeIsFencedNotLost) {
  // A request of another size on the same stream that would grow the cache
  // fences the parked block first; it is then split for the request.
  AllocationCacheOptions options = Deferred();
  options.max_split_ratio = 0;
  auto cache = NewCache(options);
  NativeStream a = NewStream();
  void* block = nullptr;
  {
    absl::StatusOr<PooledAllocation> big =
        cache->Allocate(0, 4 * kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(big, IsOk());
    block = big->data();
  }
  absl::StatusOr<PooledAllocation> small =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
  ASSERT_THAT(small, IsOk());
  EXPECT_EQ(small->data(), block);
  EXPECT_EQ(cache->GetStats(0).runtime_allocations, 1);
}

TEST_F(AllocationCacheSimTest, FenceStreamRecordsTheEventAndAllowsDestroy) {
  auto cache = NewCache(Deferred());
  absl::StatusOr<NativeStream> a = sim_.CreateStream(0, {});
  ASSERT_THAT(a, IsOk());
  NativeStream b = NewStream();
  void* block = nullptr;
  {
    absl::StatusOr<PooledAllocation> on_a =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, *a);
    ASSERT_THAT(on_a, IsOk());
    block = on_a->data();
    sim_.SubmitWork(*a, absl::InfiniteDuration());
  }
  const int64_t calls = sim_.total_calls();
  ASSERT_THAT(cache->FenceStream(0, *a), IsOk());
  // A capture-status check, an event (the block's first release recorded
  // none) and its record on A.
  EXPECT_EQ(sim_.total_calls() - calls, 3);
  ASSERT_THAT(cache->FenceStream(0, *a), IsOk());
  EXPECT_EQ(sim_.total_calls() - calls, 3) << "nothing left to fence";
  sim_.CompleteAllWork();
  ASSERT_THAT(sim_.DestroyStream(0, *a), IsOk());
  // The fence completed with A's work: B may have the block at once.
  absl::StatusOr<PooledAllocation> on_b =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(on_b, IsOk());
  EXPECT_EQ(on_b->data(), block);
  EXPECT_THAT(cache->FenceStream(7, b),
              ::gpupool::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(AllocationCacheSimTest, TrimFencesAndFreesDeferredBlocks) {
  auto cache = NewCache(Deferred());
  NativeStream a = NewStream();
  ASSERT_THAT(cache->Allocate(0, kMiB, MemoryKind::kDevice, a), IsOk());
  ASSERT_EQ(cache->GetStats(0).blocks_cached, 1);
  ASSERT_THAT(cache->Trim(0), IsOk());
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_frees, 1);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.bytes_cached, 0);
}

TEST_F(AllocationCacheSimTest, DeferredBlocksAreFreedAtTheCachesEnd) {
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  {
    AllocationCacheOptions options = Deferred();
    options.give_back_above_percent = -1;  // both blocks stay cached
    auto cache = NewCache(options);
    ASSERT_THAT(cache->Allocate(0, kMiB, MemoryKind::kDevice, a), IsOk());
    ASSERT_THAT(cache->Allocate(0, 2 * kMiB, MemoryKind::kDevice, b), IsOk());
    EXPECT_EQ(cache->GetStats(0).blocks_cached, 2);
  }
  // TearDown: no device memory leaked, no misuse (the events were recorded
  // on live streams and completed before the frees).
  EXPECT_EQ(sim_.misuse_count(), 0);
}

TEST_F(AllocationCacheSimTest, DeferredBlocksOfADeadDeviceDropWithoutCalls) {
  auto cache = NewCache(Deferred());
  NativeStream a = NewStream();
  ASSERT_THAT(cache->Allocate(0, kMiB, MemoryKind::kDevice, a), IsOk());
  sim_.PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  health_->Poison(0, absl::InternalError("cudaErrorIllegalAddress"));
  const int64_t calls = sim_.calls_on_device(0);
  EXPECT_THAT(cache->FenceStream(0, a), IsOk());
  EXPECT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(sim_.calls_on_device(0), calls);
  EXPECT_EQ(cache->GetStats(0).blocks_dropped, 1);
  EXPECT_EQ(cache->GetStats(0).blocks_cached, 0);
  cache.reset();
  sim_.ResetDevice(0);
  ASSERT_THAT(health_->Recover(0), IsOk());
  streams_.clear();  // ResetDevice destroyed them
}

TEST_F(AllocationCacheSimTest, DeferredBlockStaysParkedWhileItsStreamCaptures) {
  auto cache = NewCache(Deferred());
  NativeStream a = NewStream();
  ASSERT_THAT(cache->Allocate(0, kMiB, MemoryKind::kDevice, a), IsOk());
  ASSERT_THAT(sim_.BeginCapture(a, SimCaptureMode::kGlobal), IsOk());
  // No event may be recorded into the capture: Trim leaves the block parked.
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(cache->GetStats(0).blocks_cached, 1);
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 0);
  // Not invalidated: no query or synchronization touched the capture.
  absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(a);
  ASSERT_THAT(graph, IsOk());
  ASSERT_THAT(sim_.DestroyGraph(*graph), IsOk());
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 1);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// FenceStream says the stream is about to go: a block it cannot fence (its
// stream captures) is leaked, never left parked on a stream that is gone.
TEST(DeferredFenceTest, FenceStreamOfACapturingStreamLeaksItsBlocks) {
  SimOptions options;
  options.device_count = 1;
  int64_t misuse = 0;
  options.on_misuse = [&misuse](absl::string_view) { ++misuse; };
  SimBackend sim(options);
  absl::StatusOr<NativeStream> a = sim.CreateStream(0, {});
  ASSERT_THAT(a, IsOk());
  {
    EventPool events(sim);
    AllocationCache cache(sim, events, Deferred());
    ASSERT_THAT(cache.Allocate(0, kMiB, MemoryKind::kDevice, *a), IsOk());
    ASSERT_THAT(sim.BeginCapture(*a, SimCaptureMode::kGlobal), IsOk());
    ASSERT_THAT(cache.FenceStream(0, *a), IsOk());
    const AllocationCacheStats stats = cache.GetStats(0);
    EXPECT_EQ(stats.blocks_leaked, 1);
    EXPECT_EQ(stats.blocks_cached, 0);
    absl::StatusOr<SimGraph> graph = sim.EndCaptureToGraph(*a);
    ASSERT_THAT(graph, IsOk());
    ASSERT_THAT(sim.DestroyGraph(*graph), IsOk());
    ASSERT_THAT(sim.DestroyStream(0, *a), IsOk());
    ASSERT_THAT(cache.Trim(0), IsOk());
    EXPECT_EQ(cache.GetStats(0).runtime_frees, 0);  // never freed unfenced
  }
  EXPECT_EQ(sim.graph_misuses(), 0);
  EXPECT_EQ(sim.live_allocations(0), 1);  // the leaked segment
  EXPECT_EQ(misuse, 0);
}

TEST_F(AllocationCacheSimTest, DeferredBlockIsListedPendingInASnapshot) {
  auto cache = NewCache(Deferred());
  NativeStream a = NewStream();
  ASSERT_THAT(cache->Allocate(0, kMiB, MemoryKind::kDevice, a), IsOk());
  EXPECT_EQ(
      CountBlocks(SnapshotBlocks(TakeSnapshot(*cache), 0), BlockUse::kPending),
      1);
}

}  // namespace
}  // namespace gpupool
