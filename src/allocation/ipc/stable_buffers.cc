// The public face of stable buffers and IPC (gpupool/stable_buffers.h): a
// handle on the cache's own stable buffers, exports and imports.

#include "gpupool/stable_buffers.h"

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/allocation_cache.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/ipc/ipc_sharing.h"
#include "src/allocation/stable.h"

namespace gpupool {
namespace {

absl::string_view View(std::string_view name) {
  return absl::string_view(name.data(), name.size());
}

}  // namespace

StableBuffers::StableBuffers(AllocationCache& cache)
    : core_(internal::AllocationCacheAccess::Core(cache)),
      sharing_(&internal::IpcSharing::Of(*core_)) {}

absl::StatusOr<void*> StableBuffers::Acquire(std::string_view name, int device,
                                             size_t bytes) {
  return AcquireStable(*core_, View(name), device, bytes);
}

absl::Status StableBuffers::Release(std::string_view name, int device) {
  return ReleaseStable(*core_, View(name), device);
}

absl::StatusOr<IpcHandle> StableBuffers::Export(std::string_view name,
                                                int device, size_t bytes) {
  return sharing_->Export(View(name), device, bytes);
}

absl::StatusOr<ImportedBuffer> StableBuffers::Import(const IpcHandle& handle,
                                                     int device) {
  return sharing_->Import(handle, device);
}

IpcStats StableBuffers::GetIpcStats() const { return sharing_->GetIpcStats(); }

}  // namespace gpupool
