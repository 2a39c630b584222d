// Pools: the bundle of pools over one backend; see gpupool/pools.h.

#include "gpupool/pools.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpupool {

absl::StatusOr<std::unique_ptr<Pools>> Pools::Create(
    std::unique_ptr<Backend> backend, PoolsOptions options) {
  if (backend == nullptr) {
    return absl::InvalidArgumentError("Pools::Create: backend is null");
  }
  absl::StatusOr<int> devices = backend->DeviceCount();
  if (!devices.ok()) return devices.status();
  if (*devices <= 0) {
    return absl::UnavailableError(absl::StrCat(std::string(backend->name()),
                                               " backend reports no device"));
  }
  auto health = std::make_shared<DeviceHealth>(*devices);
  return std::unique_ptr<Pools>(
      new Pools(std::move(backend), std::move(health), options));
}

Pools::Pools(std::unique_ptr<Backend> backend,
             std::shared_ptr<DeviceHealth> health, const PoolsOptions& options)
    : backend_(std::move(backend)), health_(std::move(health)) {
  PoolOptions stream_options = options.streams;
  if (options.allocations.defer_same_stream_fences) {
    // A stream the pool destroys first has its deferred fences recorded (the
    // cache, made below, outlives no stream of the pool: it goes first).
    stream_options.before_destroy =
        [this, user = std::move(stream_options.before_destroy)](int device,
                                                                void* stream) {
          if (allocations_ != nullptr) {
            allocations_->FenceStream(device, stream).IgnoreError();
          }
          if (user) user(device, stream);
        };
  }
  streams_ = std::make_unique<StreamPool>(*backend_, health_, stream_options);
  events_ = std::make_unique<EventPool>(*backend_, health_, options.events);
  allocations_ = std::make_unique<AllocationCache>(*backend_, *events_, health_,
                                                   options.allocations);
  stable_buffers_ = std::make_unique<StableBuffers>(*allocations_);
}

Pools::~Pools() {
  // Leases hold the pools' shards, not the backend: destroy the pools (which
  // destroys their idle handles) while the backend is still alive.
  stable_buffers_.reset();
  allocations_.reset();
  events_.reset();
  streams_.reset();
}

absl::Status Pools::RecoverDevice(int device) {
  absl::Status status = health_->Recover(device);
  if (!status.ok()) return status;
  // Drop the old generation's idle handles now rather than on next use.
  streams_->Trim(device);
  events_->Trim(device);
  return allocations_->Trim(device);
}

void Pools::Trim() {
  streams_->Trim();
  events_->Trim();
  // A failed free poisons or is counted inside the cache; nothing to add.
  allocations_->Trim().IgnoreError();
}

std::vector<OutstandingLease> Pools::GetOutstandingLeases() const {
  std::vector<OutstandingLease> leases;
  for (const std::vector<OutstandingLease>& pool :
       {streams_->GetOutstandingLeases(), events_->GetOutstandingLeases(),
        allocations_->GetOutstandingLeases()}) {
    for (const OutstandingLease& lease : pool) {
      if (!lease.where.is_internal()) leases.push_back(lease);
    }
  }
  return leases;
}

std::string Pools::DebugString() const {
  return absl::StrCat(streams_->DebugString(), "\n", events_->DebugString(),
                      "\n", allocations_->DebugString());
}

}  // namespace gpupool
