// MakeBackend: backend selection by name, and the factories of runtime
// backends this build does not contain (they report why instead of failing
// to link, so callers and tests compile the same everywhere).

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/cuda_backend.h"
#include "gpupool/hip_backend.h"
#include "gpupool/sim_backend.h"

namespace gpupool {

#if !defined(GPUPOOL_HAVE_CUDA)
bool CudaBackendBuilt() { return false; }

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend() {
  return FaultError(Fault::kCaller, absl::StatusCode::kUnavailable,
                    "gpupool was built without the CUDA backend "
                    "(GPUPOOL_WITH_CUDA=OFF or toolkit not found)");
}
#endif  // !GPUPOOL_HAVE_CUDA

#if !defined(GPUPOOL_HAVE_HIP)
bool HipBackendBuilt() { return false; }

absl::StatusOr<std::unique_ptr<Backend>> MakeHipBackend() {
  return FaultError(Fault::kCaller, absl::StatusCode::kUnavailable,
                    "gpupool was built without the HIP backend "
                    "(GPUPOOL_WITH_HIP=OFF or libamdhip64/hip headers not "
                    "found)");
}
#endif  // !GPUPOOL_HAVE_HIP

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(std::string_view name) {
  if (name == "sim") return std::make_unique<SimBackend>();
  if (name == "cuda") return MakeCudaBackend();
  if (name == "hip") return MakeHipBackend();
  return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                    absl::StrCat("unknown gpupool backend \"",
                                 absl::string_view(name.data(), name.size()),
                                 "\"; valid names: cuda, hip, sim"));
}

}  // namespace gpupool
