// The cudaMallocAsync + cudaFreeAsync baseline of allocation_bench, built
// only in CUDA builds and registered only with --backend=cuda.
//
// This is the one file outside src/backends/ that includes a vendor header.
// That is deliberate and allowed: it is a baseline that calls the CUDA
// runtime directly, so that the cache is compared with the runtime's own
// stream-ordered allocator in the same process and run; the library itself
// never sees cuda_runtime.h outside src/backends/cuda/.

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "benchmarks/bench_common.h"

namespace gpupool::bench {
namespace {

constexpr int64_t kSmallest = 256;
constexpr int64_t kLargest = int64_t{256} << 20;

bool CheckCuda(benchmark::State& state, cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (",
                   static_cast<int>(error), "): ", cudaGetErrorString(error));
  state.SkipWithError(message.c_str());
  return false;
}

// Allocates and frees on one stream, as AllocationCache hits on one stream
// do. The default pool's release threshold is raised to "never" first so that
// cudaMallocAsync keeps its memory between iterations: its best case.
void MallocAsyncFreeAsync(benchmark::State& state, const BenchEnv& env) {
  state.SetLabel(env.label.c_str());
  const size_t bytes = static_cast<size_t>(state.range(0));
  int previous_device = 0;
  if (!CheckCuda(state, cudaGetDevice(&previous_device), "cudaGetDevice") ||
      !CheckCuda(state, cudaSetDevice(0), "cudaSetDevice")) {
    return;
  }
  cudaMemPool_t pool;
  cudaStream_t stream = nullptr;
  uint64_t threshold = std::numeric_limits<uint64_t>::max();
  if (CheckCuda(state, cudaDeviceGetDefaultMemPool(&pool, 0),
                "cudaDeviceGetDefaultMemPool") &&
      CheckCuda(state,
                cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                                        &threshold),
                "cudaMemPoolSetAttribute") &&
      CheckCuda(state,
                cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags")) {
    // One untimed pair, so the pool holds the memory before timing starts.
    void* warm = nullptr;
    if (CheckCuda(state, cudaMallocAsync(&warm, bytes, stream),
                  "cudaMallocAsync") &&
        CheckCuda(state, cudaFreeAsync(warm, stream), "cudaFreeAsync") &&
        CheckCuda(state, cudaStreamSynchronize(stream),
                  "cudaStreamSynchronize")) {
      for (auto _ : state) {
        void* ptr = nullptr;
        if (!CheckCuda(state, cudaMallocAsync(&ptr, bytes, stream),
                       "cudaMallocAsync")) {
          break;
        }
        benchmark::DoNotOptimize(ptr);
        if (!CheckCuda(state, cudaFreeAsync(ptr, stream), "cudaFreeAsync")) {
          break;
        }
      }
    }
    (void)cudaStreamSynchronize(stream);
    (void)cudaStreamDestroy(stream);
  }
  (void)cudaSetDevice(previous_device);
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

void RegisterCudaMallocAsyncBenchmarks(const BenchEnv& env) {
  if (env.backend_name != "cuda") return;
  benchmark::RegisterBenchmark(
      "allocation/cuda_malloc_async",
      [env](benchmark::State& state) { MallocAsyncFreeAsync(state, env); })
      ->RangeMultiplier(4)
      ->Range(kSmallest, kLargest)
      ->UseRealTime();
}

}  // namespace gpupool::bench
