// IpcExports: the exporter side of the allocation cache's IPC (stable buffers
// shared with other processes). One runtime handle per buffer version, made
// on first export and kept; a version claims a slot in the cache's shared
// reference table (ipc/refs.h) that importers pin while they have it mapped,
// and a version being freed (the buffer grew, or was released) whose slot is
// still pinned waits in `waiting_` instead of being freed: freeing memory
// another process has mapped is undefined behaviour on CUDA and HIP.
//
// Thread safety: one mutex, held across the one runtime call per version
// (export is not a hot path; every caller of one buffer waits for the same
// handle).

#ifndef GPUPOOL_SRC_ALLOCATION_IPC_EXPORTS_H_
#define GPUPOOL_SRC_ALLOCATION_IPC_EXPORTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/ipc_handle.h"
#include "src/allocation/ipc/refs.h"
#include "src/lifetime/mutex.h"

namespace gpupool::internal {

class IpcExports {
 public:
  explicit IpcExports(Backend& backend);
  ~IpcExports();
  IpcExports(const IpcExports&) = delete;
  IpcExports& operator=(const IpcExports&) = delete;

  // This cache's random exporter id (in every handle it makes).
  uint64_t exporter_id() const { return exporter_id_; }
  // The pid of the process that built this cache, in every handle it makes.
  // The cache refuses every call in a fork() child, so while a call is made
  // this is the caller's process.
  uint64_t exporter_pid() const { return exporter_pid_; }

  // How many stable-buffer frees MayFree has seen: read before the
  // AcquireStable whose pointer is then passed to Export.
  uint64_t stable_frees() const;

  // The handle of the stable buffer `name` now at `ptr` on `device`
  // (`bytes` asked for): the kept one when `ptr` is already exported, else
  // a new version made with one GetIpcHandle call. `frees_seen` is
  // stable_frees() from before `ptr` was acquired: when a stable buffer was
  // freed since (a growth or release on another thread may have freed
  // `ptr`), nothing is exported and `*moved` is set, for the caller to
  // acquire again. From the check on, the free of `ptr` waits for the export
  // (MayFree takes the same mutex), so the runtime never sees a freed pointer.
  // `generation` is the device's generation `ptr` was allocated in: an
  // export kept from an older one (the device was reset since) is stale and
  // replaced.
  absl::StatusOr<IpcHandle> Export(absl::string_view name, int device,
                                   void* ptr, size_t bytes, uint64_t generation,
                                   uint64_t frees_seen, bool* moved);

  // The memory of a stable buffer is about to be freed. True: free it now.
  // False: it is exported and still mapped by an importer; it now waits, and
  // TakeFreeable hands it out once no importer has it.
  // `generation`: the device's now (an export kept from before a reset
  // names other memory and is forgotten).
  bool MayFree(int device, void* ptr, uint64_t generation);
  // Waiting versions no live process pins any more, to free unless their
  // device was reset since (their generation is no longer the device's).
  struct Freeable {
    int device = -1;
    void* ptr = nullptr;
    uint64_t generation = 0;
  };
  std::vector<Freeable> TakeFreeable();
  // Drops everything a poisoned `device` exported (its memory is gone).
  void DropDevice(int device);

  // The local pointer of `handle`, one of our own versions, checked against
  // its binding like any import. NotFound: that version is freed.
  // InvalidArgument: a field does not match what we exported. With `pin`,
  // also pins the version's slot, as an importer would (a local lease keeps
  // its version alive); UnpinLocal undoes it.
  absl::StatusOr<void*> LocalPointer(const IpcHandle& handle, bool pin);
  void UnpinLocal(uint32_t slot, uint64_t version);

  int64_t exports() const;       // versions exported
  int64_t export_calls() const;  // Export calls
  // Freed versions still mapped, each with the processes that hold it now
  // (counted on the table's count bytes: ipc/refs.h).
  std::vector<IpcWaitingVersion> WaitingVersions() const;
  // Whether stable buffer memory `ptr` of `device` is exported now.
  bool IsLive(int device, const void* ptr) const;

 private:
  struct Version {
    std::string name;
    IpcHandle handle;
    void* ptr = nullptr;
    uint64_t generation = 0;  // the device's, when `ptr` was allocated
  };

  Backend& backend_;
  const uint64_t exporter_id_;
  const uint64_t exporter_pid_;
  mutable Mutex mu_;
  std::unique_ptr<IpcRefs> refs_ ABSL_GUARDED_BY(mu_);
  // Live exported versions by (device, ptr).
  absl::flat_hash_map<std::pair<int, uintptr_t>, Version> live_
      ABSL_GUARDED_BY(mu_);
  std::vector<Version> waiting_ ABSL_GUARDED_BY(mu_);
  int64_t exports_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stable_frees_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t export_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

// True when `exporter_id` is a live cache of this process.
bool IsLocalExporter(uint64_t exporter_id);

// Compares `handle` with the binding its exporter recorded for its slot
// (nullopt: the slot no longer holds that version → NotFound): runtime
// bytes, buffer id, device and offset + bytes (InvalidArgument naming the
// field).
absl::Status CheckBinding(const IpcHandle& handle,
                          const std::optional<IpcSlotBinding>& binding);
// InvalidArgument when offset + bytes of `handle` run past `extent`
// (computed without overflow); `of_what` names the extent in the message.
absl::Status CheckExtent(const IpcHandle& handle, uint64_t extent,
                         absl::string_view of_what);

// A process-wide version counter (also the shared table's slot tags):
// versions never repeat in a process, like CU_POINTER_ATTRIBUTE_BUFFER_ID.
uint64_t NextIpcVersion();
// A random 64-bit id (exporter ids).
uint64_t RandomIpcId();

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_IPC_EXPORTS_H_
