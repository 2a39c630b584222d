// IpcRefs (ipc/refs.h): the exporter's shared table of reference counts.

#include "src/allocation/ipc/refs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpupool::internal {
namespace {

constexpr int kCountBits = 24;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
constexpr size_t kTableBytes = IpcRefs::kSlots * sizeof(uint64_t);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

uint64_t TagOf(uint64_t word) { return word >> kCountBits; }
uint64_t CountOf(uint64_t word) { return word & kCountMask; }
uint64_t Word(uint64_t tag, uint64_t count) {
  return (tag << kCountBits) | count;
}

std::atomic<uint64_t>* MapTable(int fd) {
  void* base =
      mmap(nullptr, kTableBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return base == MAP_FAILED ? nullptr
                            : static_cast<std::atomic<uint64_t>*>(base);
}

}  // namespace

std::string IpcRefs::PathOf(uint64_t pid, uint64_t exporter_id) {
  return absl::StrFormat("/dev/shm/gpupool-ipc-refs-%d-%016x", pid,
                         exporter_id);
}

absl::StatusOr<std::unique_ptr<IpcRefs>> IpcRefs::Create(uint64_t exporter_id) {
  std::string path = PathOf(static_cast<uint64_t>(getpid()), exporter_id);
  const int fd =
      open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("IPC export: cannot create ", path,
                                            ": ", strerror(errno)));
  }
  std::atomic<uint64_t>* words =
      ftruncate(fd, kTableBytes) == 0 ? MapTable(fd) : nullptr;
  const int error = errno;
  close(fd);
  if (words == nullptr) {
    unlink(path.c_str());
    return absl::InternalError(
        absl::StrCat("IPC export: cannot map ", path, ": ", strerror(error)));
  }
  return std::unique_ptr<IpcRefs>(new IpcRefs(std::move(path), true, words));
}

absl::StatusOr<std::unique_ptr<IpcRefs>> IpcRefs::Attach(uint64_t pid,
                                                         uint64_t exporter_id) {
  std::string path = PathOf(pid, exporter_id);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("IPC import: stale handle: the exporting cache (process ",
                     pid, ") is gone"));
  }
  struct stat info;
  std::atomic<uint64_t>* words =
      fstat(fd, &info) == 0 && static_cast<size_t>(info.st_size) == kTableBytes
          ? MapTable(fd)
          : nullptr;
  close(fd);
  if (words == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("IPC import: ", path, " is not an export table"));
  }
  return std::unique_ptr<IpcRefs>(new IpcRefs(std::move(path), false, words));
}

IpcRefs::~IpcRefs() {
  if (owner_) unlink(path_.c_str());
  munmap(words_, kTableBytes);
}

absl::StatusOr<uint32_t> IpcRefs::Claim(uint64_t tag) {
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    uint64_t expected = 0;
    if (words_[slot].compare_exchange_strong(expected, Word(tag, 0),
                                             std::memory_order_acq_rel)) {
      return slot;
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "IPC export: all ", kSlots, " export slots hold versions still mapped"));
}

bool IpcRefs::TryRetire(uint32_t slot, uint64_t tag) {
  if (slot >= kSlots) return false;
  uint64_t expected = Word(tag, 0);
  return words_[slot].compare_exchange_strong(expected, 0,
                                              std::memory_order_acq_rel);
}

bool IpcRefs::Pin(uint32_t slot, uint64_t tag) {
  if (slot >= kSlots) return false;
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
