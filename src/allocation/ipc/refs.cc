// IpcRefs (ipc/refs.h): the exporter's shared table of reference counts.

#include "src/allocation/ipc/refs.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/owner_files.h"

namespace gpupool::internal {
namespace {

constexpr int kCountBits = 24;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
// A claimed slot whose binding is being written: no version matches it.
constexpr uint64_t kClaimingTag = (uint64_t{1} << (64 - kCountBits)) - 1;
static_assert(std::atomic<uint64_t>::is_always_lock_free);

uint64_t TagOf(uint64_t word) { return word >> kCountBits; }
uint64_t CountOf(uint64_t word) { return word & kCountMask; }
uint64_t Word(uint64_t tag, uint64_t count) {
  return (tag << kCountBits) | count;
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

IpcRefs::IpcRefs(std::string name, bool owner, void* table)
    : name_(std::move(name)),
      owner_(owner),
      table_(table),
      words_(static_cast<std::atomic<uint64_t>*>(table)),
      records_(
          reinterpret_cast<Record*>(static_cast<char*>(table) + kWordsBytes)) {
  static_assert(sizeof(Record) == 4 * sizeof(uint64_t));
}

std::string IpcRefs::NameOf(uint64_t exporter_id) {
  return absl::StrFormat("ipc-refs-%016x", exporter_id);
}

absl::StatusOr<std::unique_ptr<IpcRefs>> IpcRefs::Create(uint64_t exporter_id) {
  std::string name = NameOf(exporter_id);
  absl::StatusOr<int> fd = CreateOwnerFile(name, kTableBytes);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("IPC export: ", fd.status().message()));
  }
  void* table = MapTable(*fd);
  const int error = errno;
  close(*fd);
  if (table == nullptr) {
    UnlinkOwnerFile(name);
    return absl::InternalError(
        absl::StrCat("IPC export: cannot map ", name, ": ", strerror(error)));
  }
  return std::unique_ptr<IpcRefs>(new IpcRefs(std::move(name), true, table));
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
  void* table = MapTable(*fd);
  const int error = errno;
  close(*fd);
  if (table == nullptr) {
    return absl::InternalError(
        absl::StrCat("IPC import: cannot map ", name, ": ", strerror(error)));
  }
  return std::unique_ptr<IpcRefs>(new IpcRefs(std::move(name), false, table));
}

IpcRefs::~IpcRefs() {
  if (owner_) UnlinkOwnerFile(name_);
  munmap(table_, kTableBytes);
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
  if (slot >= kSlots) return false;
  uint64_t expected = Word(tag, 0);
  return words_[slot].compare_exchange_strong(expected, 0,
                                              std::memory_order_acq_rel);
}

bool IpcRefs::Pin(uint32_t slot, uint64_t tag) {
  if (slot >= kSlots || tag == 0 || tag >= kClaimingTag) return false;
  uint64_t word = words_[slot].load(std::memory_order_acquire);
  while (TagOf(word) == tag && CountOf(word) < kCountMask) {
    if (words_[slot].compare_exchange_weak(word, word + 1,
                                           std::memory_order_acq_rel)) {
      return true;
    }
  }
  return false;
}

void IpcRefs::Unpin(uint32_t slot, uint64_t tag) {
  if (slot >= kSlots) return;
  uint64_t word = words_[slot].load(std::memory_order_acquire);
  while (TagOf(word) == tag && CountOf(word) > 0) {
    if (words_[slot].compare_exchange_weak(word, word - 1,
                                           std::memory_order_acq_rel)) {
      return;
    }
  }
}

int64_t IpcRefs::Count(uint32_t slot, uint64_t tag) const {
  if (slot >= kSlots) return 0;
  const uint64_t word = words_[slot].load(std::memory_order_acquire);
  return TagOf(word) == tag ? static_cast<int64_t>(CountOf(word)) : 0;
}

}  // namespace gpupool::internal
