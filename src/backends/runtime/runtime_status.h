// RuntimeStatus<Api>: the error choke point of a CUDA-like runtime. Every
// native error code passes through ToStatus, which maps it to an absl::Status
// carrying the runtime's fault class (error_class.h) and a message naming the
// call, the device, the error name, number and description.
//
// Thread safety: stateless; every member is static.
#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_STATUS_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_STATUS_H_

#include <cstring>
#include <string>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/runtime/error_class.h"

namespace gpupool {
namespace runtime_internal {

template <typename Api>
class RuntimeStatus {
 public:
  using Error = typename Api::Error;

  // Marks a status as not tied to one device (device count, current device).
  static constexpr int kNoDevice = -1;

  // The choke point every native error of this runtime passes through: OK
  // for success (inlined), otherwise a status whose code and fault class come
  // from the runtime's table and whose message names the call, the device,
  // the error name, number and description. `call` is the function name
  // without the runtime prefix ("StreamQuery").
  static absl::Status ToStatus(Error error, absl::string_view call, int device,
                               CallKind kind = CallKind::kOther) {
    if (ABSL_PREDICT_TRUE(error == Api::kSuccess)) return absl::OkStatus();
    return ErrorToStatus(error, call, device, kind);
  }

  static absl::Status NoDeviceStatus() {
    return FaultError(
        Fault::kCaller, absl::StatusCode::kUnavailable,
        absl::StrCat(Api::kCallPrefix, "GetDeviceCount reported no device"));
  }

  // The slow half of ToStatus: builds the message (never inlined).
  ABSL_ATTRIBUTE_NOINLINE static absl::Status ErrorToStatus(
      Error error, absl::string_view call, int device, CallKind kind) {
    const ErrorClass error_class = Api::Classify(error, kind);
    const char* name = Api::ErrorName(error);
    const char* description = Api::ErrorString(error);
    if (name == nullptr) name = "unnamed error";
    std::string message = absl::StrCat(Api::kCallPrefix, call);
    if (device != kNoDevice) absl::StrAppend(&message, " on device ", device);
    absl::StrAppend(&message, ": ", name, " (", static_cast<int>(error), ")");
    // HIP's error "string" is often the name again.
    if (description != nullptr && std::strcmp(description, name) != 0) {
      absl::StrAppend(&message, ": ", description);
    }
    return FaultError(error_class.fault, error_class.code, message);
  }
};

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_STATUS_H_
