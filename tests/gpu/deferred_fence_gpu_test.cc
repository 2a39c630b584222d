// AllocationCacheOptions::defer_same_stream_fences over the real CUDA
// runtime: a block released on stream A while A's work is held behind a
// host-function gate is parked (no event recorded); stream A gets it back at
// once, another stream must not get it while A's work is pending (its fence
// is recorded on A then, behind the gate), and gets it once that work is
// done, with the data A's work wrote. Host code only (no nvcc). Without a
// CUDA device the test skips with the runtime's own reason.

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/cuda_backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/gpu/gate.h"

namespace gpupool {
namespace {

using gpu_test::Gate;

constexpr size_t kBytes = size_t{4} << 20;

TEST(DeferredFenceGpuTest, ParkedBlockReachesAnotherStreamOnlyAfterItsWork) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeCudaBackend();
  if (!backend.ok()) GTEST_SKIP() << backend.status().message();
  StreamPool streams(**backend);
  EventPool events(**backend);
  AllocationCacheOptions options;
  options.defer_same_stream_fences = true;
  // No segment is freed while the gate holds stream A (cudaFree would wait
  // for the device).
  options.give_back_above_percent = -1;
  AllocationCache cache(**backend, events, options);
  absl::StatusOr<PooledStream> a = streams.Acquire(0);
  absl::StatusOr<PooledStream> b = streams.Acquire(0);
  ASSERT_TRUE(a.ok() && b.ok());
  auto stream_a = static_cast<cudaStream_t>(a->get());

  Gate gate(std::chrono::seconds(30));
  const void* parked = nullptr;
  {
    absl::StatusOr<PooledAllocation> lease =
        cache.Allocate(0, kBytes, MemoryKind::kDevice, a->get());
    ASSERT_TRUE(lease.ok()) << lease.status();
    parked = lease->data();
    ASSERT_EQ(cudaLaunchHostFunc(stream_a, &Gate::WaitForGate, &gate),
              cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(lease->data(), 0x5a, kBytes, stream_a),
              cudaSuccess);
  }  // parked: no runtime call
  EXPECT_EQ(cache.GetStats(0).blocks_cached, 1);
  {
    // Stream A again: its own work is ordered before the new lease's.
    absl::StatusOr<PooledAllocation> again =
        cache.Allocate(0, kBytes, MemoryKind::kDevice, a->get());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->data(), parked);
  }
  // Stream B: the parked block is fenced on A behind the gate, found
  // pending, and B gets a new block.
  absl::StatusOr<PooledAllocation> first_b =
      cache.Allocate(0, kBytes, MemoryKind::kDevice, b->get());
  ASSERT_TRUE(first_b.ok()) << first_b.status();
  EXPECT_NE(first_b->data(), parked);
  EXPECT_EQ(cache.GetStats(0).runtime_allocations, 2);

  gate.Open();
  EXPECT_FALSE(gate.timed_out()) << "something waited on the gated stream";
  ASSERT_EQ(cudaStreamSynchronize(stream_a), cudaSuccess);
  // A's work is done: B gets the block, holding what A's memset wrote.
  absl::StatusOr<PooledAllocation> second_b =
      cache.Allocate(0, kBytes, MemoryKind::kDevice, b->get());
  ASSERT_TRUE(second_b.ok()) << second_b.status();
  EXPECT_EQ(second_b->data(), parked);
  std::vector<unsigned char> head(64, 0);
  ASSERT_EQ(cudaMemcpy(head.data(), second_b->data(), head.size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (unsigned char byte : head) EXPECT_EQ(byte, 0x5a);
  EXPECT_EQ(cache.GetStats(0).runtime_allocations, 2);
  second_b->Release();
  first_b->Release();
  // Before the streams go back to their pool (which may destroy them).
  EXPECT_TRUE(cache.FenceStream(0, a->get()).ok());
  EXPECT_TRUE(cache.FenceStream(0, b->get()).ok());
}

}  // namespace
}  // namespace gpupool
