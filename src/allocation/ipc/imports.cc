// IpcImports (ipc/imports.h) and the ImportedBuffer lease.

#include "src/allocation/ipc/imports.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "src/lifetime/process_state.h"

namespace gpupool {

ImportedBuffer::ImportedBuffer(ImportedBuffer&& other) noexcept {
  *this = std::move(other);
}

ImportedBuffer& ImportedBuffer::operator=(ImportedBuffer&& other) noexcept {
  if (this == &other) return *this;
  Release();
  imports_ = std::move(other.imports_);
  mapping_ = std::exchange(other.mapping_, nullptr);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  device_ = std::exchange(other.device_, -1);
  version_ = std::exchange(other.version_, 0);
  local_ = std::exchange(other.local_, false);
  return *this;
}

void ImportedBuffer::Release() {
  if (imports_ == nullptr) return;
  imports_->Release(mapping_);
  imports_.reset();
  mapping_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  device_ = -1;
  version_ = 0;
  local_ = false;
}

std::string IpcStats::ToString() const {
  return absl::StrFormat(
      "exports=%d (calls %d, waiting %d) imports=%d (hits %d, local %d) "
      "opens=%d closes=%d dropped=%d mappings=%d leases=%d",
      exports, export_calls, versions_waiting, imports, import_hits,
      local_imports, opens, closes, dropped, mappings_live, import_leases);
}

namespace internal {
namespace {

struct OpenWait {
  const uint64_t* opens_ended;
  uint64_t seen;
};
bool OpenEnded(OpenWait* wait) { return *wait->opens_ended != wait->seen; }

}  // namespace

IpcImports::IpcImports(Backend& backend, const PoolLifetime& lifetime,
                       IpcExports& exports)
    : backend_(backend), lifetime_(lifetime), exports_(exports) {}

ImportedBuffer IpcImports::MakeLease(IpcMapping* mapping, bool local,
                                     void* data) {
  ImportedBuffer lease;
  lease.imports_ = shared_from_this();
  lease.mapping_ = mapping;
  lease.data_ = data;
  lease.local_ = local;
  return lease;
}

absl::StatusOr<std::shared_ptr<IpcRefs>> IpcImports::RefsOf(
    const IpcHandle& handle) {
  const std::pair<uint64_t, uint64_t> exporter{handle.exporter_pid,
                                               handle.exporter_id};
  {
    MutexLock lock(&mu_);
    auto it = refs_.find(exporter);
    if (it != refs_.end()) return it->second;
  }
  absl::StatusOr<std::unique_ptr<IpcRefs>> attached =
      IpcRefs::Attach(handle.exporter_pid, handle.exporter_id);
  if (!attached.ok()) return attached.status();
  std::shared_ptr<IpcRefs> refs = *std::move(attached);
  MutexLock lock(&mu_);
  return refs_.try_emplace(exporter, std::move(refs)).first->second;
}

absl::StatusOr<ImportedBuffer> IpcImports::Import(const IpcHandle& handle,
                                                  int device) {
  constexpr absl::string_view where = "StableBuffers::Import";
  if (handle.exporter_pid == exports_.exporter_pid()) {
    if (handle.exporter_id != exports_.exporter_id()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where,
          ": the handle was exported by another cache of this process "
          "(the runtimes cannot open their own handles)"));
    }
    void* local = exports_.LocalPointer(handle.version);
    if (local == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(where, ": stale handle: version ", handle.version,
                       " of this cache's buffer was freed"));
    }
    MutexLock lock(&mu_);
    ++stats_.imports;
    ++stats_.local_imports;
    ++local_leases_;
    ImportedBuffer lease = MakeLease(nullptr, true, local);
    lease.size_ = handle.bytes;
    lease.device_ = device;
    lease.version_ = handle.version;
    return lease;
  }
  const Key key{handle.exporter_pid, handle.exporter_id, handle.buffer_id,
                device};
  std::unique_ptr<IpcMapping> to_close;
  IpcMapping* mapping = nullptr;
  {
    MutexLock lock(&mu_);
    while (true) {
      auto it = current_.find(key);
      if (it == current_.end()) break;
      IpcMapping* known = it->second.get();
      if (known->opening) {
        // Not `known` itself: a failed open erases it.
        OpenWait wait{&opens_ended_, opens_ended_};
        mu_.Await(absl::Condition(&OpenEnded, &wait));
        continue;
      }
      if (known->handle.version == handle.version &&
          known->handle.runtime == handle.runtime) {
        ++known->leases;
        ++stats_.imports;
        ++stats_.import_hits;
        ImportedBuffer lease = MakeLease(
            known, false, static_cast<char*>(known->base) + handle.offset);
        lease.size_ = handle.bytes;
        lease.device_ = device;
        lease.version_ = handle.version;
        return lease;
      }
      if (known->handle.version == handle.version) {
        // Same version, other bytes: not what the exporter made.
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": the handle's runtime bytes differ from those of version ",
            handle.version, " already mapped (forged or corrupt)"));
      }
      if (known->handle.version > handle.version) {
        return absl::NotFoundError(
            absl::StrCat(where, ": stale handle: version ", handle.version,
                         " was superseded by version ", known->handle.version));
      }
      // A newer version: the old mapping goes once its leases are gone.
      std::unique_ptr<IpcMapping> old = std::move(it->second);
      current_.erase(it);
      old->superseded = true;
      if (old->leases == 0) {
        to_close = std::move(old);
      } else {
        superseded_.push_back(std::move(old));
      }
      break;
    }
    auto fresh = std::make_unique<IpcMapping>();
    fresh->handle = handle;
    fresh->device = device;
    mapping = fresh.get();
    current_.emplace(key, std::move(fresh));
  }
  if (to_close != nullptr) CloseMapping(std::move(to_close));

  // Pin first: from then on the exporter keeps this version alive.
  absl::Status failed;
  absl::StatusOr<std::shared_ptr<IpcRefs>> refs = RefsOf(handle);
  void* base = nullptr;
  if (!refs.ok()) {
    failed = refs.status();
  } else if (!(*refs)->Pin(handle.slot, handle.version)) {
    failed = absl::NotFoundError(absl::StrCat(
        where, ": stale handle: the exporter freed version ", handle.version));
  } else {
    absl::StatusOr<void*> opened =
        backend_.OpenIpcHandle(device, handle.runtime);
    if (opened.ok()) {
      base = *opened;
    } else {
      (*refs)->Unpin(handle.slot, handle.version);
      failed = opened.status();
    }
  }
  MutexLock lock(&mu_);
  ++opens_ended_;  // the waiters look again (Unlock notifies them)
  if (!failed.ok()) {
    current_.erase(key);
    return failed;
  }
  mapping->refs = *refs;
  mapping->base = base;
  mapping->opening = false;
  mapping->leases = 1;
  ++stats_.opens;
  ++stats_.imports;
  ImportedBuffer lease =
      MakeLease(mapping, false, static_cast<char*>(base) + handle.offset);
  lease.size_ = handle.bytes;
  lease.device_ = device;
  lease.version_ = handle.version;
  return lease;
}

void IpcImports::Release(IpcMapping* mapping) {
  std::unique_ptr<IpcMapping> to_close;
  {
    MutexLock lock(&mu_);
    if (mapping == nullptr) {
      --local_leases_;
      return;
    }
    if (--mapping->leases > 0 || !mapping->superseded) return;
    auto it = std::find_if(superseded_.begin(), superseded_.end(),
                           [mapping](const std::unique_ptr<IpcMapping>& m) {
                             return m.get() == mapping;
                           });
    if (it == superseded_.end()) return;
    to_close = std::move(*it);
    superseded_.erase(it);
  }
  CloseMapping(std::move(to_close));
}

void IpcImports::CloseMapping(std::unique_ptr<IpcMapping> mapping) {
  // No runtime call (the mapping is left to the OS) once the cache is gone
  // (the runtime may be unloading), while exiting, in a fork() child (the
  // parent's context), or on a poisoned device (a dead context).
  {
    MutexLock lock(&mu_);
    if (closed_) {
      ++stats_.dropped;
      return;
    }
  }
  if (lifetime_.Forked()) return;  // nor do its counts belong to us
  const bool call_runtime =
      !ProcessIsExiting() &&
      !lifetime_.device_health().is_poisoned(mapping->device);
  // Unpinned only after a runtime close that succeeded: a mapping left to
  // the OS, or one whose close failed, keeps its pin, so the exporter keeps
  // that version (a leak, never a free of memory that is still mapped).
  bool closed = false;
  if (call_runtime) {
    const absl::Status status =
        backend_.CloseIpcHandle(mapping->device, mapping->base);
    closed = status.ok();
    if (FaultOf(status) == Fault::kDevice) {
      lifetime_.device_health().Poison(mapping->device, status);
    }
    if (closed && mapping->refs != nullptr) {
      mapping->refs->Unpin(mapping->handle.slot, mapping->handle.version);
    }
  }
  MutexLock lock(&mu_);
  if (closed) {
    ++stats_.closes;
  } else {
    ++stats_.dropped;
  }
}

void IpcImports::CloseUnleased(int device) {
  std::vector<std::unique_ptr<IpcMapping>> to_close;
  {
    MutexLock lock(&mu_);
    for (auto it = current_.begin(); it != current_.end();) {
      IpcMapping& m = *it->second;
      if ((device < 0 || m.device == device) && !m.opening && m.leases == 0) {
        to_close.push_back(std::move(it->second));
        current_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& mapping : to_close) CloseMapping(std::move(mapping));
}

void IpcImports::DropDevice(int device) {
  // CloseMapping sees the poison and makes no runtime call.
  CloseUnleased(device);
}

void IpcImports::Close() {
  MutexLock lock(&mu_);
  closed_ = true;
}

void IpcImports::FillStats(IpcStats* stats) const {
  MutexLock lock(&mu_);
  const int64_t export_calls = stats->export_calls;
  const int64_t exports = stats->exports;
  const int64_t waiting = stats->versions_waiting;
  *stats = stats_;
  stats->export_calls = export_calls;
  stats->exports = exports;
  stats->versions_waiting = waiting;
  stats->mappings_live = 0;
  stats->import_leases = local_leases_;
  for (const auto& [key, m] : current_) {
    if (!m->opening) ++stats->mappings_live;
    stats->import_leases += m->leases;
  }
  for (const auto& m : superseded_) {
    ++stats->mappings_live;
    stats->import_leases += m->leases;
  }
}

void IpcImports::AppendOutstanding(std::vector<OutstandingLease>* out) const {
  MutexLock lock(&mu_);
  auto add = [out](const IpcMapping& m) {
    for (int i = 0; i < m.leases; ++i) {
      OutstandingLease lease;
      lease.resource = "ipc import";
      lease.device = m.device;
      lease.key = absl::StrCat("exporter pid ", m.handle.exporter_pid,
                               " buffer version ", m.handle.version);
      out->push_back(std::move(lease));
    }
  };
  for (const auto& [key, m] : current_) add(*m);
  for (const auto& m : superseded_) add(*m);
}

}  // namespace internal
}  // namespace gpupool
