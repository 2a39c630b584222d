// IpcSharing: a cache's side of sharing stable buffers with other processes
// (gpupool/stable_buffers.h): its exports and imports, and its free gate
// (src/allocation/hooks.h): an exported version another process still maps
// is not freed until it is unmapped. Installed in the cache's core by the
// first StableBuffers made over the cache.
//
// Thread safety: as IpcExports and IpcImports; no lock of its own.

#ifndef GPUPOOL_SRC_ALLOCATION_IPC_IPC_SHARING_H_
#define GPUPOOL_SRC_ALLOCATION_IPC_IPC_SHARING_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/pool_stats.h"
#include "src/allocation/hooks.h"
#include "src/allocation/ipc/exports.h"
#include "src/allocation/ipc/imports.h"

namespace gpupool::internal {

class AllocationCacheCore;

class IpcSharing final : public FreeGate {
 public:
  // The sharing of `core`'s cache, installed on first use.
  static IpcSharing& Of(AllocationCacheCore& core);

  explicit IpcSharing(AllocationCacheCore& core);

  // StableBuffers::Export, Import and GetIpcStats.
  absl::StatusOr<IpcHandle> Export(absl::string_view name, int device,
                                   size_t bytes);
  absl::StatusOr<ImportedBuffer> Import(const IpcHandle& handle, int device);
  IpcStats GetIpcStats() const;

  // --- FreeGate ---
  bool MayFree(int device, void* ptr) override;
  std::vector<std::pair<int, void*>> TakeFreeable() override;
  void DropDevice(int device) override;
  void Trim(int device) override { imports_->CloseUnleased(device); }
  void Close() override { imports_->Close(); }
  void AppendOutstanding(std::vector<OutstandingLease>* out) const override {
    imports_->AppendOutstanding(out);
  }
  bool IsExported(int device, const void* ptr, int* importers) const override {
    *importers = -1;  // counted for waiting versions only (GetIpcStats)
    return exports_.IsLive(device, ptr);
  }
  void AppendImports(std::vector<ImportSnapshot>* out) const override {
    imports_->AppendSnapshot(out);
  }
  std::string DescribeHeld(int device) const override;

 private:
  AllocationCacheCore& core_;
  IpcExports exports_;
  // Shared with the ImportedBuffer leases, which may outlive the cache.
  const std::shared_ptr<IpcImports> imports_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_IPC_IPC_SHARING_H_
