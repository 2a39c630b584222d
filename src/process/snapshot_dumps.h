// GPUPOOL_SNAPSHOT=path: the snapshot of a bundle (gpupool/snapshot.h)
// written to `path` at exit, and to `path`.oom at the bundle's first
// out-of-memory. Used by ProcessPools() and by the preload.
//
// Thread safety: Arm and Attach are called once, by the thread that creates
// the bundle; the dumps run on the threads that meet the out-of-memory or
// run the exit drain.

#ifndef GPUPOOL_SRC_PROCESS_SNAPSHOT_DUMPS_H_
#define GPUPOOL_SRC_PROCESS_SNAPSHOT_DUMPS_H_

#include "gpupool/pools.h"

namespace gpupool::internal {

// When GPUPOOL_SNAPSHOT is set (read with secure_getenv), sets the cache's
// out-of-memory observer in `options` (chaining any the caller set). Returns
// whether it is set.
bool ArmSnapshotDumps(PoolsOptions* options);
// The bundle created with the armed options: the out-of-memory dump can
// reach it from now on, and the exit dump is registered (it runs before the
// pools drain). No-op when not armed.
void AttachSnapshotDumps(Pools* pools);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_PROCESS_SNAPSHOT_DUMPS_H_
