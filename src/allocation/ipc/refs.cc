// IpcRefs (ipc/refs.h): the exporter's table; pins are OFD locks.

#include "src/allocation/ipc/refs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpupool/ipc_handle.h"
#include "src/base/owner_files.h"

namespace gpupool::internal {
namespace {

// Versions are below 2^40 (the handle's version field is 64 bits; a larger
// one names no slot).
constexpr uint64_t kClaimingTag = (uint64_t{1} << 40) - 1;
static_assert(std::atomic<uint64_t>::is_always_lock_free);

uint64_t TagOf(uint64_t word) { return word; }
uint64_t Word(uint64_t tag, uint64_t /*unused*/) { return tag; }

// Lock bytes (advisory locks: their offsets say nothing of the data there,
// and may run past the file's end): the pins at [0, kSlots), the exporter's
// liveness byte, then each slot's count range.
static_assert(IpcRefs::kCountedImporters == kIpcCountedImporters);

constexpr off_t kLivenessByte = IpcRefs::kSlots;
constexpr off_t kCountBytesAt = 2 * off_t{IpcRefs::kSlots};
off_t CountByte(uint32_t slot, int index) {
  return kCountBytesAt + off_t{slot} * IpcRefs::kCountedImporters + index;
}

// An open-file-description lock of `type` on `bytes` bytes at `at`; false
// when another open file description holds a conflicting one (never waits).
bool LockBytes(int fd, short type, off_t at,  // NOLINT(runtime/int)
               off_t bytes = 1) {
  struct flock lock = {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = at;
  lock.l_len = bytes;
  while (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    if (errno != EINTR) return false;
  }
  return true;
}
bool LockSlot(int fd, short type, uint32_t slot) {  // NOLINT(runtime/int)
  return LockBytes(fd, type, static_cast<off_t>(slot));
}

// Whether another open file description holds a lock on any of `bytes`
// bytes at `at` (a query: nothing is taken).
bool Held(int fd, off_t at, off_t bytes = 1) {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = at;
  lock.l_len = bytes;
  return fcntl(fd, F_OFD_GETLK, &lock) == 0 && lock.l_type != F_UNLCK;
}

int64_t CoarseNowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// kLivenessBoundNs less one tick of the coarse clock (which lags real time
// by up to a tick): see RecentlyAlive.
int64_t RecheckNs() {
  timespec tick = {0, 0};
  clock_getres(CLOCK_MONOTONIC_COARSE, &tick);
  const int64_t tick_ns = int64_t{tick.tv_sec} * 1'000'000'000 + tick.tv_nsec;
  return std::max<int64_t>(0, IpcRefs::kLivenessBoundNs - tick_ns);
}

}  // namespace

// Lock-free atomics only: the exporter writes them, importers read them.
struct IpcRefs::Record {
  std::atomic<uint64_t> digest;
  std::atomic<uint64_t> buffer_id;
  std::atomic<int64_t> device;
  std::atomic<uint64_t> extent;
};

namespace {

constexpr size_t kWordsBytes = IpcRefs::kSlots * sizeof(uint64_t);
constexpr size_t kTableBytes =
    kWordsBytes + IpcRefs::kSlots * sizeof(std::atomic<uint64_t>) * 4;

void* MapTable(int fd) {
  void* base =
      mmap(nullptr, kTableBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return base == MAP_FAILED ? nullptr : base;
}

}  // namespace

uint64_t IpcRuntimeDigest(const std::array<uint8_t, 64>& runtime_bytes) {
  uint64_t hash = 0xcbf29ce484222325;
  for (uint8_t byte : runtime_bytes) hash = (hash ^ byte) * 0x100000001b3;
  return hash;
}

IpcRefs::IpcRefs(std::string name, bool owner, void* table, int lock_fd,
                 int pin_fd)
    : name_(std::move(name)),
      owner_(owner),
      table_(table),
      words_(static_cast<std::atomic<uint64_t>*>(table)),
      records_(
          reinterpret_cast<Record*>(static_cast<char*>(table) + kWordsBytes)),
      creator_pid_(getpid()),
      lock_fd_(lock_fd),
      pin_fd_(pin_fd),
      pins_(kSlots, 0),
      count_bytes_(kSlots, -1),
      recheck_ns_(RecheckNs()) {
  static_assert(sizeof(Record) == 4 * sizeof(uint64_t));
}

std::string IpcRefs::NameOf(uint64_t exporter_id) {
  return absl::StrFormat("ipc-refs-%016x", exporter_id);
}

absl::StatusOr<std::unique_ptr<IpcRefs>> IpcRefs::Create(uint64_t exporter_id) {
  ReapDeadTables();  // what killed exporters of this user left behind
  std::string name = NameOf(exporter_id);
  absl::StatusOr<int> fd = CreateOwnerFile(name, kTableBytes);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("IPC export: ", fd.status().message()));
  }
  // CreateOwnerFile's shared flock says "the exporter is alive" until this
  // process dies; a second open file description carries our own pins.
  // The liveness byte's lock says the same to importers' hits, which probe
  // it with a query.
  void* table = MapTable(*fd);
  absl::StatusOr<int> pin_fd = absl::InternalError("not opened");
  if (table != nullptr && LockBytes(*fd, F_WRLCK, kLivenessByte)) {
    pin_fd = OpenOwnerFile(name, kTableBytes);
  }
  const int error = errno;
  if (table == nullptr || !pin_fd.ok()) {
    if (pin_fd.ok()) close(*pin_fd);
    if (table != nullptr) munmap(table, kTableBytes);
    close(*fd);
    UnlinkOwnerFile(name);
    return absl::InternalError(absl::StrCat("IPC export: cannot set up ", name,
                                            ": ", strerror(error)));
  }
  UnlinkOwnerFileAtExit(name);  // the process-wide pools' cache never dies
  return std::unique_ptr<IpcRefs>(
      new IpcRefs(std::move(name), true, table, *fd, *pin_fd));
}

absl::StatusOr<std::unique_ptr<IpcRefs>> IpcRefs::Attach(uint64_t exporter_id) {
  std::string name = NameOf(exporter_id);
  absl::StatusOr<int> fd = OpenOwnerFile(name, kTableBytes);
  if (!fd.ok()) {
    if (fd.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrFormat(
          "IPC import: stale handle: the exporting cache %016x is gone",
          exporter_id));
    }
    return absl::Status(fd.status().code(),
                        absl::StrCat("IPC import: the exporter's table: ",
                                     fd.status().message()));
  }
  // Taking the liveness lock exclusively succeeds only when no exporter
  // holds it: the exporter died without removing its table.
  if (flock(*fd, LOCK_EX | LOCK_NB) == 0) {
    UnlinkOwnerFile(name);
    close(*fd);
    return absl::NotFoundError(absl::StrFormat(
        "IPC import: stale handle: the exporting cache %016x died",
        exporter_id));
  }
  void* table = MapTable(*fd);
  const int error = errno;
  if (table == nullptr) {
    close(*fd);
    return absl::InternalError(
        absl::StrCat("IPC import: cannot map ", name, ": ", strerror(error)));
  }
  return std::unique_ptr<IpcRefs>(
      new IpcRefs(std::move(name), false, table, *fd, *fd));
}

IpcRefs::~IpcRefs() {
  // Not from a fork() child: the table is its parent's.
  if (owner_ && getpid() == creator_pid_) {
    UnlinkOwnerFile(name_);
    ForgetOwnerFileAtExit(name_);
  }
  munmap(table_, kTableBytes);
  if (pin_fd_ != lock_fd_) close(pin_fd_);
  close(lock_fd_);  // drops this process's pins and liveness lock
}

bool IpcRefs::Alive() const {
  const int64_t started = CoarseNowNs();  // before the probe: see below
  // A query, unlike a flock probe (which takes the lock for a moment and so
  // can make another prober see a dead exporter alive).
  const bool alive =
      !dead_.load(std::memory_order_relaxed) && Held(lock_fd_, kLivenessByte);
  if (!alive) dead_.store(true, std::memory_order_relaxed);
  // Published after the verdict: whoever reads this time sees a dead one.
  probed_at_ns_.store(started, std::memory_order_release);
  return alive;
}

bool IpcRefs::RecentlyAlive() const {
  // A probe that started after the exporter's death stored a dead verdict
  // before its start time; one that started before it stored an older time,
  // which the coarse clock passes by more than recheck_ns_ once
  // kLivenessBoundNs have gone since the death.
  const int64_t probed_at = probed_at_ns_.load(std::memory_order_acquire);
  if (dead_.load(std::memory_order_relaxed)) return false;
  if (CoarseNowNs() - probed_at <= recheck_ns_) return true;
  return Alive();
}

namespace {

void ReapIfDead(const std::string& name, void* reaped) {
  if (OwnerFileCreatorDead(name, kTableBytes)) {
    UnlinkOwnerFile(name);
    ++*static_cast<int*>(reaped);
  }
}

}  // namespace

int IpcRefs::ReapDeadTables() {
  int reaped = 0;
  ForEachOwnerFile("ipc-refs-", &ReapIfDead, &reaped);
  return reaped;
}

absl::StatusOr<uint32_t> IpcRefs::Claim(uint64_t tag,
                                        const IpcSlotBinding& binding) {
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    uint64_t expected = 0;
    if (words_[slot].compare_exchange_strong(expected, Word(kClaimingTag, 0),
                                             std::memory_order_acq_rel)) {
      Record& record = records_[slot];
      record.digest.store(binding.digest, std::memory_order_relaxed);
      record.buffer_id.store(binding.buffer_id, std::memory_order_relaxed);
      record.device.store(binding.device, std::memory_order_relaxed);
      record.extent.store(binding.extent, std::memory_order_relaxed);
      // Published: whoever sees the tag sees the binding.
      words_[slot].store(Word(tag, 0), std::memory_order_release);
      return slot;
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "IPC export: all ", kSlots, " export slots hold versions still mapped"));
}

void IpcRefs::GrowExtent(uint32_t slot, uint64_t extent) {
  if (slot >= kSlots) return;
  std::atomic<uint64_t>& current = records_[slot].extent;
  uint64_t seen = current.load(std::memory_order_relaxed);
  while (seen < extent && !current.compare_exchange_weak(
                              seen, extent, std::memory_order_release)) {
  }
}

std::optional<IpcSlotBinding> IpcRefs::Binding(uint32_t slot,
                                               uint64_t tag) const {
  if (slot >= kSlots || tag == 0 || tag >= kClaimingTag) return std::nullopt;
  if (TagOf(words_[slot].load(std::memory_order_acquire)) != tag) {
    return std::nullopt;
  }
  const Record& record = records_[slot];
  IpcSlotBinding binding;
  binding.digest = record.digest.load(std::memory_order_relaxed);
  binding.buffer_id = record.buffer_id.load(std::memory_order_relaxed);
  binding.device = record.device.load(std::memory_order_relaxed);
  binding.extent = record.extent.load(std::memory_order_acquire);
  // Still that version: the binding read belongs to it (a slot is rebound
  // only after a retire, and versions never repeat).
  if (TagOf(words_[slot].load(std::memory_order_acquire)) != tag) {
    return std::nullopt;
  }
  return binding;
}

bool IpcRefs::TryRetire(uint32_t slot, uint64_t tag) {
  if (slot >= kSlots || TagOf(words_[slot].load()) != tag) return false;
  // Refused while any other open file description holds a read lock on
  // the byte: a live importer's pin (or our own, on pin_fd_).
  if (!LockSlot(lock_fd_, F_WRLCK, slot)) return false;
  uint64_t expected = Word(tag, 0);
  const bool retired = words_[slot].compare_exchange_strong(
      expected, 0, std::memory_order_acq_rel);
  LockSlot(lock_fd_, F_UNLCK, slot);
  return retired;
}

bool IpcRefs::Pin(uint32_t slot, uint64_t tag) {
  if (slot >= kSlots || tag == 0 || tag >= kClaimingTag) return false;
  MutexLock lock(&mu_);
  if (pins_[slot] == 0) {
    // Granted only while the exporter is not retiring the slot; the tag is
    // read after the grant, so a retire either waits for us or was done.
    if (!LockSlot(pin_fd_, F_RDLCK, slot)) return false;
    if (TagOf(words_[slot].load(std::memory_order_acquire)) != tag) {
      LockSlot(pin_fd_, F_UNLCK, slot);
      return false;
    }
    // Counted on the first free count byte, if any is (stats only).
    count_bytes_[slot] = -1;
    for (int index = 0; index < kCountedImporters; ++index) {
      if (LockBytes(pin_fd_, F_WRLCK, CountByte(slot, index))) {
        count_bytes_[slot] = static_cast<int8_t>(index);
        break;
      }
    }
  } else if (TagOf(words_[slot].load(std::memory_order_acquire)) != tag) {
    return false;  // our lock pins another version of this slot
  }
  ++pins_[slot];
  return true;
}

void IpcRefs::Unpin(uint32_t slot, uint64_t tag) {
  if (slot >= kSlots) return;
  MutexLock lock(&mu_);
  if (pins_[slot] == 0) return;  // not ours to drop
  if (--pins_[slot] > 0) return;
  if (count_bytes_[slot] >= 0) {
    LockBytes(pin_fd_, F_UNLCK, CountByte(slot, count_bytes_[slot]));
    count_bytes_[slot] = -1;
  }
  LockSlot(pin_fd_, F_UNLCK, slot);
}

bool IpcRefs::Pinned(uint32_t slot) const {
  if (slot >= kSlots) return false;
  return Held(lock_fd_, static_cast<off_t>(slot));
}

int IpcRefs::Importers(uint32_t slot) const {
  if (slot >= kSlots ||
      !Held(lock_fd_, CountByte(slot, 0), kCountedImporters)) {
    return 0;
  }
  int importers = 0;
  for (int index = 0; index < kCountedImporters; ++index) {
    importers += Held(lock_fd_, CountByte(slot, index));
  }
  return importers;
}

}  // namespace gpupool::internal
