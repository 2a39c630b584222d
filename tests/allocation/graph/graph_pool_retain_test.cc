// Graph-owned pools (GraphPool::RetainBy) and the simulator's user objects
// under them: a pool retained by graphs goes back to the general cache only
// once its handle let go and every retaining graph and its launches are
// gone; each scenario ends with 0 graph-oracle misuses.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
using ::testing::HasSubstr;

TEST_F(GraphPoolRetainTest, GraphDestroyedWhileItsLaunchIsQueued) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  NativeStream other = NewStream();
  void* scratch = nullptr;
  {
    absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
    ASSERT_THAT(pool, IsOk());
    SimGraph graph = CaptureScratch(*cache, *pool, capture, kMiB, &scratch);
    RetainAndInstantiate(*pool, graph);
    ASSERT_THAT(sim_.LaunchGraph(graph, replay), IsOk());
    ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());  // the launch still runs
  }  // the handle defers to the graph
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.graph_pools, 1);
  EXPECT_EQ(stats.graph_pools_awaiting_graphs, 1);
  EXPECT_EQ(stats.graph_pools_held, 0);
  EXPECT_EQ(sim_.live_user_objects(), 1);
  EXPECT_FALSE(Reuses(*cache, other, kMiB, scratch));
  EXPECT_THAT(cache->Trim(), IsOk());
  EXPECT_FALSE(Reuses(*cache, other, kMiB, scratch));
  sim_.CompleteAllWork();  // the launch completes: the destructor runs
  EXPECT_EQ(sim_.live_user_objects(), 0);
  EXPECT_TRUE(Reuses(*cache, other, kMiB, scratch));
  stats = cache->GetStats(0);
  EXPECT_EQ(stats.graph_pools, 0);
  EXPECT_EQ(stats.graph_pools_awaiting_graphs, 0);
  EXPECT_EQ(stats.blocks_in_graph_pools, 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

class GraphPoolSharedTest : public GraphPoolRetainTest,
                            public ::testing::WithParamInterface<bool> {};

TEST_P(GraphPoolSharedTest, TwoGraphsShareAPoolDestroyedInEitherOrder) {
  const bool first_dies_first = GetParam();
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
    RetainAndInstantiate(*pool, a);
    b = CaptureScratch(*cache, *pool, capture, kMiB, &scratch_b);
    RetainAndInstantiate(*pool, b);
    // `a` retained its recording before `b` was captured: while `a` may
    // run, its blocks are its own.
    EXPECT_NE(scratch_a, scratch_b);
    ASSERT_THAT(sim_.LaunchGraph(a, replay), IsOk());
    ASSERT_THAT(sim_.LaunchGraph(b, replay), IsOk());
  }
  ASSERT_THAT(sim_.DestroyGraph(first_dies_first ? a : b), IsOk());
  sim_.CompleteAllWork();
  EXPECT_EQ(sim_.live_user_objects(), 1);
  EXPECT_FALSE(Reuses(*cache, other, kMiB, scratch_a));
  SimGraph survivor = first_dies_first ? b : a;
  ASSERT_THAT(sim_.LaunchGraph(survivor, replay), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(survivor), IsOk());
  EXPECT_FALSE(Reuses(*cache, other, kMiB, scratch_a));  // its launch runs
  sim_.CompleteAllWork();
  EXPECT_EQ(sim_.live_user_objects(), 0);
  EXPECT_TRUE(Reuses(*cache, other, kMiB, scratch_a));
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

INSTANTIATE_TEST_SUITE_P(Order, GraphPoolSharedTest, ::testing::Bool());

TEST_F(GraphPoolRetainTest, AKeptHandleKeepsThePoolUntilItLetsGo) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream replay = NewStream();
  NativeStream other = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  void* scratch = nullptr;
  SimGraph graph = CaptureScratch(*cache, *pool, capture, kMiB, &scratch);
  RetainAndInstantiate(*pool, graph);
  ASSERT_THAT(sim_.LaunchGraph(graph, replay), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  sim_.CompleteAllWork();
  EXPECT_EQ(sim_.live_user_objects(), 0);
  // The handle may still open scopes on the pool: nothing goes back.
  EXPECT_FALSE(Reuses(*cache, other, kMiB, scratch));
  EXPECT_THAT(pool->Release(), IsOk());  // the handle lets go
  EXPECT_THAT(pool->Release(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(pool->RetainBy(NativeGraphOf(graph)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(Reuses(*cache, other, kMiB, scratch));
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A graph-owned pool released with its replay stream named: the stream is
// destroyed at once, the graph later. The pool goes back fenced by the
// event the release recorded, and nothing names the destroyed stream; the
// released handle can open no scope any more.
TEST_F(GraphPoolRetainTest, ItsReplayStreamMayGoRightAfterTheRelease) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream other = NewStream();
  absl::StatusOr<NativeStream> replay = sim_.CreateStream(0, {});
  ASSERT_THAT(replay, IsOk());
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  void* scratch = nullptr;
  SimGraph graph = CaptureScratch(*cache, *pool, capture, kMiB, &scratch);
  RetainAndInstantiate(*pool, graph);
  ASSERT_THAT(sim_.LaunchGraph(graph, *replay), IsOk());
  const int64_t records = sim_.calls(SimOp::kEventRecord);
  ASSERT_THAT(pool->Release({*replay}), IsOk());
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord) - records, 1);  // its one block
  EXPECT_THAT(pool->BeginCapture(capture),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("was released")));
  ASSERT_THAT(sim_.DestroyStream(0, *replay), IsOk());
  EXPECT_FALSE(Reuses(*cache, other, kMiB, scratch));  // the graph lives
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  EXPECT_FALSE(Reuses(*cache, other, kMiB, scratch));  // its launch runs
  sim_.CompleteAllWork();
  EXPECT_EQ(sim_.live_user_objects(), 0);
  EXPECT_TRUE(Reuses(*cache, other, kMiB, scratch));
  EXPECT_EQ(cache->GetStats(0).graph_pools, 0);
  EXPECT_EQ(sim_.misuse_count(), 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

TEST_F(GraphPoolRetainTest, RetainByRefusesBadArguments) {
  auto cache = NewCache();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  EXPECT_THAT(pool->RetainBy(nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A graph the runtime does not know: the user object is released again.
  EXPECT_THAT(pool->RetainBy(NativeGraphOf(SimGraph{0, 987654321})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(sim_.live_user_objects(), 0);
  GraphPool empty;
  EXPECT_THAT(empty.RetainBy(NativeGraphOf(SimGraph{0, 1})),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A runtime without user objects (an older CUDA or HIP 5): RetainBy is
// Unimplemented and the explicit Release stays.
class NoUserObjectsSim : public SimBackend {
 public:
  using SimBackend::SimBackend;
  absl::StatusOr<NativeUserObject> CreateUserObject(
      int device, UserObjectDestructor destroy, void* data) override {
    return Backend::CreateUserObject(device, destroy, data);
  }
};

TEST(GraphPoolRetainUnsupportedTest, RetainByIsUnimplemented) {
  NoUserObjectsSim sim(::gpupool::testing::StrictSimOptions(/*devices=*/1));
  auto health = std::make_shared<DeviceHealth>(1);
  {
    EventPool events(sim, health);
    AllocationCache cache(sim, events, health, {});
    absl::StatusOr<GraphPool> pool = GraphPool::Create(cache, 0);
    ASSERT_THAT(pool, IsOk());
    EXPECT_THAT(pool->RetainBy(NativeGraphOf(SimGraph{0, 1})),
                StatusIs(absl::StatusCode::kUnimplemented));
    EXPECT_THAT(pool->Release(), IsOk());
    EXPECT_EQ(cache.GetStats(0).graph_pools, 0);
  }
  EXPECT_EQ(sim.misuse_count(), 0);
}

// --- The simulator's user objects --------------------------------------------

struct DestructorLog {
  int runs = 0;
  SimBackend* sim = nullptr;  // when set, the destructor calls the runtime
  absl::Status call;
};

void CountRun(void* data) {
  auto* log = static_cast<DestructorLog*>(data);
  ++log->runs;
  if (log->sim != nullptr) {
    absl::StatusOr<NativeStream> stream = log->sim->CreateStream(0, {});
    log->call = stream.status();
  }
}

TEST(SimUserObjectTest, DestructorWaitsForTheGraphAndItsLaunches) {
  SimBackend sim(::gpupool::testing::StrictSimOptions(/*devices=*/1));
  absl::StatusOr<NativeStream> stream = sim.CreateStream(0, {});
  ASSERT_THAT(stream, IsOk());
  DestructorLog log;
  absl::StatusOr<NativeUserObject> object =
      sim.CreateUserObject(0, &CountRun, &log);
  ASSERT_THAT(object, IsOk());
  ASSERT_THAT(sim.BeginCapture(*stream, SimCaptureMode::kGlobal), IsOk());
  sim.SubmitWork(*stream, absl::InfiniteDuration());
  absl::StatusOr<SimGraph> graph = sim.EndCaptureToGraph(*stream);
  ASSERT_THAT(graph, IsOk());
  ASSERT_THAT(sim.RetainUserObjectByGraph(0, NativeGraphOf(*graph), *object),
              IsOk());
  // Instantiated after the retain: the executable graph copies it.
  ASSERT_THAT(sim.InstantiateGraph(*graph), IsOk());
  // The caller's reference moved: it has none left to release.
  ASSERT_THAT(sim.LaunchGraph(*graph, *stream), IsOk());
  ASSERT_THAT(sim.DestroyGraph(*graph), IsOk());
  EXPECT_EQ(log.runs, 0);  // the launch still runs
  EXPECT_THAT(sim.RetainUserObjectByGraph(0, NativeGraphOf(*graph), *object),
              StatusIs(absl::StatusCode::kInvalidArgument));
  sim.CompleteAllWork();
  EXPECT_EQ(log.runs, 1);
  EXPECT_EQ(sim.live_user_objects(), 0);
  EXPECT_THAT(sim.DestroyStream(0, *stream), IsOk());
  EXPECT_EQ(sim.misuse_count(), 0);
}

TEST(SimUserObjectTest, ARuntimeCallFromTheDestructorIsAMisuse) {
  SimOptions options;
  std::vector<std::string> misuses;
  options.on_misuse = [&misuses](absl::string_view message) {
    misuses.emplace_back(message);
  };
  SimBackend sim(options);
  DestructorLog log;
  log.sim = &sim;
  absl::StatusOr<NativeUserObject> object =
      sim.CreateUserObject(0, &CountRun, &log);
  ASSERT_THAT(object, IsOk());
  ASSERT_THAT(sim.ReleaseUserObject(0, *object), IsOk());  // runs now
  EXPECT_EQ(log.runs, 1);
  EXPECT_THAT(log.call, StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_EQ(misuses.size(), 1u);
  EXPECT_THAT(misuses[0], HasSubstr("CreateStream called from a user object's "
                                    "destructor"));
  EXPECT_EQ(sim.live_streams(0), 0);
  // Releasing a reference nobody holds is a misuse too.
  EXPECT_THAT(sim.ReleaseUserObject(0, *object),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(misuses.size(), 2u);
}

// The graph refused the reference and the release of the refused object
// failed with a sticky error: the device is poisoned (that error was once
// ignored), and the object keeps its reference rather than be destroyed
// twice.
TEST_F(GraphPoolRetainTest, StickyReleaseOfARefusedObjectPoisons) {
  {
    auto cache = NewCache();
    NativeStream capture = NewStream();
    void* scratch = nullptr;
    absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
    ASSERT_THAT(pool, IsOk());
    SimGraph graph = CaptureScratch(*cache, *pool, capture, kMiB, &scratch);
    sim_.FailNext(
        SimOp::kUserObjectRetain,
        FaultError(Fault::kResource, absl::StatusCode::kAborted, "refused"));
    sim_.FailNext(
        SimOp::kUserObjectRelease,
        FaultError(Fault::kDevice, absl::StatusCode::kInternal, "sticky"));
    EXPECT_THAT(pool->RetainBy(NativeGraphOf(graph)),
                StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_TRUE(health_->is_poisoned(0));
    EXPECT_EQ(sim_.live_user_objects(), 1);
  }
  sim_.ResetDevice(0);  // the context goes, and the refused object with it
  streams_.clear();
  EXPECT_EQ(sim_.live_user_objects(), 0);
}

// A sticky retain poisons the device, and the dead device is called no
// more (the refused object is not released there).
TEST_F(GraphPoolRetainTest, StickyRetainCallsTheDeadDeviceNoMore) {
  {
    auto cache = NewCache();
    NativeStream capture = NewStream();
    void* scratch = nullptr;
    absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
    ASSERT_THAT(pool, IsOk());
    SimGraph graph = CaptureScratch(*cache, *pool, capture, kMiB, &scratch);
    sim_.FailNext(
        SimOp::kUserObjectRetain,
        FaultError(Fault::kDevice, absl::StatusCode::kInternal, "sticky"));
    EXPECT_THAT(pool->RetainBy(NativeGraphOf(graph)),
                StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_TRUE(health_->is_poisoned(0));
    EXPECT_EQ(sim_.calls(SimOp::kUserObjectRelease), 0);
  }
  sim_.ResetDevice(0);
  streams_.clear();
  EXPECT_EQ(sim_.live_user_objects(), 0);
}

}  // namespace
}  // namespace gpupool
