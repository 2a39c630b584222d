// libgpupool_standin_cudart.so: a stand-in CUDA runtime (libcudart) for the
// preload tests. Exports the entry points gpupool's CUDA backend resolves and
// the ones client programs call (stream/event create, destroy, query,
// priority and flags, device reset), over the shared stand-in state
// (tests/preload/standin_runtime.h). Declared by CUDA's own header, so the
// signatures are the runtime's. Also built lacking the IPC entry points
// (GPUPOOL_STANDIN_WITHOUT_IPC: the preload still pools) and lacking the
// capture-mode exchange (GPUPOOL_STANDIN_WITHOUT_CAPTURE_MODE: a runtime the
// preload cannot pool, and says so).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include "tests/preload/standin_counters.h"
#include "tests/preload/standin_runtime.h"

namespace {

gpupool_standin::Runtime& State() {
  // CUDA: destroy returns at once; priorities [-5, 0] (Hopper's range).
  static auto* runtime = new gpupool_standin::Runtime(
      {/*destroy_blocks=*/false, /*least_priority=*/0,
       /*greatest_priority=*/-5});
  return *runtime;
}

cudaError_t E(int code) { return static_cast<cudaError_t>(code); }

}  // namespace

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

STANDIN_EXPORT void gpupool_standin_cudart_counters(StandinCounters* out) {
  *out = State().counters();
}
STANDIN_EXPORT int gpupool_standin_cudart_launch(cudaStream_t stream,
                                                 int64_t micros) {
  return State().Launch(stream, micros);
}
STANDIN_EXPORT int gpupool_standin_cudart_work_pending(cudaStream_t stream) {
  return State().WorkPending(stream);
}

STANDIN_EXPORT const char* cudaGetErrorName(cudaError_t error) {
  switch (static_cast<int>(error)) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    default:
      return "cudaErrorUnknown";
  }
}
STANDIN_EXPORT const char* cudaGetErrorString(cudaError_t error) {
  return cudaGetErrorName(error);
}
STANDIN_EXPORT cudaError_t cudaGetLastError(void) { return cudaSuccess; }
STANDIN_EXPORT cudaError_t cudaDriverGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}
STANDIN_EXPORT cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}

STANDIN_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return cudaErrorInvalidValue;
  *count = State().device_count();
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}
STANDIN_EXPORT cudaError_t cudaGetDevice(int* device) {
  return E(State().GetDevice(device));
}
STANDIN_EXPORT cudaError_t cudaSetDevice(int device) {
  return E(State().SetDevice(device));
}
STANDIN_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int* least,
                                                            int* greatest) {
  *least = State().dialect().least_priority;
  *greatest = State().dialect().greatest_priority;
  return cudaSuccess;
}
STANDIN_EXPORT cudaError_t cudaDeviceReset(void) {
  return E(State().DeviceReset());
}

STANDIN_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return E(State().CreateStream(reinterpret_cast<void**>(stream),
                                cudaStreamDefault, 0, nullptr, 0));
}
STANDIN_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream,
                                                     unsigned int flags) {
  return E(State().CreateStream(reinterpret_cast<void**>(stream), flags, 0,
                                nullptr, 0));
}
STANDIN_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream,
                                                        unsigned int flags,
                                                        int priority) {
  return E(State().CreateStream(reinterpret_cast<void**>(stream), flags,
                                priority, nullptr, 0));
}
STANDIN_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return E(State().DestroyStream(stream));
}
STANDIN_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return E(State().QueryStream(stream));
}
STANDIN_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return E(State().SynchronizeStream(stream));
}
STANDIN_EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t stream,
                                                 int* priority) {
  return E(State().StreamGetPriority(stream, priority));
}
STANDIN_EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t stream,
                                              unsigned int* flags) {
  return E(State().StreamGetFlags(stream, flags));
}
STANDIN_EXPORT cudaError_t
cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  bool capturing = false;
  const int code = State().StreamIsCapturing(stream, &capturing);
  if (code == cudaSuccess) {
    *status =
        capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  }
  return E(code);
}
STANDIN_EXPORT cudaError_t cudaStreamGetCaptureInfo(
    cudaStream_t stream, cudaStreamCaptureStatus* status,
    unsigned long long* id, cudaGraph_t*, const cudaGraphNode_t**,  // NOLINT
    const cudaGraphEdgeData**, size_t*) {
  if (id != nullptr) *id = 0;
  return cudaStreamIsCapturing(stream, status);
}
STANDIN_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t,
                                                cudaGraph_t* graph) {
  if (graph != nullptr) *graph = nullptr;
  return cudaErrorIllegalState;
}
STANDIN_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t) { return cudaSuccess; }
STANDIN_EXPORT cudaError_t cudaDeviceGetAttribute(int* value,
                                                  enum cudaDeviceAttr attr,
                                                  int device) {
  if (device < 0 || device >= State().device_count()) {
    return cudaErrorInvalidDevice;
  }
  // No persisting L2: a maximum access-policy window of 0 bytes.
  *value = 0;
  return cudaSuccess;
}
STANDIN_EXPORT cudaError_t cudaStreamSetAttribute(cudaStream_t stream,
                                                  cudaStreamAttrID,
                                                  const cudaStreamAttrValue*) {
  return E(State().QueryStream(stream) == cudaErrorInvalidResourceHandle
               ? cudaErrorInvalidResourceHandle
               : cudaSuccess);
}
STANDIN_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream,
                                               cudaEvent_t event,
                                               unsigned int) {
  return E(State().StreamWaitEvent(stream, event));
}
// A runtime older than gpupool needs lacks this one (CUDA before 10.1).
#ifndef GPUPOOL_STANDIN_WITHOUT_CAPTURE_MODE
STANDIN_EXPORT cudaError_t
cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr) return cudaErrorInvalidValue;
  static thread_local cudaStreamCaptureMode current =
      cudaStreamCaptureModeGlobal;
  const cudaStreamCaptureMode previous = current;
  current = *mode;
  *mode = previous;
  return cudaSuccess;
}
#endif

STANDIN_EXPORT cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return E(
      State().CreateEvent(reinterpret_cast<void**>(event), cudaEventDefault));
}
STANDIN_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event,
                                                    unsigned flags) {
  return E(State().CreateEvent(reinterpret_cast<void**>(event), flags));
}
STANDIN_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return E(State().DestroyEvent(event));
}
STANDIN_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event,
                                           cudaStream_t stream) {
  return E(State().RecordEvent(event, stream));
}
STANDIN_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
  return E(State().QueryEvent(event));
}
STANDIN_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return E(State().SynchronizeEvent(event));
}

// Memory: host memory stands in for both kinds.
STANDIN_EXPORT cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes == 0 ? 1 : bytes);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
STANDIN_EXPORT cudaError_t cudaFree(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}
STANDIN_EXPORT cudaError_t cudaHostAlloc(void** ptr, size_t bytes,
                                         unsigned int) {
  return cudaMalloc(ptr, bytes);
}
STANDIN_EXPORT cudaError_t cudaFreeHost(void* ptr) { return cudaFree(ptr); }
STANDIN_EXPORT cudaError_t cudaMemGetInfo(size_t* free_bytes,
                                          size_t* total_bytes) {
  *free_bytes = size_t{1} << 34;
  *total_bytes = size_t{1} << 34;
  return cudaSuccess;
}

// Built with GPUPOOL_STANDIN_WITHOUT_IPC, the stand-in lacks these (a
// HIP-compatible layer, an old or stripped build): still pooled.
#ifndef GPUPOOL_STANDIN_WITHOUT_IPC
// Interprocess memory: the programs under the preload never share memory
// with another process, so the stand-in answers as a platform without legacy
// IPC does (cudaErrorNotSupported), like CUDA on WSL.
STANDIN_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t*, void*) {
  return cudaErrorNotSupported;
}
STANDIN_EXPORT cudaError_t cudaIpcOpenMemHandle(void** ptr, cudaIpcMemHandle_t,
                                                unsigned int) {
  if (ptr != nullptr) *ptr = nullptr;
  return cudaErrorNotSupported;
}
STANDIN_EXPORT cudaError_t cudaIpcCloseMemHandle(void*) {
  return cudaErrorNotSupported;
}
#endif  // GPUPOOL_STANDIN_WITHOUT_IPC
