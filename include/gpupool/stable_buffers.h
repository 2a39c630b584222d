// gpupool/stable_buffers.h — named device buffers that never move, and
// sharing them with other processes, over an AllocationCache.
//
// A stable buffer keeps its address while the process lives: every
// Acquire(name, device, bytes) with the same name and device returns the
// same pointer while `bytes` fits, so a buffer registered with a
// communication library (or exported to another process) stays valid, and
// every rank that makes the same calls hits the cache the same way. A
// larger `bytes` moves the buffer once (a new version); a smaller one reuses
// it.
//
// Export(name, device, bytes) acquires the buffer and returns the IpcHandle
// another process imports it with: one runtime call per buffer version, kept
// afterwards. Import(handle, device) maps a peer's buffer: one runtime open
// per (exporter, version, device) in this process, however many threads and
// leases; the mapping closes once a newer version was imported and its last
// lease is gone, on AllocationCache::Trim, and at exit. gpupool never ships a
// transport: carry IpcHandle::Serialize() with MPI, NCCL, a pipe or a store.
//
// Every StableBuffers made over one cache sees the same buffers, exports and
// imports: it is a handle on the cache's state, cheap to make and copy.
//
// Thread safety: every method is thread-safe. The cache must outlive the
// StableBuffers' use; the buffers are freed with the cache.
//
// Example:
//
//   gpupool::StableBuffers buffers(cache);
//   absl::StatusOr<gpupool::IpcHandle> handle =
//       buffers.Export("ring", /*device=*/0, 64 << 20);
//   if (!handle.ok()) return handle.status();
//   std::string wire = handle->Serialize();  // ... to the peer ...
//
//   // In the peer:
//   absl::StatusOr<gpupool::IpcHandle> peer = gpupool::IpcHandle::Parse(wire);
//   absl::StatusOr<gpupool::ImportedBuffer> mapped =
//       buffers.Import(*peer, /*device=*/0);

#ifndef GPUPOOL_STABLE_BUFFERS_H_
#define GPUPOOL_STABLE_BUFFERS_H_

#include <cstddef>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/export.h"
#include "gpupool/ipc_handle.h"

namespace gpupool {

namespace internal {
class AllocationCacheCore;
class IpcSharing;
}  // namespace internal

class AllocationCache;

class GPUPOOL_EXPORT StableBuffers {
 public:
  // The stable buffers of `cache`.
  explicit StableBuffers(AllocationCache& cache);

  // Device memory named `name` on `device` that never moves: every call
  // returns the same address while the process lives. A larger `bytes` than
  // the buffer holds allocates a bigger one, then frees the old one (counted
  // in AllocationCacheStats::stable_reallocations; the caller must have
  // finished using the old one); if that allocation fails, the error is
  // returned and the name keeps its old buffer. A smaller one reuses it.
  // Errors as AllocationCache::Allocate.
  absl::StatusOr<void*> Acquire(std::string_view name, int device,
                                size_t bytes);
  // Frees the stable buffer `name` of `device`. NotFound when there is none;
  // errors as AllocationCache::Allocate otherwise.
  absl::Status Release(std::string_view name, int device);

  // Acquire(name, device, bytes), then the handle another process imports
  // it with: made with one runtime call per buffer version and kept (later
  // calls make no runtime call while the buffer does not move). When the
  // buffer grows it gets a new version and a new handle; the old version is
  // not freed while a live importer still has it mapped (it waits, and is
  // freed by a later Export or AllocationCache::Trim once unmapped; a killed
  // importer's pins die with it). Atomic with a growth or release of the same
  // name on another thread (Aborted if the name moved under it 64 times).
  // Every process that makes the same sequence of calls makes the same
  // sequence of reallocations, so peers that exchange handles after the same
  // calls never wait for one that did not reallocate. Errors as Acquire, plus
  // the runtime's error (Unimplemented on a backend or runtime without IPC).
  absl::StatusOr<IpcHandle> Export(std::string_view name, int device,
                                   size_t bytes);
  // Maps the buffer `handle` names on `device` of this process and leases
  // it. A handle this cache exported returns the local buffer (no mapping),
  // pinned like any lease. Errors: InvalidArgument (bad device, 0 bytes, a
  // handle of another cache of this process, or a field that disagrees with
  // what the exporter recorded: runtime bytes, slot, buffer id, device,
  // offset + bytes past the extent); NotFound (stale: the exporter freed that
  // version, a newer one was imported, or the exporter is gone or died; an
  // open mapping of it is served no more from 10 ms after its death, and
  // stays valid for the leases already out);
  // PermissionDenied (a shared file that is not this user's own);
  // FailedPrecondition (poisoned device, forked, exiting); the runtime's open
  // error. Sharing is between processes of one user (docs/allocation_cache.md,
  // "Trust model").
  absl::StatusOr<ImportedBuffer> Import(const IpcHandle& handle, int device);
  // The cache's export and import counters, and the versions that wait for
  // the processes still holding them (IpcStats::waiting: one F_OFD_GETLK
  // query per waiting version that nobody holds, 65 per one that is held).
  IpcStats GetIpcStats() const;

 private:
  std::shared_ptr<internal::AllocationCacheCore> core_;
  internal::IpcSharing* sharing_;  // owned by *core_
};

}  // namespace gpupool

#endif  // GPUPOOL_STABLE_BUFFERS_H_
