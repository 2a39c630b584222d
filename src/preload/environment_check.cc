// The preload's load-time environment check; see environment_check.h.

#include "src/preload/environment_check.h"

#include <cstdio>
#include <cstdlib>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gpupool/config.h"

namespace gpupool::preload_internal {

std::optional<bool> ParseSwitch(absl::string_view value) {
  const std::string word =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (word.empty() || word == "0" || word == "false" || word == "no" ||
      word == "off") {
    return false;
  }
  if (word == "1" || word == "true" || word == "yes" || word == "on") {
    return true;
  }
  return std::nullopt;
}

bool StatsRequested() {
  const char* value = std::getenv("GPUPOOL_STATS");
  return value != nullptr && ParseSwitch(value).value_or(false);
}

std::vector<std::string> EnvironmentComplaints(
    absl::FunctionRef<const char*(const char* name)> getenv) {
  std::vector<std::string> lines;
  if (const char* conf = getenv(kPoolsConfigEnvVar); conf != nullptr) {
    absl::StatusOr<PoolsConfig> config = ParsePoolsConfig(conf);
    if (!config.ok()) {
      lines.push_back(absl::StrCat(
          "gpupool preload: ", kPoolsConfigEnvVar, "=\"", conf,
          "\": ", config.status().message(), "; pooling is off\n"));
    }
  }
  if (const char* stats = getenv("GPUPOOL_STATS");
      stats != nullptr && !ParseSwitch(stats).has_value()) {
    lines.push_back(absl::StrCat(
        "gpupool preload: GPUPOOL_STATS=\"", stats,
        "\": not a switch (1/true/yes/on or 0/false/no/off); no stats at "
        "exit, pooling is unaffected\n"));
  }
  // The preload pools the runtime the program itself loads; the variables
  // that choose a runtime library for MakeBackend() do not apply to it.
  for (const char* name : {"GPUPOOL_CUDA_RUNTIME", "GPUPOOL_HIP_RUNTIME"}) {
    if (const char* value = getenv(name); value != nullptr && *value != '\0') {
      lines.push_back(absl::StrCat(
          "gpupool preload: ", name, "=\"", value,
          "\" is ignored: the preload pools the runtime the program loads; "
          "pooling is unaffected\n"));
    }
  }
  return lines;
}

namespace {

// Runs when the dynamic loader maps the preload, before main().
__attribute__((constructor)) void CheckEnvironmentAtLoad() {
  for (const std::string& line : EnvironmentComplaints(
           [](const char* name) { return std::getenv(name); })) {
    std::fputs(line.c_str(), stderr);
  }
}

}  // namespace
}  // namespace gpupool::preload_internal
