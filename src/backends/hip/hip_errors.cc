// The HIP error table; see hip_errors.h and docs/backends.md.

#include "src/backends/hip/hip_errors.h"

#include <hip/hip_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/hip/hip_entry_points.h"
#include "src/backends/runtime/error_class.h"

namespace gpupool {
namespace hip_internal {

using runtime_internal::CallKind;
using runtime_internal::ErrorClass;

ErrorClass HipErrorClass(int code, CallKind kind) {
  // Switch on the int: a code outside the enum's range is not a valid
  // hipError_t value.
  switch (code) {
    case hipSuccess:
      return {Fault::kNone, absl::StatusCode::kOk};

    case hipErrorNotReady:
      return {Fault::kNotReady, absl::StatusCode::kUnavailable};

    case hipErrorOutOfMemory:  // == hipErrorMemoryAllocation
      return {Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted};

    // The runtime is being torn down (atexit) or the context is gone: leak.
    case hipErrorDeinitialized:
    case hipErrorContextIsDestroyed:
      return {Fault::kShutdown, absl::StatusCode::kUnavailable};

    // Sticky GPU faults: the device's queues are dead.
    case hipErrorIllegalAddress:
    case hipErrorLaunchTimeOut:
    case hipErrorAssert:
    case hipErrorLaunchFailure:
    case hipErrorPriorLaunchFailure:
    case hipErrorECCNotCorrectable:
      return {Fault::kDevice, absl::StatusCode::kInternal};

    case hipErrorUnknown:
      // See the rule in hip_errors.h.
      if (kind == CallKind::kCompletion) {
        return {Fault::kDevice, absl::StatusCode::kInternal};
      }
      return {Fault::kResource, absl::StatusCode::kInternal};

    // HIP cannot be used in this process (no driver, no device): nothing to
    // poison or destroy; the caller learns why and, in tests, skips.
    case hipErrorNotInitialized:  // == hipErrorInitializationError
    case hipErrorInsufficientDriver:
    case hipErrorNoDevice:
      return {Fault::kCaller, absl::StatusCode::kUnavailable};

    case hipErrorInvalidValue:
    case hipErrorInvalidDevice:
    case hipErrorInvalidDevicePointer:
      return {Fault::kCaller, absl::StatusCode::kInvalidArgument};
    case hipErrorNotSupported:
      return {Fault::kCaller, absl::StatusCode::kUnimplemented};

    // The handle is bad (or its capture is broken): drop this handle only.
    case hipErrorInvalidHandle:  // == hipErrorInvalidResourceHandle
      return {Fault::kResource, absl::StatusCode::kInvalidArgument};
    case hipErrorIllegalState:
    case hipErrorStreamCaptureUnsupported:
    case hipErrorStreamCaptureInvalidated:
    case hipErrorStreamCaptureMerge:
    case hipErrorStreamCaptureUnmatched:
    case hipErrorStreamCaptureUnjoined:
    case hipErrorStreamCaptureIsolation:
    case hipErrorStreamCaptureImplicit:
    case hipErrorCapturedEvent:
    case hipErrorStreamCaptureWrongThread:
    case hipErrorGraphExecUpdateFailure:
      return {Fault::kResource, absl::StatusCode::kFailedPrecondition};

    default:
      return {Fault::kResource, absl::StatusCode::kInternal};
  }
}

Fault ClassifyHipError(int code, CallKind kind) {
  return HipErrorClass(code, kind).fault;
}

absl::string_view HipErrorName(int code) {
  const char* name = Hip().hipGetErrorName(static_cast<hipError_t>(code));
  return name != nullptr ? name : "unnamed hipError";
}

absl::string_view HipErrorDescription(int code) {
  const char* description =
      Hip().hipGetErrorString(static_cast<hipError_t>(code));
  return description != nullptr ? description : "";
}

}  // namespace hip_internal
}  // namespace gpupool
