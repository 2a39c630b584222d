// The CUDA runtime entry points the preload exports (for programs linked
// against the shared libcudart, or loading it with dlopen; the static
// runtime is reached through the driver instead). The C ABI is declared here
// (handles as void*, cudaError_t as int) so that no vendor header is needed
// (runtime_flags.h has the flag values).

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "gpupool/backend.h"
#include "src/backends/cuda/cuda_backend_over.h"
#include "src/preload/interposed_symbols.h"
#include "src/preload/pooled_runtime.h"
#include "src/preload/real_symbols.h"
#include "src/preload/runtime_flags.h"

namespace gpupool::preload_internal {
namespace {

PooledRuntime& Cuda() {
  // cudaStreamDestroy returns at once; the pool drains the stream.
  static PooledRuntime* runtime =
      new PooledRuntime({Runtime::kCudaRuntime, "cuda", "CUDA runtime",
                         &cuda_internal::MakeCudaBackendOver,
                         /*destroy_waits_for_work=*/false});
  return *runtime;
}

}  // namespace
}  // namespace gpupool::preload_internal

using gpupool::preload_internal::Cuda;
using gpupool::preload_internal::kErrorNotInitialized;
using gpupool::preload_internal::PoolableEventFlags;
using gpupool::preload_internal::PoolableStreamFlags;
using gpupool::preload_internal::RealFunction;
using gpupool::preload_internal::Runtime;

#define GPUPOOL_PRELOAD_ENTRY extern "C" __attribute__((visibility("default")))

GPUPOOL_PRELOAD_ENTRY int cudaStreamCreateWithPriority(void** stream,
                                                       unsigned flags,
                                                       int priority) {
  static RealFunction<int(void**, unsigned, int)> real_function(
      Runtime::kCudaRuntime, "cudaStreamCreateWithPriority");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream, flags, priority);
  };
  if (!PoolableStreamFlags(flags)) return real();
  return Cuda().CreateStream(
      stream, gpupool::preload_internal::StreamConfigOf(flags, priority), real);
}

GPUPOOL_PRELOAD_ENTRY int cudaStreamCreateWithFlags(void** stream,
                                                    unsigned flags) {
  static RealFunction<int(void**, unsigned)> real_function(
      Runtime::kCudaRuntime, "cudaStreamCreateWithFlags");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream, flags);
  };
  if (!PoolableStreamFlags(flags)) return real();
  return Cuda().CreateStream(
      stream, gpupool::preload_internal::StreamConfigOf(flags, 0), real);
}

GPUPOOL_PRELOAD_ENTRY int cudaStreamCreate(void** stream) {
  static RealFunction<int(void**)> real_function(Runtime::kCudaRuntime,
                                                 "cudaStreamCreate");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream);
  };
  return Cuda().CreateStream(
      stream, gpupool::preload_internal::StreamConfigOf(0, 0), real);
}

GPUPOOL_PRELOAD_ENTRY int cudaStreamDestroy(void* stream) {
  static RealFunction<int(void*)> real_function(Runtime::kCudaRuntime,
                                                "cudaStreamDestroy");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream);
  };
  return Cuda().DestroyStream(stream, real);
}

GPUPOOL_PRELOAD_ENTRY int cudaEventCreateWithFlags(void** event,
                                                   unsigned flags) {
  static RealFunction<int(void**, unsigned)> real_function(
      Runtime::kCudaRuntime, "cudaEventCreateWithFlags");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, event, flags);
  };
  if (!PoolableEventFlags(flags)) return real();
  return Cuda().CreateEvent(
      event, gpupool::preload_internal::EventConfigOf(flags), real);
}

GPUPOOL_PRELOAD_ENTRY int cudaEventCreate(void** event) {
  static RealFunction<int(void**)> real_function(Runtime::kCudaRuntime,
                                                 "cudaEventCreate");
  auto real = [&] { return real_function.CallOr(kErrorNotInitialized, event); };
  return Cuda().CreateEvent(event, gpupool::preload_internal::EventConfigOf(0),
                            real);
}

GPUPOOL_PRELOAD_ENTRY int cudaEventDestroy(void* event) {
  static RealFunction<int(void*)> real_function(Runtime::kCudaRuntime,
                                                "cudaEventDestroy");
  auto real = [&] { return real_function.CallOr(kErrorNotInitialized, event); };
  return Cuda().DestroyEvent(event, real);
}

GPUPOOL_PRELOAD_ENTRY int cudaDeviceReset() {
  static RealFunction<int()> real_function(Runtime::kCudaRuntime,
                                           "cudaDeviceReset");
  auto real = [&] { return real_function.CallOr(kErrorNotInitialized); };
  return Cuda().ResetDevice(/*device=*/-1, real);
}

namespace gpupool::preload_internal {

absl::Span<const InterposedSymbol> CudaRuntimeSymbols() {
  static const InterposedSymbol kSymbols[] = {
#define GPUPOOL_CUDA_SYMBOL(name) \
  {#name, reinterpret_cast<void*>(&::name), Runtime::kCudaRuntime},
      GPUPOOL_CUDA_SYMBOL(cudaStreamCreate)           //
      GPUPOOL_CUDA_SYMBOL(cudaStreamCreateWithFlags)  //
      GPUPOOL_CUDA_SYMBOL(cudaStreamCreateWithPriority)
          GPUPOOL_CUDA_SYMBOL(cudaStreamDestroy)     //
      GPUPOOL_CUDA_SYMBOL(cudaEventCreate)           //
      GPUPOOL_CUDA_SYMBOL(cudaEventCreateWithFlags)  //
      GPUPOOL_CUDA_SYMBOL(cudaEventDestroy)          //
      GPUPOOL_CUDA_SYMBOL(cudaDeviceReset)
#undef GPUPOOL_CUDA_SYMBOL
  };
  return kSymbols;
}

}  // namespace gpupool::preload_internal
