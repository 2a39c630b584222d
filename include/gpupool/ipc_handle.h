// gpupool/ipc_handle.h — what one process gives another so that it can map
// a buffer of its device memory: the runtime's opaque handle plus everything
// the importer needs to use it safely and to detect a stale one.
//
// The runtime's handle names a whole allocation, and a new allocation at the
// same address gets different handle bytes; so the handle carries the offset
// of the buffer inside the allocation, its size, the buffer's version (a new
// version whenever the exporter reallocates it), and the exporter's identity
// (a random id drawn per exporting cache: pids repeat across containers and
// are recycled; the pid is carried for messages only). Serialize() gives a
// versioned byte string for the user's own transport (a pipe, MPI, a TCP
// store); Parse() reads it back and refuses anything else.
//
// A handle proves nothing by itself (its checksum detects damage, not
// forgery): Import checks every field against what the exporter recorded in
// its own table before it pins or opens anything, and keeps every lease
// inside the mapped allocation. See "Trust model" in docs/allocation_cache.md.
//
// Example:
//
//   std::string wire = handle.Serialize();
//   // ... send `wire` to the peer ...
//   absl::StatusOr<gpupool::IpcHandle> back = gpupool::IpcHandle::Parse(wire);

#ifndef GPUPOOL_IPC_HANDLE_H_
#define GPUPOOL_IPC_HANDLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/export.h"

namespace gpupool {

struct GPUPOOL_EXPORT IpcHandle {
  // The runtime's handle of the allocation holding the buffer.
  IpcMemHandle runtime;
  // Device of the exporter the allocation lives on.
  int device = 0;
  // Where the buffer starts inside the allocation, and its size.
  uint64_t offset = 0;
  uint64_t bytes = 0;
  // Identifies the exported buffer within its exporter (stable across
  // versions), and its version: a buffer that is reallocated gets a new
  // version and a new handle.
  uint64_t buffer_id = 0;
  uint64_t version = 0;
  // The exporter: its pid (for messages) and its random exporter id (its
  // identity), drawn once per exporting cache.
  uint64_t exporter_pid = 0;
  uint64_t exporter_id = 0;
  // The slot of this version in the exporter's table: the binding Import
  // checks the handle against, and the byte importers lock (pin) while they
  // have the version mapped, so the exporter never frees it under a live
  // importer.
  uint32_t slot = 0;

  // The current serialization format; Parse reads exactly this one.
  static constexpr uint16_t kFormatVersion = 1;
  // Bytes of a serialized handle.
  static constexpr size_t kSerializedBytes = 136;

  // A `kSerializedBytes`-byte string: magic, format version, the fields above
  // (little-endian) and a checksum.
  std::string Serialize() const;
  // InvalidArgument for the wrong size, a wrong magic number, another format
  // version, or a checksum mismatch (corrupt bytes).
  static absl::StatusOr<IpcHandle> Parse(absl::string_view wire);

  friend bool operator==(const IpcHandle& a, const IpcHandle& b) {
    return a.runtime == b.runtime && a.device == b.device &&
           a.offset == b.offset && a.bytes == b.bytes &&
           a.buffer_id == b.buffer_id && a.version == b.version &&
           a.exporter_pid == b.exporter_pid && a.exporter_id == b.exporter_id &&
           a.slot == b.slot;
  }
  friend bool operator!=(const IpcHandle& a, const IpcHandle& b) {
    return !(a == b);
  }
};

namespace internal {
class IpcImports;
struct IpcMapping;
}  // namespace internal

// A lease on another process's buffer mapped into this one
// (StableBuffers::Import). Move-only; the mapping stays open while any
// lease of it is out, and is closed once it is superseded by a newer version
// (or trimmed) and its last lease is gone.
class GPUPOOL_EXPORT ImportedBuffer {
 public:
  ImportedBuffer() = default;
  ImportedBuffer(ImportedBuffer&& other) noexcept;
  ImportedBuffer& operator=(ImportedBuffer&& other) noexcept;
  ImportedBuffer(const ImportedBuffer&) = delete;
  ImportedBuffer& operator=(const ImportedBuffer&) = delete;
  ~ImportedBuffer() { Release(); }

  // The buffer's first byte in this process; nullptr when empty.
  void* data() const { return data_; }
  // Bytes of the buffer (the handle's size).
  size_t size() const { return size_; }
  // The device it is mapped on here; -1 when empty.
  int device() const { return device_; }
  // The buffer version the handle named.
  uint64_t version() const { return version_; }
  // True when the handle was this cache's own export: data() is the local
  // buffer, no mapping was made (the runtimes refuse to open their own).
  bool local() const { return local_; }
  explicit operator bool() const { return data_ != nullptr; }

  // Gives the lease back now; the lease is empty afterwards.
  void Release();

 private:
  friend class internal::IpcImports;
  std::shared_ptr<internal::IpcImports> imports_;
  internal::IpcMapping* mapping_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
  int device_ = -1;
  uint64_t version_ = 0;
  bool local_ = false;
};

// Importers counted per waiting version: a count of this many reads "at
// least this many" (further importers still keep the version alive; they
// are not counted).
inline constexpr int kIpcCountedImporters = 64;

// A buffer version this cache freed (the buffer grew, or was released) that
// waits for processes that still map it (IpcStats::waiting).
struct GPUPOOL_EXPORT IpcWaitingVersion {
  std::string name;  // the stable buffer's name
  int device = -1;
  uint64_t buffer_id = 0;
  uint64_t version = 0;
  // Processes holding the version when the stats were taken, this one
  // included while it leases its own handle; kIpcCountedImporters means at
  // least that many (a process that came when all were counted is never
  // counted, so after more holders than that it may read low, never high).
  // The version is freed at the next Export or AllocationCache::Trim once no
  // process holds it, counted or not.
  int importers = 0;
};

// The IPC counters of one AllocationCache (StableBuffers::GetIpcStats).
struct GPUPOOL_EXPORT IpcStats {
  // Exporter side.
  int64_t export_calls = 0;      // StableBuffers::Export calls
  int64_t exports = 0;           // buffer versions exported (runtime calls)
  int64_t versions_waiting = 0;  // freed versions an importer still maps
  // Those versions, and how many processes each waits on.
  std::vector<IpcWaitingVersion> waiting;
  // Importer side.
  int64_t imports = 0;        // Import calls that returned a lease
  int64_t import_hits = 0;    // ... served by an open mapping
  int64_t local_imports = 0;  // ... of this cache's own handles
  int64_t opens = 0;          // runtime OpenIpcHandle calls that succeeded
  int64_t closes = 0;         // mappings closed (runtime calls)
  int64_t dropped = 0;  // mappings forgotten: no runtime call, or it failed
  int64_t mappings_live = 0;  // mappings open now
  int64_t import_leases = 0;  // ImportedBuffer leases out now

  std::string ToString() const;
};

}  // namespace gpupool

#endif  // GPUPOOL_IPC_HANDLE_H_
