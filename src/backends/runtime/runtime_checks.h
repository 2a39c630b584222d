// Argument checks RuntimeBackend<Api> makes before it creates a stream: a CU
// mask only where the runtime has one (and the entry point for it) and with
// the flags its create call gives, a priority inside the device's range.
// Runtimes clamp or ignore silently; these refuse, so a pool key always
// describes its stream.
//
// Thread safety: stateless.
#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_CHECKS_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_CHECKS_H_

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpupool/backend.h"
#include "src/backends/runtime/runtime_features.h"
#include "src/backends/runtime/runtime_status.h"

namespace gpupool {
namespace runtime_internal {

// The out-of-range error of CheckDeviceRange (kCaller InvalidArgument).
template <typename Api>
ABSL_ATTRIBUTE_NOINLINE absl::Status DeviceOutOfRange(int device,
                                                      int device_count) {
  return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                    absl::StrCat(Api::kCallPrefix, " device ", device,
                                 " is out of range [0, ", device_count, ")"));
}

// OK when `device` is in [0, device_count); else kCaller InvalidArgument.
// Every primitive's first check: inline, the message built out of line.
template <typename Api>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status CheckDeviceRange(
    int device, int device_count) {
  if (ABSL_PREDICT_TRUE(device >= 0 && device < device_count)) {
    return absl::OkStatus();
  }
  return DeviceOutOfRange<Api>(device, device_count);
}

// A CU mask is a HIP extension; where it exists the create call takes no
// flags or priority, so a config asking for others would be silently
// ignored. Both cases are the caller's to fix.
template <typename Api>
absl::Status CheckCuMask(int device, const StreamConfig& config) {
  if (config.cu_mask.empty()) return absl::OkStatus();
  if constexpr (!Api::kSupportsCuMask) {
    return FaultError(
        Fault::kCaller, absl::StatusCode::kInvalidArgument,
        absl::StrCat("cu_mask is a HIP extension; the ", Api::kCallPrefix,
                     " backend cannot restrict a stream to compute units "
                     "(device ",
                     device, ", ", config.ToString(), ")"));
  } else {
    if (config.cu_mask.size() > std::numeric_limits<uint32_t>::max()) {
      return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                        "cu_mask has more than 2^32 words");
    }
    if (config.priority != Api::kCuMaskStreamPriority ||
        config.non_blocking != Api::kCuMaskStreamNonBlocking) {
      return FaultError(
          Fault::kCaller, absl::StatusCode::kInvalidArgument,
          absl::StrCat(
              Api::kCallPrefix, "ExtStreamCreateWithCUMask creates only ",
              Api::kCuMaskStreamNonBlocking ? "non-blocking" : "blocking",
              " streams of priority ", Api::kCuMaskStreamPriority,
              "; a config with a cu_mask must say non_blocking=",
              Api::kCuMaskStreamNonBlocking ? 1 : 0,
              ", priority=", Api::kCuMaskStreamPriority, " (device ", device,
              ", ", config.ToString(), ")"));
    }
    // An optional entry point (runtime_features.h): a runtime without it
    // still serves streams without a mask.
    return RequireFeature<Api>(Feature::kCuMask, "ExtStreamCreateWithCUMask",
                               device);
  }
}

// Validates against the runtime's own range on the current device (the
// caller holds the device guard). Runtimes clamp silently; we refuse, so
// that a pool key always describes the stream it maps to.
template <typename Api>
absl::Status CheckPriority(int device, int priority) {
  int least = 0;
  int greatest = 0;
  absl::Status status = RuntimeStatus<Api>::ToStatus(
      Api::DeviceGetStreamPriorityRange(&least, &greatest),
      "DeviceGetStreamPriorityRange", device);
  if (!status.ok()) return status;
  const int low = std::min(least, greatest);
  const int high = std::max(least, greatest);
  if (priority >= low && priority <= high) return absl::OkStatus();
  return FaultError(
      Fault::kCaller, absl::StatusCode::kInvalidArgument,
      absl::StrCat("stream priority ", priority, " is outside [", low, ", ",
                   high, "], the range ", Api::kCallPrefix, " device ", device,
                   " supports (lower is higher priority; never clamped)"));
}

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_CHECKS_H_
