// MakeHipBackendOver; see hip_backend_over.h.

#include "src/backends/hip/hip_backend_over.h"

#include <hip/hip_runtime_api.h>

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/hip_backend.h"
#include "src/backends/hip/hip_entry_points.h"

namespace gpupool::hip_internal {

// libgpupool_preload.so spells these flags without HIP's header
// (src/preload/runtime_flags.h); they must be HIP's.
static_assert(hipStreamNonBlocking == 0x1);
static_assert(hipEventBlockingSync == 0x1);
static_assert(hipEventDisableTiming == 0x2);
static_assert(hipEventInterprocess == 0x4);
static_assert(hipErrorNotInitialized == 3);

absl::StatusOr<std::unique_ptr<Backend>> MakeHipBackendOver(
    absl::string_view source,
    absl::FunctionRef<void*(const char* name)> lookup) {
  // Without ResolveHipRuntime's hint: the preload serves the runtime the
  // program loaded, whatever GPUPOOL_HIP_RUNTIME says.
  absl::StatusOr<HipRuntime> runtime = ResolveHipRuntimeAsIs(source, lookup);
  if (!runtime.ok()) return runtime.status();
  if (absl::Status status = UseHipRuntime(*std::move(runtime)); !status.ok()) {
    return status;
  }
  return MakeHipBackend();
}

}  // namespace gpupool::hip_internal
