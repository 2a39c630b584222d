// Fault classes travel as a status payload; see gpupool/backend.h.

#include <iterator>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "gpupool/backend.h"

namespace gpupool {
namespace {

constexpr absl::string_view kFaultNames[] = {
    "kNone",        "kNotReady", "kResource", "kDevice",
    "kOutOfMemory", "kShutdown", "kCaller"};

Fault InferFromCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return Fault::kNone;
    case absl::StatusCode::kResourceExhausted:
      return Fault::kOutOfMemory;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kNotFound:
      return Fault::kCaller;
    case absl::StatusCode::kUnavailable:
      return Fault::kShutdown;
    default:
      return Fault::kResource;
  }
}

}  // namespace

absl::string_view FaultName(Fault fault) {
  return kFaultNames[static_cast<int>(fault)];
}

Fault FaultOf(const absl::Status& status) {
  if (status.ok()) return Fault::kNone;
  absl::optional<absl::Cord> payload = status.GetPayload(kFaultPayloadUrl);
  if (payload.has_value()) {
    std::string name(*payload);
    for (int i = 0; i < static_cast<int>(std::size(kFaultNames)); ++i) {
      if (name == kFaultNames[i]) return static_cast<Fault>(i);
    }
  }
  return InferFromCode(status.code());
}

absl::Status WithFault(absl::Status status, Fault fault) {
  if (status.ok()) return status;
  status.SetPayload(kFaultPayloadUrl, absl::Cord(FaultName(fault)));
  return status;
}

absl::Status FaultError(Fault fault, absl::StatusCode code,
                        absl::string_view message) {
  return WithFault(absl::Status(code, message), fault);
}

}  // namespace gpupool
