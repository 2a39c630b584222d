// Sharing stable buffers with other processes: the cache's side of
// ExportStable / Import (the bookkeeping is in exports.* and
// imports.*, the cross-process counts in refs.*).

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/allocation/cache_core.h"

namespace gpupool::internal {

absl::StatusOr<IpcHandle> AllocationCacheCore::ExportStable(
    absl::string_view name, int device, size_t bytes) {
  FreeReleasedExports();
  // Atomic with a growth or release of the name on another thread: a
  // pointer freed between AcquireStable and the export is never handed to
  // the runtime (IpcExports::Export says how); the name is acquired again.
  constexpr int kAttempts = 64;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const uint64_t frees_seen = ipc_exports_.stable_frees();
    absl::StatusOr<void*> ptr = AcquireStable(name, device, bytes);
    if (!ptr.ok()) return ptr.status();
    bool moved = false;
    absl::StatusOr<IpcHandle> handle = ipc_exports_.Export(
        name, device, *ptr, bytes, generation(device), frees_seen, &moved);
    if (moved) continue;
    if (!handle.ok() && PoisonIfSticky(device, handle.status())) {
      return lifetime_.PoisonedError(device);
    }
    return handle;
  }
  return absl::AbortedError(absl::StrCat(
      "AllocationCache::ExportStable: stable buffers were freed by other "
      "threads during each of ",
      kAttempts, " attempts to export \"", name, "\"; try again"));
}

absl::StatusOr<ImportedBuffer> AllocationCacheCore::Import(
    const IpcHandle& handle, int device) {
  if (absl::Status usable = CheckUsable(device, "Import"); !usable.ok()) {
    return usable;
  }
  if (handle.bytes == 0) {
    return absl::InvalidArgumentError(
        "AllocationCache::Import: the handle names 0 bytes");
  }
  absl::StatusOr<ImportedBuffer> imported =
      ipc_imports_->Import(handle, device);
  if (!imported.ok() && PoisonIfSticky(device, imported.status())) {
    return lifetime_.PoisonedError(device);
  }
  return imported;
}

IpcStats AllocationCacheCore::GetIpcStats() const {
  IpcStats stats;
  stats.export_calls = ipc_exports_.export_calls();
  stats.exports = ipc_exports_.exports();
  stats.versions_waiting = ipc_exports_.versions_waiting();
  ipc_imports_->FillStats(&stats);
  return stats;
}

absl::Status AllocationCacheCore::FreeStableMemory(AllocationShard& shard,
                                                   void* ptr) {
  if (!ipc_exports_.MayFree(shard.device(), ptr, generation(shard.device()))) {
    return absl::OkStatus();
  }
  return FreeRaw(shard, ptr);
}

void AllocationCacheCore::FreeReleasedExports() {
  for (const IpcExports::Freeable& version : ipc_exports_.TakeFreeable()) {
    AllocationShard& shard = Shard(version.device, MemoryKind::kDevice);
    if (version.generation != generation(version.device)) {
      // The device was reset while the version waited: its memory went
      // with the reset, so there is nothing to free.
      shard.Retire(Departure::kDropped);
      continue;
    }
    FreeRaw(shard, version.ptr).IgnoreError();
  }
}

}  // namespace gpupool::internal
