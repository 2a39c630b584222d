// The HIP backend: RuntimeBackend over HipApi, and its factory.

#include "gpupool/hip_backend.h"

#include <memory>

#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "src/backends/hip/hip_api.h"
#include "src/backends/runtime/runtime_backend.h"

namespace gpupool {

bool HipBackendBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Backend>> MakeHipBackend() {
  return runtime_internal::RuntimeBackend<hip_internal::HipApi>::Create();
}

}  // namespace gpupool
