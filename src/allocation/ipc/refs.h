// IpcRefs: the cross-process reference counts by which an exporting cache
// learns that no importer still has an old version of a buffer mapped.
//
// The exporter owns one table per cache, an owner-only file in the user's
// shared-memory directory (base/owner_files.h: opened with O_NOFOLLOW and
// checked with fstat before it is mapped) named by the random exporter id,
// of kSlots 64-bit words and kSlots bindings. An exported buffer
// version claims a slot and tags it with its version; an importer pins the
// slot (+1) before it opens the runtime handle and unpins it (-1) after it
// closed it. The exporter frees an old version only once it can retire the
// slot, which succeeds only at count 0; a pin after the retire fails, so the
// importer reports the handle stale instead of mapping freed memory. Tag and
// count share one word (tag: high 40 bits, count: low 24 bits), so each step
// is one compare-and-swap.
//
// Thread safety: every method may be called concurrently, from any process
// that attached the table.

#ifndef GPUPOOL_SRC_ALLOCATION_IPC_REFS_H_
#define GPUPOOL_SRC_ALLOCATION_IPC_REFS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace gpupool::internal {

// What the exporter recorded for a version (see above).
struct IpcSlotBinding {
  uint64_t digest = 0;  // IpcRuntimeDigest of the runtime handle bytes
  uint64_t buffer_id = 0;
  int64_t device = -1;
  uint64_t extent = 0;  // bytes from the allocation's base
};

class IpcRefs {
 public:
  static constexpr uint32_t kSlots = 4096;

  // Exporter: creates the table of `exporter_id`.
  static absl::StatusOr<std::unique_ptr<IpcRefs>> Create(uint64_t exporter_id);
  // Importer: attaches the table of another cache; NotFound when it is
  // gone (the exporter exited or destroyed its cache); PermissionDenied
  // when the file is not this user's own (base/owner_files.h);
  // InvalidArgument when it is not a table's size.
  static absl::StatusOr<std::unique_ptr<IpcRefs>> Attach(uint64_t exporter_id);
  // The owner removes the file; everyone unmaps.
  ~IpcRefs();
  IpcRefs(const IpcRefs&) = delete;
  IpcRefs& operator=(const IpcRefs&) = delete;

  // Exporter: a free slot, bound to `binding` and then tagged `tag` (> 0,
  // < 2^40 - 1) with count 0; ResourceExhausted when every slot is taken.
  absl::StatusOr<uint32_t> Claim(uint64_t tag, const IpcSlotBinding& binding);
  // Exporter: the version in `slot` now vouches for `extent` bytes (never
  // less than before).
  void GrowExtent(uint32_t slot, uint64_t extent);
  // The binding of `slot` while it carries `tag`; nullopt when it does not
  // (retired, or never that version).
  std::optional<IpcSlotBinding> Binding(uint32_t slot, uint64_t tag) const;
  // Exporter: frees the slot when its count is 0 (true); false while pinned.
  bool TryRetire(uint32_t slot, uint64_t tag);
  // Importer: +1 while the slot still carries `tag`; false when retired.
  bool Pin(uint32_t slot, uint64_t tag);
  // Importer: -1 (never below 0: a mismatched unpin changes nothing).
  void Unpin(uint32_t slot, uint64_t tag);
  // The slot's count while it carries `tag`; 0 otherwise.
  int64_t Count(uint32_t slot, uint64_t tag) const;

 private:
  struct Record;
  IpcRefs(std::string name, bool owner, void* table);
  // The table's file name in the user's directory (base/owner_files.h).
  static std::string NameOf(uint64_t exporter_id);

  const std::string name_;
  const bool owner_;
  void* const table_;
  std::atomic<uint64_t>* const words_;  // kSlots tag+count words
  Record* const records_;               // kSlots bindings after them
};

// FNV-1a of the runtime handle bytes (the slot binding's digest).
uint64_t IpcRuntimeDigest(const std::array<uint8_t, 64>& runtime_bytes);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_IPC_REFS_H_
