// Fault classes travel in the message as a trailing tag in words; see
// gpupool/backend.h.

#include <iterator>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "gpupool/backend.h"

namespace gpupool {
namespace {

constexpr absl::string_view kFaultNames[] = {
    "kNone",        "kNotReady", "kResource", "kDevice",
    "kOutOfMemory", "kShutdown", "kCaller"};

// Every tag ends with this, so a message without it is ruled out by one
// suffix compare.
constexpr absl::string_view kTagEnd = " fault)";
constexpr absl::string_view kFaultTags[] = {
    "(no fault)",     "(not-ready fault)",     "(handle fault)",
    "(device fault)", "(out-of-memory fault)", "(shutdown fault)",
    "(caller fault)"};
constexpr int kFaultCount = static_cast<int>(std::size(kFaultTags));

// The tag `message` ends with (alone or after a space), or -1.
int TagIndex(absl::string_view message) {
  if (!absl::EndsWith(message, kTagEnd)) return -1;
  for (int i = 0; i < kFaultCount; ++i) {
    const absl::string_view tag = kFaultTags[i];
    if (!absl::EndsWith(message, tag)) continue;
    if (message.size() == tag.size() ||
        message[message.size() - tag.size() - 1] == ' ') {
      return i;
    }
  }
  return -1;
}

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

absl::string_view FaultTag(Fault fault) {
  return kFaultTags[static_cast<int>(fault)];
}

absl::string_view MessageWithoutFault(const absl::Status& status) {
  const absl::string_view message = status.message();
  const int index = TagIndex(message);
  if (index < 0) return message;
  const size_t tagged = kFaultTags[index].size();
  return message.substr(
      0, message.size() == tagged ? 0 : message.size() - tagged - 1);
}

Fault FaultOf(const absl::Status& status) {
  if (status.ok()) return Fault::kNone;
  const int index = TagIndex(status.message());
  if (index >= 0) return static_cast<Fault>(index);
  // A payload some caller attached the way gpupool once did.
  absl::optional<absl::Cord> payload = status.GetPayload(kFaultPayloadUrl);
  if (payload.has_value()) {
    const std::string name(*payload);
    for (int i = 0; i < kFaultCount; ++i) {
      if (name == kFaultNames[i]) return static_cast<Fault>(i);
    }
  }
  return InferFromCode(status.code());
}

absl::Status WithFault(absl::Status status, Fault fault) {
  if (status.ok()) return status;
  const absl::string_view words = MessageWithoutFault(status);
  absl::Status tagged(
      status.code(), words.empty() ? std::string(FaultTag(fault))
                                   : absl::StrCat(words, " ", FaultTag(fault)));
  status.ForEachPayload(
      [&tagged](absl::string_view url, const absl::Cord& payload) {
        if (url != kFaultPayloadUrl) tagged.SetPayload(url, payload);
      });
  return tagged;
}

absl::Status FaultError(Fault fault, absl::StatusCode code,
                        absl::string_view message) {
  return WithFault(absl::Status(code, message), fault);
}

}  // namespace gpupool
