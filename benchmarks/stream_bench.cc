// stream_bench — pooled stream acquire+release against raw create+destroy,
// in the same binary and run, per stream config.
//
//   stream/raw/<config>                 Backend::CreateStream + DestroyStream
//   stream/pooled/<config>              StreamPool::Acquire + Release, with
//                                       the default validation (a query on
//                                       acquire; capture check, attribute
//                                       reset and query on return)
//   stream/pooled_unvalidated/default   the same with validate_on_acquire off
//   stream/floor/mutex_vector           absl::Mutex + std::vector pop/push: the
//                                       least any locked free list can cost
//   stream/pool_only/null_backend       StreamPool over a backend whose calls
//                                       return at once: the pool's own work,
//                                       to read as a ratio to the floor
//   stream/pool_only_lean/null_backend  the same without acquire validation
//                                       and without lease-site tracking
//
// The pooled benchmarks prewarm one stream so that every timed iteration is a
// hit; the "created" counter proves it (it stays at 1).

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
  for (auto _ : state) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0, config);
    if (!Check(state, stream.status())) break;
    benchmark::DoNotOptimize(stream->get());
    stream->Release();
  }
  StreamPoolStats stats = pool.GetStats();
  state.SetItemsProcessed(state.iterations());
  state.counters["created"] = static_cast<double>(stats.created);
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
  benchmark::RegisterBenchmark("stream/pooled_unvalidated/default",
                               [env](benchmark::State& state) {
                                 StreamPoolOptions options;
                                 options.validate_on_acquire = false;
                                 PooledAcquireRelease(state, *env.backend,
                                                      env.label, StreamConfig{},
                                                      options);
                               })
      ->UseRealTime();
  benchmark::RegisterBenchmark("stream/floor/mutex_vector", FloorMutexVector)
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
  benchmark::RegisterBenchmark(
      "stream/pool_only_lean/null_backend",
      [](benchmark::State& state) {
        NullBackend null_backend(1);
        StreamPoolOptions options;
        options.validate_on_acquire = false;
        options.track_lease_sites = false;
        PooledAcquireRelease(state, null_backend,
                             "null backend, no validation, no lease sites",
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
