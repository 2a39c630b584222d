// ProcessPools(): the process-wide bundle, its backend choice and its
// at-exit report.

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/config.h"
#include "gpupool/pools.h"
#include "src/lifetime/process_state.h"
#include "src/process/environment.h"
#include "src/process/snapshot_dumps.h"
#include "src/process/stats_report.h"

namespace gpupool {
namespace {

// GPUPOOL_STATS=1: pool summary and leases still out, printed at exit before
// the pools drain (drains run newest first, and this one is registered after
// the pools').
void RegisterExitReport(Pools* pools) {
  internal::RegisterExitDrain([pools] {
    std::fputs(internal::PoolsStatsReport(*pools).c_str(), stderr);
  });
}

// Every GPUPOOL_* variable is read with secure_getenv: ignored in a
// setuid, setgid or capability-raised process (AT_SECURE).
absl::StatusOr<std::unique_ptr<Backend>> ChooseBackend() {
  const char* env = secure_getenv("GPUPOOL_BACKEND");
  const absl::string_view name = internal::BackendName(env);
  if (!name.empty()) {
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        MakeBackend(std::string_view(name.data(), name.size()));
    if (!backend.ok()) {
      return absl::Status(backend.status().code(),
                          absl::StrCat("GPUPOOL_BACKEND=\"", env, "\": ",
                                       MessageWithoutFault(backend.status())));
    }
    return backend;
  }
  // Never a silent fallback to the simulator: a job that expected a GPU and
  // got none must hear about it.
  std::vector<std::string> reasons;
  for (const char* name : {"cuda", "hip"}) {
    absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(name);
    absl::Status status = backend.status();
    if (backend.ok()) {
      absl::StatusOr<int> count = (*backend)->DeviceCount();
      if (count.ok() && *count > 0) return backend;
      status =
          count.ok() ? absl::UnavailableError("0 devices") : count.status();
    }
    reasons.push_back(absl::StrCat(name, ": ", MessageWithoutFault(status)));
  }
  return absl::NotFoundError(absl::StrCat(
      "no runtime backend reports a device (", absl::StrJoin(reasons, "; "),
      "); set GPUPOOL_BACKEND=sim to use the simulated backend"));
}

absl::StatusOr<Pools*> CreateProcessPools() {
  // GPUPOOL_CONF and GPUPOOL_STATS first: a malformed value fails before any
  // runtime call.
  absl::StatusOr<PoolsConfig> config = PoolsConfigFromEnvironment();
  if (!config.ok()) return config.status();
  absl::StatusOr<bool> stats =
      internal::StatsRequested(secure_getenv("GPUPOOL_STATS"));
  if (!stats.ok()) return stats.status();
  absl::StatusOr<std::unique_ptr<Backend>> backend = ChooseBackend();
  if (!backend.ok()) return backend.status();
  internal::ArmSnapshotDumps(&config->options);
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(*std::move(backend), config->options);
  if (!pools.ok()) return pools.status();
  Pools* process_pools = pools->release();  // never destroyed
  internal::AttachSnapshotDumps(process_pools);
  if (*stats) RegisterExitReport(process_pools);
  // A failed prewarm only costs the speed-up: warn, keep the pools.
  absl::Status prewarmed = RunPrewarms(*process_pools, config->prewarm);
  if (!prewarmed.ok()) {
    std::fprintf(stderr, "gpupool: %s: %s\n", kPoolsConfigEnvVar,
                 prewarmed.ToString().c_str());
  }
  return process_pools;
}

}  // namespace

absl::StatusOr<Pools*> ProcessPools() {
  // Function-local and leaked: immune to static destruction order.
  static const absl::StatusOr<Pools*>* const pools =
      new absl::StatusOr<Pools*>(CreateProcessPools());
  return *pools;
}

}  // namespace gpupool
