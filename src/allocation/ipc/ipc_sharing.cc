// A cache's side of sharing stable buffers with other processes
// (ipc/ipc_sharing.h); the bookkeeping is in exports.* and imports.*, the
// cross-process counts in refs.*.

#include "src/allocation/ipc/ipc_sharing.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "src/allocation/cache_core.h"

namespace gpupool::internal {

IpcSharing& IpcSharing::Of(AllocationCacheCore& core) {
  // Only IpcSharing is ever installed as a cache's free gate.
  return static_cast<IpcSharing&>(core.InstallFreeGate(
      [&core] { return std::make_unique<IpcSharing>(core); }));
}

IpcSharing::IpcSharing(AllocationCacheCore& core)
    : core_(core),
      exports_(core.backend()),
      imports_(std::make_shared<IpcImports>(core.backend(), core.lifetime(),
                                            exports_)) {}

absl::StatusOr<IpcHandle> IpcSharing::Export(absl::string_view name, int device,
                                             size_t bytes) {
  core_.FreeReleasedByGate();
  absl::StatusOr<void*> ptr = core_.AcquireStable(name, device, bytes);
  if (!ptr.ok()) return ptr.status();
  absl::StatusOr<IpcHandle> handle = exports_.Export(name, device, *ptr, bytes);
  if (!handle.ok() && core_.PoisonIfSticky(device, handle.status())) {
    return core_.PoisonedError(device);
  }
  return handle;
}

absl::StatusOr<ImportedBuffer> IpcSharing::Import(const IpcHandle& handle,
                                                  int device) {
  if (absl::Status usable = core_.CheckUsable(device, "StableBuffers::Import");
      !usable.ok()) {
    return usable;
  }
  if (handle.bytes == 0) {
    return absl::InvalidArgumentError(
        "StableBuffers::Import: the handle names 0 bytes");
  }
  absl::StatusOr<ImportedBuffer> imported = imports_->Import(handle, device);
  if (!imported.ok() && core_.PoisonIfSticky(device, imported.status())) {
    return core_.PoisonedError(device);
  }
  return imported;
}

IpcStats IpcSharing::GetIpcStats() const {
  IpcStats stats;
  stats.export_calls = exports_.export_calls();
  stats.exports = exports_.exports();
  stats.versions_waiting = exports_.versions_waiting();
  imports_->FillStats(&stats);
  return stats;
}

void IpcSharing::DropDevice(int device) {
  // Mappings and exports of a dead context go without runtime calls.
  imports_->DropDevice(device);
  exports_.DropDevice(device);
}

}  // namespace gpupool::internal
