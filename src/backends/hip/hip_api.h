// HipApi: the HIP runtime (HIP 5.2, compiled as plain C++ with
// __HIP_PLATFORM_AMD__) as a traits struct for RuntimeBackend<Api>
// (src/backends/runtime/runtime_backend.h lists what a traits struct must
// provide). Function forwards, constants and the error table only; any logic
// belongs in the template so that CUDA runs it too.
//
// HIP semantics that differ from CUDA (docs/backends.md has the table):
//  * hipStreamDestroy blocks until the stream's pending work completes and
//    silently ends an active capture (ROCm: milliseconds per call, the reason
//    gpupool exists).
//  * Priorities: hipDeviceGetStreamPriorityRange reports [-1, 1] (high,
//    normal = 0, low); values outside are refused, never clamped.
//  * Compute-unit masks via hipExtStreamCreateWithCUMask, which takes no
//    flags or priority: it always creates a blocking (hipStreamDefault),
//    normal-priority stream, so the template accepts a cu_mask only with
//    non_blocking=false and priority=0.
//  * Capture: HIP 5.2 has hipStreamIsCapturing, hipStreamEndCapture,
//    hipGraphDestroy and hipThreadExchangeStreamCaptureMode (all "beta").
//  * No per-stream attributes in 5.2 (no access-policy window): nothing to
//    reset.
//  * hipGetErrorString often returns the error name again.

#ifndef GPUPOOL_SRC_BACKENDS_HIP_HIP_API_H_
#define GPUPOOL_SRC_BACKENDS_HIP_HIP_API_H_

#include <hip/hip_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/strings/string_view.h"
#include "src/backends/hip/hip_errors.h"
#include "src/backends/runtime/error_class.h"

namespace gpupool {
namespace hip_internal {

struct HipApi {
  using Error = hipError_t;
  using Stream = hipStream_t;
  using Event = hipEvent_t;
  using Graph = hipGraph_t;
  using CaptureMode = hipStreamCaptureMode;
  using CaptureStatus = hipStreamCaptureStatus;

  static constexpr std::string_view kName = "hip";
  static constexpr absl::string_view kCallPrefix = "hip";
  static constexpr absl::string_view kHostAllocCall = "HostMalloc";
  static constexpr absl::string_view kHostFreeCall = "HostFree";

  static constexpr Error kSuccess = hipSuccess;
  static constexpr Error kErrorNotReady = hipErrorNotReady;
  static constexpr Error kErrorCaptureInvalidated =
      hipErrorStreamCaptureInvalidated;

  static constexpr unsigned kStreamDefault = hipStreamDefault;
  static constexpr unsigned kStreamNonBlocking = hipStreamNonBlocking;
  static constexpr unsigned kEventDefault = hipEventDefault;
  static constexpr unsigned kEventBlockingSync = hipEventBlockingSync;
  static constexpr unsigned kEventDisableTiming = hipEventDisableTiming;
  static constexpr unsigned kEventInterprocess = hipEventInterprocess;
  static constexpr unsigned kHostAllocDefault = hipHostMallocDefault;
  static constexpr CaptureMode kCaptureModeRelaxed =
      hipStreamCaptureModeRelaxed;
  static constexpr CaptureStatus kCaptureStatusNone =
      hipStreamCaptureStatusNone;
  static constexpr CaptureStatus kCaptureStatusActive =
      hipStreamCaptureStatusActive;
  static constexpr CaptureStatus kCaptureStatusInvalidated =
      hipStreamCaptureStatusInvalidated;

  static constexpr bool kSupportsCuMask = true;
  // What hipExtStreamCreateWithCUMask creates (hip::Stream::Priority::Normal,
  // hipStreamDefault).
  static constexpr int kCuMaskStreamPriority = 0;
  static constexpr bool kCuMaskStreamNonBlocking = false;
  static constexpr bool kHasAccessPolicyWindow = false;

  // --- Errors ----------------------------------------------------------------
  static runtime_internal::ErrorClass Classify(
      Error error, runtime_internal::CallKind kind) {
    return HipErrorClass(error, kind);
  }
  static const char* ErrorName(Error error) { return hipGetErrorName(error); }
  static const char* ErrorString(Error error) {
    return hipGetErrorString(error);
  }
  static Error GetLastError() { return hipGetLastError(); }

  // --- Device ----------------------------------------------------------------
  static Error GetDeviceCount(int* count) { return hipGetDeviceCount(count); }
  static Error GetDevice(int* device) { return hipGetDevice(device); }
  static Error SetDevice(int device) { return hipSetDevice(device); }
  static Error DeviceGetStreamPriorityRange(int* least, int* greatest) {
    return hipDeviceGetStreamPriorityRange(least, greatest);
  }

  // --- Streams ---------------------------------------------------------------
  static Error StreamCreateWithPriority(Stream* stream, unsigned flags,
                                        int priority) {
    return hipStreamCreateWithPriority(stream, flags, priority);
  }
  static Error ExtStreamCreateWithCuMask(Stream* stream, uint32_t words,
                                         const uint32_t* mask) {
    return hipExtStreamCreateWithCUMask(stream, words, mask);
  }
  // Blocks until pending work completes; ends an active capture silently.
  static Error StreamDestroy(Stream stream) { return hipStreamDestroy(stream); }
  static Error StreamQuery(Stream stream) { return hipStreamQuery(stream); }
  static Error StreamSynchronize(Stream stream) {
    return hipStreamSynchronize(stream);
  }
  static Error StreamIsCapturing(Stream stream, CaptureStatus* status) {
    return hipStreamIsCapturing(stream, status);
  }
  static Error StreamEndCapture(Stream stream, Graph* graph) {
    return hipStreamEndCapture(stream, graph);
  }
  static Error GraphDestroy(Graph graph) { return hipGraphDestroy(graph); }
  static Error StreamWaitEvent(Stream stream, Event event) {
    return hipStreamWaitEvent(stream, event, /*flags=*/0);
  }
  static Error ThreadExchangeStreamCaptureMode(CaptureMode* mode) {
    return hipThreadExchangeStreamCaptureMode(mode);
  }

  // --- Events ----------------------------------------------------------------
  static Error EventCreateWithFlags(Event* event, unsigned flags) {
    return hipEventCreateWithFlags(event, flags);
  }
  static Error EventDestroy(Event event) { return hipEventDestroy(event); }
  static Error EventRecord(Event event, Stream stream) {
    return hipEventRecord(event, stream);
  }
  static Error EventQuery(Event event) { return hipEventQuery(event); }
  static Error EventSynchronize(Event event) {
    return hipEventSynchronize(event);
  }

  // --- Memory ----------------------------------------------------------------
  static Error Malloc(void** ptr, size_t bytes) {
    return hipMalloc(ptr, bytes);
  }
  static Error Free(void* ptr) { return hipFree(ptr); }
  static Error HostAlloc(void** ptr, size_t bytes, unsigned flags) {
    return hipHostMalloc(ptr, bytes, flags);
  }
  static Error FreeHost(void* ptr) { return hipHostFree(ptr); }
  static Error MemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    return hipMemGetInfo(free_bytes, total_bytes);
  }
};

}  // namespace hip_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_HIP_HIP_API_H_
