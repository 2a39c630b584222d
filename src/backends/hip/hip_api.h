// HipApi: the HIP runtime (HIP 5.2, compiled as plain C++ with
// __HIP_PLATFORM_AMD__) as a traits struct for RuntimeBackend<Api>
// (src/backends/runtime/runtime_backend.h lists what a traits struct must
// provide). Function forwards, constants and the error table only; any logic
// belongs in the template so that CUDA runs it too. The forwards call through
// the runtime table resolved at run time (hip_entry_points.h): nothing here
// references a HIP symbol at link time.
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
//  * Capture: HIP 5.2 has hipStreamIsCapturing, hipStreamGetCaptureInfo
//    (status and the capture's process-unique id), hipStreamEndCapture,
//    hipGraphDestroy and hipThreadExchangeStreamCaptureMode (all "beta").
//  * No per-stream attributes in 5.2 (no access-policy window): nothing to
//    reset.
//  * hipGetErrorString often returns the error name again.
//  * Graph user objects (hipUserObjectCreate, hipGraphRetainUserObject,
//    hipUserObjectRelease) exist in later ROCm releases only (HIPIFY lists
//    them from 5.3); HIP 5.2's headers lack them, so their types and flag
//    values (hipUserObjectNoDestructorSync = hipGraphUserObjectMove = 1)
//    are spelled out here and the entry points are optional.

#ifndef GPUPOOL_SRC_BACKENDS_HIP_HIP_API_H_
#define GPUPOOL_SRC_BACKENDS_HIP_HIP_API_H_

#include <hip/hip_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "src/backends/hip/hip_entry_points.h"
#include "src/backends/hip/hip_errors.h"
#include "src/backends/runtime/error_class.h"
#include "src/backends/runtime/runtime_features.h"

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

  static constexpr bool kSupportsCuMask = true;
  // What hipExtStreamCreateWithCUMask creates (hip::Stream::Priority::Normal,
  // hipStreamDefault).
  static constexpr int kCuMaskStreamPriority = 0;
  static constexpr bool kCuMaskStreamNonBlocking = false;
  static constexpr bool kHasAccessPolicyWindow = false;

  // --- Optional features (src/backends/runtime/runtime_features.h) ---------
  static std::string MissingEntryPoints(runtime_internal::Feature feature) {
    return hip_internal::MissingEntryPoints(Hip(), feature);
  }
  static const std::string& RuntimeSource() { return Hip().source; }

  // --- Errors ----------------------------------------------------------------
  static runtime_internal::ErrorClass Classify(
      Error error, runtime_internal::CallKind kind) {
    return HipErrorClass(error, kind);
  }
  static const char* ErrorName(Error error) {
    return Hip().hipGetErrorName(error);
  }
  static const char* ErrorString(Error error) {
    return Hip().hipGetErrorString(error);
  }
  static Error GetLastError() { return Hip().hipGetLastError(); }

  // --- Device ----------------------------------------------------------------
  static Error GetDeviceCount(int* count) {
    return Hip().hipGetDeviceCount(count);
  }
  static Error GetDevice(int* device) { return Hip().hipGetDevice(device); }
  static Error SetDevice(int device) { return Hip().hipSetDevice(device); }
  static Error DeviceGetStreamPriorityRange(int* least, int* greatest) {
    return Hip().hipDeviceGetStreamPriorityRange(least, greatest);
  }

  // --- Streams ---------------------------------------------------------------
  static Error StreamCreateWithPriority(Stream* stream, unsigned flags,
                                        int priority) {
    return Hip().hipStreamCreateWithPriority(stream, flags, priority);
  }
  static Error ExtStreamCreateWithCuMask(Stream* stream, uint32_t words,
                                         const uint32_t* mask) {
    return Hip().hipExtStreamCreateWithCUMask(stream, words, mask);
  }
  // Blocks until pending work completes; ends an active capture silently.
  static Error StreamDestroy(Stream stream) {
    return Hip().hipStreamDestroy(stream);
  }
  static Error StreamQuery(Stream stream) {
    return Hip().hipStreamQuery(stream);
  }
  static Error StreamSynchronize(Stream stream) {
    return Hip().hipStreamSynchronize(stream);
  }
  static Error StreamIsCapturing(Stream stream, CaptureStatus* status) {
    return Hip().hipStreamIsCapturing(stream, status);
  }
  static Error StreamGetCaptureInfo(Stream stream, CaptureStatus* status,
                                    unsigned long long* id) {  // NOLINT
    return Hip().hipStreamGetCaptureInfo(stream, status, id);
  }
  static Error StreamEndCapture(Stream stream, Graph* graph) {
    return Hip().hipStreamEndCapture(stream, graph);
  }
  static Error GraphDestroy(Graph graph) {
    return Hip().hipGraphDestroy(graph);
  }
  static Error StreamWaitEvent(Stream stream, Event event) {
    return Hip().hipStreamWaitEvent(stream, event, /*flags=*/0);
  }
  static Error ThreadExchangeStreamCaptureMode(CaptureMode* mode) {
    return Hip().hipThreadExchangeStreamCaptureMode(mode);
  }

  // --- Events ----------------------------------------------------------------
  static Error EventCreateWithFlags(Event* event, unsigned flags) {
    return Hip().hipEventCreateWithFlags(event, flags);
  }
  static Error EventDestroy(Event event) {
    return Hip().hipEventDestroy(event);
  }
  static Error EventRecord(Event event, Stream stream) {
    return Hip().hipEventRecord(event, stream);
  }
  static Error EventQuery(Event event) { return Hip().hipEventQuery(event); }
  static Error EventSynchronize(Event event) {
    return Hip().hipEventSynchronize(event);
  }

  // --- Memory ----------------------------------------------------------------
  static Error Malloc(void** ptr, size_t bytes) {
    return Hip().hipMalloc(ptr, bytes);
  }
  static Error Free(void* ptr) { return Hip().hipFree(ptr); }
  static Error HostAlloc(void** ptr, size_t bytes, unsigned flags) {
    return Hip().hipHostMalloc(ptr, bytes, flags);
  }
  static Error FreeHost(void* ptr) { return Hip().hipHostFree(ptr); }
  static Error MemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    return Hip().hipMemGetInfo(free_bytes, total_bytes);
  }

  // --- Interprocess memory (runtime_ipc.h) -----------------------------------
  using IpcMemHandle = hipIpcMemHandle_t;
  static constexpr unsigned kIpcMemLazyEnablePeerAccess =
      hipIpcMemLazyEnablePeerAccess;
  static Error IpcGetMemHandle(IpcMemHandle* handle, void* ptr) {
    return Hip().hipIpcGetMemHandle(handle, ptr);
  }
  static Error IpcOpenMemHandle(void** ptr, IpcMemHandle handle,
                                unsigned flags) {
    return Hip().hipIpcOpenMemHandle(ptr, handle, flags);
  }
  static Error IpcCloseMemHandle(void* ptr) {
    return Hip().hipIpcCloseMemHandle(ptr);
  }
  // hipMemGetAddressRange from the loaded runtime library: optional (a
  // runtime without it leaves the backend's GetAddressRange Unimplemented).
  static bool HasMemGetAddressRange() {
    return HipMemGetAddressRange() != nullptr;
  }
  static Error MemGetAddressRange(void** base, size_t* bytes, void* ptr) {
    HipAddressRangeFn query = HipMemGetAddressRange();
    if (query == nullptr) return hipErrorNotSupported;
    return query(base, bytes, ptr);
  }

  // --- Graph user objects (runtime_user_objects.h) ---------------------------
  using UserObject = HipUserObject;
  static constexpr unsigned kUserObjectNoDestructorSync = 1;
  static constexpr unsigned kGraphUserObjectMove = 1;
  static Error UserObjectCreate(UserObject* object, void* data,
                                void (*destroy)(void*),
                                unsigned initial_refcount, unsigned flags) {
    return Hip().hipUserObjectCreate(object, data, destroy, initial_refcount,
                                     flags);
  }
  static Error GraphRetainUserObject(Graph graph, UserObject object,
                                     unsigned count, unsigned flags) {
    return Hip().hipGraphRetainUserObject(graph, object, count, flags);
  }
  static Error UserObjectRelease(UserObject object, unsigned count) {
    return Hip().hipUserObjectRelease(object, count);
  }
};

}  // namespace hip_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_HIP_HIP_API_H_
