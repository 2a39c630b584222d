// Capture-private pools of the AllocationCache, checked against SimBackend's
// graph oracle: a replay must never write a block that was freed or that the
// cache leased to someone else. Every scenario ends with 0 oracle misuses.
//
// Conventions: the test plays the user. Memory a test leases eagerly is
// claimed for `kEager` while it holds it (SimBackend::ClaimMemory); a graph
// captured into a pool is owned by the pool's id, so its own blocks may be
// claimed by nobody else.

#include "gpupool/graph_pool.h"

#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kEager = 1;

class GraphPoolTest : public AllocationCacheSimTest {
 protected:
  // An eager lease on `stream`, claimed for kEager while held.
  struct EagerLease {
    SimBackend* sim;
    PooledAllocation lease;
    ~EagerLease() {
      if (lease) sim->ReleaseClaim(lease.data());
    }
  };
  EagerLease Eager(AllocationCache& cache, NativeStream stream, size_t bytes,
                   int device = 0) {
    absl::StatusOr<PooledAllocation> lease =
        cache.Allocate(device, bytes, MemoryKind::kDevice, stream);
    EXPECT_THAT(lease, IsOk());
    sim_.ClaimMemory(lease->data(), bytes, kEager);
    sim_.TouchMemory(stream, lease->data(), bytes);
    return EagerLease{&sim_, *std::move(lease)};
  }
  // Allocates `bytes` on a capturing `stream` and records a kernel writing it.
  void* CapturedUse(AllocationCache& cache, NativeStream stream, size_t bytes,
                    int device = 0) {
    absl::StatusOr<PooledAllocation> lease =
        cache.Allocate(device, bytes, MemoryKind::kDevice, stream);
    EXPECT_THAT(lease, IsOk());
    sim_.TouchMemory(stream, lease->data(), bytes);
    return lease->data();  // released here, during the capture
  }
  SimGraph EndAndInstantiate(NativeStream stream) {
    absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(stream);
    EXPECT_THAT(graph, IsOk());
    EXPECT_THAT(sim_.InstantiateGraph(*graph), IsOk());
    return *graph;
  }
};

// The report's sequence, registered: the block released during the capture
// is reused inside it on the same stream, and never handed to s2.
TEST_F(GraphPoolTest, ABlockReleasedDuringACaptureIsNotHandedToAnotherStream) {
  auto cache = NewCache();
  NativeStream s1 = NewStream();
  NativeStream s2 = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  void* a = nullptr;
  SimGraph graph;
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(s1);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(s1, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    a = CapturedUse(*cache, s1, kMiB);
    // Reused inside the same capture, in stream order.
    EXPECT_EQ(CapturedUse(*cache, s1, kMiB), a);
    graph = EndAndInstantiate(s1);
  }
  {
    EagerLease b = Eager(*cache, s2, kMiB);
    EXPECT_NE(b.lease.data(), a);
    ASSERT_THAT(sim_.LaunchGraph(graph, s1), IsOk());
  }
  EXPECT_EQ(sim_.graph_misuses(), 0) << sim_.graph_misuse_log().front();
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.graph_pools, 1);
  EXPECT_EQ(stats.blocks_in_graph_pools, 1);
  EXPECT_EQ(stats.bytes_in_graph_pools, static_cast<int64_t>(kMiB));
  EXPECT_THAT(cache->DebugString(),
              HasSubstr(absl::StrCat("graph pool ", pool->id(), " dev0: 1 ")));
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  EXPECT_THAT(pool->Release({s1}), IsOk());
  EXPECT_EQ(cache->GetStats(0).graph_pools, 0);
}

// The same sequence with no scope: detect_unregistered_captures keeps the
// block out of reuse without touching the capture.
TEST_F(GraphPoolTest, AnUnregisteredCaptureIsDetectedWhenAskedFor) {
  AllocationCacheOptions options;
  options.detect_unregistered_captures = true;
  auto cache = NewCache(options);
  NativeStream s1 = NewStream();
  NativeStream s2 = NewStream();
  sim_.BeginCapture(s1);
  void* a = CapturedUse(*cache, s1, kMiB);
  EXPECT_EQ(cache->GetStats(0).blocks_held_for_captures, 1);
  {
    EagerLease b = Eager(*cache, s2, kMiB);
    EXPECT_NE(b.lease.data(), a);
  }
  // The release recorded nothing into the capture and queried nothing of it.
  EXPECT_EQ(*sim_.GetCaptureStatus(0, s1), CaptureStatus::kActive);
  SimGraph graph = EndAndInstantiate(s1);
  {
    EagerLease c = Eager(*cache, s2, kMiB);
    ASSERT_THAT(sim_.LaunchGraph(graph, s1), IsOk());
  }
  EXPECT_EQ(sim_.graph_misuses(), 0);
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  // Held until the cache goes: Trim leaves it alone.
  EXPECT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(cache->GetStats(0).bytes_held_for_captures,
            static_cast<int64_t>(kMiB));
}

// A capture stream may be destroyed once its capture ended: the pool's
// release fences on the replay streams only and never touches it again.
TEST_F(GraphPoolTest, ReleaseNeverTouchesADestroyedCaptureStream) {
  auto cache = NewCache();
  absl::StatusOr<NativeStream> capture = sim_.CreateStream(0, {});
  ASSERT_THAT(capture, IsOk());
  NativeStream replay = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  absl::StatusOr<CaptureScope> scope = pool->BeginCapture(*capture);
  ASSERT_THAT(scope, IsOk());
  ASSERT_THAT(sim_.BeginCapture(*capture, SimCaptureMode::kGlobal, pool->id()),
              IsOk());
  void* a = CapturedUse(*cache, *capture, kMiB);
  SimGraph graph = EndAndInstantiate(*capture);
  scope->End();
  ASSERT_THAT(sim_.LaunchGraph(graph, replay), IsOk());
  ASSERT_THAT(sim_.DestroyStream(0, *capture), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  EXPECT_THAT(pool->Release({replay}), IsOk());
  {
    EagerLease b = Eager(*cache, replay, kMiB);
    EXPECT_EQ(b.lease.data(), a);  // back in the general cache, same stream
  }
  EXPECT_EQ(sim_.misuse_count(), 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A pool keeps device memory only: pinned host memory released during a
// registered capture (the fuzzer's find) is held, and the pool's release
// leaves both kinds' accounts balanced.
TEST_F(GraphPoolTest, PinnedHostMemoryReleasedInACaptureIsHeldNotPooled) {
  auto cache = NewCache();
  NativeStream s1 = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  absl::StatusOr<CaptureScope> scope = pool->BeginCapture(s1);
  ASSERT_THAT(scope, IsOk());
  absl::StatusOr<PooledAllocation> host =
      cache->Allocate(0, kMiB, MemoryKind::kPinnedHost, s1);
  ASSERT_THAT(host, IsOk());
  void* host_ptr = host->data();
  ASSERT_THAT(sim_.BeginCapture(s1, SimCaptureMode::kGlobal, pool->id()),
              IsOk());
  host->Release();  // released during the capture
  EXPECT_EQ(cache->GetStats(0).blocks_held_for_captures, 1);
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 0);
  SimGraph graph = EndAndInstantiate(s1);
  scope->End();
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  EXPECT_THAT(pool->Release({s1}), IsOk());
  {
    absl::StatusOr<PooledAllocation> device =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, s1);
    ASSERT_THAT(device, IsOk());
    EXPECT_NE(device->data(), host_ptr);
    EXPECT_EQ(device->kind(), MemoryKind::kDevice);
  }
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kDevice).allocations_in_use, 0);
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kPinnedHost).allocations_in_use, 0);
}

// A backend written before GetCaptureInfo (it answers Unimplemented): the
// detection falls back to GetCaptureStatus, so an ordinary release is reused
// and a release during a capture is still held; scopes are refused.
class SimWithoutCaptureIds : public SimBackend {
 public:
  SimWithoutCaptureIds() : SimBackend(testing::StrictSimOptions(1)) {}
  absl::StatusOr<CaptureInfo> GetCaptureInfo(int, NativeStream) override {
    return absl::UnimplementedError("GetCaptureInfo: not supported");
  }
};

TEST(GraphPoolOldBackendTest, DetectionFallsBackToTheCaptureStatus) {
  SimWithoutCaptureIds sim;
  auto health = std::make_shared<DeviceHealth>(1);
  EventPool events(sim, health);
  AllocationCacheOptions options;
  options.detect_unregistered_captures = true;
  AllocationCache cache(sim, events, health, options);
  absl::StatusOr<NativeStream> s1 = sim.CreateStream(0, {});
  absl::StatusOr<NativeStream> s2 = sim.CreateStream(0, {});
  ASSERT_THAT(s1, IsOk());
  ASSERT_THAT(s2, IsOk());
  void* first = nullptr;
  {
    absl::StatusOr<PooledAllocation> a =
        cache.Allocate(0, kMiB, MemoryKind::kDevice, *s1);
    ASSERT_THAT(a, IsOk());
    first = a->data();
  }
  EXPECT_EQ(cache.GetStats(0).blocks_held_for_captures, 0);
  {
    absl::StatusOr<PooledAllocation> b =
        cache.Allocate(0, kMiB, MemoryKind::kDevice, *s1);
    ASSERT_THAT(b, IsOk());
    EXPECT_EQ(b->data(), first);  // reused: nothing was capturing
  }
  sim.BeginCapture(*s1);
  {
    absl::StatusOr<PooledAllocation> c =
        cache.Allocate(0, kMiB, MemoryKind::kDevice, *s1);
    ASSERT_THAT(c, IsOk());
  }
  EXPECT_EQ(cache.GetStats(0).blocks_held_for_captures, 1);
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(cache, 0);
  ASSERT_THAT(pool, IsOk());
  EXPECT_THAT(pool->BeginCapture(*s2),
              StatusIs(absl::StatusCode::kUnimplemented));
  absl::StatusOr<SimGraph> graph = sim.EndCaptureToGraph(*s1);
  ASSERT_THAT(graph, IsOk());
  ASSERT_THAT(sim.DestroyGraph(*graph), IsOk());
  ASSERT_THAT(pool->Release(), IsOk());
  EXPECT_THAT(sim.DestroyStream(0, *s1), IsOk());
  EXPECT_THAT(sim.DestroyStream(0, *s2), IsOk());
}

// Routing is by capture id: a side stream joined into the capture (a wait on
// an event recorded in it) allocates from the pool too.
TEST_F(GraphPoolTest, ASideStreamJoinedIntoTheCaptureRoutesToThePool) {
  auto cache = NewCache();
  NativeStream origin = NewStream();
  NativeStream side = NewStream();
  NativeStream eager = NewStream();
  NativeEvent fork = *sim_.CreateEvent(0, {});
  NativeEvent join = *sim_.CreateEvent(0, {});
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  void* on_side = nullptr;
  SimGraph graph;
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(origin);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(origin, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    ASSERT_THAT(sim_.RecordEvent(0, fork, origin), IsOk());
    ASSERT_THAT(sim_.StreamWaitEvent(0, side, fork), IsOk());
    on_side = CapturedUse(*cache, side, kMiB);
    // Served from the pool: the block released on `side` comes back.
    EXPECT_EQ(CapturedUse(*cache, side, kMiB), on_side);
    ASSERT_THAT(sim_.RecordEvent(0, join, side), IsOk());
    ASSERT_THAT(sim_.StreamWaitEvent(0, origin, join), IsOk());
    graph = EndAndInstantiate(origin);
  }
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 1);
  {
    EagerLease other = Eager(*cache, eager, kMiB);
    EXPECT_NE(other.lease.data(), on_side);
    ASSERT_THAT(sim_.LaunchGraph(graph, origin), IsOk());
  }
  EXPECT_EQ(sim_.graph_misuses(), 0);
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  ASSERT_THAT(pool->Release({origin}), IsOk());
  ASSERT_THAT(sim_.DestroyEvent(0, fork), IsOk());
  ASSERT_THAT(sim_.DestroyEvent(0, join), IsOk());
}

TEST_F(GraphPoolTest, AHundredReplaysBesideEagerWorkOnOtherStreams) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream eager = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  std::set<void*> graph_blocks;
  SimGraph graph;
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    absl::StatusOr<PooledAllocation> kept =
        cache->Allocate(0, 64 * kKiB, MemoryKind::kDevice, capture);
    ASSERT_THAT(kept, IsOk());
    sim_.TouchMemory(capture, kept->data(), 64 * kKiB);
    graph_blocks.insert(kept->data());
    graph_blocks.insert(CapturedUse(*cache, capture, kMiB));
    graph_blocks.insert(CapturedUse(*cache, capture, 4 * kKiB));
    sim_.SubmitWork(capture, absl::Milliseconds(1));
    graph = EndAndInstantiate(capture);
    // `kept` (the graph's output) stays leased past the capture.
    kept->Release();
  }
  for (int replay = 0; replay < 100; ++replay) {
    ASSERT_THAT(sim_.LaunchGraph(graph, capture), IsOk());
    EagerLease x = Eager(*cache, eager, kMiB);
    EagerLease y = Eager(*cache, eager, 4 * kKiB);
    EagerLease z = Eager(*cache, eager, 64 * kKiB);
    EXPECT_EQ(graph_blocks.count(x.lease.data()), 0u);
    EXPECT_EQ(graph_blocks.count(y.lease.data()), 0u);
    EXPECT_EQ(graph_blocks.count(z.lease.data()), 0u);
  }
  EXPECT_EQ(sim_.graph_misuses(), 0);
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 3);
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  ASSERT_THAT(pool->Release({capture}), IsOk());
}

// PyTorch issue 193402: a buffer baked into two graphs was freed when one of
// them was destroyed.
TEST_F(GraphPoolTest, TwoGraphsShareAPoolUntilItIsReleased) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream eager = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  SimGraph first;
  SimGraph second;
  void* shared = nullptr;
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    shared = CapturedUse(*cache, capture, kMiB);
    first = EndAndInstantiate(capture);
  }
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    // The second graph reuses the first one's block (they never overlap).
    EXPECT_EQ(CapturedUse(*cache, capture, kMiB), shared);
    second = EndAndInstantiate(capture);
  }
  // Destroying one graph frees nothing the other still replays.
  ASSERT_THAT(sim_.DestroyGraph(first), IsOk());
  {
    EagerLease other = Eager(*cache, eager, kMiB);
    EXPECT_NE(other.lease.data(), shared);
    ASSERT_THAT(sim_.LaunchGraph(second, capture), IsOk());
  }
  EXPECT_EQ(sim_.graph_misuses(), 0);
  ASSERT_THAT(sim_.DestroyGraph(second), IsOk());
  ASSERT_THAT(pool->Release({capture}), IsOk());
}

// llama.cpp: a pool gave memory back while a graph over it still replayed.
TEST_F(GraphPoolTest, AReleasedPoolIsReusedOnlyAfterTheLastReplayCompletes) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream eager = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  void* block = nullptr;
  SimGraph graph;
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    block = CapturedUse(*cache, capture, kMiB);
    sim_.SubmitWork(capture, absl::InfiniteDuration());
    graph = EndAndInstantiate(capture);
  }
  ASSERT_THAT(sim_.LaunchGraph(graph, capture), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());  // the launch still runs
  ASSERT_THAT(pool->Release({capture}), IsOk());
  EXPECT_THAT(pool->Release({capture}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  {
    EagerLease early = Eager(*cache, eager, kMiB);
    EXPECT_NE(early.lease.data(), block);
  }
  sim_.CompleteWork(capture);
  {
    // The replay is over: the block is the general cache's again.
    EagerLease later = Eager(*cache, eager, kMiB);
    EagerLease other = Eager(*cache, eager, kMiB);
    EXPECT_TRUE(later.lease.data() == block || other.lease.data() == block);
  }
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 0);
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// PyTorch issues 190308 and 190348: a failed or abandoned capture kept its
// private pool until the process exited.
TEST_F(GraphPoolTest, AnInvalidatedCaptureLeaksNothing) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  {
    absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
    ASSERT_THAT(pool, IsOk());
    {
      absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
      ASSERT_THAT(scope, IsOk());
      ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal), IsOk());
      CapturedUse(*cache, capture, kMiB);
      EXPECT_THAT(sim_.QueryStream(0, capture),
                  StatusIs(absl::StatusCode::kFailedPrecondition));
      CapturedUse(*cache, capture, 2 * kMiB);
      EXPECT_THAT(sim_.EndCaptureToGraph(capture),
                  StatusIs(absl::StatusCode::kFailedPrecondition));
    }
    EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 2);
    // No graph was made: nothing replays, a release needs no stream.
    EXPECT_THAT(pool->Release(), IsOk());
  }
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 0);
  EXPECT_EQ(cache->GetStats(0).graph_pools, 0);
  EXPECT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(sim_.live_allocations(0), 0);
}

TEST_F(GraphPoolTest, CapturesOnTwoDevicesUseTheirOwnPools) {
  auto cache = NewCache();
  NativeStream s0 = NewStream(0);
  NativeStream s1 = NewStream(1);
  absl::StatusOr<GraphPool> pool0 = gpupool::GraphPool::Create(*cache, 0);
  absl::StatusOr<GraphPool> pool1 = gpupool::GraphPool::Create(*cache, 1);
  ASSERT_THAT(pool0, IsOk());
  ASSERT_THAT(pool1, IsOk());
  absl::StatusOr<CaptureScope> scope0 = pool0->BeginCapture(s0);
  absl::StatusOr<CaptureScope> scope1 = pool1->BeginCapture(s1);
  ASSERT_THAT(scope0, IsOk());
  ASSERT_THAT(scope1, IsOk());
  ASSERT_THAT(sim_.BeginCapture(s0, SimCaptureMode::kGlobal, pool0->id()),
              IsOk());
  ASSERT_THAT(sim_.BeginCapture(s1, SimCaptureMode::kGlobal, pool1->id()),
              IsOk());
  void* a = CapturedUse(*cache, s0, kMiB, 0);
  void* b = CapturedUse(*cache, s1, kMiB, 1);
  SimGraph g0 = EndAndInstantiate(s0);
  SimGraph g1 = EndAndInstantiate(s1);
  scope0->End();
  scope1->End();
  EXPECT_EQ(cache->GetStats(0).blocks_in_graph_pools, 1);
  EXPECT_EQ(cache->GetStats(1).blocks_in_graph_pools, 1);
  {
    EagerLease e0 = Eager(*cache, s0, kMiB, 0);
    EagerLease e1 = Eager(*cache, s1, kMiB, 1);
    EXPECT_NE(e0.lease.data(), a);
    EXPECT_NE(e1.lease.data(), b);
    ASSERT_THAT(sim_.LaunchGraph(g0, s0), IsOk());
    ASSERT_THAT(sim_.LaunchGraph(g1, s1), IsOk());
  }
  EXPECT_EQ(sim_.graph_misuses(), 0);
  ASSERT_THAT(sim_.DestroyGraph(g0), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(g1), IsOk());
}

// The shard keeps spare events (a merge's covered ones) for leases that have
// none; a graph pool's lease takes none. Its block goes back to the pool at
// a release inside the capture, which reuses it there only when it holds no
// event: with a lent spare, every allocation of the capture would be a new
// block.
TEST_F(GraphPoolTest, APoolLeaseBorrowsNoSpareEvent) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream eager = NewStream();
  // Eager work of changing sizes on one stream: released blocks merge with
  // their free neighbours, whose events the later release covers (spares).
  for (int round = 0; round < 20; ++round) {
    std::vector<std::unique_ptr<EagerLease>> live;
    for (int i = 0; i < 8; ++i) {
      live.push_back(std::unique_ptr<EagerLease>(new EagerLease(
          Eager(*cache, eager, (1 + (round + i) % 5) * 48 * kKiB))));
    }
  }
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
  ASSERT_THAT(scope, IsOk());
  ASSERT_THAT(
      sim_.BeginCapture(capture, SimCaptureMode::kThreadLocal, pool->id()),
      IsOk());
  std::set<void*> graph_blocks;
  for (int i = 0; i < 40; ++i) {
    graph_blocks.insert(CapturedUse(*cache, capture, (1 + i % 4) * 64 * kKiB));
  }
  SimGraph graph = EndAndInstantiate(capture);
  // One block per size class, each reused in stream order.
  EXPECT_EQ(graph_blocks.size(), 4u);
  ASSERT_THAT(sim_.LaunchGraph(graph, capture), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

// A thread-local capture on one thread while another allocates eagerly on
// another stream of the same device: routing is by capture id, not thread.
TEST_F(GraphPoolTest, AThreadLocalCaptureBesideAnEagerThread) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream eager = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  std::set<void*> graph_blocks;
  std::vector<void*> eager_blocks;
  SimGraph graph;
  std::thread eager_thread([&] {
    for (int i = 0; i < 200; ++i) {
      EagerLease lease = Eager(*cache, eager, (1 + i % 4) * 64 * kKiB);
      eager_blocks.push_back(lease.lease.data());
    }
  });
  std::thread capture_thread([&] {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(
        sim_.BeginCapture(capture, SimCaptureMode::kThreadLocal, pool->id()),
        IsOk());
    for (int i = 0; i < 50; ++i) {
      graph_blocks.insert(
          CapturedUse(*cache, capture, (1 + i % 4) * 64 * kKiB));
    }
    graph = EndAndInstantiate(capture);
  });
  eager_thread.join();
  capture_thread.join();
  // One block per size class: each released block was reused in order.
  EXPECT_EQ(graph_blocks.size(), 4u);
  for (void* block : eager_blocks) EXPECT_EQ(graph_blocks.count(block), 0u);
  {
    EagerLease after = Eager(*cache, eager, 64 * kKiB);
    ASSERT_THAT(sim_.LaunchGraph(graph, capture), IsOk());
  }
  EXPECT_EQ(sim_.graph_misuses(), 0);
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
}

// PyTorch issue 159594: the out-of-memory path freed memory while a capture
// was live.
TEST_F(GraphPoolTest, TrimAndTheOutOfMemoryChainNeverFreeAGraphsBlocks) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  NativeStream eager = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  SimGraph graph;
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    CapturedUse(*cache, capture, 4 * kMiB);
    graph = EndAndInstantiate(capture);
  }
  EXPECT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(sim_.live_allocations(0), 1);
  // Room for nothing more: the OOM chain may not take the graph's block.
  sim_.SetMemoryLimit(0, 4 * kMiB);
  EXPECT_THAT(cache->Allocate(0, 4 * kMiB, MemoryKind::kDevice, eager),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(sim_.live_allocations(0), 1);
  ASSERT_THAT(sim_.LaunchGraph(graph, capture), IsOk());
  EXPECT_EQ(sim_.graph_misuses(), 0);
  ASSERT_THAT(sim_.DestroyGraph(graph), IsOk());
}

TEST_F(GraphPoolTest, APoisonedDeviceDropsThePoolsBlocksWithoutCalls) {
  auto cache = NewCache();
  // Not a fixture stream: ResetDevice below destroys it.
  absl::StatusOr<NativeStream> capture = sim_.CreateStream(0, {});
  ASSERT_THAT(capture, IsOk());
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(*capture);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(*capture, SimCaptureMode::kGlobal), IsOk());
    CapturedUse(*cache, *capture, kMiB);
    CapturedUse(*cache, *capture, 4 * kMiB);
    ASSERT_THAT(sim_.EndCapture(0, *capture), IsOk());
  }
  sim_.PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  (void)health_->Poison(0, absl::InternalError("cudaErrorIllegalAddress"));
  const int64_t calls = sim_.calls_on_device(0);
  EXPECT_THAT(pool->Release({*capture}), IsOk());
  EXPECT_EQ(sim_.calls_on_device(0), calls);
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_dropped, 2);
  EXPECT_EQ(stats.blocks_in_graph_pools, 0);
  sim_.ResetDevice(0);
}

TEST_F(GraphPoolTest, ScopesAndReleasesRefuseMisuse) {
  auto cache = NewCache();
  NativeStream capture = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  EXPECT_THAT(gpupool::GraphPool::Create(*cache, 5),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(pool->BeginCapture(nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(GraphPool().BeginCapture(capture),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture);
  ASSERT_THAT(scope, IsOk());
  EXPECT_THAT(pool->BeginCapture(capture),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("already has a capture scope")));
  EXPECT_THAT(pool->Release(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                        HasSubstr("scope open")));
  scope->End();
  EXPECT_THAT(pool->Release(), IsOk());
  EXPECT_THAT(
      pool->BeginCapture(capture),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("released")));
}

// With no scope open, an allocation cycle makes no capture query at all.
TEST_F(GraphPoolTest, NoCaptureQueryWhileNoScopeIsOpen) {
  auto cache = NewCache();
  NativeStream stream = NewStream();
  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  for (int i = 0; i < 10; ++i) {
    ASSERT_THAT(cache->Allocate(0, kMiB, MemoryKind::kDevice, stream), IsOk());
  }
  EXPECT_EQ(sim_.calls(SimOp::kCaptureStatus), 0);
}

// An event recorded into a capture and given back to the EventPool: the
// pool's return query is refused (the runtime's rule), which invalidates the
// capture, and the pool destroys the event rather than reuse it.
TEST_F(GraphPoolTest, AnEventRecordedIntoACaptureIsDestroyedOnReturn) {
  NativeStream capture = NewStream();
  const int64_t destroyed = sim_.events_destroyed();
  ASSERT_THAT(sim_.BeginCapture(capture, SimCaptureMode::kGlobal), IsOk());
  {
    absl::StatusOr<PooledEvent> event = events_->Acquire(0);
    ASSERT_THAT(event, IsOk());
    ASSERT_THAT(sim_.RecordEvent(0, event->get(), capture), IsOk());
  }
  EXPECT_EQ(sim_.events_destroyed(), destroyed + 1);
  EXPECT_EQ(*sim_.GetCaptureStatus(0, capture), CaptureStatus::kInvalidated);
  EXPECT_THAT(sim_.EndCapture(0, capture), IsOk());
}

}  // namespace
}  // namespace gpupool
