// Per-device poisoning and generations; see gpupool/device_health.h.

#include "gpupool/device_health.h"

#include "absl/strings/str_cat.h"
#include "gpupool/backend.h"

namespace gpupool {

DeviceHealth::DeviceHealth(int device_count) {
  devices_.reserve(device_count > 0 ? device_count : 0);
  for (int i = 0; i < device_count; ++i) {
    devices_.push_back(std::make_unique<Device>());
  }
}

bool DeviceHealth::Poison(int device, const absl::Status& cause) {
  if (device < 0 || device >= device_count()) return false;
  Device& d = *devices_[device];
  absl::MutexLock lock(&d.mu);
  if (d.poisoned.load(std::memory_order_relaxed)) return false;
  d.cause = cause;
  d.poisoned.store(true, std::memory_order_release);
  // Every handle of the old generation is now dead.
  d.generation.fetch_add(1, std::memory_order_acq_rel);
  poison_count_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

absl::Status DeviceHealth::CheckHealthy(int device) const {
  if (device < 0 || device >= device_count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", device, " out of range [0, ", device_count(), ")"));
  }
  if (!is_poisoned(device)) return absl::OkStatus();
  absl::Status cause = poison_cause(device);
  // Fault::kDevice: a caller classifying this status learns the device is
  // dead (not that its handle is bad).
  return FaultError(Fault::kDevice, absl::StatusCode::kFailedPrecondition,
                    absl::StrCat("device ", device,
                                 " is poisoned by a sticky error and needs a "
                                 "reset (then RecoverDevice): ",
                                 MessageWithoutFault(cause)));
}

absl::Status DeviceHealth::poison_cause(int device) const {
  if (device < 0 || device >= device_count()) return absl::OkStatus();
  const Device& d = *devices_[device];
  absl::MutexLock lock(&d.mu);
  return d.cause;
}

absl::Status DeviceHealth::Recover(int device) {
  if (device < 0 || device >= device_count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", device, " out of range [0, ", device_count(), ")"));
  }
  Device& d = *devices_[device];
  absl::MutexLock lock(&d.mu);
  if (!d.poisoned.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device, " is not poisoned"));
  }
  d.cause = absl::OkStatus();
  d.generation.fetch_add(1, std::memory_order_acq_rel);
  d.poisoned.store(false, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace gpupool
