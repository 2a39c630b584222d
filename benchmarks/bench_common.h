// benchmarks/bench_common.h — what every gpupool benchmark binary shares:
// the backend chosen on the command line, labels that say whether a figure is
// simulated, and a main() that registers a suite after parsing our flags.
//
// Every suite binary takes, besides Google Benchmark's own flags:
//   --backend=sim|cuda|hip|null   runtime to measure (default sim). `null` is
//                                 a benchmark-local backend whose primitives
//                                 return at once: it isolates the pool's own
//                                 cost from any runtime's.
//   --sim_profile=instant|cuda|rocm_mi300x   SimBackend latency profile
//                                 (default cuda); ignored by other backends.
//   --mutex_deadlock_detection=default|off   `off` turns off Abseil's
//                                 lock-order checking, which Abseil builds
//                                 without NDEBUG (Debian's) run on every
//                                 absl::Mutex lock, pools and floor alike.
// These are removed from argv before benchmark::Initialize sees it.
//
// Suites register their benchmarks at run time (benchmark::RegisterBenchmark)
// rather than with static BENCHMARK macros, so that iteration counts can
// follow the backend: a raw create+destroy that sleeps milliseconds (HIP, or
// the simulated MI300X) gets a fixed small iteration count.

#ifndef GPUPOOL_BENCHMARKS_BENCH_COMMON_H_
#define GPUPOOL_BENCHMARKS_BENCH_COMMON_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "gpupool/backend.h"

namespace gpupool::bench {

// The runtime a benchmark binary measures, fixed for the whole run.
struct BenchEnv {
  std::string backend_name;  // "sim", "cuda", "hip", "null"
  std::string profile_name;  // sim profile ("instant", "cuda",
                             // "rocm-mi300x"); empty for other backends
  bool simulated = false;    // sim or null: no GPU was measured
  // Raw stream create/destroy costs milliseconds here (HIP or the MI300X
  // profile): raw benchmarks get fixed, small iteration counts.
  bool slow_streams = false;
  int device_count = 0;
  // "sim:cuda (simulated)", "cuda (GPU)", ...: every benchmark's label.
  std::string label;
  Backend* backend = nullptr;  // owned by the main below
};

// A suite's registration function: registers its benchmarks for `env`.
using RegisterFn = void (*)(const BenchEnv& env);

// Parses and strips our flags, builds the backend, calls `register_suite`,
// then runs Google Benchmark. Returns the process exit code: 2 for a bad flag
// or an unusable backend, 1 when the SimBackend saw misuse (a leaked or
// double-destroyed handle), else 0.
int RunBenchmarkMain(int argc, char** argv, RegisterFn register_suite);

// Builds the backend `name` with `profile` (sim only); the same backends the
// suites use, for programs that share them.
absl::StatusOr<std::unique_ptr<Backend>> MakeBenchBackend(
    const std::string& name, const std::string& profile);

// Marks the benchmark as failed with `status` and returns false when it is
// not OK, so loops can `if (!Check(state, status)) break;`.
bool Check(benchmark::State& state, const absl::Status& status);

// Adds an "<name>_per_s" rate counter of `count` events over the measured
// time (with UseRealTime: wall time).
void SetRate(benchmark::State& state, const std::string& name, int64_t count);

// Runtime calls `backend` has counted so far (SimBackend counts every
// primitive); -1 for a backend that does not count.
int64_t CountedRuntimeCalls(Backend& backend);

// Sets the "calls_per_cycle" counter: runtime calls since `before` (a
// CountedRuntimeCalls value taken just before the timed loop) per iteration.
// Nothing when the backend does not count. The smoke tests hold it to the
// limits the pools promise (tests/CMakeLists.txt).
void SetCallsPerCycle(benchmark::State& state, Backend& backend,
                      int64_t before);

// Iterations for a benchmark whose every iteration creates and destroys
// `streams_per_iteration` streams: on a slow runtime, enough for about
// `budget_ms` of raw work (at least 2); 0 (let Google Benchmark decide)
// otherwise.
int64_t RawIterations(const BenchEnv& env, int streams_per_iteration,
                      int budget_ms = 300);

// Applies RawIterations to `benchmark` when it is non-zero; always real time.
benchmark::internal::Benchmark* Tune(benchmark::internal::Benchmark* benchmark,
                                     const BenchEnv& env,
                                     int streams_per_iteration);

}  // namespace gpupool::bench

#endif  // GPUPOOL_BENCHMARKS_BENCH_COMMON_H_
