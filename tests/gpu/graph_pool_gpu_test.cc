// Graph pools on a real GPU: a CUDA graph captured with its scratch memory in
// a GraphPool is replayed 100 times while eager work on another stream keeps
// allocating from the same cache; the graph's result and the eager buffers
// must both hold exactly what their own work wrote. Then the pool is released
// and its memory is reused. Without a CUDA device the test skips with the
// runtime's own reason.

#include <cuda_runtime_api.h>

#include <memory>
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
#include "tests/gpu/graph_pool_kernel.h"

namespace gpupool {
namespace {

using ::gpupool::gpu_test::LaunchAccumulate;
using ::gpupool::gpu_test::LaunchFill;

constexpr int kCount = 1 << 16;
constexpr size_t kBytes = kCount * sizeof(int);
constexpr int kReplays = 100;

std::vector<int> CopyOut(const void* device_ptr) {
  std::vector<int> host(kCount);
  EXPECT_EQ(cudaMemcpy(host.data(), device_ptr, kBytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  return host;
}

TEST(GraphPoolGpuTest, ReplaysKeepTheirMemoryBesideEagerWork) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeCudaBackend();
  if (!backend.ok()) GTEST_SKIP() << backend.status().message();
  StreamPool streams(**backend);
  EventPool events(**backend);
  AllocationCache cache(**backend, events);
  absl::StatusOr<PooledStream> capture = streams.Acquire(0);
  absl::StatusOr<PooledStream> eager = streams.Acquire(0);
  ASSERT_TRUE(capture.ok() && eager.ok());
  auto capture_stream = static_cast<cudaStream_t>(capture->get());
  auto eager_stream = static_cast<cudaStream_t>(eager->get());

  // The graph's output lives outside the capture: an ordinary lease kept for
  // as long as the graph may run.
  absl::StatusOr<PooledAllocation> output =
      cache.Allocate(0, kBytes, MemoryKind::kDevice, capture->get());
  ASSERT_TRUE(output.ok()) << output.status();
  int* out = static_cast<int*>(output->data());
  ASSERT_EQ(LaunchFill(capture_stream, out, kCount, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(capture_stream), cudaSuccess);

  absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(cache, 0);
  ASSERT_TRUE(pool.ok()) << pool.status();
  cudaGraph_t graph = nullptr;
  const void* scratch_address = nullptr;
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(capture->get());
    ASSERT_TRUE(scope.ok()) << scope.status();
    ASSERT_EQ(
        cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeGlobal),
        cudaSuccess);
    {
      // Scratch: allocated and released inside the capture (from the pool).
      absl::StatusOr<PooledAllocation> scratch =
          cache.Allocate(0, kBytes, MemoryKind::kDevice, capture->get());
      ASSERT_TRUE(scratch.ok()) << scratch.status();
      scratch_address = scratch->data();
      int* in = static_cast<int*>(scratch->data());
      ASSERT_EQ(LaunchFill(capture_stream, in, kCount, 1), cudaSuccess);
      ASSERT_EQ(LaunchAccumulate(capture_stream, in, out, kCount), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamEndCapture(capture_stream, &graph), cudaSuccess);
  }
  EXPECT_EQ(cache.GetStats(0).blocks_in_graph_pools, 1);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  std::vector<PooledAllocation> eager_buffers;
  for (int replay = 0; replay < kReplays; ++replay) {
    ASSERT_EQ(cudaGraphLaunch(exec, capture_stream), cudaSuccess);
    absl::StatusOr<PooledAllocation> buffer =
        cache.Allocate(0, kBytes, MemoryKind::kDevice, eager->get());
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_NE(buffer->data(), scratch_address);
    ASSERT_EQ(
        LaunchFill(eager_stream, static_cast<int*>(buffer->data()), kCount, 7),
        cudaSuccess);
    if (replay % 10 == 0) eager_buffers.push_back(*std::move(buffer));
  }
  ASSERT_EQ(cudaStreamSynchronize(capture_stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(eager_stream), cudaSuccess);
  for (int value : CopyOut(out)) ASSERT_EQ(value, kReplays);
  for (const PooledAllocation& buffer : eager_buffers) {
    for (int value : CopyOut(buffer.data())) ASSERT_EQ(value, 7);
  }

  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_TRUE(pool->Release({capture->get()}).ok());
  EXPECT_EQ(cache.GetStats(0).blocks_in_graph_pools, 0);
  // The scratch block is the general cache's again (same stream: at once).
  absl::StatusOr<PooledAllocation> again =
      cache.Allocate(0, kBytes, MemoryKind::kDevice, capture->get());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->data(), scratch_address);
}

}  // namespace
}  // namespace gpupool
