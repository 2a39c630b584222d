// AccessPolicyWindowReset<Api>: how RuntimeBackend<Api> returns a stream's
// L2 access-policy window to its creation default (a zero-byte window), for
// a runtime whose streams carry one (Api::kHasAccessPolicyWindow: CUDA). A
// window outlives a lease unless reset, and would make the next user's
// accesses persist in L2.
//
// Whether a device supports a window at all (a maximum window of 0 bytes
// means no persisting L2) is read once per device and cached. The reset is
// an optional feature (runtime_features.h, Feature::kAccessPolicyWindow): on
// a runtime without its entry points Reset is Unimplemented naming them and
// Resettable is false, so pools never ask.
//
// The Api traits struct provides MaxAccessPolicyWindowBytes(int device, int*)
// and ClearAccessPolicyWindow(Stream).
//
// Thread safety: safe to call concurrently. The per-device answers are
// atomics; racing first callers compute the same answer.
#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_ACCESS_POLICY_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_ACCESS_POLICY_H_

#include <atomic>
#include <memory>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/backends/runtime/runtime_features.h"
#include "src/backends/runtime/runtime_status.h"

namespace gpupool {
namespace runtime_internal {

template <typename Api>
class AccessPolicyWindowReset {
 public:
  explicit AccessPolicyWindowReset(int device_count)
      : state_(new std::atomic<int>[device_count]) {
    for (int i = 0; i < device_count; ++i) {
      state_[i].store(kUnknown, std::memory_order_relaxed);
    }
  }
  AccessPolicyWindowReset(const AccessPolicyWindowReset&) = delete;
  AccessPolicyWindowReset& operator=(const AccessPolicyWindowReset&) = delete;

  // Backend::ResetStreamAttributes for `stream` on `device` (range-checked
  // by the caller). Devices without persisting L2 cannot have a window set;
  // skipping them avoids an error that would discard every returned stream.
  absl::Status Reset(int device, typename Api::Stream stream) {
    absl::StatusOr<bool> supported = Supported(device);
    if (!supported.ok()) return supported.status();
    if (!*supported) return absl::OkStatus();
    return RuntimeStatus<Api>::ToStatus(Api::ClearAccessPolicyWindow(stream),
                                        "StreamSetAttribute", device);
  }

  // Backend::HasResettableStreamAttributes. A failed attribute query answers
  // true: the reset at return then reports the runtime's error. A runtime
  // without the entry points answers false: there is nothing it could reset.
  bool Resettable(int device) {
    absl::StatusOr<bool> supported = Supported(device);
    if (supported.ok()) return *supported;
    return supported.status().code() != absl::StatusCode::kUnimplemented;
  }

 private:
  enum : int { kUnknown = 0, kSupported, kAbsent, kNoEntryPoints };

  absl::StatusOr<bool> Supported(int device) {
    std::atomic<int>& state = state_[device];
    const int known = state.load(std::memory_order_relaxed);
    if (ABSL_PREDICT_TRUE(known == kSupported)) return true;
    if (known == kAbsent) return false;
    absl::Status has = RequireFeature<Api>(Feature::kAccessPolicyWindow,
                                           "StreamSetAttribute", device);
    if (!has.ok()) {
      state.store(kNoEntryPoints, std::memory_order_relaxed);
      return has;
    }
    int max_bytes = 0;
    absl::Status status = RuntimeStatus<Api>::ToStatus(
        Api::MaxAccessPolicyWindowBytes(device, &max_bytes),
        "DeviceGetAttribute", device);
    if (!status.ok()) return status;
    // Racing first callers compute the same answer; either store wins.
    state.store(max_bytes > 0 ? kSupported : kAbsent,
                std::memory_order_relaxed);
    return max_bytes > 0;
  }

  const std::unique_ptr<std::atomic<int>[]> state_;
};

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_ACCESS_POLICY_H_
