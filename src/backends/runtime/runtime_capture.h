// RuntimeCapture<Api>: the capture calls RuntimeBackend<Api>'s capture
// overrides make once they have checked the device: the capture status, the
// capture's id (Backend::GetCaptureInfo) and the teardown of a capture left
// on a returned stream (Backend::EndCapture).
//
// The Api traits struct provides, besides what runtime_backend.h lists:
//   StreamGetCaptureInfo(Stream, CaptureStatus*, unsigned long long* id)
//     forwarding to cudaStreamGetCaptureInfo / hipStreamGetCaptureInfo, which
//     never invalidate a capture (they only read the stream's state) and so
//     need no Relaxed-mode guard. An optional feature (runtime_features.h,
//     Feature::kCaptureInfo): without it GetCaptureInfo is Unimplemented
//     naming the entry point, and callers fall back to the capture status.
//
// Thread safety: stateless.
#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_CAPTURE_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_CAPTURE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/backend.h"
#include "src/backends/runtime/runtime_features.h"
#include "src/backends/runtime/runtime_status.h"

namespace gpupool {
namespace runtime_internal {

template <typename Api>
struct RuntimeCapture {
  // The runtime's capture status as the Backend's. A status newer than this
  // code counts as invalidated: no pool can use such a capture.
  static CaptureStatus ToCaptureStatus(typename Api::CaptureStatus capture) {
    if (capture == Api::kCaptureStatusNone) return CaptureStatus::kNone;
    if (capture == Api::kCaptureStatusActive) return CaptureStatus::kActive;
    return CaptureStatus::kInvalidated;
  }

  // Backend::GetCaptureStatus for `stream` on `device` (already
  // range-checked).
  static absl::StatusOr<CaptureStatus> GetStatus(int device,
                                                 typename Api::Stream stream) {
    typename Api::CaptureStatus capture = Api::kCaptureStatusNone;
    absl::Status status = RuntimeStatus<Api>::ToStatus(
        Api::StreamIsCapturing(stream, &capture), "StreamIsCapturing", device);
    if (!status.ok()) return status;
    return ToCaptureStatus(capture);
  }

  // Backend::EndCapture for `stream` on `device` (already range-checked):
  // ends the capture and destroys what it captured.
  static absl::Status End(int device, typename Api::Stream stream) {
    typename Api::Graph graph = nullptr;
    const typename Api::Error error = Api::StreamEndCapture(stream, &graph);
    // Nobody will ever launch what was captured into a pooled stream; an
    // undestroyed graph would leak with every returned capture.
    if (graph != nullptr) {
      absl::Status destroyed = RuntimeStatus<Api>::ToStatus(
          Api::GraphDestroy(graph), "GraphDestroy", device);
      if (!destroyed.ok()) return destroyed;
    }
    // Ending an invalidated capture reports the invalidation and yields no
    // graph, but the capture is over: that is the postcondition we want.
    if (error != Api::kErrorCaptureInvalidated) {
      if (absl::Status status =
              RuntimeStatus<Api>::ToStatus(error, "StreamEndCapture", device);
          !status.ok()) {
        return status;
      }
    }
    absl::StatusOr<CaptureStatus> after = GetStatus(device, stream);
    if (!after.ok()) return after.status();
    if (*after != CaptureStatus::kNone) {
      return FaultError(
          Fault::kResource, absl::StatusCode::kFailedPrecondition,
          absl::StrCat(Api::kCallPrefix, "StreamEndCapture on device ", device,
                       " left the stream capturing"));
    }
    return absl::OkStatus();
  }

  // Backend::GetCaptureInfo for `stream` on `device` (already range-checked).
  // The runtimes return a valid id only with status Active; any other status
  // reports id 0.
  static absl::StatusOr<CaptureInfo> GetCaptureInfo(
      int device, typename Api::Stream stream) {
    if (absl::Status has = RequireFeature<Api>(Feature::kCaptureInfo,
                                               "StreamGetCaptureInfo", device);
        !has.ok()) {
      return has;
    }
    typename Api::CaptureStatus capture = Api::kCaptureStatusNone;
    unsigned long long id = 0;  // NOLINT(runtime/int): the runtimes' type
    absl::Status status = RuntimeStatus<Api>::ToStatus(
        Api::StreamGetCaptureInfo(stream, &capture, &id),
        "StreamGetCaptureInfo", device);
    if (!status.ok()) return status;
    CaptureInfo info;
    info.status = ToCaptureStatus(capture);
    if (info.status == CaptureStatus::kActive) {
      info.id = static_cast<uint64_t>(id);
    }
    return info;
  }
};

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_CAPTURE_H_
