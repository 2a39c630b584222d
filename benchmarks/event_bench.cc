// event_bench — pooled event acquire+release against raw create+destroy, in
// the same binary and run, per event config.
//
//   event/raw/<config>      Backend::CreateEvent + DestroyEvent
//   event/pooled/<config>   EventPool::Acquire + Release (one query, at
//                           return), every iteration a hit (one event
//                           prewarmed; "timed_misses" stays 0)
//   event/pooled_record/default   acquire, record on a stream, release: the
//                           way a client marks work done (the record is the
//                           same call a raw client makes, so it is in both)
//   event/raw_record/default      create, record, destroy

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "benchmarks/bench_common.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/pool_options.h"

namespace gpupool::bench {
namespace {

struct NamedConfig {
  std::string name;
  EventConfig config;
};

// Sync-only events (the common case: disable_timing) and timing events.
std::vector<NamedConfig> Configs() {
  EventConfig timing;
  timing.disable_timing = false;
  return {{"default", EventConfig{}}, {"timing", timing}};
}

void RawCreateDestroy(benchmark::State& state, const BenchEnv& env,
                      EventConfig config, bool record) {
  state.SetLabel(env.label.c_str());
  Backend& backend = *env.backend;
  NativeStream stream = nullptr;
  if (record) {
    absl::StatusOr<NativeStream> created = backend.CreateStream(0, {});
    if (!Check(state, created.status())) return;
    stream = *created;
  }
  for (auto _ : state) {
    absl::StatusOr<NativeEvent> event = backend.CreateEvent(0, config);
    if (!Check(state, event.status())) break;
    benchmark::DoNotOptimize(*event);
    if (record && !Check(state, backend.RecordEvent(0, *event, stream))) {
      (void)backend.DestroyEvent(0, *event);
      break;
    }
    if (!Check(state, backend.DestroyEvent(0, *event))) break;
  }
  if (stream != nullptr) (void)backend.DestroyStream(0, stream);
  state.SetItemsProcessed(state.iterations());
  state.counters["created"] = static_cast<double>(state.iterations());
}

void PooledAcquireRelease(benchmark::State& state, const BenchEnv& env,
                          EventConfig config, bool record) {
  state.SetLabel(env.label.c_str());
  Backend& backend = *env.backend;
  NativeStream stream = nullptr;
  if (record) {
    absl::StatusOr<NativeStream> created = backend.CreateStream(0, {});
    if (!Check(state, created.status())) return;
    stream = *created;
  }
  {
    EventPool pool(backend);
    int64_t created_before = 0;
    if (Check(state, pool.Prewarm(0, config, 1))) {
      created_before = pool.GetStats().created;
      const int64_t calls_before = CountedRuntimeCalls(backend);
      for (auto _ : state) {
        absl::StatusOr<PooledEvent> event = pool.Acquire(0, config);
        if (!Check(state, event.status())) break;
        benchmark::DoNotOptimize(event->get());
        if (record &&
            !Check(state, backend.RecordEvent(0, event->get(), stream))) {
          break;
        }
        event->Release();
      }
      // "calls_per_cycle" includes the record where there is one.
      SetCallsPerCycle(state, backend, calls_before);
    }
    EventPoolStats stats = pool.GetStats();
    state.counters["created"] = static_cast<double>(stats.created);
    state.counters["timed_misses"] =
        static_cast<double>(stats.created - created_before);
    state.counters["hit_rate"] = stats.hit_rate();
  }
  if (stream != nullptr) (void)backend.DestroyStream(0, stream);
  state.SetItemsProcessed(state.iterations());
}

void RegisterEventBenchmarks(const BenchEnv& env) {
  for (const NamedConfig& named : Configs()) {
    benchmark::RegisterBenchmark(
        absl::StrCat("event/raw/", named.name).c_str(),
        [env, config = named.config](benchmark::State& state) {
          RawCreateDestroy(state, env, config, /*record=*/false);
        })
        ->UseRealTime();
    benchmark::RegisterBenchmark(
        absl::StrCat("event/pooled/", named.name).c_str(),
        [env, config = named.config](benchmark::State& state) {
          PooledAcquireRelease(state, env, config, /*record=*/false);
        })
        ->UseRealTime();
  }
  benchmark::RegisterBenchmark("event/raw_record/default",
                               [env](benchmark::State& state) {
                                 RawCreateDestroy(state, env, EventConfig{},
                                                  /*record=*/true);
                               })
      ->UseRealTime();
  benchmark::RegisterBenchmark("event/pooled_record/default",
                               [env](benchmark::State& state) {
                                 PooledAcquireRelease(state, env, EventConfig{},
                                                      /*record=*/true);
                               })
      ->UseRealTime();
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  return gpupool::bench::RunBenchmarkMain(
      argc, argv, &gpupool::bench::RegisterEventBenchmarks);
}
