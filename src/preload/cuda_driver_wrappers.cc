// The CUDA driver entry points the preload exports, and cuGetProcAddress,
// through which the static CUDA runtime (and any program that asks the
// driver for its functions) reaches them. The C ABI is declared here with
// plain types (CUstream/CUevent as void*, CUresult as int, CUdevice as int):
// cuda.h renames several functions to their _v2 versions, and the preload
// exports both. Only each device's primary context is pooled (the driver
// backend refuses others, and the call then goes to the driver unchanged).

#include <dlfcn.h>

#include <cstdint>

#include "absl/types/span.h"
#include "gpupool/backend.h"
#include "src/backends/cuda/cuda_backend_over.h"
#include "src/preload/interposed_symbols.h"
#include "src/preload/pooled_runtime.h"
#include "src/preload/real_symbols.h"
#include "src/preload/runtime_call_guard.h"
#include "src/preload/runtime_flags.h"

namespace gpupool::preload_internal {
namespace {

PooledRuntime& Driver() {
  // cuStreamDestroy returns at once; the pool drains the stream.
  static PooledRuntime* runtime =
      new PooledRuntime({Runtime::kCudaDriver, "cu", "CUDA driver",
                         &cuda_internal::MakeCudaDriverBackendOver,
                         /*destroy_waits_for_work=*/false});
  return *runtime;
}

}  // namespace
}  // namespace gpupool::preload_internal

using gpupool::preload_internal::Driver;
using gpupool::preload_internal::EventConfigOf;
using gpupool::preload_internal::kErrorNotInitialized;
using gpupool::preload_internal::PoolableEventFlags;
using gpupool::preload_internal::PoolableStreamFlags;
using gpupool::preload_internal::RealFunction;
using gpupool::preload_internal::Runtime;
using gpupool::preload_internal::StreamConfigOf;

#define GPUPOOL_PRELOAD_ENTRY extern "C" __attribute__((visibility("default")))

GPUPOOL_PRELOAD_ENTRY int cuStreamCreateWithPriority(void** stream,
                                                     unsigned flags,
                                                     int priority) {
  static RealFunction<int(void**, unsigned, int)> real_function(
      Runtime::kCudaDriver, "cuStreamCreateWithPriority");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream, flags, priority);
  };
  if (!PoolableStreamFlags(flags)) return real();
  return Driver().CreateStream(stream, StreamConfigOf(flags, priority), real);
}

GPUPOOL_PRELOAD_ENTRY int cuStreamCreate(void** stream, unsigned flags) {
  static RealFunction<int(void**, unsigned)> real_function(Runtime::kCudaDriver,
                                                           "cuStreamCreate");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream, flags);
  };
  if (!PoolableStreamFlags(flags)) return real();
  return Driver().CreateStream(stream, StreamConfigOf(flags, 0), real);
}

GPUPOOL_PRELOAD_ENTRY int cuStreamDestroy_v2(void* stream) {
  static RealFunction<int(void*)> real_function(Runtime::kCudaDriver,
                                                "cuStreamDestroy_v2");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream);
  };
  return Driver().DestroyStream(stream, real);
}

GPUPOOL_PRELOAD_ENTRY int cuStreamDestroy(void* stream) {
  static RealFunction<int(void*)> real_function(Runtime::kCudaDriver,
                                                "cuStreamDestroy");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, stream);
  };
  return Driver().DestroyStream(stream, real);
}

GPUPOOL_PRELOAD_ENTRY int cuEventCreate(void** event, unsigned flags) {
  static RealFunction<int(void**, unsigned)> real_function(Runtime::kCudaDriver,
                                                           "cuEventCreate");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, event, flags);
  };
  if (!PoolableEventFlags(flags)) return real();
  return Driver().CreateEvent(event, EventConfigOf(flags), real);
}

GPUPOOL_PRELOAD_ENTRY int cuEventDestroy_v2(void* event) {
  static RealFunction<int(void*)> real_function(Runtime::kCudaDriver,
                                                "cuEventDestroy_v2");
  auto real = [&] { return real_function.CallOr(kErrorNotInitialized, event); };
  return Driver().DestroyEvent(event, real);
}

GPUPOOL_PRELOAD_ENTRY int cuEventDestroy(void* event) {
  static RealFunction<int(void*)> real_function(Runtime::kCudaDriver,
                                                "cuEventDestroy");
  auto real = [&] { return real_function.CallOr(kErrorNotInitialized, event); };
  return Driver().DestroyEvent(event, real);
}

GPUPOOL_PRELOAD_ENTRY int cuDevicePrimaryCtxReset_v2(int device) {
  static RealFunction<int(int)> real_function(Runtime::kCudaDriver,
                                              "cuDevicePrimaryCtxReset_v2");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, device);
  };
  return Driver().ResetDevice(device, real);
}

GPUPOOL_PRELOAD_ENTRY int cuDevicePrimaryCtxReset(int device) {
  static RealFunction<int(int)> real_function(Runtime::kCudaDriver,
                                              "cuDevicePrimaryCtxReset");
  auto real = [&] {
    return real_function.CallOr(kErrorNotInitialized, device);
  };
  return Driver().ResetDevice(device, real);
}

namespace {

// What cuGetProcAddress found for the caller, replaced by the preload's
// wrapper of the same exported function when there is one: the driver's
// answer is named by the symbol it is (cuStreamDestroy_v2 for a
// "cuStreamDestroy" request from a CUDA 4+ caller), and that name picks the
// wrapper, so the caller gets the version it would have got.
void InterposeProcAddress(void** function) {
  if (*function == nullptr || gpupool::preload_internal::InRuntimeCall()) {
    return;
  }
  Dl_info info;
  if (dladdr(*function, &info) == 0 || info.dli_sname == nullptr ||
      info.dli_saddr != *function) {
    return;
  }
  const gpupool::preload_internal::InterposedSymbol* symbol =
      gpupool::preload_internal::FindInterposedSymbol(info.dli_sname);
  if (symbol != nullptr && symbol->runtime == Runtime::kCudaDriver) {
    gpupool::preload_internal::RecordLibrary(Runtime::kCudaDriver, *function);
    *function = symbol->wrapper;
  }
}

}  // namespace

GPUPOOL_PRELOAD_ENTRY int cuGetProcAddress_v2(const char* symbol,
                                              void** function, int cuda_version,
                                              uint64_t flags, int* status) {
  static RealFunction<int(const char*, void**, int, uint64_t, int*)>
      real_function(Runtime::kCudaDriver, "cuGetProcAddress_v2");
  const int result = real_function.CallOr(
      kErrorNotInitialized, symbol, function, cuda_version, flags, status);
  if (result == 0 && function != nullptr) InterposeProcAddress(function);
  return result;
}

GPUPOOL_PRELOAD_ENTRY int cuGetProcAddress(const char* symbol, void** function,
                                           int cuda_version, uint64_t flags) {
  static RealFunction<int(const char*, void**, int, uint64_t)> real_function(
      Runtime::kCudaDriver, "cuGetProcAddress");
  const int result = real_function.CallOr(kErrorNotInitialized, symbol,
                                          function, cuda_version, flags);
  if (result == 0 && function != nullptr) InterposeProcAddress(function);
  return result;
}

namespace gpupool::preload_internal {

absl::Span<const InterposedSymbol> CudaDriverSymbols() {
  static const InterposedSymbol kSymbols[] = {
#define GPUPOOL_CU_SYMBOL(name) \
  {#name, reinterpret_cast<void*>(&::name), Runtime::kCudaDriver},
      GPUPOOL_CU_SYMBOL(cuStreamCreate)              //
      GPUPOOL_CU_SYMBOL(cuStreamCreateWithPriority)  //
      GPUPOOL_CU_SYMBOL(cuStreamDestroy)             //
      GPUPOOL_CU_SYMBOL(cuStreamDestroy_v2)          //
      GPUPOOL_CU_SYMBOL(cuEventCreate)               //
      GPUPOOL_CU_SYMBOL(cuEventDestroy)              //
      GPUPOOL_CU_SYMBOL(cuEventDestroy_v2)           //
      GPUPOOL_CU_SYMBOL(cuDevicePrimaryCtxReset)     //
      GPUPOOL_CU_SYMBOL(cuDevicePrimaryCtxReset_v2)  //
      GPUPOOL_CU_SYMBOL(cuGetProcAddress)            //
      GPUPOOL_CU_SYMBOL(cuGetProcAddress_v2)
#undef GPUPOOL_CU_SYMBOL
  };
  return kSymbols;
}

}  // namespace gpupool::preload_internal
