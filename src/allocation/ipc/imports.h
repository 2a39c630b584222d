// IpcImports: the importer side of the allocation cache's IPC. One runtime
// open per (exporter, buffer, version, device) per process however many
// threads and leases ask; the mapping is closed once a newer version of the
// same buffer was imported (superseded) and its last lease is gone, on Trim,
// and at exit while the runtime is alive; never in a fork() child (leaked,
// like every pool's handles there). A poisoned device's mappings are
// forgotten without a runtime call. Before it opens a version the importer
// pins the exporter's reference slot (ipc/refs.h); it unpins after closing.
//
// Thread safety: one mutex; runtime calls are made without it. Threads
// importing a version that is being opened wait for that open.

#ifndef GPUPOOL_SRC_ALLOCATION_IPC_IMPORTS_H_
#define GPUPOOL_SRC_ALLOCATION_IPC_IMPORTS_H_

#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/pool_stats.h"
#include "gpupool/snapshot.h"
#include "src/allocation/ipc/exports.h"
#include "src/allocation/ipc/refs.h"
#include "src/lifetime/mutex.h"
#include "src/lifetime/pool_lifetime.h"

namespace gpupool::internal {

struct IpcMapping {
  IpcHandle handle;
  int device = -1;
  void* base = nullptr;
  // Bytes mapped from `base`: the runtime's address range where it has the
  // query, else the extent the exporter recorded. Every lease stays inside.
  uint64_t extent = 0;
  int leases = 0;
  // One of this cache's own versions (no runtime mapping; its slot pinned
  // in our own table while leased).
  bool local = false;
  bool opening = true;
  bool superseded = false;
  std::shared_ptr<IpcRefs> refs;
};

class IpcImports : public std::enable_shared_from_this<IpcImports> {
 public:
  // `lifetime` and `exports` (this cache's own exports) must outlive every
  // call made before Close().
  IpcImports(Backend& backend, const PoolLifetime& lifetime,
             IpcExports& exports);
  IpcImports(const IpcImports&) = delete;
  IpcImports& operator=(const IpcImports&) = delete;

  absl::StatusOr<ImportedBuffer> Import(const IpcHandle& handle, int device);
  void Release(IpcMapping* mapping);

  // Closes the unleased mappings of `device` (-1: all devices), then
  // detaches the tables of exporters that died and that no mapping uses.
  void CloseUnleased(int device);
  // Forgets `device`'s mappings without runtime calls (poisoned device).
  void DropDevice(int device);
  // The cache is going away: later releases leak instead of calling the
  // runtime (it may be unloading).
  void Close();

  void FillStats(IpcStats* stats) const;
  void AppendOutstanding(std::vector<OutstandingLease>* out) const;
  // For snapshots: every mapping of another process's buffer open here.
  void AppendSnapshot(std::vector<ImportSnapshot>* out) const;

 private:
  // (exporter id, buffer id, local device). The random exporter id alone
  // names the exporter: pids repeat across containers.
  using Key = std::tuple<uint64_t, uint64_t, int>;
  struct Opened {
    std::shared_ptr<IpcRefs> refs;
    void* base = nullptr;
    uint64_t extent = 0;
  };

  // A lease on `handle`'s bytes of `mapping`, whose memory is at `base`.
  ImportedBuffer MakeLease(IpcMapping* mapping, void* base,
                           const IpcHandle& handle, int device);
  absl::StatusOr<ImportedBuffer> ImportLocal(const IpcHandle& handle,
                                             int device);
  // Checks the handle against its exporter's binding, pins, opens, learns
  // the mapped extent and checks the handle against it; undoes what it did
  // on failure.
  absl::StatusOr<Opened> Open(const IpcHandle& handle, int device);
  // Runtime close (or a drop) of an unleased mapping taken out of the maps.
  void CloseMapping(std::unique_ptr<IpcMapping> mapping);
  absl::StatusOr<std::shared_ptr<IpcRefs>> RefsOf(const IpcHandle& handle);
  void DetachDeadTables();

  Backend& backend_;
  const PoolLifetime& lifetime_;
  IpcExports& exports_;
  mutable Mutex mu_;
  absl::flat_hash_map<Key, std::unique_ptr<IpcMapping>> current_
      ABSL_GUARDED_BY(mu_);
  // Superseded mappings with leases still out.
  std::vector<std::unique_ptr<IpcMapping>> superseded_ ABSL_GUARDED_BY(mu_);
  // Attached export tables by exporter id.
  absl::flat_hash_map<uint64_t, std::shared_ptr<IpcRefs>> refs_
      ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Bumped when an open ends (made or failed): what waiters wait for.
  uint64_t opens_ended_ ABSL_GUARDED_BY(mu_) = 0;
  // Leases on this cache's own versions, by version.
  absl::flat_hash_map<uint64_t, std::unique_ptr<IpcMapping>> local_
      ABSL_GUARDED_BY(mu_);
  IpcStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_IPC_IMPORTS_H_
