// GPUPOOL_SNAPSHOT dumps; see snapshot_dumps.h.

#include "src/process/snapshot_dumps.h"

#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpupool/snapshot.h"
#include "src/lifetime/process_state.h"

namespace gpupool::internal {
namespace {

// One bundle per process is armed (the process-wide one, or the preload's);
// leaked with it.
struct Dumps {
  std::string path;
  std::atomic<Pools*> pools{nullptr};
  std::atomic<bool> oom_written{false};
};

Dumps* ArmedDumps() {
  static Dumps* const dumps = [] {
    const char* path = secure_getenv("GPUPOOL_SNAPSHOT");
    if (path == nullptr || path[0] == '\0') return static_cast<Dumps*>(nullptr);
    Dumps* made = new Dumps;
    made->path = path;
    return made;
  }();
  return dumps;
}

void Write(const Pools& pools, const std::string& path) {
  absl::Status written = WriteSnapshot(TakeSnapshot(pools), path);
  if (!written.ok()) {
    std::fprintf(stderr, "gpupool: GPUPOOL_SNAPSHOT: %s\n",
                 std::string(written.message()).c_str());
  }
}

}  // namespace

bool ArmSnapshotDumps(PoolsOptions* options) {
  Dumps* dumps = ArmedDumps();
  if (dumps == nullptr) return false;
  std::function<void(const absl::Status&)> chained =
      std::move(options->allocations.on_out_of_memory);
  options->allocations.on_out_of_memory =
      [dumps, chained = std::move(chained)](const absl::Status& status) {
        if (chained) chained(status);
        Pools* pools = dumps->pools.load(std::memory_order_acquire);
        if (pools == nullptr ||
            dumps->oom_written.exchange(true, std::memory_order_acq_rel)) {
          return;
        }
        Write(*pools, absl::StrCat(dumps->path, ".oom"));
      };
  return true;
}

void AttachSnapshotDumps(Pools* pools) {
  Dumps* dumps = ArmedDumps();
  if (dumps == nullptr) return;
  Pools* expected = nullptr;
  if (!dumps->pools.compare_exchange_strong(expected, pools,
                                            std::memory_order_acq_rel)) {
    return;  // another bundle already holds the dumps
  }
  RegisterExitDrain([dumps, pools] { Write(*pools, dumps->path); });
}

}  // namespace gpupool::internal
