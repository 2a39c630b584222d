// AllocationCache and PooledAllocation: the public face of the cache. The
// cache itself is AllocationCacheCore (src/allocation/cache_core.h,
// which maps its files by job).

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "gpupool/allocation_cache.h"
#include "src/allocation/block.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/size_classes.h"
#include "src/kernel/process_state.h"

namespace gpupool {

// ---------------------------------------------------------------------------
// PooledAllocation
// ---------------------------------------------------------------------------

PooledAllocation::PooledAllocation(internal::Lease lease,
                                   const internal::AllocationBlock& block)
    : lease_(std::move(lease)),
      data_(block.ptr),
      size_(block.requested),
      capacity_(block.size),
      device_(block.device),
      kind_(block.kind),
      stream_(block.stream) {}

PooledAllocation::PooledAllocation(PooledAllocation&& other) noexcept {
  *this = std::move(other);
}

PooledAllocation& PooledAllocation::operator=(
    PooledAllocation&& other) noexcept {
  if (this != &other) {
    Release();
    lease_ = std::move(other.lease_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    device_ = std::exchange(other.device_, -1);
    kind_ = std::exchange(other.kind_, MemoryKind::kDevice);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void PooledAllocation::RecordUse(NativeStream stream) {
  if (!lease_ || stream == nullptr) return;
  auto& uses = static_cast<internal::AllocationBlock*>(lease_.handle())->uses;
  if (std::find(uses.begin(), uses.end(), stream) == uses.end()) {
    uses.push_back(stream);
  }
}

void PooledAllocation::Release() {
  if (!lease_) return;
  internal::Lease lease = std::move(lease_);
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
  device_ = -1;
  kind_ = MemoryKind::kDevice;
  stream_ = nullptr;
  lease.Release();
}

// ---------------------------------------------------------------------------
// AllocationCache
// ---------------------------------------------------------------------------

AllocationCache::AllocationCache(Backend& backend, EventPool& events,
                                 AllocationCacheOptions options)
    : AllocationCache(backend, events, nullptr, options) {}

AllocationCache::AllocationCache(Backend& backend, EventPool& events,
                                 std::shared_ptr<DeviceHealth> health,
                                 AllocationCacheOptions options)
    : core_(std::make_shared<internal::AllocationCacheCore>(
          backend, events, std::move(health), options)) {
  core_->MakeLeaseAnchors();
  // After DeviceCount() initialised the runtime (in the core), so that our
  // exit drain runs before the runtime's own atexit teardown.
  internal::InstallProcessHooks();
  internal::AllocationCacheCore* core = core_.get();
  exit_registration_ =
      internal::RegisterExitDrain([core] { core->DrainForExit(); });
}

AllocationCache::~AllocationCache() {
  internal::UnregisterExitDrain(exit_registration_);
  if (core_->Forked()) {
    // Leases may still hold the core; a child must neither free nor lock.
    new std::shared_ptr<internal::AllocationCacheCore>(  // NOLINT: leak
        std::move(core_));
    return;
  }
  core_->FreeEverything(/*close=*/true,
                        /*call_runtime=*/!internal::ProcessIsExiting());
  core_->DropLeaseAnchors();
}

absl::StatusOr<PooledAllocation> AllocationCache::Allocate(
    int device, size_t bytes, MemoryKind kind, NativeStream stream,
    SourceLocation where) {
  return core_->Allocate(device, bytes, kind, stream, where);
}

absl::StatusOr<void*> AllocationCache::AcquireStable(std::string_view name,
                                                     int device, size_t bytes) {
  return core_->AcquireStable(absl::string_view(name.data(), name.size()),
                              device, bytes);
}

absl::Status AllocationCache::ReleaseStable(std::string_view name, int device) {
  return core_->ReleaseStable(absl::string_view(name.data(), name.size()),
                              device);
}

absl::Status AllocationCache::Trim(int device, size_t keep_bytes) {
  return core_->Trim(device, keep_bytes);
}

absl::Status AllocationCache::Trim() { return core_->TrimAll(); }

AllocationCacheStats AllocationCache::GetStats() const {
  return core_->GetStats();
}

AllocationCacheStats AllocationCache::GetStats(int device) const {
  return core_->GetStats(device);
}

AllocationCacheStats AllocationCache::GetStats(int device,
                                               MemoryKind kind) const {
  return core_->GetStats(device, kind);
}

std::vector<OutstandingLease> AllocationCache::GetOutstandingLeases() const {
  return core_->GetOutstandingLeases();
}

std::string AllocationCache::DebugString() const {
  return core_->DebugString();
}

Backend& AllocationCache::backend() const { return core_->backend(); }

const std::shared_ptr<DeviceHealth>& AllocationCache::health() const {
  return core_->health();
}

const AllocationCacheOptions& AllocationCache::options() const {
  return core_->options();
}

size_t AllocationCache::RoundedSize(size_t bytes) {
  if (bytes > internal::kMaxSizeClassBytes) return bytes;
  return internal::RoundUpToSizeClass(bytes == 0 ? 1 : bytes);
}

}  // namespace gpupool
