// libgpupool_standin_hip.so: a stand-in HIP runtime for the preload tests.
// Exports the HIP entry points gpupool's HIP backend resolves and the ones
// client programs call (stream/event create, destroy, query, priority and
// flags, device reset), over the shared stand-in state
// (tests/preload/standin_runtime.h). Declared by HIP's own header, so the
// signatures are the runtime's. Also built lacking the IPC entry points
// (GPUPOOL_STANDIN_WITHOUT_IPC: the preload still pools) and lacking the
// capture-mode exchange (GPUPOOL_STANDIN_WITHOUT_CAPTURE_MODE: a runtime the
// preload cannot pool, and says so).

#include <hip/hip_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include "tests/preload/standin_counters.h"
#include "tests/preload/standin_runtime.h"

namespace {

gpupool_standin::Runtime& State() {
  // HIP: destroy blocks until the stream's work is done; priorities [-1, 1].
  static auto* runtime = new gpupool_standin::Runtime(
      {/*destroy_blocks=*/true, /*least_priority=*/1,
       /*greatest_priority=*/-1});
  return *runtime;
}

hipError_t E(int code) { return static_cast<hipError_t>(code); }

}  // namespace

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

STANDIN_EXPORT void gpupool_standin_hip_counters(StandinCounters* out) {
  *out = State().counters();
}
STANDIN_EXPORT int gpupool_standin_hip_launch(hipStream_t stream,
                                              int64_t micros) {
  return State().Launch(stream, micros);
}
STANDIN_EXPORT int gpupool_standin_hip_work_pending(hipStream_t stream) {
  return State().WorkPending(stream);
}

STANDIN_EXPORT const char* hipGetErrorName(hipError_t error) {
  switch (static_cast<int>(error)) {
    case hipSuccess:
      return "hipSuccess";
    case hipErrorInvalidValue:
      return "hipErrorInvalidValue";
    case hipErrorInvalidDevice:
      return "hipErrorInvalidDevice";
    case hipErrorInvalidHandle:
      return "hipErrorInvalidHandle";
    case hipErrorNotReady:
      return "hipErrorNotReady";
    default:
      return "hipErrorUnknown";
  }
}
STANDIN_EXPORT const char* hipGetErrorString(hipError_t error) {
  return hipGetErrorName(error);
}
STANDIN_EXPORT hipError_t hipGetLastError(void) { return hipSuccess; }
STANDIN_EXPORT hipError_t hipDriverGetVersion(int* version) {
  *version = 50221151;
  return hipSuccess;
}
STANDIN_EXPORT hipError_t hipRuntimeGetVersion(int* version) {
  *version = 50221151;
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipGetDeviceCount(int* count) {
  if (count == nullptr) return hipErrorInvalidValue;
  *count = State().device_count();
  return *count > 0 ? hipSuccess : hipErrorNoDevice;
}
STANDIN_EXPORT hipError_t hipGetDevice(int* device) {
  return E(State().GetDevice(device));
}
STANDIN_EXPORT hipError_t hipSetDevice(int device) {
  return E(State().SetDevice(device));
}
STANDIN_EXPORT hipError_t hipDeviceGetStreamPriorityRange(int* least,
                                                          int* greatest) {
  *least = State().dialect().least_priority;
  *greatest = State().dialect().greatest_priority;
  return hipSuccess;
}
STANDIN_EXPORT hipError_t hipDeviceReset(void) {
  return E(State().DeviceReset());
}

STANDIN_EXPORT hipError_t hipStreamCreate(hipStream_t* stream) {
  return E(State().CreateStream(reinterpret_cast<void**>(stream),
                                hipStreamDefault, 0, nullptr, 0));
}
STANDIN_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t* stream,
                                                   unsigned int flags) {
  return E(State().CreateStream(reinterpret_cast<void**>(stream), flags, 0,
                                nullptr, 0));
}
STANDIN_EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t* stream,
                                                      unsigned int flags,
                                                      int priority) {
  return E(State().CreateStream(reinterpret_cast<void**>(stream), flags,
                                priority, nullptr, 0));
}
STANDIN_EXPORT hipError_t hipExtStreamCreateWithCUMask(hipStream_t* stream,
                                                       uint32_t words,
                                                       const uint32_t* mask) {
  if (words == 0 || mask == nullptr) return hipErrorInvalidValue;
  return E(State().CreateStream(reinterpret_cast<void**>(stream),
                                hipStreamDefault, 0, mask, words));
}
STANDIN_EXPORT hipError_t hipStreamDestroy(hipStream_t stream) {
  return E(State().DestroyStream(stream));
}
STANDIN_EXPORT hipError_t hipStreamQuery(hipStream_t stream) {
  return E(State().QueryStream(stream));
}
STANDIN_EXPORT hipError_t hipStreamSynchronize(hipStream_t stream) {
  return E(State().SynchronizeStream(stream));
}
STANDIN_EXPORT hipError_t hipStreamGetPriority(hipStream_t stream,
                                               int* priority) {
  return E(State().StreamGetPriority(stream, priority));
}
STANDIN_EXPORT hipError_t hipStreamGetFlags(hipStream_t stream,
                                            unsigned int* flags) {
  return E(State().StreamGetFlags(stream, flags));
}
STANDIN_EXPORT hipError_t hipStreamIsCapturing(hipStream_t stream,
                                               hipStreamCaptureStatus* status) {
  bool capturing = false;
  const int code = State().StreamIsCapturing(stream, &capturing);
  if (code == hipSuccess) {
    *status =
        capturing ? hipStreamCaptureStatusActive : hipStreamCaptureStatusNone;
  }
  return E(code);
}
STANDIN_EXPORT hipError_t
hipStreamGetCaptureInfo(hipStream_t stream, hipStreamCaptureStatus* status,
                        unsigned long long* id) {  // NOLINT(runtime/int)
  if (id != nullptr) *id = 0;
  return hipStreamIsCapturing(stream, status);
}
STANDIN_EXPORT hipError_t hipStreamEndCapture(hipStream_t, hipGraph_t* graph) {
  if (graph != nullptr) *graph = nullptr;
  return hipErrorIllegalState;
}
STANDIN_EXPORT hipError_t hipGraphDestroy(hipGraph_t) { return hipSuccess; }
STANDIN_EXPORT hipError_t hipStreamWaitEvent(hipStream_t stream,
                                             hipEvent_t event, unsigned int) {
  return E(State().StreamWaitEvent(stream, event));
}
// A runtime older than gpupool needs lacks this one (HIP before 5.0).
#ifndef GPUPOOL_STANDIN_WITHOUT_CAPTURE_MODE
STANDIN_EXPORT hipError_t
hipThreadExchangeStreamCaptureMode(hipStreamCaptureMode* mode) {
  if (mode == nullptr) return hipErrorInvalidValue;
  static thread_local hipStreamCaptureMode current = hipStreamCaptureModeGlobal;
  const hipStreamCaptureMode previous = current;
  current = *mode;
  *mode = previous;
  return hipSuccess;
}
#endif

STANDIN_EXPORT hipError_t hipEventCreate(hipEvent_t* event) {
  return E(
      State().CreateEvent(reinterpret_cast<void**>(event), hipEventDefault));
}
STANDIN_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t* event,
                                                  unsigned flags) {
  return E(State().CreateEvent(reinterpret_cast<void**>(event), flags));
}
STANDIN_EXPORT hipError_t hipEventDestroy(hipEvent_t event) {
  return E(State().DestroyEvent(event));
}
STANDIN_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  return E(State().RecordEvent(event, stream));
}
STANDIN_EXPORT hipError_t hipEventQuery(hipEvent_t event) {
  return E(State().QueryEvent(event));
}
STANDIN_EXPORT hipError_t hipEventSynchronize(hipEvent_t event) {
  return E(State().SynchronizeEvent(event));
}

// Memory: host memory stands in for both kinds.
STANDIN_EXPORT hipError_t hipMalloc(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes == 0 ? 1 : bytes);
  return *ptr != nullptr ? hipSuccess : hipErrorOutOfMemory;
}
STANDIN_EXPORT hipError_t hipFree(void* ptr) {
  std::free(ptr);
  return hipSuccess;
}
STANDIN_EXPORT hipError_t hipHostMalloc(void** ptr, size_t bytes,
                                        unsigned int) {
  return hipMalloc(ptr, bytes);
}
STANDIN_EXPORT hipError_t hipHostFree(void* ptr) { return hipFree(ptr); }
STANDIN_EXPORT hipError_t hipMemGetInfo(size_t* free_bytes,
                                        size_t* total_bytes) {
  *free_bytes = size_t{1} << 34;
  *total_bytes = size_t{1} << 34;
  return hipSuccess;
}

// Built with GPUPOOL_STANDIN_WITHOUT_IPC, the stand-in lacks these (a
// HIP-compatible layer, an old or stripped build): still pooled.
#ifndef GPUPOOL_STANDIN_WITHOUT_IPC
// Interprocess memory: the programs under the preload never share memory
// with another process, so the stand-in answers as a platform without IPC.
STANDIN_EXPORT hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t*, void*) {
  return hipErrorNotSupported;
}
STANDIN_EXPORT hipError_t hipIpcOpenMemHandle(void** ptr, hipIpcMemHandle_t,
                                              unsigned int) {
  if (ptr != nullptr) *ptr = nullptr;
  return hipErrorNotSupported;
}
STANDIN_EXPORT hipError_t hipIpcCloseMemHandle(void*) {
  return hipErrorNotSupported;
}
#endif  // GPUPOOL_STANDIN_WITHOUT_IPC
