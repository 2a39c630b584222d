// Scoped guards RuntimeBackend<Api> puts around runtime calls: the current
// device (set only when it differs, always restored) and the thread's
// stream-capture mode (Relaxed, so that a pool's call never invalidates a
// user's graph capture).
//
// Thread safety: each guard changes only the calling thread's state.
#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_GUARDS_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_GUARDS_H_

#include "absl/status/status.h"
#include "src/backends/runtime/runtime_status.h"

namespace gpupool {
namespace runtime_internal {

// Makes `device` the calling thread's current device for the guard's
// lifetime: set only if different (setting is not free, and on CUDA it
// may initialise a context), always restored. A failed restore cannot be
// reported from a destructor; the next call on this thread will see the
// runtime's error itself.
template <typename Api>
class CurrentDeviceGuard {
 public:
  explicit CurrentDeviceGuard(int device, bool needed = true) {
    if (!needed) return;
    status_ = RuntimeStatus<Api>::ToStatus(Api::GetDevice(&previous_),
                                           "GetDevice", device);
    if (!status_.ok() || previous_ == device) return;
    status_ = RuntimeStatus<Api>::ToStatus(Api::SetDevice(device), "SetDevice",
                                           device);
    restore_ = status_.ok();
  }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;
  ~CurrentDeviceGuard() {
    if (restore_) (void)Api::SetDevice(previous_);
  }

  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
  int previous_ = 0;
  bool restore_ = false;
};

// Switches the calling thread's stream-capture mode to Relaxed for the
// guard's lifetime. In the default (global) mode a "potentially unsafe"
// call (query, synchronize, malloc, free, ...) issued while any thread
// captures in global mode is prohibited and invalidates that capture; pools
// validate, create and destroy on arbitrary threads and must never break a
// user's graph. Creation and destruction are guarded too: they are off the
// hot path, and the runtimes do not document them as capture-safe.
//
// Cost: one thread-local exchange, plus one to restore unless the thread
// was already Relaxed; neither takes a driver lock. It cannot be skipped
// more cleverly: no runtime call says whether some other thread has a
// global-mode capture open, and a prohibited call has already invalidated
// that capture by the time its error comes back, so "try, then switch" is
// unsound. Pools keep the guarded calls few instead: one query per
// returned handle, none at acquire, and the capture status
// (StreamIsCapturing, capture-safe, unguarded) only after a failed query.
template <typename Api>
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(int device) {
    status_ = RuntimeStatus<Api>::ToStatus(
        Api::ThreadExchangeStreamCaptureMode(&mode_),
        "ThreadExchangeStreamCaptureMode", device);
    restore_ = status_.ok() && mode_ != Api::kCaptureModeRelaxed;
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;
  ~RelaxedCaptureMode() {
    if (restore_) (void)Api::ThreadExchangeStreamCaptureMode(&mode_);
  }

  const absl::Status& status() const { return status_; }

 private:
  typename Api::CaptureMode mode_ = Api::kCaptureModeRelaxed;
  absl::Status status_;
  bool restore_ = false;
};

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_GUARDS_H_
