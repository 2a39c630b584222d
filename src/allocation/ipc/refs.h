// IpcRefs: the cross-process reference counts by which an exporting cache
// learns that no importer still has an old version of a buffer mapped.
//
// The exporter owns one table per cache, a file under /dev/shm named by its
// pid and random exporter id, of kSlots 64-bit words. An exported buffer
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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gpupool::internal {

class IpcRefs {
 public:
  static constexpr uint32_t kSlots = 4096;

  // Exporter: creates the table of this process and `exporter_id`.
  static absl::StatusOr<std::unique_ptr<IpcRefs>> Create(uint64_t exporter_id);
  // Importer: attaches the table of another process; NotFound when it is
  // gone (the exporter exited or destroyed its cache).
  static absl::StatusOr<std::unique_ptr<IpcRefs>> Attach(uint64_t pid,
                                                         uint64_t exporter_id);
  // The owner removes the file; everyone unmaps.
  ~IpcRefs();
  IpcRefs(const IpcRefs&) = delete;
  IpcRefs& operator=(const IpcRefs&) = delete;

  // Exporter: a free slot, tagged `tag` (> 0, < 2^40) with count 0;
  // ResourceExhausted when every slot is taken.
  absl::StatusOr<uint32_t> Claim(uint64_t tag);
  // Exporter: frees the slot when its count is 0 (true); false while pinned.
  bool TryRetire(uint32_t slot, uint64_t tag);
  // Importer: +1 while the slot still carries `tag`; false when retired.
  bool Pin(uint32_t slot, uint64_t tag);
  // Importer: -1 (never below 0: a mismatched unpin changes nothing).
  void Unpin(uint32_t slot, uint64_t tag);
  // The slot's count while it carries `tag`; 0 otherwise.
  int64_t Count(uint32_t slot, uint64_t tag) const;

 private:
  IpcRefs(std::string path, bool owner, std::atomic<uint64_t>* words)
      : path_(std::move(path)), owner_(owner), words_(words) {}
  static std::string PathOf(uint64_t pid, uint64_t exporter_id);

  const std::string path_;
  const bool owner_;
  std::atomic<uint64_t>* const words_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_IPC_REFS_H_
