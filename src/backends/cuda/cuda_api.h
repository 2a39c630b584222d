// CudaApi: the CUDA runtime as a traits struct for RuntimeBackend<Api>
// (src/backends/runtime/runtime_backend.h, which lists what a traits struct
// must provide). Function forwards, constants and the error table only; any
// logic belongs in the template so that HIP runs it too. The forwards call
// through the runtime table resolved at run time (cuda_entry_points.h): nothing
// here references a CUDA symbol at link time.
//
// CUDA semantics the template relies on (docs/backends.md has the full
// CUDA/HIP comparison):
//  * cudaStreamDestroy returns at once; the stream's resources are released
//    when its pending work completes.
//  * Priorities come from cudaDeviceGetStreamPriorityRange (e.g. [-5, 0] on
//    Hopper); cudaStreamCreateWithPriority clamps, the template refuses.
//  * No compute-unit masks.
//  * Streams carry an L2 access-policy window that outlives a lease unless
//    reset; devices without persisting L2 report a maximum window of 0.
//  * Graph user objects from CUDA 11.4 (cudaUserObjectCreate with
//    cudaUserObjectNoDestructorSync, the only and required flag); the
//    destructor runs on a CUDA-owned thread that allows no CUDA call.

#ifndef GPUPOOL_SRC_BACKENDS_CUDA_CUDA_API_H_
#define GPUPOOL_SRC_BACKENDS_CUDA_CUDA_API_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "src/backends/cuda/cuda_entry_points.h"
#include "src/backends/cuda/cuda_errors.h"
#include "src/backends/runtime/error_class.h"
#include "src/backends/runtime/runtime_features.h"

namespace gpupool {
namespace cuda_internal {

struct CudaApi {
  using Error = cudaError_t;
  using Stream = cudaStream_t;
  using Event = cudaEvent_t;
  using Graph = cudaGraph_t;
  using CaptureMode = cudaStreamCaptureMode;
  using CaptureStatus = cudaStreamCaptureStatus;

  static constexpr std::string_view kName = "cuda";
  static constexpr absl::string_view kCallPrefix = "cuda";
  static constexpr absl::string_view kHostAllocCall = "HostAlloc";
  static constexpr absl::string_view kHostFreeCall = "FreeHost";

  static constexpr Error kSuccess = cudaSuccess;
  static constexpr Error kErrorNotReady = cudaErrorNotReady;
  static constexpr Error kErrorCaptureInvalidated =
      cudaErrorStreamCaptureInvalidated;

  static constexpr unsigned kStreamDefault = cudaStreamDefault;
  static constexpr unsigned kStreamNonBlocking = cudaStreamNonBlocking;
  static constexpr unsigned kEventDefault = cudaEventDefault;
  static constexpr unsigned kEventBlockingSync = cudaEventBlockingSync;
  static constexpr unsigned kEventDisableTiming = cudaEventDisableTiming;
  static constexpr unsigned kEventInterprocess = cudaEventInterprocess;
  static constexpr unsigned kHostAllocDefault = cudaHostAllocDefault;
  static constexpr CaptureMode kCaptureModeRelaxed =
      cudaStreamCaptureModeRelaxed;
  static constexpr CaptureStatus kCaptureStatusNone =
      cudaStreamCaptureStatusNone;
  static constexpr CaptureStatus kCaptureStatusActive =
      cudaStreamCaptureStatusActive;

  static constexpr bool kSupportsCuMask = false;
  static constexpr bool kHasAccessPolicyWindow = true;

  // --- Optional features (src/backends/runtime/runtime_features.h) ---------
  static std::string MissingEntryPoints(runtime_internal::Feature feature) {
    return cuda_internal::MissingEntryPoints(Cudart(), feature);
  }
  static const std::string& RuntimeSource() { return Cudart().source; }

  // --- Errors ----------------------------------------------------------------
  static runtime_internal::ErrorClass Classify(Error error,
                                               runtime_internal::CallKind) {
    return CudaErrorClass(error);
  }
  static const char* ErrorName(Error error) {
    return Cudart().cudaGetErrorName(error);
  }
  static const char* ErrorString(Error error) {
    return Cudart().cudaGetErrorString(error);
  }
  static Error GetLastError() { return Cudart().cudaGetLastError(); }

  // --- Device ----------------------------------------------------------------
  static Error GetDeviceCount(int* count) {
    return Cudart().cudaGetDeviceCount(count);
  }
  static Error GetDevice(int* device) { return Cudart().cudaGetDevice(device); }
  static Error SetDevice(int device) { return Cudart().cudaSetDevice(device); }
  static Error DeviceGetStreamPriorityRange(int* least, int* greatest) {
    return Cudart().cudaDeviceGetStreamPriorityRange(least, greatest);
  }
  static Error MaxAccessPolicyWindowBytes(int device, int* bytes) {
    return Cudart().cudaDeviceGetAttribute(
        bytes, cudaDevAttrMaxAccessPolicyWindowSize, device);
  }

  // --- Streams ---------------------------------------------------------------
  static Error StreamCreateWithPriority(Stream* stream, unsigned flags,
                                        int priority) {
    return Cudart().cudaStreamCreateWithPriority(stream, flags, priority);
  }
  static Error StreamDestroy(Stream stream) {
    return Cudart().cudaStreamDestroy(stream);
  }
  static Error StreamQuery(Stream stream) {
    return Cudart().cudaStreamQuery(stream);
  }
  static Error StreamSynchronize(Stream stream) {
    return Cudart().cudaStreamSynchronize(stream);
  }
  static Error StreamIsCapturing(Stream stream, CaptureStatus* status) {
    return Cudart().cudaStreamIsCapturing(stream, status);
  }
  // CUDA 13's cudaStreamGetCaptureInfo takes seven arguments; a CUDA 12
  // runtime's symbol of that name takes three or six. Every optional output
  // but the id is null here, so either form ignores the extra arguments or
  // reads them as "not requested".
  static Error StreamGetCaptureInfo(Stream stream, CaptureStatus* status,
                                    unsigned long long* id) {  // NOLINT
    return Cudart().cudaStreamGetCaptureInfo(stream, status, id, nullptr,
                                             nullptr, nullptr, nullptr);
  }
  static Error StreamEndCapture(Stream stream, Graph* graph) {
    return Cudart().cudaStreamEndCapture(stream, graph);
  }
  static Error GraphDestroy(Graph graph) {
    return Cudart().cudaGraphDestroy(graph);
  }
  static Error StreamWaitEvent(Stream stream, Event event) {
    return Cudart().cudaStreamWaitEvent(stream, event, /*flags=*/0);
  }
  static Error ThreadExchangeStreamCaptureMode(CaptureMode* mode) {
    return Cudart().cudaThreadExchangeStreamCaptureMode(mode);
  }
  // A zero-byte window is the creation default: no lines persist.
  static Error ClearAccessPolicyWindow(Stream stream) {
    cudaStreamAttrValue value = {};
    value.accessPolicyWindow.base_ptr = nullptr;
    value.accessPolicyWindow.num_bytes = 0;
    value.accessPolicyWindow.hitRatio = 0.0f;
    value.accessPolicyWindow.hitProp = cudaAccessPropertyNormal;
    value.accessPolicyWindow.missProp = cudaAccessPropertyNormal;
    return Cudart().cudaStreamSetAttribute(
        stream, cudaStreamAttributeAccessPolicyWindow, &value);
  }

  // --- Events ----------------------------------------------------------------
  static Error EventCreateWithFlags(Event* event, unsigned flags) {
    return Cudart().cudaEventCreateWithFlags(event, flags);
  }
  static Error EventDestroy(Event event) {
    return Cudart().cudaEventDestroy(event);
  }
  static Error EventRecord(Event event, Stream stream) {
    return Cudart().cudaEventRecord(event, stream);
  }
  static Error EventQuery(Event event) {
    return Cudart().cudaEventQuery(event);
  }
  static Error EventSynchronize(Event event) {
    return Cudart().cudaEventSynchronize(event);
  }

  // --- Memory ----------------------------------------------------------------
  static Error Malloc(void** ptr, size_t bytes) {
    return Cudart().cudaMalloc(ptr, bytes);
  }
  static Error Free(void* ptr) { return Cudart().cudaFree(ptr); }
  static Error HostAlloc(void** ptr, size_t bytes, unsigned flags) {
    return Cudart().cudaHostAlloc(ptr, bytes, flags);
  }
  static Error FreeHost(void* ptr) { return Cudart().cudaFreeHost(ptr); }
  static Error MemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    return Cudart().cudaMemGetInfo(free_bytes, total_bytes);
  }

  // --- Interprocess memory (runtime_ipc.h) -----------------------------------
  using IpcMemHandle = cudaIpcMemHandle_t;
  static constexpr unsigned kIpcMemLazyEnablePeerAccess =
      cudaIpcMemLazyEnablePeerAccess;
  static Error IpcGetMemHandle(IpcMemHandle* handle, void* ptr) {
    return Cudart().cudaIpcGetMemHandle(handle, ptr);
  }
  static Error IpcOpenMemHandle(void** ptr, IpcMemHandle handle,
                                unsigned flags) {
    return Cudart().cudaIpcOpenMemHandle(ptr, handle, flags);
  }
  static Error IpcCloseMemHandle(void* ptr) {
    return Cudart().cudaIpcCloseMemHandle(ptr);
  }
  // The driver's cuMemGetAddressRange_v2 (the runtime API has none), from
  // the libcuda the runtime loaded: optional. Driver and runtime codes share
  // their numbers for the errors the backend reacts to.
  static bool HasMemGetAddressRange() {
    return DriverMemGetAddressRange() != nullptr;
  }
  static Error MemGetAddressRange(void** base, size_t* bytes, void* ptr) {
    DriverAddressRangeFn query = DriverMemGetAddressRange();
    if (query == nullptr) return cudaErrorNotSupported;
    unsigned long long found = 0;  // NOLINT(runtime/int): CUdeviceptr
    const int result =
        query(&found, bytes, reinterpret_cast<unsigned long long>(ptr));
    *base = reinterpret_cast<void*>(found);
    return static_cast<Error>(result);
  }

  // --- Graph user objects (runtime_user_objects.h) ---------------------------
  using UserObject = cudaUserObject_t;
  static constexpr unsigned kUserObjectNoDestructorSync =
      cudaUserObjectNoDestructorSync;
  static constexpr unsigned kGraphUserObjectMove = cudaGraphUserObjectMove;
  static Error UserObjectCreate(UserObject* object, void* data,
                                void (*destroy)(void*),
                                unsigned initial_refcount, unsigned flags) {
    return Cudart().cudaUserObjectCreate(object, data, destroy,
                                         initial_refcount, flags);
  }
  static Error GraphRetainUserObject(Graph graph, UserObject object,
                                     unsigned count, unsigned flags) {
    return Cudart().cudaGraphRetainUserObject(graph, object, count, flags);
  }
  static Error UserObjectRelease(UserObject object, unsigned count) {
    return Cudart().cudaUserObjectRelease(object, count);
  }
};

}  // namespace cuda_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_CUDA_CUDA_API_H_
