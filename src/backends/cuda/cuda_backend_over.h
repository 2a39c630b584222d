// MakeCudaBackendOver: the CUDA runtime backend over entry points the caller
// resolved (libgpupool_preload.so hands it the real runtime's functions, never
// its own wrappers). Vendor-free, so that the preload layer can include it.

#ifndef GPUPOOL_SRC_BACKENDS_CUDA_CUDA_BACKEND_OVER_H_
#define GPUPOOL_SRC_BACKENDS_CUDA_CUDA_BACKEND_OVER_H_

#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"

namespace gpupool::cuda_internal {

// Resolves every entry point the backend needs through `lookup`, makes that
// table this process's CUDA runtime (UseCudaRuntime), and builds the backend.
// Unavailable naming each missing entry point; FailedPrecondition when the
// process's table was already chosen; the runtime's own error when it has no
// usable device.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackendOver(
    absl::FunctionRef<void*(const char* name)> lookup);

// The CUDA driver API as a backend over `lookup` (cuda_driver_backend.cc):
// streams and events of each device's primary context. Unavailable naming
// each missing entry point, or when the driver reports no device.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaDriverBackendOver(
    absl::FunctionRef<void*(const char* name)> lookup);

}  // namespace gpupool::cuda_internal

#endif  // GPUPOOL_SRC_BACKENDS_CUDA_CUDA_BACKEND_OVER_H_
