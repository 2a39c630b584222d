// SimIpcRegistry: the simulator's interprocess memory registry. Export, open
// and close across real processes go through segments it owns in shared
// memory; the IPC primitives (sim_memory.h) call it.
//
// Every exported allocation gets one segment, an owner-only file in the
// user's shared-memory directory (base/owner_files.h: O_NOFOLLOW, fstat
// checks of type, owner, mode and size before mapping) named by the
// simulator's IPC namespace (SimOptions::ipc_namespace), the exporting
// instance and the export id. The segment holds a header (what the handle
// claims, whether the allocation is live, how many importing processes have
// it mapped) and the allocation's bytes. The exporter writes through
// SimBackend::ExportedBytes; an importer's OpenIpcHandle returns a pointer
// to the same bytes, mapped MAP_SHARED, so a test can prove that it reads the
// exporter's live allocation.
//
// Handle bytes (64): magic, format version, device, exporter pid, export id,
// size, exporter instance, checksum. A handle whose magic, version or
// checksum is wrong is forged or corrupt (InvalidArgument). A well-formed
// handle whose segment is gone (the exporter freed the allocation) or whose
// exporter no longer holds the segment's lock (it exited) is stale
// (NotFound); the importer never maps other memory. While an exporter is
// alive it holds a shared flock(2) on each of its segments: the kernel drops
// it when the process exits, however it exits.
//
// Thread safety: all methods may be called concurrently (one mutex, the last
// in the simulator's lock order: callers may hold a device's memory lock).

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_IPC_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_IPC_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"

namespace gpupool {
namespace sim_internal {

struct SegmentHeader;

class SimIpcRegistry {
 public:
  // `ipc_namespace` names the registry (empty: one per user).
  explicit SimIpcRegistry(const std::string& ipc_namespace);
  // Removes this process's segments and unmaps its imports.
  ~SimIpcRegistry();
  SimIpcRegistry(const SimIpcRegistry&) = delete;
  SimIpcRegistry& operator=(const SimIpcRegistry&) = delete;

  // --- Exporter --------------------------------------------------------------
  // The handle of the live allocation [address, address + bytes) on `device`;
  // the first call creates its segment, later calls return the same bytes.
  absl::StatusOr<IpcMemHandle> Export(int device, uintptr_t address,
                                      size_t bytes);
  // The allocation at `address` is being freed: removes its segment (if it
  // was exported) and returns how many other processes still have it mapped.
  int OnFree(uintptr_t address);
  // Host view of an exported allocation's bytes; nullptr when not exported.
  void* ExportedBytes(uintptr_t address) const;
  // Processes that have the exported allocation at `address` mapped now.
  int ImportersOf(uintptr_t address) const;

  // --- Importer --------------------------------------------------------------
  absl::StatusOr<void*> Open(int device, const IpcMemHandle& handle);
  // NotFound when `ptr` is not an open mapping on `device`.
  absl::Status Close(int device, void* ptr);
  // The open mapping on `device` containing `ptr`: its base and the
  // exporter's allocation size; nullopt when there is none.
  std::optional<AddressRange> RangeOf(int device, void* ptr) const;

  // Counters: segments created, mappings made and unmapped, open now.
  int64_t exports() const;
  int64_t maps() const;
  int64_t unmaps() const;
  int mappings_live() const;

 private:
  struct Segment {
    int fd = -1;
    SegmentHeader* header = nullptr;
    size_t mapped_bytes = 0;
    IpcMemHandle handle;
    std::string path;
  };
  struct Mapping {
    Segment segment;
    int device = 0;
    int references = 0;  // opens in this process (CUDA >= 11.1 counts them)
  };

  std::string SegmentPath(uint64_t instance, uint64_t export_id) const;
  static void Unmap(Segment& segment);

  const std::string namespace_;
  const uint64_t instance_;
  const pid_t pid_;  // the process that made this registry
  mutable absl::Mutex mu_;
  uint64_t next_export_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool reaped_ ABSL_GUARDED_BY(mu_) = false;
  // Exported allocations by address.
  absl::flat_hash_map<uintptr_t, Segment> exported_ ABSL_GUARDED_BY(mu_);
  // Imports by (exporter instance, export id) and by mapped address.
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, Mapping> imported_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uintptr_t, std::pair<uint64_t, uint64_t>> by_address_
      ABSL_GUARDED_BY(mu_);
  int64_t exports_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t maps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t unmaps_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_IPC_H_
