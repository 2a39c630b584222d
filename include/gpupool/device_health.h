// gpupool/device_health.h — per-device poisoning and generations.
//
// A sticky device error (Fault::kDevice) poisons the device: every pool that
// shares this object drops the device's handles without calling the runtime
// and fails acquires with FailedPrecondition naming the original error, until
// `Recover(device)` starts a new generation (after the user reset the device).
// Handles remember the generation they were created in; a handle from an older
// generation is dropped, never reused.
//
// Why it is public: users read it (`pools.health()->poison_cause(device)`,
// `is_poisoned`, `generation`) to decide when to reset a device, and share one
// instance between pools they build themselves (the pools' and the
// AllocationCache's constructors take it) so that a fault seen by one poisons
// the device for all.
//
// Thread safety: all methods are thread-safe; the fast-path reads are atomic.

#ifndef GPUPOOL_DEVICE_HEALTH_H_
#define GPUPOOL_DEVICE_HEALTH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/export.h"

namespace gpupool {

class GPUPOOL_EXPORT DeviceHealth {
 public:
  // Tracks devices [0, device_count).
  explicit DeviceHealth(int device_count);
  DeviceHealth(const DeviceHealth&) = delete;
  DeviceHealth& operator=(const DeviceHealth&) = delete;

  int device_count() const { return static_cast<int>(devices_.size()); }

  // Current generation of `device`; bumps on Poison and on Recover. 0 (a
  // generation no handle has: they start at 1) for an out-of-range device.
  uint64_t generation(int device) const {
    if (device < 0 || device >= device_count()) return 0;
    return devices_[device]->generation.load(std::memory_order_acquire);
  }
  // False for an out-of-range device.
  bool is_poisoned(int device) const {
    if (device < 0 || device >= device_count()) return false;
    return devices_[device]->poisoned.load(std::memory_order_acquire);
  }

  // Poisons `device` with the sticky error `cause`. Returns true when this
  // call poisoned it (false when it already was: the first cause is kept).
  bool Poison(int device, const absl::Status& cause);

  // FailedPrecondition (Fault::kDevice) naming the original error while
  // poisoned; OK otherwise.
  absl::Status CheckHealthy(int device) const;

  // The error that poisoned `device` (OK when healthy).
  absl::Status poison_cause(int device) const;

  // Clears the poison and starts a new generation. FailedPrecondition if the
  // device is not poisoned (nothing to recover), InvalidArgument when out of
  // range.
  absl::Status Recover(int device);

  // Times a device was poisoned, over all devices.
  int64_t poison_count() const {
    return poison_count_.load(std::memory_order_relaxed);
  }

 private:
  struct Device {
    std::atomic<uint64_t> generation{1};
    std::atomic<bool> poisoned{false};
    mutable absl::Mutex mu;
    absl::Status cause ABSL_GUARDED_BY(mu);
  };
  std::vector<std::unique_ptr<Device>> devices_;
  std::atomic<int64_t> poison_count_{0};
};

}  // namespace gpupool

#endif  // GPUPOOL_DEVICE_HEALTH_H_
