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

ImportedBuffer IpcImports::MakeLease(IpcMapping* mapping, void* base,
                                     const IpcHandle& handle, int device) {
  ImportedBuffer lease;
  lease.imports_ = shared_from_this();
  lease.mapping_ = mapping;
  lease.data_ = static_cast<char*>(base) + handle.offset;
  lease.local_ = mapping->local;
  lease.size_ = handle.bytes;
  lease.device_ = device;
  lease.version_ = handle.version;
  return lease;
}

absl::StatusOr<std::shared_ptr<IpcRefs>> IpcImports::RefsOf(
    const IpcHandle& handle) {
  {
    MutexLock lock(&mu_);
    auto it = refs_.find(handle.exporter_id);
    if (it != refs_.end()) return it->second;
  }
  absl::StatusOr<std::unique_ptr<IpcRefs>> attached =
      IpcRefs::Attach(handle.exporter_id);
  if (!attached.ok()) return attached.status();
  std::shared_ptr<IpcRefs> refs = *std::move(attached);
  MutexLock lock(&mu_);
  return refs_.try_emplace(handle.exporter_id, std::move(refs)).first->second;
}

namespace {

constexpr absl::string_view kWhere = "StableBuffers::Import";

// Why `handle` is not the version `mapped` already maps (same version).
absl::Status NotTheMappedVersion(const IpcHandle& mapped,
                                 const IpcHandle& handle) {
  absl::string_view wrong = "runtime bytes do";
  if (mapped.slot != handle.slot) {
    wrong = "slot does";
  } else if (mapped.device != handle.device) {
    wrong = "device does";
  }
  return absl::InvalidArgumentError(
      absl::StrCat(kWhere, ": the handle's ", wrong, " not match version ",
                   handle.version, " already mapped (forged or corrupt)"));
}

}  // namespace

absl::StatusOr<ImportedBuffer> IpcImports::ImportLocal(const IpcHandle& handle,
                                                       int device) {
  MutexLock lock(&mu_);
  // Checked like any import; the first lease of a version pins it like an
  // importer's mapping, so the version outlives a growth or release.
  std::unique_ptr<IpcMapping>& entry = local_[handle.version];
  absl::StatusOr<void*> local =
      exports_.LocalPointer(handle, /*pin=*/entry == nullptr);
  if (!local.ok()) {
    if (entry == nullptr) local_.erase(handle.version);
    return local.status();
  }
  if (entry == nullptr) {
    entry = std::make_unique<IpcMapping>();
    entry->handle = handle;
    entry->device = device;
    entry->base = *local;
    entry->opening = false;
    entry->local = true;
  }
  ++entry->leases;
  ++stats_.imports;
  ++stats_.local_imports;
  return MakeLease(entry.get(), *local, handle, device);
}

absl::StatusOr<ImportedBuffer> IpcImports::Import(const IpcHandle& handle,
                                                  int device) {
  if (handle.exporter_id == exports_.exporter_id()) {
    return ImportLocal(handle, device);
  }
  const Key key{handle.exporter_id, handle.buffer_id, device};
  std::unique_ptr<IpcMapping> to_close;
  IpcMapping* mapping = nullptr;
  absl::Status dead;
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
      if (known->handle.version == handle.version) {
        // A hit only for exactly the handle that was mapped, within what
        // was mapped.
        if (known->handle.runtime != handle.runtime ||
            known->handle.slot != handle.slot ||
            known->handle.device != handle.device) {
          return NotTheMappedVersion(known->handle, handle);
        }
        if (handle.offset > known->extent ||
            handle.bytes > known->extent - handle.offset) {
          return CheckExtent(handle, known->extent, "the mapped allocation");
        }
        // The exporter still lives (asked again at most once per recheck
        // interval: refs.h). A dead one's mapping goes like a superseded
        // one, once its last lease does.
        if (known->refs->RecentlyAlive()) {
          ++known->leases;
          ++stats_.imports;
          ++stats_.import_hits;
          return MakeLease(known, known->base, handle, device);
        }
        dead = absl::NotFoundError(
            absl::StrFormat("%s: stale handle: the exporting cache %016x died",
                            kWhere, handle.exporter_id));
      }
      if (known->handle.version > handle.version) {
        return absl::NotFoundError(
            absl::StrCat(kWhere, ": stale handle: version ", handle.version,
                         " was superseded by version ", known->handle.version));
      }
      // A newer version (or a dead exporter): the old mapping goes once its
      // leases are gone.
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
    if (dead.ok()) {
      auto fresh = std::make_unique<IpcMapping>();
      fresh->handle = handle;
      fresh->device = device;
      mapping = fresh.get();
      current_.emplace(key, std::move(fresh));
    }
  }
  if (to_close != nullptr) CloseMapping(std::move(to_close));
  if (!dead.ok()) return dead;

  absl::StatusOr<Opened> opened = Open(handle, device);
  MutexLock lock(&mu_);
  ++opens_ended_;  // the waiters look again (Unlock notifies them)
  if (!opened.ok()) {
    current_.erase(key);
    return opened.status();
  }
  mapping->refs = std::move(opened->refs);
  mapping->base = opened->base;
  mapping->extent = opened->extent;
  mapping->opening = false;
  mapping->leases = 1;
  ++stats_.opens;
  ++stats_.imports;
  return MakeLease(mapping, opened->base, handle, device);
}

absl::StatusOr<IpcImports::Opened> IpcImports::Open(const IpcHandle& handle,
                                                    int device) {
  if (IsLocalExporter(handle.exporter_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kWhere,
        ": the handle was exported by another cache of this process "
        "(the runtimes cannot open their own handles)"));
  }
  Opened opened;
  absl::StatusOr<std::shared_ptr<IpcRefs>> refs = RefsOf(handle);
  if (!refs.ok()) return refs.status();
  opened.refs = *std::move(refs);
  // A table attached earlier may outlive its exporter (killed): a runtime
  // may still open a dead process's handle, so ask the table's liveness
  // lock before any pin or open (one probe per open, never on a hit).
  if (!opened.refs->Alive()) {
    return absl::NotFoundError(
        absl::StrFormat("%s: stale handle: the exporting cache %016x died",
                        kWhere, handle.exporter_id));
  }
  // Before any pin or open: the handle is what the exporter recorded for
  // its slot, and within the extent it vouched for.
  const std::optional<IpcSlotBinding> binding =
      opened.refs->Binding(handle.slot, handle.version);
  if (absl::Status bound = CheckBinding(handle, binding); !bound.ok()) {
    return bound;
  }
  // Pin: from then on the exporter keeps this version alive.
  if (!opened.refs->Pin(handle.slot, handle.version)) {
    return absl::NotFoundError(absl::StrCat(
        kWhere, ": stale handle: the exporter freed version ", handle.version));
  }
  absl::StatusOr<void*> base = backend_.OpenIpcHandle(device, handle.runtime);
  if (!base.ok()) {
    opened.refs->Unpin(handle.slot, handle.version);
    return base.status();
  }
  opened.base = *base;
  // The real extent of what was mapped, where the runtime can tell.
  absl::Status refused;
  absl::StatusOr<AddressRange> range =
      backend_.GetAddressRange(device, opened.base);
  if (range.ok()) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(opened.base);
    const uintptr_t from = reinterpret_cast<uintptr_t>(range->base);
    if (at < from || at - from > range->bytes) {
      refused = absl::InternalError(absl::StrCat(
          kWhere, ": the runtime places the mapping outside its own range"));
    } else {
      opened.extent = range->bytes - (at - from);
      refused = CheckExtent(handle, opened.extent, "the mapped allocation");
    }
  } else if (range.status().code() == absl::StatusCode::kUnimplemented) {
    opened.extent = binding->extent;  // no query: the exporter's record
  } else {
    refused = range.status();
  }
  if (refused.ok()) return opened;
  if (backend_.CloseIpcHandle(device, opened.base).ok()) {
    opened.refs->Unpin(handle.slot, handle.version);
  }
  return refused;
}

void IpcImports::Release(IpcMapping* mapping) {
  std::unique_ptr<IpcMapping> to_close;
  {
    MutexLock lock(&mu_);
    if (mapping->local) {
      if (--mapping->leases > 0) return;
      // Not after the cache is gone (its exports with it), nor in a fork()
      // child (the table's counts are the parent's).
      if (!closed_ && !lifetime_.Forked()) {
        exports_.UnpinLocal(mapping->handle.slot, mapping->handle.version);
      }
      local_.erase(mapping->handle.version);
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

namespace {

// A mapping left to the OS keeps its pin for the rest of this process's
// life: its table (whose descriptor holds the pin's lock) is never closed.
// The kernel drops the pin when the process ends, and with it the mapping.
void KeepPinForLife(std::shared_ptr<IpcRefs> refs) {
  if (refs == nullptr) return;
  struct Kept {
    Mutex mu;
    std::vector<std::shared_ptr<IpcRefs>> tables ABSL_GUARDED_BY(mu);
  };
  static Kept* const kept = new Kept;  // never destroyed
  MutexLock lock(&kept->mu);
  kept->tables.push_back(std::move(refs));
}

}  // namespace

void IpcImports::CloseMapping(std::unique_ptr<IpcMapping> mapping) {
  // No runtime call (the mapping is left to the OS) once the cache is gone
  // (the runtime may be unloading), while exiting, in a fork() child (the
  // parent's context), or on a poisoned device (a dead context).
  {
    MutexLock lock(&mu_);
    if (closed_) {
      ++stats_.dropped;
      KeepPinForLife(std::move(mapping->refs));
      return;
    }
  }
  // In a fork() child: the pins (locks of descriptors shared with the
  // parent) are the parent's.
  if (lifetime_.Forked()) return;
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
  if (!closed) KeepPinForLife(std::move(mapping->refs));
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
  DetachDeadTables();
}

void IpcImports::DetachDeadTables() {
  // Candidates: tables no mapping uses (the map holds the only reference).
  std::vector<std::pair<uint64_t, std::shared_ptr<IpcRefs>>> unused;
  {
    MutexLock lock(&mu_);
    for (const auto& [id, refs] : refs_) {
      if (refs.use_count() == 1) unused.emplace_back(id, refs);
    }
  }
  std::vector<uint64_t> dead;
  for (const auto& [id, refs] : unused) {
    if (!refs->Alive()) dead.push_back(id);
  }
  MutexLock lock(&mu_);
  for (uint64_t id : dead) {
    auto it = refs_.find(id);
    // Still unused (ours and the map's references only): detach.
    if (it != refs_.end() && it->second.use_count() == 2) refs_.erase(it);
  }
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
  std::vector<IpcWaitingVersion> waiting_versions = std::move(stats->waiting);
  *stats = stats_;
  stats->export_calls = export_calls;
  stats->exports = exports;
  stats->versions_waiting = waiting;
  stats->waiting = std::move(waiting_versions);
  stats->mappings_live = 0;
  stats->import_leases = 0;
  for (const auto& [version, m] : local_) stats->import_leases += m->leases;
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
      lease.key = absl::StrFormat("exporter %016x (pid %d) buffer version %d",
                                  m.handle.exporter_id, m.handle.exporter_pid,
                                  m.handle.version);
      out->push_back(std::move(lease));
    }
  };
  for (const auto& [key, m] : current_) add(*m);
  for (const auto& m : superseded_) add(*m);
}

void IpcImports::AppendSnapshot(std::vector<ImportSnapshot>* out) const {
  MutexLock lock(&mu_);
  auto add = [out](const IpcMapping& m) {
    if (m.local || m.opening) return;
    out->push_back(
        ImportSnapshot{m.device, reinterpret_cast<uintptr_t>(m.base), m.extent,
                       absl::StrFormat("%016x", m.handle.exporter_id),
                       absl::StrFormat("buffer %d version %d",
                                       m.handle.buffer_id, m.handle.version),
                       m.leases});
  };
  for (const auto& [key, m] : current_) add(*m);
  for (const auto& m : superseded_) add(*m);
}

}  // namespace internal
}  // namespace gpupool
