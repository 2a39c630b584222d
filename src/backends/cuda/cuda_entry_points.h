// The CUDA runtime's entry points, resolved at run time from libcudart
// (src/backends/loader/runtime_library.h): the table CudaApi forwards through,
// and the process's one instance of it.
//
// Which library: GPUPOOL_CUDA_RUNTIME when set (a path, or a name for the
// dynamic loader; nothing else is tried), else libcudart.so.13 then
// libcudart.so.12 through the dynamic loader's search, then the same two in
// /usr/local/cuda/lib64, preferring one the process has already loaded. gpupool
// is compiled against CUDA 13's headers; every entry point below has the same
// signature and error codes in CUDA 12. docs/backends.md documents this.
//
// The process's table is chosen once: by the first MakeCudaBackend() (or any
// first call through CudaApi), which loads the library above, or before that
// by UseCudaRuntime(), which installs a table resolved elsewhere (e.g. an
// LD_PRELOAD interposer handing over the real runtime's functions, resolved
// with RuntimeLibrary::FindSymbol or dlsym(RTLD_NEXT), never its own).

#ifndef GPUPOOL_SRC_BACKENDS_CUDA_CUDA_ENTRY_POINTS_H_
#define GPUPOOL_SRC_BACKENDS_CUDA_CUDA_ENTRY_POINTS_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <string>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/backends/loader/runtime_library.h"
#include "src/backends/runtime/runtime_features.h"

// The table resolves the plain names; per-thread-default-stream builds rename
// them (cudaStreamQuery_ptsz) and would also change what the null stream means.
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error \
    "gpupool's CUDA backend is built without CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

namespace gpupool {
namespace cuda_internal {

// X(name): the entry points pooling needs (streams, events, memory, and the
// device, error and capture-mode calls around them). A runtime lacking one is
// refused as a whole (Unavailable naming it), never used in part.
#define GPUPOOL_CUDA_REQUIRED_ENTRY_POINTS(X) \
  X(cudaGetErrorName)                         \
  X(cudaGetErrorString)                       \
  X(cudaGetLastError)                         \
  X(cudaDriverGetVersion)                     \
  X(cudaRuntimeGetVersion)                    \
  X(cudaGetDeviceCount)                       \
  X(cudaGetDevice)                            \
  X(cudaSetDevice)                            \
  X(cudaDeviceGetStreamPriorityRange)         \
  X(cudaStreamCreateWithPriority)             \
  X(cudaStreamDestroy)                        \
  X(cudaStreamQuery)                          \
  X(cudaStreamSynchronize)                    \
  X(cudaStreamIsCapturing)                    \
  X(cudaStreamEndCapture)                     \
  X(cudaGraphDestroy)                         \
  X(cudaStreamWaitEvent)                      \
  X(cudaThreadExchangeStreamCaptureMode)      \
  X(cudaEventCreateWithFlags)                 \
  X(cudaEventDestroy)                         \
  X(cudaEventRecord)                          \
  X(cudaEventQuery)                           \
  X(cudaEventSynchronize)                     \
  X(cudaMalloc)                               \
  X(cudaFree)                                 \
  X(cudaHostAlloc)                            \
  X(cudaFreeHost)                             \
  X(cudaMemGetInfo)

// X(name, feature): the entry points of one optional feature each
// (src/backends/runtime/runtime_features.h). A runtime lacking one is still
// used; its table holds null there, and the backend refuses that feature
// alone (Unimplemented naming the entry point).
#define GPUPOOL_CUDA_OPTIONAL_ENTRY_POINTS(X)    \
  X(cudaStreamGetCaptureInfo, kCaptureInfo)      \
  X(cudaDeviceGetAttribute, kAccessPolicyWindow) \
  X(cudaStreamSetAttribute, kAccessPolicyWindow) \
  X(cudaIpcGetMemHandle, kIpc)                   \
  X(cudaIpcOpenMemHandle, kIpc)                  \
  X(cudaIpcCloseMemHandle, kIpc)                 \
  X(cudaUserObjectCreate, kUserObjects)          \
  X(cudaGraphRetainUserObject, kUserObjects)     \
  X(cudaUserObjectRelease, kUserObjects)

// The resolved entry points, each a pointer of the function's own type, and
// where they came from.
struct CudaRuntime {
#define GPUPOOL_CUDA_FIELD(name, ...) decltype(&::name) name = nullptr;
  GPUPOOL_CUDA_REQUIRED_ENTRY_POINTS(GPUPOOL_CUDA_FIELD)
  GPUPOOL_CUDA_OPTIONAL_ENTRY_POINTS(GPUPOOL_CUDA_FIELD)
#undef GPUPOOL_CUDA_FIELD

  // The library (or other source) the entry points were resolved from, for
  // messages: "/usr/local/cuda/lib64/libcudart.so.13".
  std::string source;
};

// cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* bytes, CUdeviceptr),
// with cuda.h's types spelled out (CUdeviceptr is unsigned long long).
using DriverAddressRangeFn = int (*)(unsigned long long*,           // NOLINT
                                     size_t*, unsigned long long);  // NOLINT
// The driver's address-range query, from the libcuda.so.1 already loaded in
// the process (never loading one); nullptr when there is none yet or it
// lacks the symbol. Found once, then kept.
DriverAddressRangeFn DriverMemGetAddressRange();

// Where the CUDA runtime is looked for (see the header comment).
inline constexpr char kCudaRuntimeEnvVar[] = "GPUPOOL_CUDA_RUNTIME";
loader_internal::LibrarySearch CudaRuntimeSearch();

// Resolves every entry point through `lookup`; `source` names it in errors and
// becomes CudaRuntime::source. Unavailable naming each missing required
// symbol, with a hint to point GPUPOOL_CUDA_RUNTIME elsewhere; a missing
// optional one is left null.
absl::StatusOr<CudaRuntime> ResolveCudaRuntime(
    absl::string_view source, loader_internal::SymbolLookup lookup);

// Resolves the table from an opened library (RuntimeLibrary::Open or
// OpenFile); Unavailable naming each missing symbol and the library.
absl::StatusOr<CudaRuntime> LoadCudaRuntime(
    const loader_internal::RuntimeLibrary& library);

// The same without the GPUPOOL_CUDA_RUNTIME hint: for an interposer, which
// serves whatever runtime the program loaded.
absl::StatusOr<CudaRuntime> ResolveCudaRuntimeAsIs(
    absl::string_view source, loader_internal::SymbolLookup lookup);

// The entry points of `feature` that `runtime` lacks, ", "-separated; empty
// when it has them all.
inline std::string MissingEntryPoints(const CudaRuntime& runtime,
                                      runtime_internal::Feature feature) {
  std::string missing;
#define GPUPOOL_CUDA_MISSING(name, needed_by)            \
  if (feature == runtime_internal::Feature::needed_by && \
      runtime.name == nullptr) {                         \
    runtime_internal::AppendMissing(&missing, #name);    \
  }
  GPUPOOL_CUDA_OPTIONAL_ENTRY_POINTS(GPUPOOL_CUDA_MISSING)
#undef GPUPOOL_CUDA_MISSING
  return missing;
}

// The process's table: installed by UseCudaRuntime, else loaded by the first
// call from CudaRuntimeSearch(). The load's failure is kept and returned to
// every later caller (the environment does not change under a process).
absl::StatusOr<const CudaRuntime*> ProcessCudaRuntime();

// Makes `runtime` the process's table. FailedPrecondition once the process's
// table has been chosen (by an earlier call or by a first use); a table must
// not change under live streams.
absl::Status UseCudaRuntime(CudaRuntime runtime);

// The table CudaApi's forwards call through: the process's table, loaded by
// the first call that needs it (ProcessCudaRuntime); when that load failed, a
// table whose every entry returns cudaErrorInitializationError (and null
// names), so a stray call answers with an error instead of crashing.
// MakeCudaBackend loads (and reports the failure) before any forward runs.
namespace internal_table {
extern std::atomic<const CudaRuntime*> process_table;
const CudaRuntime& LoadOrFallback();
}  // namespace internal_table

inline const CudaRuntime& Cudart() {
  const CudaRuntime* table =
      internal_table::process_table.load(std::memory_order_acquire);
  if (ABSL_PREDICT_TRUE(table != nullptr)) return *table;
  return internal_table::LoadOrFallback();
}

}  // namespace cuda_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_CUDA_CUDA_ENTRY_POINTS_H_
