// IpcRefs: the exporter's table by which an exporting cache learns that no
// live importer still has an old version of a buffer mapped.
//
// The exporter owns one table per cache, an owner-only file in the user's
// shared-memory directory (base/owner_files.h: opened with O_NOFOLLOW and
// checked with fstat before it is mapped) named by the random exporter id,
// of kSlots tag words and kSlots bindings. An exported buffer version
// claims a slot and tags it with its version.
//
// Pins are kernel locks, not counts: an importer pins a version by holding
// an open-file-description read lock (fcntl F_OFD_SETLK, F_RDLCK) on the
// byte of the table file at the slot's index, taken before it opens the
// runtime handle and dropped after it closed it. The kernel drops the lock
// when the importer's last descriptor of the file closes, which includes
// its death by any signal, so a killed importer never pins a version beyond
// the exporter's next attempt to free it; and since a lock belongs to the
// open file description that took it, no other process can release a pin
// it does not hold. The exporter frees a version only once it takes the
// write lock on that byte (F_WRLCK, refused while any reader holds it) and
// clears the tag under it; an importer checks the tag *after* its read lock
// is granted, so it either keeps the version alive or sees it retired and
// reports the handle stale, never maps freed memory. A process pins a slot
// once per table however many of its mappings use it (a local count).
//
// Counting: beside its pin, an importer holds an open-file-description
// write lock on one of kCountedImporters bytes of its slot's count range
// (the first free one; none when all are taken). The exporter counts the
// held bytes with F_OFD_GETLK probes: how many processes wait on a version.
// The count is for stats only; the pin alone decides when a version is freed,
// so an importer that found every count byte taken still pins.
//
// Liveness: the exporter holds a shared flock(2) on the table while it
// lives (what the reapers and a first attach probe; see ReapDeadTables),
// and an open-file-description write lock on the liveness byte, which an
// importer probes with F_OFD_GETLK (a query: it takes nothing, so probes
// never disturb each other). The probe's verdict is remembered: import hits
// ask it again at most once per recheck interval (RecentlyAlive), and a
// table found dead stays dead. The exporter takes the liveness byte right
// after it made the table, before any handle of it exists.
//
// Each slot also holds the version's binding, written by the exporter
// before the tag is published: a digest of the runtime handle bytes, the
// buffer id, the device and the extent (bytes) the exporter vouched for.
// An importer compares a handle with the binding of the slot it names
// before it pins or opens anything: a handle whose runtime bytes belong to
// another slot, or whose offset + bytes run past the extent, is refused.
// The table is the exporter's own file, so the binding is what the exporter
// recorded, not what a peer claims (the handle's checksum proves only that
// its bytes were not damaged in transit).
//
// Thread safety: every method may be called concurrently, from any process
// that attached the table.

#ifndef GPUPOOL_SRC_ALLOCATION_IPC_REFS_H_
#define GPUPOOL_SRC_ALLOCATION_IPC_REFS_H_

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "src/lifetime/mutex.h"

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
  // Count bytes per slot: counts above it read as this many.
  static constexpr int kCountedImporters = 64;
  // An import hit that starts this long after the exporter died sees it
  // dead (RecentlyAlive).
  static constexpr int64_t kLivenessBoundNs = 10'000'000;

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
  // Exporter: frees the slot when no live process pins it (true); false
  // while one does.
  bool TryRetire(uint32_t slot, uint64_t tag);
  // Pins the slot while it still carries `tag` (false: retired, or being
  // retired right now). The exporter's own pins (leases on its own
  // handles) use a second descriptor, so its retire probes see them.
  bool Pin(uint32_t slot, uint64_t tag);
  // Drops one pin this process took on the slot (others' pins are theirs).
  void Unpin(uint32_t slot, uint64_t tag);
  // Whether a live process other than the prober pins the slot now.
  bool Pinned(uint32_t slot) const;
  // Exporter: how many processes hold a count byte of `slot` now (at most
  // kCountedImporters, which reads "at least that many").
  int Importers(uint32_t slot) const;
  // Whether the table's exporter still lives (holds its liveness lock):
  // probes now, and remembers the verdict for RecentlyAlive.
  bool Alive() const;
  // Alive(), probed again only when the coarse monotonic clock shows more
  // than the recheck interval since the last probe; false for good once a
  // probe found the exporter dead. The interval is kLivenessBoundNs less one
  // tick of CLOCK_MONOTONIC_COARSE, so a call that starts kLivenessBoundNs
  // or more after the exporter's death returns false (while the coarse
  // clock lags real time by no more than its tick, as it does unless the
  // machine's ticks are held back). Between probes it costs one vDSO clock
  // read.
  bool RecentlyAlive() const;

  // Removes the tables of this user's exporters that died without removing
  // theirs (killed): those whose liveness lock nobody holds. Returns how
  // many were removed.
  static int ReapDeadTables();

 private:
  struct Record;
  IpcRefs(std::string name, bool owner, void* table, int lock_fd, int pin_fd);
  // The table's file name in the user's directory (base/owner_files.h).
  static std::string NameOf(uint64_t exporter_id);

  const std::string name_;
  const bool owner_;
  void* const table_;
  std::atomic<uint64_t>* const words_;  // kSlots tag+count words
  Record* const records_;               // kSlots bindings after them
  const pid_t creator_pid_;
  // Owner: retire probes and the liveness flock. Importer: its pins.
  const int lock_fd_;
  // Owner: its own pins (a second open file description); else lock_fd_.
  const int pin_fd_;
  // This process's pins per slot: the kernel lock is taken at 0 -> 1 and
  // dropped at 1 -> 0; with it, the count byte taken (-1: none).
  mutable Mutex mu_;
  std::vector<int> pins_ ABSL_GUARDED_BY(mu_);
  std::vector<int8_t> count_bytes_ ABSL_GUARDED_BY(mu_);
  // RecentlyAlive's memory: the coarse clock before the last probe, and a
  // dead verdict (never undone).
  const int64_t recheck_ns_;
  mutable std::atomic<int64_t> probed_at_ns_{0};
  mutable std::atomic<bool> dead_{false};
};

// FNV-1a of the runtime handle bytes (the slot binding's digest).
uint64_t IpcRuntimeDigest(const std::array<uint8_t, 64>& runtime_bytes);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_IPC_REFS_H_
