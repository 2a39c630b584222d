// The HIP backend: RuntimeBackend over HipApi, and its factory, which loads
// the runtime (hip_entry_points.h) and turns "this process cannot use HIP"
// into a message that says why and what to do.

#include "gpupool/hip_backend.h"

#include <hip/hip_runtime_api.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/backend.h"
#include "src/backends/hip/hip_api.h"
#include "src/backends/hip/hip_entry_points.h"
#include "src/backends/hip/hip_errors.h"
#include "src/backends/runtime/runtime_backend.h"

namespace gpupool {
namespace hip_internal {
namespace {

// Why hipGetDeviceCount's `error` means HIP is unusable here. Without the
// amdgpu kernel driver (no /dev/kfd) or without a GPU, HIP reports
// hipErrorNoDevice; hipErrorInsufficientDriver means a driver older than the
// runtime.
absl::Status UnusableStatus(const HipRuntime& runtime, hipError_t error) {
  const std::string code =
      absl::StrCat(HipErrorName(error), " (", static_cast<int>(error), ")");
  const std::string where =
      absl::StrCat(" [runtime: ", runtime.source, "; ", kHipRuntimeEnvVar,
                   " selects another]");
  std::string message;
  if (error == hipErrorNoDevice) {
    message = absl::StrCat(
        "hipGetDeviceCount: ", code,
        ": no AMD GPU is visible to this process (no device, or no amdgpu "
        "kernel driver: /dev/kfd is absent or not accessible)");
  } else if (error == hipErrorInsufficientDriver) {
    message = absl::StrCat("hipGetDeviceCount: ", code,
                           ": the amdgpu kernel driver is older than this HIP "
                           "runtime; update it or point ",
                           kHipRuntimeEnvVar, " at an older runtime");
  } else {
    message = absl::StrCat("hipGetDeviceCount: ", code);
    const absl::string_view description = HipErrorDescription(error);
    // HIP's description is often the name again.
    if (!description.empty() && description != HipErrorName(error)) {
      absl::StrAppend(&message, ": ", description);
    }
  }
  const runtime_internal::ErrorClass error_class =
      HipErrorClass(error, runtime_internal::CallKind::kOther);
  return FaultError(error_class.fault, error_class.code,
                    absl::StrCat(message, where));
}

}  // namespace
}  // namespace hip_internal

bool HipBackendBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Backend>> MakeHipBackend() {
  using hip_internal::HipRuntime;
  absl::StatusOr<const HipRuntime*> runtime = hip_internal::ProcessHipRuntime();
  if (!runtime.ok()) return runtime.status();
  int count = 0;
  const hipError_t error = (*runtime)->hipGetDeviceCount(&count);
  if (error != hipSuccess)
    return hip_internal::UnusableStatus(**runtime, error);
  return runtime_internal::RuntimeBackend<hip_internal::HipApi>::Create();
}

}  // namespace gpupool
