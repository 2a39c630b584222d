// The HIP runtime's entry-point table and the process's instance of it; see
// hip_entry_points.h.

#include "src/backends/hip/hip_entry_points.h"

#include <dlfcn.h>
#include <hip/hip_runtime_api.h>

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
namespace hip_internal {

using loader_internal::EntryPoint;
using loader_internal::LibrarySearch;
using loader_internal::RuntimeLibrary;
using loader_internal::SymbolLookup;

namespace internal_table {
std::atomic<const HipRuntime*> process_table{nullptr};
}  // namespace internal_table

namespace {

// What every entry of the fallback table does: report "not initialised" (an
// Unavailable/kCaller code in the error table), or give no name.
template <typename F>
struct Fallback;
template <typename... Args>
struct Fallback<hipError_t (*)(Args...)> {
  static hipError_t Call(Args...) { return hipErrorNotInitialized; }
};
template <typename... Args>
struct Fallback<const char* (*)(Args...)> {
  static const char* Call(Args...) { return nullptr; }
};

const HipRuntime& FallbackTable() {
  static const HipRuntime* const table = [] {
    auto* fallback = new HipRuntime;
#define GPUPOOL_HIP_FALLBACK(name, type, ...) \
  fallback->name = &Fallback<type>::Call;
    GPUPOOL_HIP_REQUIRED_ENTRY_POINTS(GPUPOOL_HIP_FALLBACK)
    GPUPOOL_HIP_OPTIONAL_ENTRY_POINTS(GPUPOOL_HIP_FALLBACK)
#undef GPUPOOL_HIP_FALLBACK
    fallback->source = "no HIP runtime loaded";
    return fallback;
  }();
  return *table;
}

// The process's choice, made once (src/backends/loader/process_runtime.h).
loader_internal::ProcessRuntime<HipRuntime>& Choice() {
  static auto* const choice = new loader_internal::ProcessRuntime<HipRuntime>(
      "HIP", "UseHipRuntime", &internal_table::process_table);
  return *choice;
}

}  // namespace

LibrarySearch HipRuntimeSearch() {
  return LibrarySearch{
      "HIP",
      kHipRuntimeEnvVar,
      {"libamdhip64.so.6", "libamdhip64.so.5", "/opt/rocm/lib/libamdhip64.so.6",
       "/opt/rocm/lib/libamdhip64.so.5"}};
}

absl::StatusOr<HipRuntime> ResolveHipRuntimeAsIs(absl::string_view source,
                                                 SymbolLookup lookup) {
  HipRuntime runtime;
  const EntryPoint entries[] = {
#define GPUPOOL_HIP_REQUIRED(name, type) \
  {#name, reinterpret_cast<void**>(&runtime.name)},
#define GPUPOOL_HIP_OPTIONAL(name, type, feature) \
  {#name, reinterpret_cast<void**>(&runtime.name), /*optional=*/true},
      GPUPOOL_HIP_REQUIRED_ENTRY_POINTS(GPUPOOL_HIP_REQUIRED)
          GPUPOOL_HIP_OPTIONAL_ENTRY_POINTS(GPUPOOL_HIP_OPTIONAL)
#undef GPUPOOL_HIP_OPTIONAL
#undef GPUPOOL_HIP_REQUIRED
  };
  absl::Status status =
      loader_internal::ResolveEntryPoints(source, lookup, entries);
  if (!status.ok()) return status;
  runtime.source = std::string(source);
  return runtime;
}

absl::StatusOr<HipRuntime> ResolveHipRuntime(absl::string_view source,
                                             SymbolLookup lookup) {
  absl::StatusOr<HipRuntime> runtime = ResolveHipRuntimeAsIs(source, lookup);
  if (!runtime.ok()) {
    return FaultError(
        Fault::kCaller, absl::StatusCode::kUnavailable,
        absl::StrCat(MessageWithoutFault(runtime.status()), "; set ",
                     kHipRuntimeEnvVar,
                     " to a HIP 5 or 6 runtime (libamdhip64.so)"));
  }
  return runtime;
}

absl::StatusOr<HipRuntime> LoadHipRuntime(const RuntimeLibrary& library) {
  return ResolveHipRuntime(
      absl::StrCat("the HIP runtime ", library.path()),
      [&library](const char* name) { return library.FindSymbol(name); });
}

HipAddressRangeFn HipMemGetAddressRange() {
  static std::atomic<HipAddressRangeFn> found{nullptr};
  HipAddressRangeFn query = found.load(std::memory_order_acquire);
  if (query != nullptr) return query;
  absl::StatusOr<const HipRuntime*> runtime = ProcessHipRuntime();
  if (!runtime.ok()) return nullptr;
  // The library the table came from, already loaded: RTLD_NOLOAD.
  void* library =
      dlopen((*runtime)->source.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (library == nullptr) return nullptr;
  query = reinterpret_cast<HipAddressRangeFn>(
      dlsym(library, "hipMemGetAddressRange"));
  dlclose(library);
  if (query != nullptr) found.store(query, std::memory_order_release);
  return query;
}

absl::StatusOr<const HipRuntime*> ProcessHipRuntime() {
  return Choice().Get([]() -> absl::StatusOr<HipRuntime> {
    absl::StatusOr<RuntimeLibrary> library =
        RuntimeLibrary::Open(HipRuntimeSearch());
    if (!library.ok()) return library.status();
    return LoadHipRuntime(*library);
  });
}

absl::Status UseHipRuntime(HipRuntime runtime) {
  return Choice().Use(std::move(runtime));
}

namespace internal_table {
const HipRuntime& LoadOrFallback() {
  absl::StatusOr<const HipRuntime*> runtime = ProcessHipRuntime();
  return runtime.ok() ? **runtime : FallbackTable();
}
}  // namespace internal_table

}  // namespace hip_internal
}  // namespace gpupool
