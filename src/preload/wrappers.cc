// The entry points the preload exports: one table per runtime, each row an
// exported name and the operation it performs (wrappers.h), and the
// runtime's traits (how its PooledRuntime is built). A runtime this build
// of the preload does not interpose has an empty symbol table.

#include "src/preload/wrappers.h"

#include <dlfcn.h>

#include <cstdint>

#include "absl/types/span.h"
#include "src/preload/interposed_symbols.h"
#include "src/preload/pooled_runtime.h"
#include "src/preload/real_symbols.h"
#include "src/preload/runtime_call_guard.h"

#ifdef GPUPOOL_PRELOAD_HIP
#include "src/backends/hip/hip_backend_over.h"
#endif
#if defined(GPUPOOL_PRELOAD_CUDA) || defined(GPUPOOL_PRELOAD_CUDA_DRIVER)
#include "src/backends/cuda/cuda_backend_over.h"
#endif

namespace gpupool::preload_internal {

void InterposeProcAddress(Runtime runtime, void** function) {
  if (*function == nullptr || InRuntimeCall()) return;
  Dl_info info;
  if (dladdr(*function, &info) == 0 || info.dli_sname == nullptr ||
      info.dli_saddr != *function) {
    return;
  }
  const InterposedSymbol* symbol = FindInterposedSymbol(info.dli_sname);
  if (symbol != nullptr && symbol->runtime == runtime) {
    RecordLibrary(runtime, *function);
    *function = symbol->wrapper;
  }
}

// --- HIP -----------------------------------------------------------------

#ifdef GPUPOOL_PRELOAD_HIP
struct HipTraits {
  static constexpr Runtime kRuntime = Runtime::kHip;
  // hipStreamDestroy returns once the stream's work is done; so does the
  // pooled destroy.
  static constexpr RuntimeDescription kDescription = {
      kRuntime, "hip", "HIP runtime", &hip_internal::MakeHipBackendOver,
      /*destroy_waits_for_work=*/true};
};
#endif

// --- The CUDA runtime (shared libcudart, or dlopen'ed) ------------------

#ifdef GPUPOOL_PRELOAD_CUDA
struct CudaRuntimeTraits {
  static constexpr Runtime kRuntime = Runtime::kCudaRuntime;
  // cudaStreamDestroy returns at once; the pool drains the stream.
  static constexpr RuntimeDescription kDescription = {
      kRuntime, "cuda", "CUDA runtime", &cuda_internal::MakeCudaBackendOver,
      /*destroy_waits_for_work=*/false};
};
#endif

// --- The CUDA driver ---------------------------------------------------------
// cuda.h renames several functions to their _v2 versions; the preload
// exports both. The static CUDA runtime reaches the driver through
// cuGetProcAddress, which is interposed so that it hands out these wrappers.
// Only each device's primary context is pooled (the driver backend refuses
// others, and the call then goes to the driver unchanged).

#ifdef GPUPOOL_PRELOAD_CUDA_DRIVER
struct CudaDriverTraits {
  static constexpr Runtime kRuntime = Runtime::kCudaDriver;
  // cuStreamDestroy returns at once; the pool drains the stream.
  static constexpr RuntimeDescription kDescription = {
      kRuntime, "cu", "CUDA driver", &cuda_internal::MakeCudaDriverBackendOver,
      /*destroy_waits_for_work=*/false};
};
#endif

}  // namespace gpupool::preload_internal

// X(exported name, operation): the tables.
#define GPUPOOL_HIP_WRAPPERS(X)                            \
  X(hipStreamCreate, StreamCreate)                         \
  X(hipStreamCreateWithFlags, StreamCreateWithFlags)       \
  X(hipStreamCreateWithPriority, StreamCreateWithPriority) \
  X(hipExtStreamCreateWithCUMask, StreamCreateWithCuMask)  \
  X(hipStreamDestroy, StreamDestroy)                       \
  X(hipEventCreate, EventCreate)                           \
  X(hipEventCreateWithFlags, EventCreateWithFlags)         \
  X(hipEventDestroy, EventDestroy)                         \
  X(hipDeviceReset, CurrentDeviceReset)

#define GPUPOOL_CUDA_RUNTIME_WRAPPERS(X)                    \
  X(cudaStreamCreate, StreamCreate)                         \
  X(cudaStreamCreateWithFlags, StreamCreateWithFlags)       \
  X(cudaStreamCreateWithPriority, StreamCreateWithPriority) \
  X(cudaStreamDestroy, StreamDestroy)                       \
  X(cudaEventCreate, EventCreate)                           \
  X(cudaEventCreateWithFlags, EventCreateWithFlags)         \
  X(cudaEventDestroy, EventDestroy)                         \
  X(cudaDeviceReset, CurrentDeviceReset)

#define GPUPOOL_CUDA_DRIVER_WRAPPERS(X)                   \
  X(cuStreamCreate, StreamCreateWithFlags)                \
  X(cuStreamCreateWithPriority, StreamCreateWithPriority) \
  X(cuStreamDestroy, StreamDestroy)                       \
  X(cuStreamDestroy_v2, StreamDestroy)                    \
  X(cuEventCreate, EventCreateWithFlags)                  \
  X(cuEventDestroy, EventDestroy)                         \
  X(cuEventDestroy_v2, EventDestroy)                      \
  X(cuDevicePrimaryCtxReset, DeviceReset)                 \
  X(cuDevicePrimaryCtxReset_v2, DeviceReset)              \
  X(cuGetProcAddress, GetProcAddress)                     \
  X(cuGetProcAddress_v2, GetProcAddressWithStatus)

// The exported functions.
#ifdef GPUPOOL_PRELOAD_HIP
#define GPUPOOL_HIP_WRAPPER(name, Op) \
  GPUPOOL_PRELOAD_WRAPPER(gpupool::preload_internal::HipTraits, name, Op)
GPUPOOL_HIP_WRAPPERS(GPUPOOL_HIP_WRAPPER)
#endif
#ifdef GPUPOOL_PRELOAD_CUDA
#define GPUPOOL_CUDA_RUNTIME_WRAPPER(name, Op)                                \
  GPUPOOL_PRELOAD_WRAPPER(gpupool::preload_internal::CudaRuntimeTraits, name, \
                          Op)
GPUPOOL_CUDA_RUNTIME_WRAPPERS(GPUPOOL_CUDA_RUNTIME_WRAPPER)
#endif
#ifdef GPUPOOL_PRELOAD_CUDA_DRIVER
#define GPUPOOL_CUDA_DRIVER_WRAPPER(name, Op) \
  GPUPOOL_PRELOAD_WRAPPER(gpupool::preload_internal::CudaDriverTraits, name, Op)
GPUPOOL_CUDA_DRIVER_WRAPPERS(GPUPOOL_CUDA_DRIVER_WRAPPER)
#endif

namespace gpupool::preload_internal {

// The symbol tables: built at compile time, readable before any constructor
// has run (a loader, or a sanitizer runtime, may call dlsym that early).

absl::Span<const InterposedSymbol> HipSymbols() {
#ifdef GPUPOOL_PRELOAD_HIP
#define GPUPOOL_HIP_SYMBOL(name, Op) GPUPOOL_PRELOAD_SYMBOL(HipTraits, name, Op)
  static const InterposedSymbol kSymbols[] = {
      GPUPOOL_HIP_WRAPPERS(GPUPOOL_HIP_SYMBOL)};
  return kSymbols;
#else
  return {};
#endif
}

absl::Span<const InterposedSymbol> CudaRuntimeSymbols() {
#ifdef GPUPOOL_PRELOAD_CUDA
#define GPUPOOL_CUDA_RUNTIME_SYMBOL(name, Op) \
  GPUPOOL_PRELOAD_SYMBOL(CudaRuntimeTraits, name, Op)
  static const InterposedSymbol kSymbols[] = {
      GPUPOOL_CUDA_RUNTIME_WRAPPERS(GPUPOOL_CUDA_RUNTIME_SYMBOL)};
  return kSymbols;
#else
  return {};
#endif
}

absl::Span<const InterposedSymbol> CudaDriverSymbols() {
#ifdef GPUPOOL_PRELOAD_CUDA_DRIVER
#define GPUPOOL_CUDA_DRIVER_SYMBOL(name, Op) \
  GPUPOOL_PRELOAD_SYMBOL(CudaDriverTraits, name, Op)
  static const InterposedSymbol kSymbols[] = {
      GPUPOOL_CUDA_DRIVER_WRAPPERS(GPUPOOL_CUDA_DRIVER_SYMBOL)};
  return kSymbols;
#else
  return {};
#endif
}

}  // namespace gpupool::preload_internal
