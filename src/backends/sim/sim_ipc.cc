// SimIpcRegistry: the simulator's shared-memory IPC registry (sim_ipc.h says
// how).

#include "src/backends/sim/sim_ipc.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/owner_files.h"

namespace gpupool {
namespace sim_internal {

// At the start of every segment; the allocation's bytes follow at
// kSegmentDataOffset. Lock-free atomics only: two processes share it.
struct SegmentHeader {
  uint64_t magic;
  uint64_t export_id;
  uint64_t instance;
  uint64_t bytes;
  int32_t exporter_pid;
  int32_t device;
  std::atomic<int32_t> live;       // 1 until the exporter frees it
  std::atomic<int32_t> importers;  // processes that have it mapped now
};
static_assert(std::atomic<int32_t>::is_always_lock_free);

namespace {

constexpr uint64_t kHandleMagic = 0x6370696d69737067;   // "gpsimipc"
constexpr uint64_t kSegmentMagic = 0x74676573636d6973;  // "simcsegt"
constexpr uint32_t kHandleVersion = 1;
constexpr size_t kSegmentDataOffset = 4096;

// Field offsets in the handle bytes.
constexpr size_t kMagicAt = 0, kVersionAt = 8, kDeviceAt = 12, kPidAt = 16,
                 kExportIdAt = 24, kBytesAt = 32, kInstanceAt = 40,
                 kChecksumAt = 48;

struct DecodedHandle {
  int device;
  int32_t pid;
  uint64_t export_id;
  uint64_t bytes;
  uint64_t instance;
};

template <typename T>
void Put(IpcMemHandle& handle, size_t at, T value) {
  std::memcpy(handle.bytes.data() + at, &value, sizeof(value));
}
template <typename T>
T Get(const IpcMemHandle& handle, size_t at) {
  T value;
  std::memcpy(&value, handle.bytes.data() + at, sizeof(value));
  return value;
}

// FNV-1a over the fields before the checksum.
uint64_t Checksum(const IpcMemHandle& handle) {
  uint64_t hash = 0xcbf29ce484222325;
  for (size_t i = 0; i < kChecksumAt; ++i) {
    hash = (hash ^ handle.bytes[i]) * 0x100000001b3;
  }
  return hash;
}

IpcMemHandle Encode(const DecodedHandle& d) {
  IpcMemHandle handle;
  Put(handle, kMagicAt, kHandleMagic);
  Put(handle, kVersionAt, kHandleVersion);
  Put(handle, kDeviceAt, static_cast<int32_t>(d.device));
  Put(handle, kPidAt, d.pid);
  Put(handle, kExportIdAt, d.export_id);
  Put(handle, kBytesAt, d.bytes);
  Put(handle, kInstanceAt, d.instance);
  Put(handle, kChecksumAt, Checksum(handle));
  return handle;
}

absl::Status Refuse(absl::StatusCode code, std::string message) {
  return FaultError(Fault::kCaller, code, absl::StrCat("sim: ", message));
}

absl::StatusOr<DecodedHandle> Decode(const IpcMemHandle& handle) {
  if (Get<uint64_t>(handle, kMagicAt) != kHandleMagic) {
    return Refuse(absl::StatusCode::kInvalidArgument,
                  "OpenIpcHandle: not an IPC handle (bad magic)");
  }
  if (Get<uint32_t>(handle, kVersionAt) != kHandleVersion) {
    return Refuse(absl::StatusCode::kInvalidArgument,
                  absl::StrCat("OpenIpcHandle: unknown handle format version ",
                               Get<uint32_t>(handle, kVersionAt)));
  }
  if (Get<uint64_t>(handle, kChecksumAt) != Checksum(handle)) {
    return Refuse(absl::StatusCode::kInvalidArgument,
                  "OpenIpcHandle: corrupt handle (checksum mismatch)");
  }
  for (size_t i = kChecksumAt + 8; i < kIpcMemHandleBytes; ++i) {
    if (handle.bytes[i] != 0) {
      return Refuse(absl::StatusCode::kInvalidArgument,
                    "OpenIpcHandle: corrupt handle (reserved bytes set)");
    }
  }
  return DecodedHandle{
      Get<int32_t>(handle, kDeviceAt), Get<int32_t>(handle, kPidAt),
      Get<uint64_t>(handle, kExportIdAt), Get<uint64_t>(handle, kBytesAt),
      Get<uint64_t>(handle, kInstanceAt)};
}

std::string SanitizedNamespace(const std::string& name) {
  if (name.empty()) return absl::StrCat("uid", getuid());
  std::string out;
  for (char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '-' || c == '_';
    out.push_back(plain ? c : '_');
  }
  return out;
}

uint64_t RandomInstance() {
  std::random_device device;
  uint64_t value = (uint64_t{device()} << 32) ^ device();
  return value ^ (static_cast<uint64_t>(getpid()) << 17);
}

// Maps the whole segment of `fd` (header + `bytes`).
SegmentHeader* MapSegment(int fd, size_t bytes) {
  void* base = mmap(nullptr, kSegmentDataOffset + bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
  return base == MAP_FAILED ? nullptr : static_cast<SegmentHeader*>(base);
}

// Each importing process holds an open-file-description read lock on the
// segment's first byte while it has it mapped: the kernel drops it when the
// importer dies, as the driver unmaps a dead process's IPC mappings.
bool HoldImporterLock(int fd) {
  struct flock lock = {};
  lock.l_type = F_RDLCK;
  lock.l_whence = SEEK_SET;
  lock.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

// Importers alive now: the header's count, unless no importer holds its
// lock any more (those counted died).
int LiveImporters(int fd, const SegmentHeader& header) {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_len = 1;
  if (fcntl(fd, F_OFD_GETLK, &lock) == 0 && lock.l_type == F_UNLCK) return 0;
  return header.importers.load(std::memory_order_acquire);
}

void* DataOf(SegmentHeader* header) {
  return reinterpret_cast<char*>(header) + kSegmentDataOffset;
}

}  // namespace

SimIpcRegistry::SimIpcRegistry(const std::string& ipc_namespace)
    : namespace_(SanitizedNamespace(ipc_namespace)),
      instance_(RandomInstance()),
      pid_(getpid()) {}

SimIpcRegistry::~SimIpcRegistry() {
  absl::MutexLock lock(&mu_);
  for (auto& [address, segment] : exported_) {
    // Not from a fork() child: the segments are its parent's.
    if (getpid() == pid_) {
      segment.header->live.store(0, std::memory_order_release);
      internal::UnlinkOwnerFile(segment.path);
      internal::ForgetOwnerFileAtExit(segment.path);
    }
    Unmap(segment);
  }
  for (auto& [key, mapping] : imported_) {
    mapping.segment.header->importers.fetch_sub(1, std::memory_order_acq_rel);
    Unmap(mapping.segment);
  }
}

std::string SimIpcRegistry::SegmentPath(uint64_t instance,
                                        uint64_t export_id) const {
  return absl::StrFormat("sim-%s-%016x-%x", namespace_, instance, export_id);
}

void SimIpcRegistry::Unmap(Segment& segment) {
  if (segment.header != nullptr) {
    munmap(segment.header, kSegmentDataOffset + segment.mapped_bytes);
  }
  if (segment.fd >= 0) close(segment.fd);  // also drops our flock
  segment.header = nullptr;
  segment.fd = -1;
}

namespace {

// A segment whose exporter died without removing it (killed): removed.
void ReapIfDead(const std::string& name, void* /*unused*/) {
  if (internal::OwnerFileCreatorDead(name, internal::kAnyOwnerFileSize)) {
    internal::UnlinkOwnerFile(name);
  }
}

}  // namespace

absl::StatusOr<IpcMemHandle> SimIpcRegistry::Export(int device,
                                                    uintptr_t address,
                                                    size_t bytes) {
  absl::MutexLock lock(&mu_);
  if (!reaped_) {
    // The first export of this instance reaps what killed exporters of
    // this user left behind.
    internal::ForEachOwnerFile("sim-", &ReapIfDead, nullptr);
    reaped_ = true;
  }
  auto it = exported_.find(address);
  if (it != exported_.end()) return it->second.handle;
  const uint64_t export_id = next_export_id_++;
  Segment segment;
  segment.path = SegmentPath(instance_, export_id);
  absl::StatusOr<int> fd =
      internal::CreateOwnerFile(segment.path, kSegmentDataOffset + bytes);
  if (!fd.ok()) {
    return FaultError(
        Fault::kResource,
        fd.status().code() == absl::StatusCode::kPermissionDenied
            ? absl::StatusCode::kPermissionDenied
            : absl::StatusCode::kInternal,
        absl::StrCat("sim: GetIpcHandle: ", fd.status().message()));
  }
  segment.fd = *fd;
  // CreateOwnerFile's shared flock says "the exporter is alive" until this
  // process exits.
  if ((segment.header = MapSegment(segment.fd, bytes)) == nullptr) {
    const int error = errno;
    internal::UnlinkOwnerFile(segment.path);
    Unmap(segment);
    return FaultError(Fault::kResource, absl::StatusCode::kInternal,
                      absl::StrCat("sim: GetIpcHandle: cannot set up ",
                                   segment.path, ": ", strerror(error)));
  }
  segment.mapped_bytes = bytes;
  // A SimBackend that is never destroyed (the process-wide pools') still
  // removes its segments at exit.
  internal::UnlinkOwnerFileAtExit(segment.path);
  SegmentHeader* header = segment.header;
  header->magic = kSegmentMagic;
  header->export_id = export_id;
  header->instance = instance_;
  header->bytes = bytes;
  header->exporter_pid = getpid();
  header->device = device;
  header->importers.store(0, std::memory_order_relaxed);
  header->live.store(1, std::memory_order_release);
  segment.handle = Encode(
      {device, getpid(), export_id, static_cast<uint64_t>(bytes), instance_});
  ++exports_;
  IpcMemHandle handle = segment.handle;
  exported_.emplace(address, std::move(segment));
  return handle;
}

int SimIpcRegistry::OnFree(uintptr_t address) {
  absl::MutexLock lock(&mu_);
  auto it = exported_.find(address);
  if (it == exported_.end()) return 0;
  Segment& segment = it->second;
  segment.header->live.store(0, std::memory_order_release);
  const int importers = LiveImporters(segment.fd, *segment.header);
  internal::UnlinkOwnerFile(segment.path);
  internal::ForgetOwnerFileAtExit(segment.path);
  Unmap(segment);
  exported_.erase(it);
  return importers;
}

void* SimIpcRegistry::ExportedBytes(uintptr_t address) const {
  absl::MutexLock lock(&mu_);
  auto it = exported_.find(address);
  return it == exported_.end() ? nullptr : DataOf(it->second.header);
}

int SimIpcRegistry::ImportersOf(uintptr_t address) const {
  absl::MutexLock lock(&mu_);
  auto it = exported_.find(address);
  if (it == exported_.end()) return 0;
  return LiveImporters(it->second.fd, *it->second.header);
}

absl::StatusOr<void*> SimIpcRegistry::Open(int device,
                                           const IpcMemHandle& handle) {
  absl::StatusOr<DecodedHandle> decoded = Decode(handle);
  if (!decoded.ok()) return decoded.status();
  if (decoded->pid == getpid()) {
    // Like cuIpcOpenMemHandle in the exporting process: refused.
    return Refuse(absl::StatusCode::kInvalidArgument,
                  "OpenIpcHandle: the handle was exported by this process "
                  "(use the local pointer)");
  }
  if (decoded->device != device) {
    return Refuse(absl::StatusCode::kInvalidArgument,
                  absl::StrCat("OpenIpcHandle: the handle names device ",
                               decoded->device, ", opened on device ", device));
  }
  const std::pair<uint64_t, uint64_t> key{decoded->instance,
                                          decoded->export_id};
  absl::MutexLock lock(&mu_);
  auto known = imported_.find(key);
  if (known != imported_.end()) {
    ++known->second.references;
    return DataOf(known->second.segment.header);
  }
  Mapping mapping;
  mapping.device = device;
  Segment& segment = mapping.segment;
  segment.path = SegmentPath(decoded->instance, decoded->export_id);
  const std::string stale =
      absl::StrCat("OpenIpcHandle: stale handle: export ", decoded->export_id,
                   " of process ", decoded->pid, " (");
  // Owner-only, not a link, a regular file of the size the handle names:
  // checked on the descriptor before anything is mapped (a truncated file
  // would raise SIGBUS on access).
  if (decoded->bytes > (uint64_t{1} << 48)) {
    return Refuse(absl::StatusCode::kInvalidArgument,
                  "OpenIpcHandle: the handle does not match its segment");
  }
  absl::StatusOr<int> fd = internal::OpenOwnerFile(
      segment.path, kSegmentDataOffset + decoded->bytes);
  if (!fd.ok()) {
    switch (fd.status().code()) {
      case absl::StatusCode::kNotFound:
        return Refuse(
            absl::StatusCode::kNotFound,
            absl::StrCat(stale, "the exporter freed the allocation)"));
      case absl::StatusCode::kInvalidArgument:
        return Refuse(absl::StatusCode::kInvalidArgument,
                      absl::StrCat("OpenIpcHandle: the handle does not match "
                                   "its segment: ",
                                   fd.status().message()));
      default:
        return Refuse(fd.status().code(),
                      absl::StrCat("OpenIpcHandle: ", fd.status().message()));
    }
  }
  segment.fd = *fd;
  // Taking the lock exclusively succeeds only when no exporter holds it.
  if (flock(segment.fd, LOCK_EX | LOCK_NB) == 0) {
    internal::UnlinkOwnerFile(segment.path);  // the exporter died: clean up
    Unmap(segment);
    return Refuse(absl::StatusCode::kNotFound,
                  absl::StrCat(stale, "the exporter exited)"));
  }
  if ((segment.header = MapSegment(segment.fd, decoded->bytes)) == nullptr) {
    Unmap(segment);
    return Refuse(absl::StatusCode::kInvalidArgument,
                  "OpenIpcHandle: the handle does not match its segment");
  }
  segment.mapped_bytes = decoded->bytes;
  const SegmentHeader& header = *segment.header;
  if (header.magic != kSegmentMagic || header.export_id != decoded->export_id ||
      header.instance != decoded->instance || header.bytes != decoded->bytes ||
      header.exporter_pid != decoded->pid || header.device != device) {
    Unmap(segment);
    return Refuse(absl::StatusCode::kInvalidArgument,
                  "OpenIpcHandle: the handle does not match its segment");
  }
  if (!HoldImporterLock(segment.fd)) {
    Unmap(segment);
    return Refuse(absl::StatusCode::kInternal,
                  absl::StrCat("OpenIpcHandle: cannot lock the segment: ",
                               strerror(errno)));
  }
  segment.header->importers.fetch_add(1, std::memory_order_acq_rel);
  if (header.live.load(std::memory_order_acquire) == 0) {
    segment.header->importers.fetch_sub(1, std::memory_order_acq_rel);
    Unmap(segment);
    return Refuse(absl::StatusCode::kNotFound,
                  absl::StrCat(stale, "the exporter freed the allocation)"));
  }
  segment.handle = handle;
  mapping.references = 1;
  void* ptr = DataOf(segment.header);
  ++maps_;
  by_address_.emplace(reinterpret_cast<uintptr_t>(ptr), key);
  imported_.emplace(key, std::move(mapping));
  return ptr;
}

absl::Status SimIpcRegistry::Close(int device, void* ptr) {
  absl::MutexLock lock(&mu_);
  auto where = by_address_.find(reinterpret_cast<uintptr_t>(ptr));
  if (where == by_address_.end()) {
    return Refuse(
        absl::StatusCode::kNotFound,
        absl::StrFormat("CloseIpcHandle: %p is not an open mapping", ptr));
  }
  auto it = imported_.find(where->second);
  Mapping& mapping = it->second;
  if (mapping.device != device) {
    return Refuse(absl::StatusCode::kInvalidArgument,
                  absl::StrCat("CloseIpcHandle: the mapping is on device ",
                               mapping.device, ", closed on device ", device));
  }
  if (--mapping.references > 0) return absl::OkStatus();
  mapping.segment.header->importers.fetch_sub(1, std::memory_order_acq_rel);
  Unmap(mapping.segment);
  ++unmaps_;
  by_address_.erase(where);
  imported_.erase(it);
  return absl::OkStatus();
}

std::optional<AddressRange> SimIpcRegistry::RangeOf(int device,
                                                    void* ptr) const {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  absl::MutexLock lock(&mu_);
  for (const auto& [base, key] : by_address_) {
    const Mapping& mapping = imported_.at(key);
    if (mapping.device == device && address >= base &&
        address - base < mapping.segment.mapped_bytes) {
      return AddressRange{reinterpret_cast<void*>(base),
                          mapping.segment.mapped_bytes};
    }
  }
  return std::nullopt;
}

int64_t SimIpcRegistry::exports() const {
  absl::MutexLock lock(&mu_);
  return exports_;
}
int64_t SimIpcRegistry::maps() const {
  absl::MutexLock lock(&mu_);
  return maps_;
}
int64_t SimIpcRegistry::unmaps() const {
  absl::MutexLock lock(&mu_);
  return unmaps_;
}
int SimIpcRegistry::mappings_live() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(imported_.size());
}

}  // namespace sim_internal
}  // namespace gpupool
