// GraphPool::RetainBy on a real GPU: a kernel-free graph (a cudaMemsetAsync
// into a pool allocation) is captured into a GraphPool, the graph retains
// the pool through a CUDA user object, and then the pool handle, the graph
// and its executable graph are all dropped while a launch is still queued
// behind a gate on the replay stream. The pool's block must stay out of
// general reuse (Trim included) until that launch completes, and go back
// after, with no stream named by the caller. Host code only (no nvcc).
// Without a CUDA device the test skips with the runtime's own reason; on a
// runtime without user objects it skips naming the missing entry points.

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/cuda_backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/graph_pool.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/gpu/gate.h"

namespace gpupool {
namespace {

using gpu_test::Gate;

constexpr size_t kBytes = size_t{4} << 20;

// Whether one of the leases held at once on `stream`, one more than the
// general cache holds idle, is `ptr` (the first Allocate also gives back a
// pool its graphs let go).
bool Reuses(AllocationCache& cache, NativeStream stream, const void* ptr) {
  std::vector<PooledAllocation> leases;
  bool found = false;
  const int64_t count = 2 + cache.GetStats(0).blocks_cached;
  for (int64_t i = 0; i < count; ++i) {
    absl::StatusOr<PooledAllocation> lease =
        cache.Allocate(0, kBytes, MemoryKind::kDevice, stream);
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (!lease.ok()) break;
    found = found || lease->data() == ptr;
    leases.push_back(*std::move(lease));
  }
  return found;
}

TEST(GraphPoolRetainGpuTest, PoolOutlivesEverythingButTheQueuedLaunch) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeCudaBackend();
  if (!backend.ok()) GTEST_SKIP() << backend.status().message();
  StreamPool streams(**backend);
  EventPool events(**backend);
  AllocationCache cache(**backend, events);
  absl::StatusOr<PooledStream> capture = streams.Acquire(0);
  absl::StatusOr<PooledStream> replay = streams.Acquire(0);
  absl::StatusOr<PooledStream> other = streams.Acquire(0);
  ASSERT_TRUE(capture.ok() && replay.ok() && other.ok());
  auto capture_stream = static_cast<cudaStream_t>(capture->get());
  auto replay_stream = static_cast<cudaStream_t>(replay->get());

  std::optional<GraphPool> pool;
  {
    absl::StatusOr<GraphPool> created = GraphPool::Create(cache, 0);
    ASSERT_TRUE(created.ok()) << created.status();
    pool.emplace(*std::move(created));
  }
  cudaGraph_t graph = nullptr;
  const void* scratch_address = nullptr;
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture->get());
    ASSERT_TRUE(scope.ok()) << scope.status();
    ASSERT_EQ(
        cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeGlobal),
        cudaSuccess);
    {
      absl::StatusOr<PooledAllocation> scratch =
          cache.Allocate(0, kBytes, MemoryKind::kDevice, capture->get());
      ASSERT_TRUE(scratch.ok()) << scratch.status();
      scratch_address = scratch->data();
      ASSERT_EQ(cudaMemsetAsync(scratch->data(), 0x5a, kBytes, capture_stream),
                cudaSuccess);
    }  // released inside the capture: the pool's
    ASSERT_EQ(cudaStreamEndCapture(capture_stream, &graph), cudaSuccess);
  }
  EXPECT_EQ(cache.GetStats(0).blocks_in_graph_pools, 1);

  const absl::Status retained = pool->RetainBy(graph);
  if (absl::IsUnimplemented(retained)) {
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    EXPECT_TRUE(pool->Release({capture->get()}).ok());
    GTEST_SKIP() << retained.message();
  }
  ASSERT_TRUE(retained.ok()) << retained;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  Gate gate(std::chrono::seconds(30));
  ASSERT_EQ(cudaLaunchHostFunc(replay_stream, &Gate::WaitForGate, &gate),
            cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, replay_stream), cudaSuccess);
  // Everything but the queued launch goes: the handle, the graph, the exec.
  pool.reset();
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);

  AllocationCacheStats stats = cache.GetStats(0);
  EXPECT_EQ(stats.graph_pools, 1);
  EXPECT_EQ(stats.graph_pools_awaiting_graphs, 1);
  EXPECT_EQ(stats.blocks_in_graph_pools, 1);
  // The pool's segment is the only one: a Trim must leave it alone.
  EXPECT_TRUE(cache.Trim().ok());
  EXPECT_EQ(cache.GetStats(0).blocks_in_graph_pools, 1);
  EXPECT_FALSE(Reuses(cache, other->get(), scratch_address));
  EXPECT_EQ(cache.GetStats(0).blocks_in_graph_pools, 1);
  EXPECT_EQ(cudaStreamQuery(replay_stream), cudaErrorNotReady);
  EXPECT_FALSE(gate.timed_out()) << "the watchdog had to open the gate";

  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(replay_stream), cudaSuccess);
  // The destructor runs on a CUDA thread, not synchronized with the stream
  // (cudaUserObjectNoDestructorSync): wait for the pool to be let go.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cache.GetStats(0).graph_pools != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    // Keeping every cached byte: the scratch block must stay for Reuses.
    EXPECT_TRUE(cache.Trim(0, /*keep_bytes=*/size_t{1} << 40).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stats = cache.GetStats(0);
  EXPECT_EQ(stats.graph_pools, 0);
  EXPECT_EQ(stats.graph_pools_awaiting_graphs, 0);
  EXPECT_EQ(stats.blocks_in_graph_pools, 0);
  EXPECT_TRUE(Reuses(cache, other->get(), scratch_address));
}

}  // namespace
}  // namespace gpupool
