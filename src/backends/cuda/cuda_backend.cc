// The CUDA backend: RuntimeBackend over CudaApi, and its factory, which loads
// the runtime (cuda_entry_points.h) and turns "this process cannot use CUDA"
// into a message that says why and what to do.

#include "gpupool/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/backend.h"
#include "src/backends/cuda/cuda_api.h"
#include "src/backends/cuda/cuda_entry_points.h"
#include "src/backends/cuda/cuda_errors.h"
#include "src/backends/runtime/runtime_backend.h"

namespace gpupool {
namespace cuda_internal {
namespace {

// "13.0" from cudaDriverGetVersion / cudaRuntimeGetVersion's 13000.
std::string CudaVersionString(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

// Why cudaGetDeviceCount's `error` means CUDA is unusable here. The runtime
// reports a machine with no driver at all as cudaErrorInsufficientDriver,
// whose text ("driver version is insufficient") sends people to upgrade a
// driver that does not exist; the driver version tells the two apart.
absl::Status UnusableStatus(const CudaRuntime& runtime, cudaError_t error) {
  const std::string code =
      absl::StrCat(CudaErrorName(error), " (", static_cast<int>(error), ")");
  const std::string where =
      absl::StrCat(" [runtime: ", runtime.source, "; ", kCudaRuntimeEnvVar,
                   " selects another]");
  int driver = 0;
  if (runtime.cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  std::string message;
  if (error == cudaErrorInsufficientDriver && driver == 0) {
    message = absl::StrCat(
        "cudaGetDeviceCount: ", code,
        ": no NVIDIA driver was found (cudaDriverGetVersion reports none; "
        "the runtime looks for libcuda.so.1), so this machine has no usable "
        "CUDA device");
  } else if (error == cudaErrorInsufficientDriver) {
    int runtime_version = 0;
    (void)runtime.cudaRuntimeGetVersion(&runtime_version);
    message = absl::StrCat(
        "cudaGetDeviceCount: ", code, ": the NVIDIA driver supports CUDA ",
        CudaVersionString(driver), " but the runtime is CUDA ",
        CudaVersionString(runtime_version), "; update the driver or point ",
        kCudaRuntimeEnvVar, " at a runtime no newer than the driver");
  } else {
    message = absl::StrCat("cudaGetDeviceCount: ", code, ": ",
                           CudaErrorDescription(error));
  }
  const runtime_internal::ErrorClass error_class = CudaErrorClass(error);
  return FaultError(error_class.fault, error_class.code,
                    absl::StrCat(message, where));
}

}  // namespace
}  // namespace cuda_internal

bool CudaBackendBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend() {
  using cuda_internal::CudaRuntime;
  absl::StatusOr<const CudaRuntime*> runtime =
      cuda_internal::ProcessCudaRuntime();
  if (!runtime.ok()) return runtime.status();
  int count = 0;
  const cudaError_t error = (*runtime)->cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return cuda_internal::UnusableStatus(**runtime, error);
  }
  return runtime_internal::RuntimeBackend<cuda_internal::CudaApi>::Create();
}

}  // namespace gpupool
