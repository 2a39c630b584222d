// The CUDA runtime's entry-point table and the process's instance of it; see
// cuda_entry_points.h.

#include "src/backends/cuda/cuda_entry_points.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/loader/process_runtime.h"
#include "src/backends/loader/runtime_library.h"

namespace gpupool {
namespace cuda_internal {

using loader_internal::EntryPoint;
using loader_internal::LibrarySearch;
using loader_internal::RuntimeLibrary;
using loader_internal::SymbolLookup;

namespace internal_table {
std::atomic<const CudaRuntime*> process_table{nullptr};
}  // namespace internal_table

DriverAddressRangeFn DriverMemGetAddressRange() {
  static std::atomic<DriverAddressRangeFn> found{nullptr};
  DriverAddressRangeFn query = found.load(std::memory_order_acquire);
  if (query != nullptr) return query;
  // RTLD_NOLOAD: only the driver the runtime already loaded; not found yet
  // (the runtime loads it at its first call) is looked for again next time.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (driver == nullptr) return nullptr;
  query = reinterpret_cast<DriverAddressRangeFn>(
      dlsym(driver, "cuMemGetAddressRange_v2"));
  dlclose(driver);  // the runtime's own reference keeps it loaded
  if (query != nullptr) found.store(query, std::memory_order_release);
  return query;
}

namespace {

// What every entry of the fallback table does: report "not initialised" (an
// Unavailable/kCaller code in the error table), or give no name.
template <typename F>
struct Fallback;
template <typename... Args>
struct Fallback<cudaError_t (*)(Args...)> {
  static cudaError_t Call(Args...) { return cudaErrorInitializationError; }
};
template <typename... Args>
struct Fallback<const char* (*)(Args...)> {
  static const char* Call(Args...) { return nullptr; }
};

const CudaRuntime& FallbackTable() {
  static const CudaRuntime* const table = [] {
    auto* fallback = new CudaRuntime;
#define GPUPOOL_CUDA_FALLBACK(name, ...) \
  fallback->name = &Fallback<decltype(&::name)>::Call;
    GPUPOOL_CUDA_REQUIRED_ENTRY_POINTS(GPUPOOL_CUDA_FALLBACK)
    GPUPOOL_CUDA_OPTIONAL_ENTRY_POINTS(GPUPOOL_CUDA_FALLBACK)
#undef GPUPOOL_CUDA_FALLBACK
    fallback->source = "no CUDA runtime loaded";
    return fallback;
  }();
  return *table;
}

// The process's choice, made once (src/backends/loader/process_runtime.h).
loader_internal::ProcessRuntime<CudaRuntime>& Choice() {
  static auto* const choice = new loader_internal::ProcessRuntime<CudaRuntime>(
      "CUDA", "UseCudaRuntime", &internal_table::process_table);
  return *choice;
}

}  // namespace

LibrarySearch CudaRuntimeSearch() {
  return LibrarySearch{"CUDA",
                       kCudaRuntimeEnvVar,
                       {"libcudart.so.13", "libcudart.so.12",
                        "/usr/local/cuda/lib64/libcudart.so.13",
                        "/usr/local/cuda/lib64/libcudart.so.12"}};
}

absl::StatusOr<CudaRuntime> ResolveCudaRuntimeAsIs(absl::string_view source,
                                                   SymbolLookup lookup) {
  CudaRuntime runtime;
  const EntryPoint entries[] = {
#define GPUPOOL_CUDA_REQUIRED(name) \
  {#name, reinterpret_cast<void**>(&runtime.name)},
#define GPUPOOL_CUDA_OPTIONAL(name, feature) \
  {#name, reinterpret_cast<void**>(&runtime.name), /*optional=*/true},
      GPUPOOL_CUDA_REQUIRED_ENTRY_POINTS(GPUPOOL_CUDA_REQUIRED)
          GPUPOOL_CUDA_OPTIONAL_ENTRY_POINTS(GPUPOOL_CUDA_OPTIONAL)
#undef GPUPOOL_CUDA_OPTIONAL
#undef GPUPOOL_CUDA_REQUIRED
  };
  absl::Status status =
      loader_internal::ResolveEntryPoints(source, lookup, entries);
  if (!status.ok()) return status;
  runtime.source = std::string(source);
  return runtime;
}

absl::StatusOr<CudaRuntime> ResolveCudaRuntime(absl::string_view source,
                                               SymbolLookup lookup) {
  absl::StatusOr<CudaRuntime> runtime = ResolveCudaRuntimeAsIs(source, lookup);
  if (!runtime.ok()) {
    return FaultError(
        Fault::kCaller, absl::StatusCode::kUnavailable,
        absl::StrCat(MessageWithoutFault(runtime.status()), "; set ",
                     kCudaRuntimeEnvVar,
                     " to a CUDA 12 or 13 runtime (libcudart.so.13)"));
  }
  return runtime;
}

absl::StatusOr<CudaRuntime> LoadCudaRuntime(const RuntimeLibrary& library) {
  return ResolveCudaRuntime(
      absl::StrCat("the CUDA runtime ", library.path()),
      [&library](const char* name) { return library.FindSymbol(name); });
}

absl::StatusOr<const CudaRuntime*> ProcessCudaRuntime() {
  return Choice().Get([]() -> absl::StatusOr<CudaRuntime> {
    absl::StatusOr<RuntimeLibrary> library =
        RuntimeLibrary::Open(CudaRuntimeSearch());
    if (!library.ok()) return library.status();
    return LoadCudaRuntime(*library);
  });
}

absl::Status UseCudaRuntime(CudaRuntime runtime) {
  return Choice().Use(std::move(runtime));
}

namespace internal_table {
const CudaRuntime& LoadOrFallback() {
  absl::StatusOr<const CudaRuntime*> runtime = ProcessCudaRuntime();
  return runtime.ok() ? **runtime : FallbackTable();
}
}  // namespace internal_table

}  // namespace cuda_internal
}  // namespace gpupool
