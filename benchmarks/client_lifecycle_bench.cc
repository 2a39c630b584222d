// client_lifecycle_bench — a PJRT-style client (per device: 14 streams, 16
// events, a 64 MiB scratch allocation) built and torn down per iteration, raw
// against pooled, for 1 and 8 devices, in the same binary and run.
//
//   client_lifecycle/raw/devices:N      raw Backend create/destroy calls
//   client_lifecycle/pooled/devices:N   StreamPool + EventPool +
//                                       AllocationCache; one untimed
//                                       lifecycle first, so the timed ones are
//                                       the steady state a test suite sees
//                                       from its second test on
//
// The client model is the demo's (examples/client_lifecycle/client_model.h),
// so the demo and this benchmark measure the same thing.

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"
#include "benchmarks/bench_common.h"
#include "examples/client_lifecycle/client_model.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/event_pool.h"
#include "gpupool/stream_pool.h"

namespace gpupool::bench {
namespace {

using examples::ClientPools;
using examples::ClientShape;
using examples::LifecycleCounts;

void RawLifecycle(benchmark::State& state, const BenchEnv& env) {
  state.SetLabel(env.label.c_str());
  const int devices = static_cast<int>(state.range(0));
  const ClientShape shape;
  LifecycleCounts counts;
  for (auto _ : state) {
    if (!Check(state, examples::RunRawLifecycle(*env.backend, devices, shape,
                                                &counts))) {
      break;
    }
  }
  SetRate(state, "lifecycles", state.iterations());
  state.counters["streams_created"] =
      static_cast<double>(counts.streams_created);
}

void PooledLifecycle(benchmark::State& state, const BenchEnv& env) {
  state.SetLabel(env.label.c_str());
  const int devices = static_cast<int>(state.range(0));
  const ClientShape shape;
  // Declared in dependency order: the cache takes events from the event pool
  // and is destroyed before it.
  StreamPool streams(*env.backend);
  EventPool events(*env.backend);
  AllocationCache allocations(*env.backend, events);
  ClientPools pools{&streams, &events, &allocations};
  // The first client of the process fills the pools; not timed.
  if (!Check(state, examples::RunPooledLifecycle(pools, devices, shape))) {
    return;
  }
  for (auto _ : state) {
    if (!Check(state, examples::RunPooledLifecycle(pools, devices, shape))) {
      break;
    }
  }
  SetRate(state, "lifecycles", state.iterations());
  state.counters["streams_created"] =
      static_cast<double>(streams.GetStats().created);
  state.counters["hit_rate"] = streams.GetStats().hit_rate();
}

void RegisterClientLifecycleBenchmarks(const BenchEnv& env) {
  // 1 device, and 8 (or as many as the machine has, when fewer).
  std::vector<int> device_counts = {1};
  if (env.device_count > 1)
    device_counts.push_back(std::min(8, env.device_count));
  const ClientShape shape;
  for (int devices : device_counts) {
    Tune(benchmark::RegisterBenchmark(
             "client_lifecycle/raw",
             [env](benchmark::State& state) { RawLifecycle(state, env); })
             ->ArgName("devices")
             ->Arg(devices)
             ->Unit(benchmark::kMicrosecond),
         env, shape.streams_per_device() * devices);
    benchmark::RegisterBenchmark(
        "client_lifecycle/pooled",
        [env](benchmark::State& state) { PooledLifecycle(state, env); })
        ->ArgName("devices")
        ->Arg(devices)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  return gpupool::bench::RunBenchmarkMain(
      argc, argv, &gpupool::bench::RegisterClientLifecycleBenchmarks);
}
