// The resource-lifetime layer; see pool_lifetime.h.

#include "src/lifetime/pool_lifetime.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "src/lifetime/process_state.h"

namespace gpupool::internal {

absl::Status ForkedChildError(absl::string_view caller,
                              absl::string_view owner) {
  return absl::FailedPreconditionError(absl::StrCat(
      caller, ": this process is a fork() child of the one that created the ",
      owner,
      "; what it inherited belongs to the parent's GPU context and is never "
      "reused (create a new ",
      owner, " in the child)"));
}

absl::Status ProcessExitingError(absl::string_view caller,
                                 absl::string_view owner) {
  return absl::FailedPreconditionError(
      absl::StrCat(caller, ": the process is exiting; the ", owner,
                   " no longer hands out resources"));
}

absl::Status DeviceOutOfRangeError(absl::string_view caller, int device,
                                   int device_count) {
  return absl::InvalidArgumentError(absl::StrCat(
      caller, ": device ", device, " out of range [0, ", device_count, ")"));
}

PoolLifetime::PoolLifetime(Backend& backend,
                           std::shared_ptr<DeviceHealth> health)
    : fork_epoch_(ForkEpoch()) {
  absl::StatusOr<int> count = backend.DeviceCount();
  if (count.ok()) {
    device_count_ = *count;
  } else {
    device_count_status_ = count.status();
  }
  if (health == nullptr) health = std::make_shared<DeviceHealth>(device_count_);
  health_ = std::move(health);
  device_count_ = std::min(device_count_, health_->device_count());
}

PoolLifetime::~PoolLifetime() {
  if (Forked())
    new std::shared_ptr<DeviceHealth>(std::move(health_));  // NOLINT
}

absl::Status PoolLifetime::CheckEntry(
    absl::string_view caller, absl::string_view owner, int device,
    absl::FunctionRef<void(int device)> purge) const {
  if (Forked()) return ForkedChildError(caller, owner);
  if (ProcessIsExiting()) return ProcessExitingError(caller, owner);
  if (!device_count_status_.ok()) return device_count_status_;
  if (!InRange(device)) {
    return DeviceOutOfRangeError(caller, device, device_count_);
  }
  if (health_->is_poisoned(device)) {
    purge(device);
    return PoisonedError(device);
  }
  return absl::OkStatus();
}

absl::Status PoolLifetime::PoisonedError(int device) const {
  absl::Status status = health_->CheckHealthy(device);
  if (status.ok()) {
    status = absl::FailedPreconditionError(absl::StrCat(
        "device ", device, " was poisoned during the call and recovered"));
  }
  return status;
}

}  // namespace gpupool::internal
