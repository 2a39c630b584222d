// allocation_bench — AllocationCache hits against raw allocate+free, for
// sizes 256 B ... 256 MiB (powers of 4), in the same binary and run.
//
//   allocation/raw/<bytes>               Backend::Allocate + Free (device
//                                        memory: cudaMalloc/hipMalloc)
//   allocation/cached/<bytes>            AllocationCache::Allocate on a stream
//                                        + Release (records a ready event on
//                                        that stream): every iteration a hit
//                                        on the same stream
//   allocation/cached_no_stream/<bytes>  the same with no stream (nothing to
//                                        order against, no event recorded)
//   allocation/cached_traced/<bytes>     allocation/cached with the cache's
//                                        trace on (trace_capacity 100000):
//                                        the trace's cost per cycle
//   allocation/captured/<bytes>          with --backend=sim only (labelled
//                                        simulated): the cached cycle on a
//                                        stream under graph capture, routed
//                                        to a GraphPool by a CaptureScope
//                                        (a capture query per Allocate, no
//                                        ready event at release)
//   allocation/cuda_malloc_async/<bytes> with --backend=cuda in a CUDA build:
//                                        cudaMallocAsync + cudaFreeAsync on one
//                                        stream (benchmarks/cuda/)

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "benchmarks/bench_common.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/graph_pool.h"
#include "gpupool/sim_backend.h"

namespace gpupool::bench {

#ifdef GPUPOOL_BENCH_HAVE_CUDA
// benchmarks/cuda/malloc_async_bench.cc: registers the cudaMallocAsync
// baseline when env is the CUDA backend.
void RegisterCudaMallocAsyncBenchmarks(const BenchEnv& env);
#endif

namespace {

constexpr int64_t kSmallest = 256;
constexpr int64_t kLargest = int64_t{256} << 20;

void RawAllocateFree(benchmark::State& state, const BenchEnv& env) {
  state.SetLabel(env.label.c_str());
  const size_t bytes = static_cast<size_t>(state.range(0));
  Backend& backend = *env.backend;
  for (auto _ : state) {
    absl::StatusOr<void*> ptr = backend.Allocate(0, bytes, MemoryKind::kDevice);
    if (!Check(state, ptr.status())) break;
    benchmark::DoNotOptimize(*ptr);
    if (!Check(state, backend.Free(0, *ptr, MemoryKind::kDevice))) break;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["runtime_allocations"] =
      static_cast<double>(state.iterations());
}

void CachedAllocateRelease(benchmark::State& state, const BenchEnv& env,
                           bool on_stream, bool traced = false) {
  state.SetLabel(env.label.c_str());
  const size_t bytes = static_cast<size_t>(state.range(0));
  Backend& backend = *env.backend;
  NativeStream stream = nullptr;
  if (on_stream) {
    absl::StatusOr<NativeStream> created = backend.CreateStream(0, {});
    if (!Check(state, created.status())) return;
    stream = *created;
  }
  {
    EventPool events(backend);
    AllocationCacheOptions options;
    if (traced) options.trace_capacity = 100000;
    AllocationCache cache(backend, events, options);
    // The one miss: the block every timed iteration then reuses.
    absl::Status warm =
        cache.Allocate(0, bytes, MemoryKind::kDevice, stream).status();
    int64_t allocations_before = 0;
    if (Check(state, warm)) {
      allocations_before = cache.GetStats().runtime_allocations;
      const int64_t calls_before = CountedRuntimeCalls(backend);
      for (auto _ : state) {
        absl::StatusOr<PooledAllocation> block =
            cache.Allocate(0, bytes, MemoryKind::kDevice, stream);
        if (!Check(state, block.status())) break;
        benchmark::DoNotOptimize(block->data());
        block->Release();
      }
      SetCallsPerCycle(state, backend, calls_before);
    }
    AllocationCacheStats stats = cache.GetStats();
    state.counters["runtime_allocations"] =
        static_cast<double>(stats.runtime_allocations);
    state.counters["timed_misses"] =
        static_cast<double>(stats.runtime_allocations - allocations_before);
    state.counters["hit_rate"] = stats.hit_rate();
  }
  if (stream != nullptr) (void)backend.DestroyStream(0, stream);
  state.SetItemsProcessed(state.iterations());
}

// The cached cycle inside a graph capture the cache was told about: every
// allocation is routed to the pool and reuses the block released on the same
// capturing stream. SimBackend only (its capture control begins the capture).
void CapturedAllocateRelease(benchmark::State& state, const BenchEnv& env) {
  state.SetLabel(env.label.c_str());
  auto* sim = dynamic_cast<SimBackend*>(env.backend);
  if (sim == nullptr) {
    state.SkipWithError("needs SimBackend's capture control");
    return;
  }
  const size_t bytes = static_cast<size_t>(state.range(0));
  absl::StatusOr<NativeStream> stream = sim->CreateStream(0, {});
  if (!Check(state, stream.status())) return;
  {
    EventPool events(*sim);
    AllocationCache cache(*sim, events);
    absl::StatusOr<GraphPool> pool = gpupool::GraphPool::Create(cache, 0);
    if (!Check(state, pool.status())) return;
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(*stream);
    if (Check(state, scope.status()) &&
        Check(state, sim->BeginCapture(*stream, SimCaptureMode::kGlobal)) &&
        Check(
            state,
            cache.Allocate(0, bytes, MemoryKind::kDevice, *stream).status())) {
      const int64_t calls_before = CountedRuntimeCalls(*sim);
      for (auto _ : state) {
        absl::StatusOr<PooledAllocation> block =
            cache.Allocate(0, bytes, MemoryKind::kDevice, *stream);
        if (!Check(state, block.status())) break;
        benchmark::DoNotOptimize(block->data());
        block->Release();
      }
      SetCallsPerCycle(state, *sim, calls_before);
      (void)sim->EndCapture(0, *stream);
    }
    state.counters["runtime_allocations"] =
        static_cast<double>(cache.GetStats().runtime_allocations);
  }
  (void)sim->DestroyStream(0, *stream);
  state.SetItemsProcessed(state.iterations());
}

void RegisterAllocationBenchmarks(const BenchEnv& env) {
  benchmark::RegisterBenchmark(
      "allocation/raw",
      [env](benchmark::State& state) { RawAllocateFree(state, env); })
      ->RangeMultiplier(4)
      ->Range(kSmallest, kLargest)
      ->UseRealTime();
  benchmark::RegisterBenchmark("allocation/cached",
                               [env](benchmark::State& state) {
                                 CachedAllocateRelease(state, env,
                                                       /*on_stream=*/true);
                               })
      ->RangeMultiplier(4)
      ->Range(kSmallest, kLargest)
      ->UseRealTime();
  benchmark::RegisterBenchmark("allocation/cached_traced",
                               [env](benchmark::State& state) {
                                 CachedAllocateRelease(state, env,
                                                       /*on_stream=*/true,
                                                       /*traced=*/true);
                               })
      ->RangeMultiplier(4)
      ->Range(kSmallest, kLargest)
      ->UseRealTime();
  benchmark::RegisterBenchmark("allocation/cached_no_stream",
                               [env](benchmark::State& state) {
                                 CachedAllocateRelease(state, env,
                                                       /*on_stream=*/false);
                               })
      ->RangeMultiplier(4)
      ->Range(kSmallest, kLargest)
      ->UseRealTime();
  if (env.backend_name == "sim") {
    benchmark::RegisterBenchmark(
        "allocation/captured",
        [env](benchmark::State& state) { CapturedAllocateRelease(state, env); })
        ->RangeMultiplier(4)
        ->Range(kSmallest, kLargest)
        ->UseRealTime();
  }
#ifdef GPUPOOL_BENCH_HAVE_CUDA
  RegisterCudaMallocAsyncBenchmarks(env);
#endif
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  return gpupool::bench::RunBenchmarkMain(
      argc, argv, &gpupool::bench::RegisterAllocationBenchmarks);
}
