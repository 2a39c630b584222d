// MakeCudaBackendOver: the CUDA runtime backend over entry points the caller
// resolved (libgpupool_preload.so hands it the real runtime's functions, never
// its own wrappers). Vendor-free, so that the preload layer can include it.

#ifndef GPUPOOL_SRC_BACKENDS_CUDA_CUDA_BACKEND_OVER_H_
#define GPUPOOL_SRC_BACKENDS_CUDA_CUDA_BACKEND_OVER_H_

#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"

namespace gpupool::cuda_internal {

// Resolves every entry point the backend needs through `lookup`, makes that
// table this process's CUDA runtime (UseCudaRuntime), and builds the backend.
// `source` names the runtime in messages ("the CUDA runtime /usr/lib/...").
// Unavailable naming `source` and each missing required entry point (a
// missing optional one disables its feature alone); FailedPrecondition when
// the process's table was already chosen; the runtime's own error when it
// has no usable device.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackendOver(
    absl::string_view source,
    absl::FunctionRef<void*(const char* name)> lookup);

// The CUDA driver API as a backend over `lookup` (cuda_driver_backend.cc):
// streams and events of each device's primary context. Unavailable naming
// `source` and each missing entry point, or when the driver reports no
// device.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaDriverBackendOver(
    absl::string_view source,
    absl::FunctionRef<void*(const char* name)> lookup);

}  // namespace gpupool::cuda_internal

#endif  // GPUPOOL_SRC_BACKENDS_CUDA_CUDA_BACKEND_OVER_H_
