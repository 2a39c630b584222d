// The HIP entry points the preload exports. The C ABI is declared here
// (handles as void*, hipError_t as int) so that no vendor header is needed
// (runtime_flags.h has the flag values).

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "gpupool/backend.h"
#include "src/backends/hip/hip_backend_over.h"
#include "src/preload/interposed_symbols.h"
#include "src/preload/pooled_runtime.h"
#include "src/preload/real_symbols.h"
#include "src/preload/runtime_flags.h"

namespace gpupool::preload_internal {
namespace {

PooledRuntime& Hip() {
  static PooledRuntime* runtime = new PooledRuntime(
      {Runtime::kHip, "hip", "HIP runtime", &hip_internal::MakeHipBackendOver,
       /*destroy_waits_for_work=*/true});
  return *runtime;
}

}  // namespace
}  // namespace gpupool::preload_internal

using gpupool::preload_internal::Hip;
using gpupool::preload_internal::kErrorNotInitialized;
using gpupool::preload_internal::PoolableEventFlags;
using gpupool::preload_internal::PoolableStreamFlags;
using gpupool::preload_internal::RealFunction;
using gpupool::preload_internal::Runtime;

#define GPUPOOL_PRELOAD_ENTRY extern "C" __attribute__((visibility("default")))

GPUPOOL_PRELOAD_ENTRY int hipStreamCreateWithPriority(void** stream,
                                                      unsigned flags,
                                                      int priority) {
  static RealFunction<int(void**, unsigned, int)> real_function(
      Runtime::kHip, "hipStreamCreateWithPriority");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream, flags, priority);
  };
  if (!PoolableStreamFlags(flags)) return real();
  return Hip().CreateStream(
      stream, gpupool::preload_internal::StreamConfigOf(flags, priority), real);
}

GPUPOOL_PRELOAD_ENTRY int hipStreamCreateWithFlags(void** stream,
                                                   unsigned flags) {
  static RealFunction<int(void**, unsigned)> real_function(
      Runtime::kHip, "hipStreamCreateWithFlags");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream, flags);
  };
  if (!PoolableStreamFlags(flags)) return real();
  return Hip().CreateStream(
      stream, gpupool::preload_internal::StreamConfigOf(flags, 0), real);
}

GPUPOOL_PRELOAD_ENTRY int hipStreamCreate(void** stream) {
  static RealFunction<int(void**)> real_function(Runtime::kHip,
                                                 "hipStreamCreate");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream);
  };
  return Hip().CreateStream(
      stream, gpupool::preload_internal::StreamConfigOf(0, 0), real);
}

GPUPOOL_PRELOAD_ENTRY int hipExtStreamCreateWithCUMask(void** stream,
                                                       uint32_t words,
                                                       const uint32_t* mask) {
  static RealFunction<int(void**, uint32_t, const uint32_t*)> real_function(
      Runtime::kHip, "hipExtStreamCreateWithCUMask");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream, words, mask);
  };
  if (words == 0 || mask == nullptr) return real();
  // What hipExtStreamCreateWithCUMask creates: a blocking, normal-priority
  // stream with this mask.
  gpupool::StreamConfig config =
      gpupool::preload_internal::StreamConfigOf(0, 0);
  config.cu_mask.assign(mask, mask + words);
  return Hip().CreateStream(stream, config, real);
}

GPUPOOL_PRELOAD_ENTRY int hipStreamDestroy(void* stream) {
  static RealFunction<int(void*)> real_function(Runtime::kHip,
                                                "hipStreamDestroy");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream);
  };
  return Hip().DestroyStream(stream, real);
}

GPUPOOL_PRELOAD_ENTRY int hipEventCreateWithFlags(void** event,
                                                  unsigned flags) {
  static RealFunction<int(void**, unsigned)> real_function(
      Runtime::kHip, "hipEventCreateWithFlags");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, event, flags);
  };
  if (!PoolableEventFlags(flags)) return real();
  return Hip().CreateEvent(
      event, gpupool::preload_internal::EventConfigOf(flags), real);
}

GPUPOOL_PRELOAD_ENTRY int hipEventCreate(void** event) {
  static RealFunction<int(void**)> real_function(Runtime::kHip,
                                                 "hipEventCreate");
  auto real = [&] { return real_function.CallOr(kErrorNotInitialized, event); };
  return Hip().CreateEvent(event, gpupool::preload_internal::EventConfigOf(0),
                           real);
}

GPUPOOL_PRELOAD_ENTRY int hipEventDestroy(void* event) {
  static RealFunction<int(void*)> real_function(Runtime::kHip,
                                                "hipEventDestroy");
  auto real = [&] { return real_function.CallOr(kErrorNotInitialized, event); };
  return Hip().DestroyEvent(event, real);
}

GPUPOOL_PRELOAD_ENTRY int hipDeviceReset() {
  static RealFunction<int()> real_function(Runtime::kHip, "hipDeviceReset");
  auto real = [&] { return real_function.CallOr(kErrorNotInitialized); };
  return Hip().ResetDevice(/*device=*/-1, real);
}

namespace gpupool::preload_internal {

absl::Span<const InterposedSymbol> HipSymbols() {
  static const InterposedSymbol kSymbols[] = {
#define GPUPOOL_HIP_SYMBOL(name) \
  {#name, reinterpret_cast<void*>(&::name), Runtime::kHip},
      GPUPOOL_HIP_SYMBOL(hipStreamCreate)           //
      GPUPOOL_HIP_SYMBOL(hipStreamCreateWithFlags)  //
      GPUPOOL_HIP_SYMBOL(hipStreamCreateWithPriority)
          GPUPOOL_HIP_SYMBOL(hipExtStreamCreateWithCUMask)
              GPUPOOL_HIP_SYMBOL(hipStreamDestroy)  //
      GPUPOOL_HIP_SYMBOL(hipEventCreate)            //
      GPUPOOL_HIP_SYMBOL(hipEventCreateWithFlags)   //
      GPUPOOL_HIP_SYMBOL(hipEventDestroy)           //
      GPUPOOL_HIP_SYMBOL(hipDeviceReset)
#undef GPUPOOL_HIP_SYMBOL
  };
  return kSymbols;
}

}  // namespace gpupool::preload_internal
