// Backend selection, labels and main() shared by the benchmark suites.

#include "benchmarks/bench_common.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "benchmarks/null_backend.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"

namespace gpupool::bench {
namespace {

// The simulated machine: eight devices, like the 8-GPU node of the seed
// report (112 streams = 8 devices x 14).
constexpr int kSimDevices = 8;

// Estimated raw create+destroy of one stream on a slow runtime, for sizing
// iteration counts only: 3.4 + 3.3 ms on MI300X (seed report), rounded up.
constexpr double kSlowStreamPairMs = 7.0;

absl::StatusOr<SimProfile> SimProfileNamed(const std::string& name) {
  if (name == "instant") return SimProfile::Instant();
  if (name == "cuda") return SimProfile::Cuda();
  if (name == "rocm_mi300x" || name == "rocm-mi300x") {
    return SimProfile::RocmMi300x();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown --sim_profile=", name, " (instant|cuda|rocm_mi300x)"));
}

// Removes argv[i] by shifting the rest down.
void RemoveArg(int* argc, char** argv, int i) {
  for (int j = i; j + 1 < *argc; ++j) argv[j] = argv[j + 1];
  --*argc;
  argv[*argc] = nullptr;
}

// Takes "--name=value" out of argv; returns whether it was there.
bool TakeFlag(int* argc, char** argv, absl::string_view name,
              std::string* value) {
  std::string prefix = absl::StrCat("--", name, "=");
  bool found = false;
  for (int i = 1; i < *argc;) {
    absl::string_view arg(argv[i]);
    if (absl::StartsWith(arg, prefix)) {
      *value = std::string(arg.substr(prefix.size()));
      found = true;
      RemoveArg(argc, argv, i);
    } else {
      ++i;
    }
  }
  return found;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeBenchBackend(
    const std::string& name, const std::string& profile) {
  if (name == "sim") {
    absl::StatusOr<SimProfile> sim_profile = SimProfileNamed(profile);
    if (!sim_profile.ok()) return sim_profile.status();
    SimOptions options;
    options.device_count = kSimDevices;
    options.profile = *std::move(sim_profile);
    return std::unique_ptr<Backend>(
        std::make_unique<SimBackend>(std::move(options)));
  }
  if (name == "null") {
    return std::unique_ptr<Backend>(std::make_unique<NullBackend>(kSimDevices));
  }
  if (name == "cuda" || name == "hip") return MakeBackend(name);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --backend=", name, " (sim|cuda|hip|null)"));
}

int64_t CountedRuntimeCalls(Backend& backend) {
  auto* sim = dynamic_cast<SimBackend*>(&backend);
  return sim == nullptr ? -1 : sim->total_calls();
}

void SetCallsPerCycle(benchmark::State& state, Backend& backend,
                      int64_t before) {
  if (before < 0 || state.iterations() == 0) return;
  state.counters["calls_per_cycle"] =
      static_cast<double>(CountedRuntimeCalls(backend) - before) /
      static_cast<double>(state.iterations());
}

bool Check(benchmark::State& state, const absl::Status& status) {
  if (status.ok()) return true;
  state.SkipWithError(status.ToString().c_str());
  return false;
}

void SetRate(benchmark::State& state, const std::string& name, int64_t count) {
  state.counters[name + "_per_s"] = benchmark::Counter(
      static_cast<double>(count), benchmark::Counter::kIsRate);
}

int64_t RawIterations(const BenchEnv& env, int streams_per_iteration,
                      int budget_ms) {
  if (!env.slow_streams || streams_per_iteration <= 0) return 0;
  double per_iteration_ms = kSlowStreamPairMs * streams_per_iteration;
  return std::max<int64_t>(2,
                           static_cast<int64_t>(budget_ms / per_iteration_ms));
}

benchmark::internal::Benchmark* Tune(benchmark::internal::Benchmark* benchmark,
                                     const BenchEnv& env,
                                     int streams_per_iteration) {
  benchmark->UseRealTime();
  int64_t iterations = RawIterations(env, streams_per_iteration);
  if (iterations > 0) benchmark->Iterations(iterations);
  return benchmark;
}

int RunBenchmarkMain(int argc, char** argv, RegisterFn register_suite) {
  // Measure in a multithreaded process, as every GPU client is one (the
  // CUDA runtime and a PJRT client start threads of their own). Until a
  // process has started its first thread, glibc and libstdc++ skip atomic
  // instructions (measured on the 2-core VM of docs/benchmarks.md: a
  // std::mutex pop/push cycle 9 -> 26 ns and a shared_ptr copy 4 -> 15 ns
  // once one thread had existed), so one-thread rows would be measured on a
  // path no client runs, and every 1-vs-2-thread ratio would be skewed.
  std::thread([] {}).join();
  std::string backend_name = "sim";
  std::string profile_name = "cuda";
  std::string deadlock_detection = "default";
  TakeFlag(&argc, argv, "backend", &backend_name);
  TakeFlag(&argc, argv, "sim_profile", &profile_name);
  TakeFlag(&argc, argv, "mutex_deadlock_detection", &deadlock_detection);
  if (deadlock_detection == "off") {
    // Abseil built without NDEBUG (Debian's) checks every absl::Mutex
    // acquisition for lock-order cycles, which costs more than the lock; a
    // release build of Abseil does not. Process-wide; benchmarks only.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  } else if (deadlock_detection != "default") {
    std::fprintf(stderr,
                 "gpupool bench: --mutex_deadlock_detection=%s: want default "
                 "or off\n",
                 deadlock_detection.c_str());
    return 2;
  }

  absl::StatusOr<std::unique_ptr<Backend>> backend =
      MakeBenchBackend(backend_name, profile_name);
  if (!backend.ok()) {
    std::fprintf(stderr, "gpupool bench: --backend=%s unusable: %s\n",
                 backend_name.c_str(), backend.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<int> devices = (*backend)->DeviceCount();
  if (!devices.ok() || *devices <= 0) {
    std::fprintf(
        stderr, "gpupool bench: --backend=%s has no device: %s\n",
        backend_name.c_str(),
        devices.ok() ? "0 devices" : devices.status().ToString().c_str());
    return 2;
  }

  // A runtime's first call on a device creates its context (about 100 ms on
  // an H100): make it here, outside every timed loop, or the first benchmark
  // of the binary measures it (one iteration at ~0.1 s). The simulator and
  // the null backend have no context to make.
  const bool runtime = backend_name != "sim" && backend_name != "null";
  for (int device = 0; runtime && device < *devices; ++device) {
    absl::StatusOr<NativeStream> stream =
        (*backend)->CreateStream(device, StreamConfig{});
    if (stream.ok()) (*backend)->DestroyStream(device, *stream).IgnoreError();
  }

  BenchEnv env;
  env.backend_name = backend_name;
  env.backend = backend->get();
  env.device_count = *devices;
  if (backend_name == "sim") {
    env.profile_name = static_cast<SimBackend*>(env.backend)->profile().name;
    env.simulated = true;
    env.slow_streams =
        static_cast<SimBackend*>(env.backend)->profile().stream_create >=
        absl::Milliseconds(1);
    env.label = absl::StrCat("sim:", env.profile_name, " (simulated)");
  } else if (backend_name == "null") {
    env.simulated = true;
    env.label = "null (no runtime)";
  } else {
    env.slow_streams = backend_name == "hip";
    env.label = absl::StrCat(backend_name, " (GPU)");
  }

  register_suite(env);
  benchmark::AddCustomContext("gpupool_backend", env.backend_name);
  benchmark::AddCustomContext("gpupool_sim_profile", env.profile_name);
  benchmark::AddCustomContext("gpupool_simulated",
                              env.simulated ? "true" : "false");
  benchmark::AddCustomContext("gpupool_devices",
                              std::to_string(env.device_count));
  benchmark::AddCustomContext("gpupool_mutex_deadlock_detection",
                              deadlock_detection);

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  // Every pool was destroyed with its benchmark; the simulator now reports
  // anything the pools or baselines leaked or misused.
  int exit_code = 0;
  if (backend_name == "sim") {
    auto* sim = static_cast<SimBackend*>(env.backend);
    absl::Status leaks = sim->CheckNoLeaks();
    if (!leaks.ok() || sim->misuse_count() > 0) {
      std::fprintf(stderr, "gpupool bench: simulator saw misuse: %s (%lld)\n",
                   leaks.ToString().c_str(),
                   static_cast<long long>(sim->misuse_count()));
      exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace gpupool::bench
