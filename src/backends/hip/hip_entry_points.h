// The HIP runtime's entry points, resolved at run time from libamdhip64
// (src/backends/loader/runtime_library.h): the table HipApi forwards through,
// and the process's one instance of it.
//
// Which library: GPUPOOL_HIP_RUNTIME when set (a path, or a name for the
// dynamic loader; nothing else is tried), else libamdhip64.so.6 then
// libamdhip64.so.5 through the dynamic loader's search, then the same two in
// /opt/rocm/lib, preferring one the process has already loaded. gpupool is
// compiled against HIP 5.2's headers; every entry point below has the same
// signature and error codes in ROCm 6. docs/backends.md documents this.
//
// The process's table is chosen once: by the first MakeHipBackend() (or any
// first call through HipApi), which loads the library above, or before that by
// UseHipRuntime(), which installs a table resolved elsewhere (e.g. an
// LD_PRELOAD interposer handing over the real runtime's functions, resolved
// with RuntimeLibrary::FindSymbol or dlsym(RTLD_NEXT), never its own).

#ifndef GPUPOOL_SRC_BACKENDS_HIP_HIP_ENTRY_POINTS_H_
#define GPUPOOL_SRC_BACKENDS_HIP_HIP_ENTRY_POINTS_H_

#include <hip/hip_runtime_api.h>

#include <atomic>
#include <string>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/backends/loader/runtime_library.h"
#include "src/backends/runtime/runtime_features.h"

namespace gpupool {
namespace hip_internal {

// hipMalloc and hipHostMalloc are overloaded (C++ templates over T**): the
// table holds the C entry points, spelled out.
using HipMallocFn = hipError_t (*)(void**, size_t);
using HipHostMallocFn = hipError_t (*)(void**, size_t, unsigned int);
// The graph user-object calls came after HIP 5.2, whose headers gpupool is
// compiled against: their types are spelled out (hipUserObject_t is an
// opaque pointer; HIP's own declarations have the same shape as CUDA's).
using HipUserObject = void*;
using HipUserObjectCreateFn = hipError_t (*)(HipUserObject*, void*,
                                             void (*)(void*), unsigned int,
                                             unsigned int);
using HipGraphRetainUserObjectFn = hipError_t (*)(hipGraph_t, HipUserObject,
                                                  unsigned int, unsigned int);
using HipUserObjectReleaseFn = hipError_t (*)(HipUserObject, unsigned int);

// X(name, type): the entry points pooling needs (streams, events, memory,
// and the device, error and capture-mode calls around them). A runtime
// lacking one is refused as a whole (Unavailable naming it), never used in
// part.
#define GPUPOOL_HIP_REQUIRED_ENTRY_POINTS(X)                               \
  X(hipGetErrorName, decltype(&::hipGetErrorName))                         \
  X(hipGetErrorString, decltype(&::hipGetErrorString))                     \
  X(hipGetLastError, decltype(&::hipGetLastError))                         \
  X(hipDriverGetVersion, decltype(&::hipDriverGetVersion))                 \
  X(hipRuntimeGetVersion, decltype(&::hipRuntimeGetVersion))               \
  X(hipGetDeviceCount, decltype(&::hipGetDeviceCount))                     \
  X(hipGetDevice, decltype(&::hipGetDevice))                               \
  X(hipSetDevice, decltype(&::hipSetDevice))                               \
  X(hipDeviceGetStreamPriorityRange,                                       \
    decltype(&::hipDeviceGetStreamPriorityRange))                          \
  X(hipStreamCreateWithPriority, decltype(&::hipStreamCreateWithPriority)) \
  X(hipStreamDestroy, decltype(&::hipStreamDestroy))                       \
  X(hipStreamQuery, decltype(&::hipStreamQuery))                           \
  X(hipStreamSynchronize, decltype(&::hipStreamSynchronize))               \
  X(hipStreamIsCapturing, decltype(&::hipStreamIsCapturing))               \
  X(hipStreamEndCapture, decltype(&::hipStreamEndCapture))                 \
  X(hipGraphDestroy, decltype(&::hipGraphDestroy))                         \
  X(hipStreamWaitEvent, decltype(&::hipStreamWaitEvent))                   \
  X(hipThreadExchangeStreamCaptureMode,                                    \
    decltype(&::hipThreadExchangeStreamCaptureMode))                       \
  X(hipEventCreateWithFlags, decltype(&::hipEventCreateWithFlags))         \
  X(hipEventDestroy, decltype(&::hipEventDestroy))                         \
  X(hipEventRecord, decltype(&::hipEventRecord))                           \
  X(hipEventQuery, decltype(&::hipEventQuery))                             \
  X(hipEventSynchronize, decltype(&::hipEventSynchronize))                 \
  X(hipMalloc, HipMallocFn)                                                \
  X(hipFree, decltype(&::hipFree))                                         \
  X(hipHostMalloc, HipHostMallocFn)                                        \
  X(hipHostFree, decltype(&::hipHostFree))                                 \
  X(hipMemGetInfo, decltype(&::hipMemGetInfo))

// X(name, type, feature): the entry points of one optional feature each
// (src/backends/runtime/runtime_features.h). A runtime lacking one is still
// used; its table holds null there, and the backend refuses that feature
// alone (Unimplemented naming the entry point).
#define GPUPOOL_HIP_OPTIONAL_ENTRY_POINTS(X)                                 \
  X(hipStreamGetCaptureInfo, decltype(&::hipStreamGetCaptureInfo),           \
    kCaptureInfo)                                                            \
  X(hipExtStreamCreateWithCUMask, decltype(&::hipExtStreamCreateWithCUMask), \
    kCuMask)                                                                 \
  X(hipIpcGetMemHandle, decltype(&::hipIpcGetMemHandle), kIpc)               \
  X(hipIpcOpenMemHandle, decltype(&::hipIpcOpenMemHandle), kIpc)             \
  X(hipIpcCloseMemHandle, decltype(&::hipIpcCloseMemHandle), kIpc)           \
  X(hipUserObjectCreate, HipUserObjectCreateFn, kUserObjects)                \
  X(hipGraphRetainUserObject, HipGraphRetainUserObjectFn, kUserObjects)      \
  X(hipUserObjectRelease, HipUserObjectReleaseFn, kUserObjects)

// The resolved entry points, each a pointer of the function's own type, and
// where they came from.
struct HipRuntime {
#define GPUPOOL_HIP_FIELD(name, type, ...) type name = nullptr;
  GPUPOOL_HIP_REQUIRED_ENTRY_POINTS(GPUPOOL_HIP_FIELD)
  GPUPOOL_HIP_OPTIONAL_ENTRY_POINTS(GPUPOOL_HIP_FIELD)
#undef GPUPOOL_HIP_FIELD

  // The library (or other source) the entry points were resolved from, for
  // messages: "the HIP runtime /opt/rocm/lib/libamdhip64.so.6".
  std::string source;
};

// Where the HIP runtime is looked for (see the header comment).
inline constexpr char kHipRuntimeEnvVar[] = "GPUPOOL_HIP_RUNTIME";
loader_internal::LibrarySearch HipRuntimeSearch();

// Resolves every entry point through `lookup`; `source` names it in errors and
// becomes HipRuntime::source. Unavailable naming each missing required
// symbol, with a hint to point GPUPOOL_HIP_RUNTIME elsewhere; a missing
// optional one is left null.
absl::StatusOr<HipRuntime> ResolveHipRuntime(
    absl::string_view source, loader_internal::SymbolLookup lookup);

// Resolves the table from an opened library (RuntimeLibrary::Open or
// OpenFile); Unavailable naming each missing symbol and the library.
absl::StatusOr<HipRuntime> LoadHipRuntime(
    const loader_internal::RuntimeLibrary& library);

// The same without the GPUPOOL_HIP_RUNTIME hint: for an interposer, which
// serves whatever runtime the program loaded.
absl::StatusOr<HipRuntime> ResolveHipRuntimeAsIs(
    absl::string_view source, loader_internal::SymbolLookup lookup);

// The entry points of `feature` that `runtime` lacks, ", "-separated; empty
// when it has them all.
inline std::string MissingEntryPoints(const HipRuntime& runtime,
                                      runtime_internal::Feature feature) {
  std::string missing;
#define GPUPOOL_HIP_MISSING(name, type, needed_by)       \
  if (feature == runtime_internal::Feature::needed_by && \
      runtime.name == nullptr) {                         \
    runtime_internal::AppendMissing(&missing, #name);    \
  }
  GPUPOOL_HIP_OPTIONAL_ENTRY_POINTS(GPUPOOL_HIP_MISSING)
#undef GPUPOOL_HIP_MISSING
  return missing;
}

// The process's table: installed by UseHipRuntime, else loaded by the first
// call from HipRuntimeSearch(). The load's failure is kept and returned to
// every later caller (the environment does not change under a process).
absl::StatusOr<const HipRuntime*> ProcessHipRuntime();

// Makes `runtime` the process's table. FailedPrecondition once the process's
// table has been chosen (by an earlier call or by a first use); a table must
// not change under live streams.
absl::Status UseHipRuntime(HipRuntime runtime);

// The table HipApi's forwards call through: the process's table, loaded by
// the first call that needs it (ProcessHipRuntime); when that load failed, a
// table whose every entry returns hipErrorNotInitialized (and null
// names), so a stray call answers with an error instead of crashing.
// MakeHipBackend loads (and reports the failure) before any forward runs.
namespace internal_table {
extern std::atomic<const HipRuntime*> process_table;
const HipRuntime& LoadOrFallback();
}  // namespace internal_table

// hipMemGetAddressRange(hipDeviceptr_t* base, size_t* bytes, hipDeviceptr_t),
// looked up in the process's runtime library (never loading another);
// nullptr when that runtime lacks it. Found once, then kept.
using HipAddressRangeFn = hipError_t (*)(void**, size_t*, void*);
HipAddressRangeFn HipMemGetAddressRange();

inline const HipRuntime& Hip() {
  const HipRuntime* table =
      internal_table::process_table.load(std::memory_order_acquire);
  if (ABSL_PREDICT_TRUE(table != nullptr)) return *table;
  return internal_table::LoadOrFallback();
}

}  // namespace hip_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_HIP_HIP_ENTRY_POINTS_H_
