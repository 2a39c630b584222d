// How a graph pool's memory leaves it: never unfenced. A lease given back
// after Release (or after the handle is gone) is fenced on every stream it
// was used on; a dropped handle holds its blocks; every allocation kind of a
// capture is the pool's; a scope spans later captures on its origin;
// uncached blocks are reused inside the pool; a release counts each byte once.
// Each scenario ends with 0 graph-oracle misuses.

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/graph_pool.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class GraphPoolReleaseTest : public AllocationCacheSimTest {
 protected:
  // Captures on `stream` into `pool`: a `bytes` lease kept out of the
  // capture (the graph's output) and written by it. Returns the instantiated
  // graph; the scope has ended.
  SimGraph CaptureOutput(AllocationCache& cache, GraphPool& pool,
                         NativeStream stream, size_t bytes,
                         PooledAllocation* output,
                         MemoryKind kind = MemoryKind::kDevice) {
    absl::StatusOr<CaptureScope> scope = pool.BeginCapture(stream);
    EXPECT_THAT(scope, IsOk());
    EXPECT_THAT(sim_.BeginCapture(stream, SimCaptureMode::kGlobal, pool.id()),
                IsOk());
    absl::StatusOr<PooledAllocation> lease =
        cache.Allocate(0, bytes, kind, stream);
    EXPECT_THAT(lease, IsOk());
    sim_.TouchMemory(stream, lease->data(), bytes);
    *output = *std::move(lease);
    absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(stream);
    EXPECT_THAT(graph, IsOk());
    EXPECT_THAT(sim_.InstantiateGraph(*graph), IsOk());
    return *graph;
  }
  void* Lease(AllocationCache& cache, NativeStream stream, size_t bytes,
              MemoryKind kind = MemoryKind::kDevice) {
    absl::StatusOr<PooledAllocation> lease =
        cache.Allocate(0, bytes, kind, stream);
    EXPECT_THAT(lease, IsOk());
    return lease.ok() ? lease->data() : nullptr;  // released at once
  }
  // Whether one of two leases held at once on `stream` is `ptr`.
  bool OneOfTwoLeasesIs(AllocationCache& cache, NativeStream stream,
                        size_t bytes, void* ptr) {
    absl::StatusOr<PooledAllocation> a =
        cache.Allocate(0, bytes, MemoryKind::kDevice, stream);
    absl::StatusOr<PooledAllocation> b =
        cache.Allocate(0, bytes, MemoryKind::kDevice, stream);
    EXPECT_THAT(a, IsOk());
    EXPECT_THAT(b, IsOk());
    return a.ok() && b.ok() && (a->data() == ptr || b->data() == ptr);
  }
};

// PyTorch's shape: a graph's static output outlives the graph and the pool's
// release, and is used eagerly on its own stream and on another one.
TEST_F(GraphPoolReleaseTest, AnOutputReturnedAfterReleaseIsFencedOnItsUses) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  NativeStream other = NewStream();
  NativeStream third = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  PooledAllocation output;
  SimGraph graph = CaptureOutput(*cache, *pool, capture, kMiB, &output);
  void* out = output.data();
  ASSERT_THAT(sim_.LaunchGraph(graph, replay), IsOk());
  sim_.CompleteWork(replay);
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  ASSERT_THAT(pool->Release({replay}), IsOk());
  // Eager use after the release: its own stream and a declared one.
  sim_.SubmitWork(capture, absl::InfiniteDuration());
  output.RecordUse(other);
  sim_.SubmitWork(other, absl::InfiniteDuration());
  output.Release();
  EXPECT_NE(Lease(*cache, third, kMiB), out);
  sim_.CompleteWork(capture);
  EXPECT_NE(Lease(*cache, third, kMiB), out);  // `other` still runs
  sim_.CompleteWork(other);
  // Both streams are done: the block is the general cache's again.
  EXPECT_TRUE(OneOfTwoLeasesIs(*cache, third, kMiB, out));
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// The replay stream is destroyed as soon as the release returns, while its
// replay still runs (CUDA lets its work finish): the output that comes back
// later is fenced on that replay by the event the release recorded, and no
// call ever names the destroyed stream.
TEST_F(GraphPoolReleaseTest, ALateLeaseIsFencedOnAReplayStreamDestroyedSince) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream third = NewStream();
  absl::StatusOr<NativeStream> replay = sim_.CreateStream(0, {});
  ASSERT_THAT(replay, IsOk());
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  PooledAllocation output;
  SimGraph graph = CaptureOutput(*cache, *pool, capture, kMiB, &output);
  void* out = output.data();
  sim_.SubmitWork(*replay, absl::InfiniteDuration());
  ASSERT_THAT(sim_.LaunchGraph(graph, *replay), IsOk());
  ASSERT_THAT(pool->Release({*replay}), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  ASSERT_THAT(sim_.DestroyStream(0, *replay), IsOk());
  output.Release();
  EXPECT_EQ(sim_.misuse_count(), 0);
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 0);
  EXPECT_NE(Lease(*cache, third, kMiB), out);  // the replay still runs
  sim_.CompleteAllWork();
  EXPECT_TRUE(OneOfTwoLeasesIs(*cache, third, kMiB, out));
  EXPECT_EQ(sim_.misuse_count(), 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A replay stream that captures (for another pool) when the release is
// made cannot be fenced by an event: the lease that comes back later is
// held out of reuse, as any release there, and freed with the cache.
TEST_F(GraphPoolReleaseTest,
       ALateLeaseIsHeldWhenAReplayStreamCapturedAtRelease) {
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  {
    auto cache = NewCache();
    absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
    absl::StatusOr<GraphPool> other = GraphPool::Create(*cache, 0);
    ASSERT_THAT(pool, IsOk());
    ASSERT_THAT(other, IsOk());
    PooledAllocation output;
    SimGraph graph = CaptureOutput(*cache, *pool, capture, kMiB, &output);
    ASSERT_THAT(sim_.LaunchGraph(graph, replay), IsOk());
    ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
    absl::StatusOr<CaptureScope> scope = other->BeginCapture(replay);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(replay, SimCaptureMode::kGlobal, other->id()),
                IsOk());
    ASSERT_THAT(pool->Release({replay}), IsOk());
    output.Release();
    EXPECT_EQ(cache->GetStats(0).blocks_held_for_captures, 1);
    absl::StatusOr<SimGraph> captured = sim_.EndCaptureToGraph(replay);
    ASSERT_THAT(captured, IsOk());
    scope->End();
    ASSERT_THAT(sim_.DestroyGraph(*captured), IsOk());
    ASSERT_THAT(other->Release(), IsOk());
    EXPECT_EQ(cache->GetStats(0).blocks_held_for_captures, 1);
  }  // the cache frees it (TearDown: no leak)
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A release with no lease out records nothing ahead: its free blocks go
// back at once, fenced there.
TEST_F(GraphPoolReleaseTest, AReleaseWithNoLeaseOutRecordsNothingAhead) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  PooledAllocation output;
  SimGraph graph = CaptureOutput(*cache, *pool, capture, kMiB, &output);
  output.Release();  // after the capture: held by the pool, fenced
  ASSERT_THAT(sim_.LaunchGraph(graph, replay), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  const int64_t records = sim_.calls(SimOp::kEventRecord);
  ASSERT_THAT(pool->Release({replay}), IsOk());
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord) - records, 1);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A dropped handle: the graph's launch is still queued on a stream the
// handle never heard of. Nothing goes back to the general cache; the stats
// say the pool is held; an output returned afterwards is fenced and held.
TEST_F(GraphPoolReleaseTest, DroppingTheHandleHoldsTheBlocks) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  NativeStream eager = NewStream();
  PooledAllocation output;
  void* scratch = nullptr;
  {
    absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
    ASSERT_THAT(pool, IsOk());
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    absl::StatusOr<PooledAllocation> lease =
        cache->Allocate(0, 2 * kMiB, MemoryKind::kDevice, capture);
    ASSERT_THAT(lease, IsOk());
    scratch = lease->data();
    sim_.TouchMemory(capture, scratch, 2 * kMiB);
    lease->Release();  // during the capture: the pool's
    absl::StatusOr<PooledAllocation> out =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, capture);
    ASSERT_THAT(out, IsOk());
    sim_.TouchMemory(capture, out->data(), kMiB);
    output = *std::move(out);
    absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(capture);
    ASSERT_THAT(graph, IsOk());
    ASSERT_THAT(sim_.InstantiateGraph(*graph), IsOk());
    scope->End();
    sim_.SubmitWork(replay, absl::InfiniteDuration());
    ASSERT_THAT(sim_.LaunchGraph(*graph, replay), IsOk());
    ASSERT_THAT(sim_.DestroyGraph(*graph), IsOk());  // the launch still runs
  }  // the handle is dropped unreleased
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.graph_pools, 1);
  EXPECT_EQ(stats.graph_pools_held, 1);
  EXPECT_EQ(stats.blocks_in_graph_pools, 1);
  EXPECT_THAT(cache->DebugString(), HasSubstr("held (handle dropped"));
  EXPECT_NE(Lease(*cache, eager, 2 * kMiB), scratch);
  // The output, used eagerly, comes back after the handle is gone.
  void* out = output.data();
  sim_.SubmitWork(capture, absl::InfiniteDuration());
  output.Release();
  EXPECT_NE(Lease(*cache, eager, kMiB), out);
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 2);
  EXPECT_THAT(cache->Trim(0), IsOk());  // Trim never frees them
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 2);
  sim_.CompleteAllWork();
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// Pinned host memory allocated inside a capture is the pool's: returned
// after the capture it is fenced and held, not re-leased while the graph
// replays.
TEST_F(GraphPoolReleaseTest, PinnedHostMemoryOfACaptureIsThePools) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  PooledAllocation staging;
  SimGraph graph = CaptureOutput(*cache, *pool, capture, kMiB, &staging,
                                 MemoryKind::kPinnedHost);
  void* host = staging.data();
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kPinnedHost).allocations_in_use, 1);
  sim_.SubmitWork(replay, absl::InfiniteDuration());
  ASSERT_THAT(sim_.LaunchGraph(graph, replay), IsOk());
  staging.Release();
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 1);
  EXPECT_NE(Lease(*cache, capture, kMiB, MemoryKind::kPinnedHost), host);
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  ASSERT_THAT(pool->Release({replay}), IsOk());
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 0);
  EXPECT_NE(Lease(*cache, capture, kMiB, MemoryKind::kPinnedHost), host);
  sim_.CompleteWork(replay);
  EXPECT_EQ(sim_.graph_misuses(), 0);
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kPinnedHost).allocations_in_use, 0);
}

// A scope kept open across two captures on its origin routes both to the
// pool; the second reuses what the first released on that stream.
TEST_F(GraphPoolReleaseTest, AScopeKeptOpenRoutesALaterCaptureToo) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
  ASSERT_THAT(scope, IsOk());
  SimGraph graphs[2];
  void* first = nullptr;
  for (int i = 0; i < 2; ++i) {
    ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    absl::StatusOr<PooledAllocation> lease =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, capture);
    ASSERT_THAT(lease, IsOk());
    if (i == 0) first = lease->data();
    EXPECT_EQ(lease->data(), first);
    sim_.TouchMemory(capture, lease->data(), kMiB);
    absl::StatusOr<PooledAllocation> second =
        cache->Allocate(0, 3 * kMiB, MemoryKind::kDevice, capture);
    ASSERT_THAT(second, IsOk());
    lease->Release();
    second->Release();
    absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(capture);
    ASSERT_THAT(graph, IsOk());
    graphs[i] = *graph;
  }
  scope->End();
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_held_for_captures, 0);
  EXPECT_EQ(stats.blocks_in_graph_pools, 2);
  EXPECT_EQ(stats.runtime_allocations, 2);
  EXPECT_THAT(cache->DebugString(), HasSubstr("2 captures"));
  for (SimGraph graph : graphs) ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  ASSERT_THAT(pool->Release({capture}), IsOk());
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// Blocks above max_cached_block_bytes freed inside a capture are reused
// inside it (best fit), and the out-of-memory message counts the pools.
TEST_F(GraphPoolReleaseTest, UncachedBlocksAreReusedInsideThePool) {
  AllocationCacheOptions options;
  options.max_cached_block_bytes = kMiB;
  auto cache = NewCache(options);
  sim_.SetMemoryLimit(0, 12 * kMiB);
  NativeStream capture = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
  ASSERT_THAT(scope, IsOk());
  ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal, pool->id()),
              IsOk());
  // 8 MiB freed, then 6 MiB twice: fits in 12 MiB only by reuse.
  void* big = Lease(*cache, capture, 8 * kMiB);
  EXPECT_EQ(Lease(*cache, capture, 6 * kMiB), big);
  EXPECT_EQ(Lease(*cache, capture, 6 * kMiB), big);
  EXPECT_EQ(cache->GetStats(0).runtime_allocations, 1);
  absl::StatusOr<PooledAllocation> failed =
      cache->Allocate(0, 6 * kMiB, MemoryKind::kDevice, capture);
  absl::StatusOr<PooledAllocation> too_much =
      cache->Allocate(0, 6 * kMiB, MemoryKind::kDevice, capture);
  EXPECT_THAT(too_much,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("in graph pools 0 bytes"),
                             HasSubstr("in use 8.00 MiB (8388608 bytes)"))))
      << too_much.status();
  failed = absl::UnknownError("released");  // back to the pool
  EXPECT_THAT(cache->Allocate(0, 10 * kMiB, MemoryKind::kDevice, capture),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("in graph pools 8.00 MiB (8388608 bytes)")));
  absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(capture);
  ASSERT_THAT(graph, IsOk());
  scope->End();
  ASSERT_THAT(sim_.DestroyGraph(*graph), IsOk());
  ASSERT_THAT(pool->Release({capture}), IsOk());
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A release passes no pseudo-lease through the in-use gauges: the peak
// counts each byte once.
TEST_F(GraphPoolReleaseTest, ReleaseDoesNotRaiseThePeak) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream eager = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  PooledAllocation output;
  SimGraph graph = CaptureOutput(*cache, *pool, capture, 2 * kMiB, &output);
  output.Release();
  absl::StatusOr<PooledAllocation> held =
      cache->Allocate(0, 2 * kMiB, MemoryKind::kDevice, eager);
  ASSERT_THAT(held, IsOk());
  EXPECT_EQ(cache->GetStats(0).peak_bytes_in_use,
            static_cast<int64_t>(2 * kMiB));
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  ASSERT_THAT(pool->Release({capture}), IsOk());
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.peak_bytes_in_use, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(stats.bytes_in_use, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(stats.hits, 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A block used eagerly on a side stream, which then joins a capture that is
// invalidated before the block is freed there: the pool adopts it (it is not
// held for the life of the cache), and its release gives it back.
TEST_F(GraphPoolReleaseTest, ASideStreamOfAnInvalidatedCaptureLeaksNothing) {
  auto cache = NewCache();
  NativeStream origin = NewStream();
  NativeStream side = NewStream();
  NativeEvent fork = *sim_.CreateEvent(0, {});
  absl::StatusOr<PooledAllocation> before =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, side);
  ASSERT_THAT(before, IsOk());
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(origin);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(origin, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    ASSERT_THAT(sim_.RecordEvent(0, fork, origin), IsOk());
    ASSERT_THAT(sim_.StreamWaitEvent(0, side, fork), IsOk());
    sim_.TouchMemory(side, before->data(), kMiB);
    EXPECT_THAT(sim_.QueryStream(0, origin),
                StatusIs(absl::StatusCode::kFailedPrecondition));
    before->Release();  // `side` reports the invalidated capture
    EXPECT_EQ(cache->GetStats(0).blocks_held_for_captures, 0);
    EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 1);
    EXPECT_THAT(sim_.EndCaptureToGraph(origin),
                StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  ASSERT_THAT(pool->Release(), IsOk());  // no graph was made
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 0);
  EXPECT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(sim_.live_allocations(0), 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
  ASSERT_THAT(sim_.DestroyEvent(0, fork), IsOk());
}

// An output returned after its capture while its stream captures again (for
// nobody): no ready event is recorded into that capture; the block is held
// as any release there, and the capture survives the pool's release and the
// eager work after it.
TEST_F(GraphPoolReleaseTest, AnOutputReturnedWhileItsStreamCapturesIsHeld) {
  AllocationCacheOptions options;
  options.detect_unregistered_captures = true;
  auto cache = NewCache(options);
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  NativeStream eager = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  PooledAllocation output;
  SimGraph graph = CaptureOutput(*cache, *pool, capture, kMiB, &output);
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal), IsOk());
  output.Release();
  EXPECT_EQ(cache->GetStats(0).blocks_held_for_captures, 1);
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 0);
  ASSERT_THAT(pool->Release({replay}), IsOk());
  for (int i = 0; i < 3; ++i) Lease(*cache, eager, kMiB);
  EXPECT_EQ(*sim_.GetCaptureStatus(0, capture), CaptureStatus::kActive);
  absl::StatusOr<SimGraph> unregistered = sim_.EndCaptureToGraph(capture);
  ASSERT_THAT(unregistered, IsOk());
  ASSERT_THAT(sim_.DestroyGraph(*unregistered), IsOk());
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A command buffer re-recorded 100 times into one pool, each old graph
// destroyed before the next recording: the blocks its captures released are
// reused by the next, so the memory stays that of one recording.
TEST_F(GraphPoolReleaseTest, ReRecordingAHundredTimesKeepsMemoryBounded) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  for (int recording = 0; recording < 100; ++recording) {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    for (size_t bytes : {kMiB, 2 * kMiB, 4 * kMiB}) {
      absl::StatusOr<PooledAllocation> lease =
          cache->Allocate(0, bytes, MemoryKind::kDevice, capture);
      ASSERT_THAT(lease, IsOk());
      sim_.TouchMemory(capture, lease->data(), bytes);
    }
    absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(capture);
    ASSERT_THAT(graph, IsOk());
    scope->End();
    ASSERT_THAT(sim_.InstantiateGraph(*graph), IsOk());
    ASSERT_THAT(sim_.LaunchGraph(*graph, replay), IsOk());
    sim_.CompleteWork(replay);
    ASSERT_THAT(sim_.DestroyGraph(*graph), IsOk());
  }
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_allocations, 3);
  EXPECT_EQ(stats.bytes_in_graph_pools, static_cast<int64_t>(7 * kMiB));
  EXPECT_EQ(sim_.live_allocations(0), 3);
  ASSERT_THAT(pool->Release({replay}), IsOk());
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

}  // namespace
}  // namespace gpupool
