// The fixture of the graph-owned pool tests (GraphPool::RetainBy): captures
// into a pool over the simulator, the retain-then-instantiate order, and a
// probe of whether the general cache hands out a given block.

#ifndef GPUPOOL_TESTS_ALLOCATION_GRAPH_GRAPH_RETAIN_FIXTURE_H_
#define GPUPOOL_TESTS_ALLOCATION_GRAPH_GRAPH_RETAIN_FIXTURE_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/graph_pool.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/allocation/sim_fixture.h"

namespace gpupool {

class GraphPoolRetainTest : public AllocationCacheSimTest {
 protected:
  // Captures into `pool` on `stream`: a `bytes` scratch block released
  // during the capture (the pool's) and work that runs until
  // CompleteAllWork on every launch. Returns the graph, not yet
  // instantiated: RetainBy comes first, as on CUDA, where an executable
  // graph copies only the references its graph held when instantiated.
  SimGraph CaptureScratch(AllocationCache& cache, GraphPool& pool,
                          NativeStream stream, size_t bytes, void** scratch) {
    absl::StatusOr<CaptureScope> scope = pool.BeginCapture(stream);
    EXPECT_THAT(scope, ::gpupool::testing::IsOk());
    EXPECT_THAT(sim_.BeginCapture(stream, SimCaptureMode::kGlobal, pool.id()),
                ::gpupool::testing::IsOk());
    absl::StatusOr<PooledAllocation> lease =
        cache.Allocate(0, bytes, MemoryKind::kDevice, stream);
    EXPECT_THAT(lease, ::gpupool::testing::IsOk());
    *scratch = lease->data();
    sim_.TouchMemory(stream, lease->data(), bytes);
    sim_.SubmitWork(stream, absl::InfiniteDuration());
    lease->Release();
    absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(stream);
    EXPECT_THAT(graph, ::gpupool::testing::IsOk());
    return *graph;
  }
  // Captures into `pool` on `stream` a `bytes` block that outlives the
  // capture (an output, in `output`, still leased). Returns the graph, not
  // yet instantiated.
  SimGraph CaptureOutput(AllocationCache& cache, GraphPool& pool,
                         NativeStream stream, size_t bytes,
                         PooledAllocation* output) {
    absl::StatusOr<CaptureScope> scope = pool.BeginCapture(stream);
    EXPECT_THAT(scope, ::gpupool::testing::IsOk());
    EXPECT_THAT(sim_.BeginCapture(stream, SimCaptureMode::kGlobal, pool.id()),
                ::gpupool::testing::IsOk());
    absl::StatusOr<PooledAllocation> lease =
        cache.Allocate(0, bytes, MemoryKind::kDevice, stream);
    EXPECT_THAT(lease, ::gpupool::testing::IsOk());
    if (lease.ok()) {
      sim_.TouchMemory(stream, lease->data(), bytes);
      *output = *std::move(lease);
    }
    absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(stream);
    EXPECT_THAT(graph, ::gpupool::testing::IsOk());
    return graph.ok() ? *graph : SimGraph{};
  }
  // RetainBy(graph), then the executable graph that launches will run.
  void RetainAndInstantiate(GraphPool& pool, SimGraph graph) {
    EXPECT_THAT(pool.RetainBy(NativeGraphOf(graph)),
                ::gpupool::testing::IsOk());
    EXPECT_THAT(sim_.InstantiateGraph(graph), ::gpupool::testing::IsOk());
  }
  // Whether one of the leases held at once on `stream`, one more than the
  // general cache holds idle, is `ptr` (the order among its idle blocks
  // does not matter). The first Allocate gives back a releasable pool.
  bool Reuses(AllocationCache& cache, NativeStream stream, size_t bytes,
              void* ptr) {
    std::vector<PooledAllocation> leases;
    bool found = false;
    const int64_t count = 2 + cache.GetStats(0).blocks_cached;
    for (int64_t i = 0; i < count; ++i) {
      absl::StatusOr<PooledAllocation> lease =
          cache.Allocate(0, bytes, MemoryKind::kDevice, stream);
      EXPECT_THAT(lease, ::gpupool::testing::IsOk());
      if (!lease.ok()) break;
      found = found || lease->data() == ptr;
      leases.push_back(*std::move(lease));
    }
    return found;
  }
};

}  // namespace gpupool

#endif  // GPUPOOL_TESTS_ALLOCATION_GRAPH_GRAPH_RETAIN_FIXTURE_H_
