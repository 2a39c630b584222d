// The CUDA backend: RuntimeBackend over CudaApi, and its factory.

#include "gpupool/cuda_backend.h"

#include <memory>

#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "src/backends/cuda/cuda_api.h"
#include "src/backends/runtime/runtime_backend.h"

namespace gpupool {

bool CudaBackendBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend() {
  return runtime_internal::RuntimeBackend<cuda_internal::CudaApi>::Create();
}

}  // namespace gpupool
