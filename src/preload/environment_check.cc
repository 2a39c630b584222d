// The preload's load-time environment check; see environment_check.h.

#include "src/preload/environment_check.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/config.h"
#include "src/process/environment.h"

namespace gpupool::preload_internal {

bool StatsRequested() {
  return internal::StatsRequested(secure_getenv("GPUPOOL_STATS"))
      .value_or(false);
}

std::vector<std::string> EnvironmentComplaints(
    absl::FunctionRef<const char*(const char* name)> read_env) {
  std::vector<std::string> lines;
  if (const char* conf = read_env(kPoolsConfigEnvVar); conf != nullptr) {
    absl::StatusOr<PoolsConfig> config = ParsePoolsConfig(conf);
    if (!config.ok()) {
      lines.push_back(absl::StrCat(
          "gpupool preload: ", kPoolsConfigEnvVar, "=\"", conf,
          "\": ", config.status().message(), "; pooling is off\n"));
    }
  }
  if (const char* stats = read_env("GPUPOOL_STATS");
      !internal::StatsRequested(stats).ok()) {
    lines.push_back(absl::StrCat(
        "gpupool preload: GPUPOOL_STATS=\"", stats,
        "\": not a switch (1/true/yes/on or 0/false/no/off); no stats at "
        "exit, pooling is unaffected\n"));
  }
  // The preload pools the runtime the program itself loads; the variables
  // that choose a runtime library for MakeBackend() do not apply to it.
  for (const char* name : {"GPUPOOL_CUDA_RUNTIME", "GPUPOOL_HIP_RUNTIME"}) {
    if (const char* value = read_env(name);
        value != nullptr && *value != '\0') {
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
           [](const char* name) { return secure_getenv(name); })) {
    std::fputs(line.c_str(), stderr);
  }
}

}  // namespace
}  // namespace gpupool::preload_internal
