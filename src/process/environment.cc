// GPUPOOL_STATS and GPUPOOL_BACKEND; see environment.h.

#include "src/process/environment.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpupool::internal {

std::optional<bool> ParseSwitch(absl::string_view value) {
  const std::string word =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (word == "1" || word == "true" || word == "yes" || word == "on") {
    return true;
  }
  if (word == "0" || word == "false" || word == "no" || word == "off") {
    return false;
  }
  return std::nullopt;
}

absl::StatusOr<bool> StatsRequested(const char* value) {
  if (value == nullptr || absl::StripAsciiWhitespace(value).empty()) {
    return false;
  }
  if (std::optional<bool> on = ParseSwitch(value)) return *on;
  return absl::InvalidArgumentError(absl::StrCat(
      "GPUPOOL_STATS=\"", value,
      "\": not a switch (expected 1, true, yes or on to print the pools' "
      "report at exit; 0, false, no or off, or unset, for none)"));
}

absl::string_view BackendName(const char* value) {
  if (value == nullptr) return "";
  return absl::StripAsciiWhitespace(value);
}

}  // namespace gpupool::internal
