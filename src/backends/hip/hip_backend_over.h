// MakeHipBackendOver: the HIP backend over entry points the caller resolved
// (libgpupool_preload.so hands it the real runtime's functions, never its
// own wrappers). Vendor-free, so that the preload layer can include it.

#ifndef GPUPOOL_SRC_BACKENDS_HIP_HIP_BACKEND_OVER_H_
#define GPUPOOL_SRC_BACKENDS_HIP_HIP_BACKEND_OVER_H_

#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"

namespace gpupool::hip_internal {

// Resolves every entry point the backend needs through `lookup`, makes that
// table this process's HIP runtime (UseHipRuntime), and builds the backend.
// `source` names the runtime in messages ("the HIP runtime /opt/rocm/...").
// Unavailable naming `source` and each missing required entry point (a
// missing optional one disables its feature alone); FailedPrecondition when
// the process's table was already chosen; the runtime's own error when it
// has no usable device.
absl::StatusOr<std::unique_ptr<Backend>> MakeHipBackendOver(
    absl::string_view source,
    absl::FunctionRef<void*(const char* name)> lookup);

}  // namespace gpupool::hip_internal

#endif  // GPUPOOL_SRC_BACKENDS_HIP_HIP_BACKEND_OVER_H_
