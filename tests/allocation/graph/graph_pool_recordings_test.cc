// The recordings of a graph-owned pool: a capture after RetainBy starts a
// new recording, which never reuses the blocks of an earlier one whose
// graph may still run; once that graph and its launches are gone, its
// blocks serve later captures (those only captures used) or go back to the
// general cache behind their own events (those used outside a capture).

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/graph_pool.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/allocation/graph/graph_retain_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;

using GraphPoolRecordingsTest = GraphPoolRetainTest;

// Graphs captured one after another and retained only after both share
// their blocks (one recording): the pool goes back once both are gone.
TEST_F(GraphPoolRecordingsTest, GraphsRetainedAfterBothCapturesShareBlocks) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  NativeStream other = NewStream();
  void* scratch_a = nullptr;
  void* scratch_b = nullptr;
  SimGraph a;
  SimGraph b;
  {
    absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
    ASSERT_THAT(pool, IsOk());
    a = CaptureScratch(*cache, *pool, capture, kMiB, &scratch_a);
    b = CaptureScratch(*cache, *pool, capture, kMiB, &scratch_b);
    EXPECT_EQ(scratch_a, scratch_b);  // reused inside the pool
    RetainAndInstantiate(*pool, a);
    RetainAndInstantiate(*pool, b);
    ASSERT_THAT(sim_.LaunchGraph(a, replay), IsOk());
    ASSERT_THAT(sim_.LaunchGraph(b, replay), IsOk());
  }
  ASSERT_THAT(sim_.DestroyGraph(a), IsOk());
  sim_.CompleteAllWork();
  EXPECT_FALSE(Reuses(*cache, other, kMiB, scratch_a));  // `b` lives
  ASSERT_THAT(sim_.DestroyGraph(b), IsOk());
  EXPECT_TRUE(Reuses(*cache, other, kMiB, scratch_a));
  EXPECT_EQ(cache->GetStats(0).graph_pools, 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A command buffer re-recorded 100 times into one pool while its previous
// graph's last launch is still queued: a recording never reuses the blocks
// of the graph before it (still running), and reuses those of the graph
// before that (gone), so the pool holds two recordings' memory.
TEST_F(GraphPoolRecordingsTest, ReRecordingWhileTheOldGraphIsQueued) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  std::vector<void*> scratch;
  std::vector<SimGraph> graphs;
  std::set<void*> distinct;
  for (int recording = 0; recording < 100; ++recording) {
    void* ptr = nullptr;
    SimGraph graph = CaptureScratch(*cache, *pool, capture, kMiB, &ptr);
    RetainAndInstantiate(*pool, graph);
    if (recording >= 1) {
      // The previous graph's launch is still queued: not its block.
      EXPECT_NE(ptr, scratch[recording - 1]) << "recording " << recording;
      // Its launch completes and it is destroyed (the command buffer now
      // holds the new graph).
      sim_.CompleteWork(replay);
      ASSERT_THAT(sim_.DestroyGraph(graphs[recording - 1]), IsOk());
    }
    if (recording >= 2) {
      // The graph before the previous one is gone: its block serves again.
      EXPECT_EQ(ptr, scratch[recording - 2]) << "recording " << recording;
    }
    ASSERT_THAT(sim_.LaunchGraph(graph, replay), IsOk());  // stays queued
    scratch.push_back(ptr);
    graphs.push_back(graph);
    distinct.insert(ptr);
  }
  EXPECT_EQ(distinct.size(), 2u);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_allocations, 2);
  EXPECT_EQ(sim_.live_allocations(0), 2);
  EXPECT_EQ(sim_.live_user_objects(), 1);  // the last graph's
  sim_.CompleteAllWork();
  ASSERT_THAT(sim_.DestroyGraph(graphs.back()), IsOk());
  ASSERT_THAT(pool->Release(), IsOk());
  EXPECT_THAT(cache->Trim(), IsOk());  // collects the released pool
  stats = cache->GetStats(0);
  EXPECT_EQ(stats.graph_pools, 0);
  EXPECT_EQ(stats.bytes_in_graph_pools, 0);
  EXPECT_EQ(sim_.misuse_count(), 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// An output of an earlier recording, used eagerly on another stream and
// returned after that recording's graph is gone: it goes back to the
// general cache behind a ready event on that stream, not into the pool for
// the life of the cache.
TEST_F(GraphPoolRecordingsTest, AnOutputOfARecordingThatIsOverGoesBack) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream eager = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  PooledAllocation output;
  SimGraph first = CaptureOutput(*cache, *pool, capture, kMiB, &output);
  RetainAndInstantiate(*pool, first);
  void* second_scratch = nullptr;
  SimGraph second =
      CaptureScratch(*cache, *pool, capture, kMiB, &second_scratch);
  RetainAndInstantiate(*pool, second);
  EXPECT_NE(second_scratch, output.data());
  ASSERT_THAT(sim_.DestroyGraph(first), IsOk());  // the first recording ends
  // The output is used eagerly on `eager`, and returned.
  output.RecordUse(eager);
  sim_.SubmitWork(eager, absl::InfiniteDuration());
  void* const output_ptr = output.data();
  output.Release();
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_in_graph_pools, 1);  // the second's scratch only
  EXPECT_EQ(stats.blocks_cached, 1);  // the general cache's, fenced on `eager`
  EXPECT_FALSE(Reuses(*cache, capture, kMiB, output_ptr));
  sim_.CompleteAllWork();
  EXPECT_TRUE(Reuses(*cache, capture, kMiB, output_ptr));
  ASSERT_THAT(sim_.DestroyGraph(second), IsOk());
  ASSERT_THAT(pool->Release(), IsOk());
  EXPECT_EQ(sim_.misuse_count(), 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A RetainBy that fails (here the user object cannot be made) leaves no
// graph holding the recording: its blocks stay the pool's while the pool's
// handle lives, even once the next capture sets that recording apart. An
// output used eagerly on another stream and returned goes back to the pool,
// never to general work while the graph captured with it may still launch.
TEST_F(GraphPoolRecordingsTest, AFailedRetainByLeavesTheRecordingThePools) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream eager = NewStream();
  NativeStream other = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  PooledAllocation output;
  SimGraph first = CaptureOutput(*cache, *pool, capture, kMiB, &output);
  sim_.FailNext(
      SimOp::kUserObjectCreate,
      FaultError(Fault::kResource, absl::StatusCode::kAborted, "refused"));
  EXPECT_THAT(pool->RetainBy(NativeGraphOf(first)),
              StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(sim_.InstantiateGraph(first), IsOk());
  void* second_scratch = nullptr;
  SimGraph second =
      CaptureScratch(*cache, *pool, capture, kMiB, &second_scratch);
  void* const output_ptr = output.data();
  output.RecordUse(eager);
  output.Release();
  sim_.CompleteAllWork();
  EXPECT_EQ(cache->GetStats(0).blocks_cached, 0);
  EXPECT_FALSE(Reuses(*cache, other, kMiB, output_ptr));
  ASSERT_THAT(sim_.LaunchGraph(first, capture), IsOk());
  sim_.CompleteAllWork();
  ASSERT_THAT(sim_.DestroyGraph(first), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(second), IsOk());
  ASSERT_THAT(pool->Release(), IsOk());
  EXPECT_EQ(sim_.misuse_count(), 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

}  // namespace
}  // namespace gpupool
