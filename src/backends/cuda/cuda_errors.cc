// The CUDA error table; see cuda_errors.h and docs/backends.md.

#include "src/backends/cuda/cuda_errors.h"

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/cuda/cuda_entry_points.h"
#include "src/backends/runtime/error_class.h"

namespace gpupool {
namespace cuda_internal {

using runtime_internal::ErrorClass;

ErrorClass CudaErrorClass(int code) {
  // Switch on the int: a code outside the enum's range is not a valid
  // cudaError_t value.
  switch (code) {
    case cudaSuccess:
      return {Fault::kNone, absl::StatusCode::kOk};

    case cudaErrorNotReady:
      return {Fault::kNotReady, absl::StatusCode::kUnavailable};

    case cudaErrorMemoryAllocation:
      return {Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted};

    // The runtime is going away (atexit) or the context was torn down under
    // us: calling it again is pointless, leaking is the only safe reaction.
    case cudaErrorCudartUnloading:
    case cudaErrorContextIsDestroyed:
      return {Fault::kShutdown, absl::StatusCode::kUnavailable};

    // Sticky: "the process is in an inconsistent state and any further CUDA
    // work will return the same error". ECC and NVLink uncorrectable errors
    // are not documented as sticky but lose the context in practice.
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorContained:
    case cudaErrorExternalDevice:
    case cudaErrorMpsClientTerminated:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorPriorLaunchFailure:
      return {Fault::kDevice, absl::StatusCode::kInternal};

    // CUDA cannot be used in this process at all (no driver, no device, MPS
    // down). Nothing to poison or destroy: the caller learns why and, in
    // tests, skips with this reason.
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoDevice:
    case cudaErrorDeviceNotLicensed:
    case cudaErrorSoftwareValidityNotEstablished:
    case cudaErrorStartupFailure:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorMpsConnectionFailed:
    case cudaErrorMpsServerNotReady:
    case cudaErrorMpsMaxClientsReached:
    case cudaErrorMpsMaxConnectionsReached:
      return {Fault::kCaller, absl::StatusCode::kUnavailable};

    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidHostPointer:
      return {Fault::kCaller, absl::StatusCode::kInvalidArgument};
    case cudaErrorNotSupported:
      return {Fault::kCaller, absl::StatusCode::kUnimplemented};
    case cudaErrorNotPermitted:
      return {Fault::kCaller, absl::StatusCode::kFailedPrecondition};

    // The handle is bad (or its capture is broken): drop this handle only.
    case cudaErrorInvalidResourceHandle:
      return {Fault::kResource, absl::StatusCode::kInvalidArgument};
    case cudaErrorIllegalState:
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorCapturedEvent:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorGraphExecUpdateFailure:
      return {Fault::kResource, absl::StatusCode::kFailedPrecondition};

    default:
      // Unknown or unexpected for a pool primitive (cudaErrorUnknown
      // included): assume only this handle is affected. A dead context
      // reports one of the sticky codes above on the next call anyway.
      return {Fault::kResource, absl::StatusCode::kInternal};
  }
}

Fault ClassifyCudaError(int code) { return CudaErrorClass(code).fault; }

absl::string_view CudaErrorName(int code) {
  const char* name = Cudart().cudaGetErrorName(static_cast<cudaError_t>(code));
  return name != nullptr ? name : "unnamed cudaError";
}

absl::string_view CudaErrorDescription(int code) {
  const char* description =
      Cudart().cudaGetErrorString(static_cast<cudaError_t>(code));
  return description != nullptr ? description : "";
}

}  // namespace cuda_internal
}  // namespace gpupool
