// IpcExports (ipc/exports.h): export once per buffer version, never free a
// version an importer still has mapped.

#include "src/allocation/ipc/exports.h"

#include <unistd.h>

#include <atomic>
#include <random>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpupool::internal {

uint64_t NextIpcVersion() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

uint64_t RandomIpcId() {
  std::random_device device;
  const uint64_t id = (uint64_t{device()} << 32) ^ device();
  return id != 0 ? id : 1;
}

namespace {

// FNV-1a of the name: the buffer's id, the same for all its versions.
uint64_t BufferId(absl::string_view name, int device) {
  uint64_t hash = 0xcbf29ce484222325 ^ static_cast<uint64_t>(device);
  for (char c : name) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3;
  }
  return hash;
}

}  // namespace

namespace {

// The exporter ids of this process's live caches: a handle carrying one of
// them is this process's own, whatever pid it names (two containers' first
// processes are both pid 1).
struct LocalExporters {
  Mutex mu;
  absl::flat_hash_set<uint64_t> ids ABSL_GUARDED_BY(mu);
};
LocalExporters& Local() {
  static auto* local = new LocalExporters;
  return *local;
}

uint64_t RegisteredId() {
  LocalExporters& local = Local();
  MutexLock lock(&local.mu);
  uint64_t id = RandomIpcId();
  while (!local.ids.insert(id).second) id = RandomIpcId();
  return id;
}

}  // namespace

bool IsLocalExporter(uint64_t exporter_id) {
  LocalExporters& local = Local();
  MutexLock lock(&local.mu);
  return local.ids.contains(exporter_id);
}

IpcExports::IpcExports(Backend& backend)
    : backend_(backend),
      exporter_id_(RegisteredId()),
      exporter_pid_(static_cast<uint64_t>(getpid())) {}

IpcExports::~IpcExports() {
  LocalExporters& local = Local();
  MutexLock lock(&local.mu);
  local.ids.erase(exporter_id_);
}

uint64_t IpcExports::stable_frees() const {
  MutexLock lock(&mu_);
  return stable_frees_;
}

absl::StatusOr<IpcHandle> IpcExports::Export(absl::string_view name, int device,
                                             void* ptr, size_t bytes,
                                             uint64_t generation,
                                             uint64_t frees_seen, bool* moved) {
  MutexLock lock(&mu_);
  *moved = false;
  auto it = live_.find({device, reinterpret_cast<uintptr_t>(ptr)});
  if (it != live_.end() && it->second.generation != generation) {
    // Kept from before a reset of the device (which this cache may not
    // have seen poisoned): that memory is gone, and `ptr` is a new
    // allocation at the same address. Its slot stays claimed while pinned.
    refs_->TryRetire(it->second.handle.slot, it->second.handle.version);
    live_.erase(it);
    it = live_.end();
  }
  if (it != live_.end()) {
    // Another request the buffer holds: the binding vouches for the most
    // bytes ever handed out for this version (AcquireStable returned the
    // same pointer for them, so the allocation holds them). Exported
    // pointers are freed only through MayFree, which erases them first: a
    // live entry is never a freed pointer.
    ++export_calls_;
    it->second.handle.bytes = bytes;
    refs_->GrowExtent(it->second.handle.slot, bytes);
    return it->second.handle;
  }
  if (stable_frees_ != frees_seen) {
    *moved = true;  // `ptr` may be freed already: acquire again
    return absl::AbortedError("moved");
  }
  ++export_calls_;
  if (refs_ == nullptr) {
    absl::StatusOr<std::unique_ptr<IpcRefs>> refs =
        IpcRefs::Create(exporter_id_);
    if (!refs.ok()) return refs.status();
    refs_ = *std::move(refs);
  }
  absl::StatusOr<IpcMemHandle> runtime = backend_.GetIpcHandle(device, ptr);
  if (!runtime.ok()) return runtime.status();
  Version version;
  version.name = std::string(name);
  version.ptr = ptr;
  version.generation = generation;
  version.handle.runtime = *runtime;
  version.handle.device = device;
  version.handle.offset = 0;  // a stable buffer is its allocation's base
  version.handle.bytes = bytes;
  version.handle.buffer_id = BufferId(name, device);
  version.handle.version = NextIpcVersion();
  version.handle.exporter_pid = exporter_pid_;
  version.handle.exporter_id = exporter_id_;
  IpcSlotBinding binding;
  binding.digest = IpcRuntimeDigest(version.handle.runtime.bytes);
  binding.buffer_id = version.handle.buffer_id;
  binding.device = device;
  binding.extent = bytes;
  absl::StatusOr<uint32_t> slot = refs_->Claim(version.handle.version, binding);
  if (!slot.ok()) return slot.status();
  version.handle.slot = *slot;
  ++exports_;
  live_.emplace(std::make_pair(device, reinterpret_cast<uintptr_t>(ptr)),
                version);
  return version.handle;
}

bool IpcExports::MayFree(int device, void* ptr, uint64_t generation) {
  MutexLock lock(&mu_);
  ++stable_frees_;
  auto it = live_.find({device, reinterpret_cast<uintptr_t>(ptr)});
  if (it == live_.end()) return true;
  if (it->second.generation != generation) {
    refs_->TryRetire(it->second.handle.slot, it->second.handle.version);
    live_.erase(it);
    return true;
  }
  Version version = it->second;
  live_.erase(it);
  if (refs_->TryRetire(version.handle.slot, version.handle.version)) {
    return true;
  }
  waiting_.push_back(version);
  return false;
}

std::vector<IpcExports::Freeable> IpcExports::TakeFreeable() {
  std::vector<Freeable> freeable;
  MutexLock lock(&mu_);
  for (size_t i = 0; i < waiting_.size();) {
    const Version& version = waiting_[i];
    if (refs_->TryRetire(version.handle.slot, version.handle.version)) {
      freeable.push_back(
          Freeable{version.handle.device, version.ptr, version.generation});
      waiting_[i] = waiting_.back();
      waiting_.pop_back();
    } else {
      ++i;
    }
  }
  return freeable;
}

void IpcExports::DropDevice(int device) {
  MutexLock lock(&mu_);
  for (auto it = live_.begin(); it != live_.end();) {
    if (it->first.first == device) {
      live_.erase(it++);
    } else {
      ++it;
    }
  }
  for (size_t i = 0; i < waiting_.size();) {
    if (waiting_[i].handle.device == device) {
      waiting_[i] = waiting_.back();
      waiting_.pop_back();
    } else {
      ++i;
    }
  }
}

absl::StatusOr<void*> IpcExports::LocalPointer(const IpcHandle& handle,
                                               bool pin) {
  MutexLock lock(&mu_);
  const Version* found = nullptr;
  for (const auto& [key, live] : live_) {
    if (live.handle.version == handle.version) found = &live;
  }
  for (const Version& waiting : waiting_) {
    if (waiting.handle.version == handle.version) found = &waiting;
  }
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("AllocationCache::Import: stale handle: version ",
                     handle.version, " of this cache's buffer was freed"));
  }
  const std::optional<IpcSlotBinding> binding =
      refs_->Binding(found->handle.slot, found->handle.version);
  absl::Status wrong = CheckBinding(handle, binding);
  if (!wrong.ok()) return wrong;
  if (handle.slot != found->handle.slot) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllocationCache::Import: the handle's slot ", handle.slot,
                     " is not the slot of version ", handle.version));
  }
  if (pin && !refs_->Pin(handle.slot, handle.version)) {
    return absl::NotFoundError(
        absl::StrCat("AllocationCache::Import: stale handle: version ",
                     handle.version, " of this cache's buffer was freed"));
  }
  return found->ptr;
}

void IpcExports::UnpinLocal(uint32_t slot, uint64_t version) {
  MutexLock lock(&mu_);
  if (refs_ != nullptr) refs_->Unpin(slot, version);
}

absl::Status CheckBinding(const IpcHandle& handle,
                          const std::optional<IpcSlotBinding>& binding) {
  constexpr absl::string_view where = "AllocationCache::Import";
  if (!binding.has_value()) {
    return absl::NotFoundError(
        absl::StrCat(where, ": stale handle: the exporter's slot ", handle.slot,
                     " no longer holds version ", handle.version));
  }
  if (binding->digest != IpcRuntimeDigest(handle.runtime.bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": the handle's runtime bytes are not those the exporter "
                     "recorded for slot ",
                     handle.slot, " version ", handle.version,
                     " (crossed or forged handle)"));
  }
  if (binding->buffer_id != handle.buffer_id) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the handle's buffer id does not match slot ",
                     handle.slot, " version ", handle.version));
  }
  if (binding->device != handle.device) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the handle's device ", handle.device,
                     " is not the exporter's device ", binding->device,
                     " of version ", handle.version));
  }
  return CheckExtent(handle, binding->extent, "the exporter's recorded extent");
}

absl::Status CheckExtent(const IpcHandle& handle, uint64_t extent,
                         absl::string_view of_what) {
  // Overflow-safe: offset + bytes is never computed.
  if (handle.offset > extent || handle.bytes > extent - handle.offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllocationCache::Import: the handle's offset ",
                     handle.offset, " + bytes ", handle.bytes, " run past ",
                     of_what, " of ", extent, " bytes"));
  }
  return absl::OkStatus();
}

int64_t IpcExports::exports() const {
  MutexLock lock(&mu_);
  return exports_;
}
int64_t IpcExports::export_calls() const {
  MutexLock lock(&mu_);
  return export_calls_;
}
std::vector<IpcWaitingVersion> IpcExports::WaitingVersions() const {
  std::vector<IpcWaitingVersion> versions;
  MutexLock lock(&mu_);
  for (const Version& waiting : waiting_) {
    IpcWaitingVersion& version = versions.emplace_back();
    version.name = waiting.name;
    version.device = waiting.handle.device;
    version.buffer_id = waiting.handle.buffer_id;
    version.version = waiting.handle.version;
    version.importers = refs_->Importers(waiting.handle.slot);
  }
  return versions;
}

bool IpcExports::IsLive(int device, const void* ptr) const {
  MutexLock lock(&mu_);
  return live_.contains({device, reinterpret_cast<uintptr_t>(ptr)});
}

}  // namespace gpupool::internal
