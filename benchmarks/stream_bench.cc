// stream_bench — pooled stream acquire+release against raw create+destroy,
// in the same binary and run, per stream config.
//
//   stream/raw/<config>                 Backend::CreateStream + DestroyStream
//   stream/pooled/<config>              StreamPool::Acquire + Release with
//                                       the default protocol (nothing at
//                                       acquire; one query at return, plus
//                                       an attribute reset where the backend
//                                       has one)
//   stream/pooled_validated/default     the same with validate_on_acquire on
//                                       (one more query per cycle)
//   stream/floor/mutex_vector           absl::Mutex + std::vector pop/push: the
//                                       least any locked free list can cost
//                                       with Abseil's mutex
//   stream/floor/std_mutex_vector       the same over std::mutex, the lock
//                                       the pools use (src/lifetime/mutex.h)
//   stream/pool_only/null_backend       StreamPool over a backend whose calls
//                                       return at once: the pool's own work,
//                                       to read as a ratio to the floor
//   stream/pool_only_lean/null_backend  the same without lease-site tracking
//
// The pooled benchmarks prewarm one stream so that every timed iteration is a
// hit: "timed_misses" (streams created inside the timed loop) proves it by
// staying 0. "calls_per_cycle" counts runtime calls per acquire + release
// (SimBackend only).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "benchmarks/bench_common.h"
#include "benchmarks/null_backend.h"
#include "gpupool/backend.h"
#include "gpupool/pool_options.h"
#include "gpupool/stream_pool.h"
#include "src/lifetime/mutex.h"

namespace gpupool::bench {
namespace {

struct NamedConfig {
  std::string name;
  StreamConfig config;
};

// The configs a runtime client asks for: default, high priority (-1 is valid
// on CUDA [-5, 0] and HIP [-1, 1]) and blocking (synchronises with stream 0).
std::vector<NamedConfig> Configs() {
  StreamConfig high_priority;
  high_priority.priority = -1;
  StreamConfig blocking;
  blocking.non_blocking = false;
  return {{"default", StreamConfig{}},
          {"high_priority", high_priority},
          {"blocking", blocking}};
}

void RawCreateDestroy(benchmark::State& state, const BenchEnv& env,
                      StreamConfig config) {
  state.SetLabel(env.label.c_str());
  Backend& backend = *env.backend;
  for (auto _ : state) {
    absl::StatusOr<NativeStream> stream = backend.CreateStream(0, config);
    if (!Check(state, stream.status())) break;
    benchmark::DoNotOptimize(*stream);
    if (!Check(state, backend.DestroyStream(0, *stream))) break;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["created"] = static_cast<double>(state.iterations());
}

// Acquire + release of a prewarmed key on `backend`: every iteration a hit.
void PooledAcquireRelease(benchmark::State& state, Backend& backend,
                          const std::string& label, StreamConfig config,
                          StreamPoolOptions options) {
  state.SetLabel(label.c_str());
  StreamPool pool(backend, options);
  if (!Check(state, pool.Prewarm(0, config, 1))) return;
  const int64_t created_before = pool.GetStats().created;
  const int64_t calls_before = CountedRuntimeCalls(backend);
  for (auto _ : state) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0, config);
    if (!Check(state, stream.status())) break;
    benchmark::DoNotOptimize(stream->get());
    stream->Release();
  }
  SetCallsPerCycle(state, backend, calls_before);
  StreamPoolStats stats = pool.GetStats();
  state.SetItemsProcessed(state.iterations());
  state.counters["created"] = static_cast<double>(stats.created);
  state.counters["timed_misses"] =
      static_cast<double>(stats.created - created_before);
  state.counters["hit_rate"] = stats.hit_rate();
}

// The floor: the two critical sections any locked free list needs (pop on
// acquire, push on release) and nothing else.
void FloorMutexVector(benchmark::State& state) {
  state.SetLabel("no runtime call");
  absl::Mutex mu;
  std::vector<void*> idle;
  for (uintptr_t i = 1; i <= 64; ++i) {
    idle.push_back(reinterpret_cast<void*>(i * 0x100));
  }
  for (auto _ : state) {
    void* handle;
    {
      absl::MutexLock lock(&mu);
      handle = idle.back();
      idle.pop_back();
    }
    benchmark::DoNotOptimize(handle);
    {
      absl::MutexLock lock(&mu);
      idle.push_back(handle);
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// The same floor over std::mutex (through the pools' annotated wrapper,
// src/lifetime/mutex.h): what the pools' own cycle is measured against.
void FloorStdMutexVector(benchmark::State& state) {
  state.SetLabel("no runtime call");
  internal::Mutex mu;
  std::vector<void*> idle;
  for (uintptr_t i = 1; i <= 64; ++i) {
    idle.push_back(reinterpret_cast<void*>(i * 0x100));
  }
  for (auto _ : state) {
    void* handle;
    {
      internal::MutexLock lock(&mu);
      handle = idle.back();
      idle.pop_back();
    }
    benchmark::DoNotOptimize(handle);
    {
      internal::MutexLock lock(&mu);
      idle.push_back(handle);
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void RegisterStreamBenchmarks(const BenchEnv& env) {
  for (const NamedConfig& named : Configs()) {
    Tune(benchmark::RegisterBenchmark(
             absl::StrCat("stream/raw/", named.name).c_str(),
             [env, config = named.config](benchmark::State& state) {
               RawCreateDestroy(state, env, config);
             }),
         env, /*streams_per_iteration=*/1);
    benchmark::RegisterBenchmark(
        absl::StrCat("stream/pooled/", named.name).c_str(),
        [env, config = named.config](benchmark::State& state) {
          PooledAcquireRelease(state, *env.backend, env.label, config,
                               StreamPoolOptions{});
        })
        ->UseRealTime();
  }
  benchmark::RegisterBenchmark("stream/pooled_validated/default",
                               [env](benchmark::State& state) {
                                 StreamPoolOptions options;
                                 options.validate_on_acquire = true;
                                 PooledAcquireRelease(state, *env.backend,
                                                      env.label, StreamConfig{},
                                                      options);
                               })
      ->UseRealTime();
  benchmark::RegisterBenchmark("stream/floor/mutex_vector", FloorMutexVector)
      ->UseRealTime();
  benchmark::RegisterBenchmark("stream/floor/std_mutex_vector",
                               FloorStdMutexVector)
      ->UseRealTime();
  // Over NullBackend whatever --backend says: these measure the pool alone.
  benchmark::RegisterBenchmark(
      "stream/pool_only/null_backend",
      [](benchmark::State& state) {
        NullBackend null_backend(1);
        PooledAcquireRelease(state, null_backend, "null backend (pool alone)",
                             StreamConfig{}, StreamPoolOptions{});
      })
      ->UseRealTime();
  benchmark::RegisterBenchmark("stream/pool_only_lean/null_backend",
                               [](benchmark::State& state) {
                                 NullBackend null_backend(1);
                                 StreamPoolOptions options;
                                 options.track_lease_sites = false;
                                 PooledAcquireRelease(
                                     state, null_backend,
                                     "null backend, no lease sites",
                                     StreamConfig{}, options);
                               })
      ->UseRealTime();
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  return gpupool::bench::RunBenchmarkMain(
      argc, argv, &gpupool::bench::RegisterStreamBenchmarks);
}
