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
#include "src/allocation/stable.h"
#include "src/allocation/trace_ring.h"
#include "src/base/readable_bytes.h"

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
  // Atomic with a growth or release of the name on another thread: a
  // pointer freed between Acquire and the export is never handed to the
  // runtime (IpcExports::Export says how); the name is acquired again.
  constexpr int kAttempts = 64;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const uint64_t frees_seen = exports_.stable_frees();
    absl::StatusOr<void*> ptr = AcquireStable(core_, name, device, bytes);
    if (!ptr.ok()) return ptr.status();
    bool moved = false;
    absl::StatusOr<IpcHandle> handle =
        exports_.Export(name, device, *ptr, bytes, core_.generation(device),
                        frees_seen, &moved);
    if (moved) continue;
    if (!handle.ok() && core_.PoisonIfSticky(device, handle.status())) {
      return core_.PoisonedError(device);
    }
    if (handle.ok() && ABSL_PREDICT_FALSE(core_.trace() != nullptr)) {
      core_.trace()->Transition(TraceOp::kIpc, "export", device,
                                MemoryKind::kDevice, bytes, *ptr);
    }
    return handle;
  }
  return absl::AbortedError(absl::StrCat(
      "StableBuffers::Export: stable buffers were freed by other threads "
      "during each of ",
      kAttempts, " attempts to export \"", name, "\"; try again"));
}

bool IpcSharing::MayFree(int device, void* ptr) {
  return exports_.MayFree(device, ptr, core_.generation(device));
}

std::vector<std::pair<int, void*>> IpcSharing::TakeFreeable() {
  std::vector<std::pair<int, void*>> out;
  for (const IpcExports::Freeable& version : exports_.TakeFreeable()) {
    if (version.generation != core_.generation(version.device)) {
      // The device was reset while the version waited: its memory went with
      // the reset, so there is nothing to free.
      core_.Shard(version.device, MemoryKind::kDevice)
          .Retire(RetireReason::kDropped);
      continue;
    }
    out.emplace_back(version.device, version.ptr);
  }
  return out;
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
  if (imported.ok() && ABSL_PREDICT_FALSE(core_.trace() != nullptr)) {
    core_.trace()->Transition(TraceOp::kIpc, "import", device,
                              MemoryKind::kDevice, imported->size(),
                              imported->data());
  }
  return imported;
}

IpcStats IpcSharing::GetIpcStats() const {
  IpcStats stats;
  stats.export_calls = exports_.export_calls();
  stats.exports = exports_.exports();
  stats.waiting = exports_.WaitingVersions();
  stats.versions_waiting = static_cast<int64_t>(stats.waiting.size());
  imports_->FillStats(&stats);
  return stats;
}

void IpcSharing::DropDevice(int device) {
  // Mappings and exports of a dead context go without runtime calls.
  imports_->DropDevice(device);
  exports_.DropDevice(device);
}

std::string IpcSharing::DescribeHeld(int device) const {
  int waiting = 0;
  for (const IpcWaitingVersion& version : exports_.WaitingVersions()) {
    waiting += version.device == device;
  }
  std::vector<ImportSnapshot> imports;
  imports_->AppendSnapshot(&imports);
  int mappings = 0;
  int64_t imported = 0;
  for (const ImportSnapshot& import : imports) {
    if (import.device != device) continue;
    ++mappings;
    imported += static_cast<int64_t>(import.bytes);
  }
  if (waiting == 0 && mappings == 0) return "";
  return absl::StrCat("shared with other processes: ", waiting,
                      " exported versions waiting on importers, ", mappings,
                      " imported mappings of ", ReadableBytes(imported));
}

}  // namespace gpupool::internal
