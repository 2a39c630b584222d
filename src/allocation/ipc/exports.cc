// IpcExports (ipc/exports.h): export once per buffer version, never free a
// version an importer still has mapped.

#include "src/allocation/ipc/exports.h"

#include <unistd.h>

#include <atomic>
#include <random>
#include <string>

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

IpcExports::IpcExports(Backend& backend)
    : backend_(backend),
      exporter_id_(RandomIpcId()),
      exporter_pid_(static_cast<uint64_t>(getpid())) {}

absl::StatusOr<IpcHandle> IpcExports::Export(absl::string_view name, int device,
                                             void* ptr, size_t bytes) {
  MutexLock lock(&mu_);
  ++export_calls_;
  auto it = live_.find({device, reinterpret_cast<uintptr_t>(ptr)});
  if (it != live_.end()) {
    it->second.handle.bytes = bytes;  // a smaller request reuses the buffer
    return it->second.handle;
  }
  if (refs_ == nullptr) {
    absl::StatusOr<std::unique_ptr<IpcRefs>> refs =
        IpcRefs::Create(exporter_id_);
    if (!refs.ok()) return refs.status();
    refs_ = *std::move(refs);
  }
  absl::StatusOr<IpcMemHandle> runtime = backend_.GetIpcHandle(device, ptr);
  if (!runtime.ok()) return runtime.status();
  Version version;
  version.ptr = ptr;
  version.handle.runtime = *runtime;
  version.handle.device = device;
  version.handle.offset = 0;  // a stable buffer is its allocation's base
  version.handle.bytes = bytes;
  version.handle.buffer_id = BufferId(name, device);
  version.handle.version = NextIpcVersion();
  version.handle.exporter_pid = exporter_pid_;
  version.handle.exporter_id = exporter_id_;
  absl::StatusOr<uint32_t> slot = refs_->Claim(version.handle.version);
  if (!slot.ok()) return slot.status();
  version.handle.slot = *slot;
  ++exports_;
  live_.emplace(std::make_pair(device, reinterpret_cast<uintptr_t>(ptr)),
                version);
  return version.handle;
}

bool IpcExports::MayFree(int device, void* ptr) {
  MutexLock lock(&mu_);
  auto it = live_.find({device, reinterpret_cast<uintptr_t>(ptr)});
  if (it == live_.end()) return true;
  Version version = it->second;
  live_.erase(it);
  if (refs_->TryRetire(version.handle.slot, version.handle.version)) {
    return true;
  }
  waiting_.push_back(version);
  return false;
}

std::vector<std::pair<int, void*>> IpcExports::TakeFreeable() {
  std::vector<std::pair<int, void*>> freeable;
  MutexLock lock(&mu_);
  for (size_t i = 0; i < waiting_.size();) {
    const Version& version = waiting_[i];
    if (refs_->TryRetire(version.handle.slot, version.handle.version)) {
      freeable.emplace_back(version.handle.device, version.ptr);
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

void* IpcExports::LocalPointer(uint64_t version) const {
  MutexLock lock(&mu_);
  for (const auto& [key, live] : live_) {
    if (live.handle.version == version) return live.ptr;
  }
  for (const Version& waiting : waiting_) {
    if (waiting.handle.version == version) return waiting.ptr;
  }
  return nullptr;
}

int64_t IpcExports::exports() const {
  MutexLock lock(&mu_);
  return exports_;
}
int64_t IpcExports::export_calls() const {
  MutexLock lock(&mu_);
  return export_calls_;
}
int64_t IpcExports::versions_waiting() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(waiting_.size());
}

}  // namespace gpupool::internal
