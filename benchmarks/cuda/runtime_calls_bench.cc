// runtime_calls_bench: what each CUDA runtime call a pool could make on its
// hot path costs on this GPU, beside the create+destroy it replaces. The
// figures explain the pooled stream and event cycles (docs/benchmarks.md):
// a validated return is at least one query, and on CUDA a query is only safe
// against another thread's global-mode capture inside a Relaxed capture-mode
// exchange (docs/backends.md).
//
// Like malloc_async_bench.cc this calls the CUDA runtime directly and is the
// only kind of file outside src/backends/ allowed to include a vendor header:
// it measures the runtime, not gpupool. Built in CUDA builds only; registers
// its benchmarks with --backend=cuda only.

#include <cuda_runtime.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "benchmarks/bench_common.h"

namespace gpupool::bench {
namespace {

bool CheckCuda(benchmark::State& state, cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorName(error),
                                           " (", static_cast<int>(error), ")");
  state.SkipWithError(message.c_str());
  return false;
}

// An idle non-blocking stream and a completed event on device 0, made before
// timing and destroyed after it.
struct Fixture {
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;

  bool SetUp(benchmark::State& state) {
    return CheckCuda(state, cudaSetDevice(0), "cudaSetDevice") &&
           CheckCuda(state,
                     cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                     "cudaStreamCreateWithFlags") &&
           CheckCuda(state,
                     cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                     "cudaEventCreateWithFlags") &&
           CheckCuda(state, cudaEventRecord(event, stream),
                     "cudaEventRecord") &&
           CheckCuda(state, cudaStreamSynchronize(stream),
                     "cudaStreamSynchronize");
  }
  ~Fixture() {
    if (event != nullptr) (void)cudaEventDestroy(event);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
};

// Registers `name` timing `call(fixture)` once per iteration; a call that
// fails stops the benchmark with the runtime's error.
template <typename Call>
void RegisterCall(const BenchEnv& env, const std::string& name, Call call) {
  benchmark::RegisterBenchmark(
      ("runtime/" + name).c_str(),
      [env, name, call](benchmark::State& state) {
        state.SetLabel(env.label);
        Fixture fixture;
        if (!fixture.SetUp(state)) return;
        for (auto _ : state) {
          if (!CheckCuda(state, call(fixture), name.c_str())) break;
        }
      })
      ->UseRealTime();
}

cudaError_t ExchangeQueryRestore(Fixture& f) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaError_t error = cudaThreadExchangeStreamCaptureMode(&mode);
  if (error != cudaSuccess) return error;
  const cudaError_t query = cudaStreamQuery(f.stream);
  error = cudaThreadExchangeStreamCaptureMode(&mode);
  return query != cudaSuccess ? query : error;
}

void RegisterRuntimeCallBenchmarks(const BenchEnv& env) {
  if (env.backend_name != "cuda") return;
  // The baselines a pool replaces.
  RegisterCall(env, "stream_create_destroy/non_blocking", [](Fixture&) {
    cudaStream_t stream = nullptr;
    const cudaError_t error =
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    return error != cudaSuccess ? error : cudaStreamDestroy(stream);
  });
  RegisterCall(env, "stream_create_destroy/priority_high", [](Fixture&) {
    int least = 0;
    int greatest = 0;
    cudaError_t error = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (error != cudaSuccess) return error;
    cudaStream_t stream = nullptr;
    error =
        cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest);
    return error != cudaSuccess ? error : cudaStreamDestroy(stream);
  });
  RegisterCall(env, "event_create_destroy/disable_timing", [](Fixture&) {
    cudaEvent_t event = nullptr;
    const cudaError_t error =
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    return error != cudaSuccess ? error : cudaEventDestroy(event);
  });
  // What a validated return can cost.
  RegisterCall(env, "stream_query/idle",
               [](Fixture& f) { return cudaStreamQuery(f.stream); });
  RegisterCall(env, "stream_query/idle_in_relaxed_capture_mode",
               &ExchangeQueryRestore);
  RegisterCall(env, "capture_mode_exchange/pair", [](Fixture&) {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    const cudaError_t error = cudaThreadExchangeStreamCaptureMode(&mode);
    return error != cudaSuccess ? error
                                : cudaThreadExchangeStreamCaptureMode(&mode);
  });
  RegisterCall(env, "stream_is_capturing", [](Fixture& f) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(f.stream, &status);
  });
  RegisterCall(env, "stream_set_attribute/access_policy_window_reset",
               [](Fixture& f) {
                 cudaStreamAttrValue value{};
                 return cudaStreamSetAttribute(
                     f.stream, cudaStreamAttributeAccessPolicyWindow, &value);
               });
  RegisterCall(env, "stream_get_attribute/access_policy_window",
               [](Fixture& f) {
                 cudaStreamAttrValue value{};
                 return cudaStreamGetAttribute(
                     f.stream, cudaStreamAttributeAccessPolicyWindow, &value);
               });
  RegisterCall(env, "event_query/complete",
               [](Fixture& f) { return cudaEventQuery(f.event); });
  RegisterCall(env, "event_record/idle_stream",
               [](Fixture& f) { return cudaEventRecord(f.event, f.stream); });
  // The current-device guard around a call.
  RegisterCall(env, "get_device", [](Fixture&) {
    int device = 0;
    return cudaGetDevice(&device);
  });
  RegisterCall(env, "set_device/same",
               [](Fixture&) { return cudaSetDevice(0); });
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  return gpupool::bench::RunBenchmarkMain(
      argc, argv, &gpupool::bench::RegisterRuntimeCallBenchmarks);
}
