// MakeCudaBackendOver; see cuda_backend_over.h.

#include "src/backends/cuda/cuda_backend_over.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/cuda_backend.h"
#include "src/backends/cuda/cuda_entry_points.h"

namespace gpupool::cuda_internal {

// libgpupool_preload.so spells these flags without CUDA's header
// (src/preload/runtime_flags.h); they must be CUDA's.
static_assert(cudaStreamNonBlocking == 0x1);
static_assert(cudaEventBlockingSync == 0x1);
static_assert(cudaEventDisableTiming == 0x2);
static_assert(cudaEventInterprocess == 0x4);
static_assert(cudaErrorInitializationError == 3);

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackendOver(
    absl::string_view source,
    absl::FunctionRef<void*(const char* name)> lookup) {
  // Without ResolveCudaRuntime's hint: the preload serves the runtime the
  // program loaded, whatever GPUPOOL_CUDA_RUNTIME says.
  absl::StatusOr<CudaRuntime> runtime = ResolveCudaRuntimeAsIs(source, lookup);
  if (!runtime.ok()) return runtime.status();
  if (absl::Status status = UseCudaRuntime(*std::move(runtime)); !status.ok()) {
    return status;
  }
  return MakeCudaBackend();
}

}  // namespace gpupool::cuda_internal
