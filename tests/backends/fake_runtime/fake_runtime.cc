// A scripted stand-in for the CUDA runtime (libcudart) or, built with
// GPUPOOL_FAKE_HIP, the HIP runtime (libamdhip64): a shared library exporting
// the entry points gpupool's backend resolves, under the real names, with the
// real C signatures spelled in plain types (handles are pointers, enums are
// ints). Loaded through GPUPOOL_CUDA_RUNTIME / GPUPOOL_HIP_RUNTIME, it lets
// tests/backends/loader/runtime_loader_test.cc run the backend end to end,
// through the dynamic loader, with no GPU and no vendor library. Built with
// GPUPOOL_FAKE_OMIT_WAIT_EVENT it lacks one entry point (a "too old" runtime);
// built with GPUPOOL_FAKE_OMIT_OPTIONAL it lacks every optional one (capture
// info, the L2 window attributes, CU masks, IPC, graph user objects): a
// runtime still pooled.
//
// Single-threaded use only (the tests drive it from one thread), except the
// capture mode, which is per thread as in the real runtimes.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "tests/backends/fake_runtime/fake_runtime_state.h"

#ifdef GPUPOOL_FAKE_HIP
#define FAKE(name) hip##name
#define FAKE_NAME(name) "hipError" name
#else
#define FAKE(name) cuda##name
#define FAKE_NAME(name) "cudaError" name
#endif

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

using gpupool_fake::State;

State& S() {
  static State state;
  return state;
}

struct FakeStream {
  int device;
};
struct FakeEvent {
  int device;
};
struct FakeUserObject {
  void* data;
  void (*destroy)(void*);
  unsigned refs;
};
// The references a graph holds, one entry per reference.
struct FakeGraph {
  FakeUserObject* held[8] = {};
  int count = 0;
};

void Unref(FakeUserObject* object, unsigned count) {
  object->refs -= count;
  if (object->refs != 0) return;
  object->destroy(object->data);
  ++S().user_object_destructors_run;
  --S().live_user_objects;
  delete object;
}

thread_local int capture_mode = gpupool_fake::kModeGlobal;

int Count(int error) {
  ++S().calls;
  return error;
}

}  // namespace

FAKE_API gpupool_fake::State* gpupool_fake_runtime_state() { return &S(); }
FAKE_API void gpupool_fake_runtime_reset() {
  S() = State();
  capture_mode = gpupool_fake::kModeGlobal;
}

// --- Errors ------------------------------------------------------------------

FAKE_API const char* FAKE(GetErrorName)(int error) {
  ++S().calls;
  switch (error) {
    case gpupool_fake::kSuccess:
#ifdef GPUPOOL_FAKE_HIP
      return "hipSuccess";
#else
      return "cudaSuccess";
#endif
    case gpupool_fake::kInvalidValue:
      return FAKE_NAME("InvalidValue");
#ifdef GPUPOOL_FAKE_HIP
    case gpupool_fake::kOutOfMemory:
      return "hipErrorOutOfMemory";
    case gpupool_fake::kInvalidHandle:
      return "hipErrorInvalidHandle";
#else
    case gpupool_fake::kOutOfMemory:
      return "cudaErrorMemoryAllocation";
    case gpupool_fake::kInvalidHandle:
      return "cudaErrorInvalidResourceHandle";
#endif
    case gpupool_fake::kInsufficientDriver:
      return FAKE_NAME("InsufficientDriver");
    case gpupool_fake::kNoDevice:
      return FAKE_NAME("NoDevice");
    case gpupool_fake::kInvalidDevice:
      return FAKE_NAME("InvalidDevice");
    case gpupool_fake::kNotReady:
      return FAKE_NAME("NotReady");
    case gpupool_fake::kIllegalAddress:
      return FAKE_NAME("IllegalAddress");
    case gpupool_fake::kCaptureInvalidated:
      return FAKE_NAME("StreamCaptureInvalidated");
    default:
      return FAKE_NAME("Unknown");
  }
}
FAKE_API const char* FAKE(GetErrorString)(int error) {
  ++S().calls;
  return error == gpupool_fake::kIllegalAddress ? "fake: illegal address"
                                                : "fake error";
}
FAKE_API int FAKE(GetLastError)() {
  const int error = S().last_error;
  S().last_error = gpupool_fake::kSuccess;
  return Count(error);
}
FAKE_API int FAKE(DriverGetVersion)(int* version) {
  *version = S().driver_version;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(RuntimeGetVersion)(int* version) {
  *version = S().runtime_version;
  return Count(gpupool_fake::kSuccess);
}

// --- Device ------------------------------------------------------------------

FAKE_API int FAKE(GetDeviceCount)(int* count) {
  *count =
      S().device_count_error == gpupool_fake::kSuccess ? S().device_count : 0;
  return Count(S().device_count_error);
}
FAKE_API int FAKE(GetDevice)(int* device) {
  *device = S().current_device;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(SetDevice)(int device) {
  ++S().set_device_calls;
  if (device < 0 || device >= S().device_count) {
    return Count(gpupool_fake::kInvalidDevice);
  }
  S().current_device = device;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(DeviceGetStreamPriorityRange)(int* least, int* greatest) {
  *least = S().least_priority;
  *greatest = S().greatest_priority;
  return Count(gpupool_fake::kSuccess);
}
#if !defined(GPUPOOL_FAKE_HIP) && !defined(GPUPOOL_FAKE_OMIT_OPTIONAL)
FAKE_API int cudaDeviceGetAttribute(int* value, int /*attribute*/,
                                    int /*device*/) {
  *value = S().max_window_bytes;
  return Count(gpupool_fake::kSuccess);
}
#endif

// --- Streams -----------------------------------------------------------------

FAKE_API int FAKE(StreamCreateWithPriority)(void** stream, unsigned flags,
                                            int priority) {
  if (S().stream_create_error != gpupool_fake::kSuccess) {
    return Count(S().stream_create_error);
  }
  *stream = new FakeStream{S().current_device};
  S().last_stream_flags = flags;
  S().last_stream_priority = priority;
  ++S().streams_created;
  ++S().live_streams;
  return Count(gpupool_fake::kSuccess);
}
#if defined(GPUPOOL_FAKE_HIP) && !defined(GPUPOOL_FAKE_OMIT_OPTIONAL)
FAKE_API int hipExtStreamCreateWithCUMask(void** stream, uint32_t words,
                                          const uint32_t* mask) {
  if (words == 0 || mask == nullptr) return Count(gpupool_fake::kInvalidValue);
  *stream = new FakeStream{S().current_device};
  ++S().cu_mask_streams_created;
  ++S().live_streams;
  return Count(gpupool_fake::kSuccess);
}
#endif
FAKE_API int FAKE(StreamDestroy)(void* stream) {
  if (stream == nullptr) return Count(gpupool_fake::kInvalidHandle);
  delete static_cast<FakeStream*>(stream);
  --S().live_streams;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(StreamQuery)(void* /*stream*/) {
  S().mode_at_last_query = capture_mode;
  return Count(S().stream_query_error);
}
FAKE_API int FAKE(StreamSynchronize)(void* /*stream*/) {
  const int error = S().stream_query_error;
  return Count(error == gpupool_fake::kNotReady ? gpupool_fake::kSuccess
                                                : error);
}
FAKE_API int FAKE(StreamIsCapturing)(void* /*stream*/, int* status) {
  *status = S().capture_status;
  return Count(gpupool_fake::kSuccess);
}
#ifndef GPUPOOL_FAKE_OMIT_OPTIONAL
// The capture's id is scripted (capture_id); it is reported only while the
// status is Active, as the runtimes do. CUDA 13 spells seven arguments, HIP's
// hipStreamGetCaptureInfo three.
#ifdef GPUPOOL_FAKE_HIP
FAKE_API int FAKE(StreamGetCaptureInfo)(void* /*stream*/, int* status,
                                        unsigned long long* id) {  // NOLINT
#else
FAKE_API int FAKE(StreamGetCaptureInfo)(void* /*stream*/, int* status,
                                        unsigned long long* id,  // NOLINT
                                        void* /*graph*/, void* /*deps*/,
                                        void* /*edges*/, void* /*count*/) {
#endif
  *status = S().capture_status;
  if (id != nullptr) {
    *id =
        S().capture_status == gpupool_fake::kStatusActive ? S().capture_id : 0;
  }
  return Count(gpupool_fake::kSuccess);
}
#endif  // GPUPOOL_FAKE_OMIT_OPTIONAL
FAKE_API int FAKE(StreamEndCapture)(void* /*stream*/, void** graph) {
  *graph = nullptr;
  if (S().end_capture_yields_graph) {
    *graph = new FakeGraph;
    ++S().live_graphs;
  }
  S().capture_status = gpupool_fake::kStatusNone;
  return Count(S().end_capture_error);
}
FAKE_API int FAKE(GraphDestroy)(void* graph) {
  auto* fake = static_cast<FakeGraph*>(graph);
  for (int i = 0; fake != nullptr && i < fake->count; ++i) {
    Unref(fake->held[i], 1);
  }
  delete fake;
  --S().live_graphs;
  return Count(gpupool_fake::kSuccess);
}
#ifndef GPUPOOL_FAKE_OMIT_WAIT_EVENT
FAKE_API int FAKE(StreamWaitEvent)(void* /*stream*/, void* event,
                                   unsigned /*flags*/) {
  if (event == nullptr) return Count(gpupool_fake::kInvalidHandle);
  ++S().waits;
  return Count(gpupool_fake::kSuccess);
}
#endif
FAKE_API int FAKE(ThreadExchangeStreamCaptureMode)(int* mode) {
  const int previous = capture_mode;
  capture_mode = *mode;
  *mode = previous;
  return Count(gpupool_fake::kSuccess);
}
#if !defined(GPUPOOL_FAKE_HIP) && !defined(GPUPOOL_FAKE_OMIT_OPTIONAL)
FAKE_API int cudaStreamSetAttribute(void* /*stream*/, int /*attribute*/,
                                    const void* /*value*/) {
  ++S().windows_cleared;
  return Count(gpupool_fake::kSuccess);
}
#endif

// --- Events ------------------------------------------------------------------

FAKE_API int FAKE(EventCreateWithFlags)(void** event, unsigned flags) {
  *event = new FakeEvent{S().current_device};
  S().last_event_flags = flags;
  ++S().live_events;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(EventDestroy)(void* event) {
  if (event == nullptr) return Count(gpupool_fake::kInvalidHandle);
  delete static_cast<FakeEvent*>(event);
  --S().live_events;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(EventRecord)(void* event, void* /*stream*/) {
  if (event == nullptr) return Count(gpupool_fake::kInvalidHandle);
  ++S().events_recorded;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(EventQuery)(void* /*event*/) {
  return Count(S().event_query_error);
}
FAKE_API int FAKE(EventSynchronize)(void* /*event*/) {
  const int error = S().event_query_error;
  return Count(error == gpupool_fake::kNotReady ? gpupool_fake::kSuccess
                                                : error);
}

// --- Memory ------------------------------------------------------------------

FAKE_API int FAKE(Malloc)(void** ptr, size_t bytes) {
  if (S().malloc_error != gpupool_fake::kSuccess) {
    S().last_error = S().malloc_error;  // the runtimes record it too
    return Count(S().malloc_error);
  }
  *ptr = std::malloc(bytes);
  ++S().live_device_allocations;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(Free)(void* ptr) {
  std::free(ptr);
  if (ptr != nullptr) --S().live_device_allocations;
  return Count(gpupool_fake::kSuccess);
}
#ifdef GPUPOOL_FAKE_HIP
FAKE_API int hipHostMalloc(void** ptr, size_t bytes, unsigned /*flags*/) {
#else
FAKE_API int cudaHostAlloc(void** ptr, size_t bytes, unsigned /*flags*/) {
#endif
  *ptr = std::malloc(bytes);
  ++S().live_host_allocations;
  return Count(gpupool_fake::kSuccess);
}
#ifdef GPUPOOL_FAKE_HIP
FAKE_API int hipHostFree(void* ptr) {
#else
FAKE_API int cudaFreeHost(void* ptr) {
#endif
  std::free(ptr);
  if (ptr != nullptr) --S().live_host_allocations;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(MemGetInfo)(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = S().free_bytes;
  *total_bytes = S().total_bytes;
  return Count(gpupool_fake::kSuccess);
}

// --- Interprocess memory -----------------------------------------------------

#ifndef GPUPOOL_FAKE_OMIT_OPTIONAL

struct FakeIpcHandle {
  unsigned char reserved[64];
};

FAKE_API int FAKE(IpcGetMemHandle)(FakeIpcHandle* handle, void* ptr) {
  if (ptr == nullptr) return Count(gpupool_fake::kInvalidValue);
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  std::memcpy(handle->reserved, &ptr, sizeof(ptr));
  handle->reserved[sizeof(ptr)] = gpupool_fake::kIpcMagic;
  ++S().ipc_handles_made;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(IpcOpenMemHandle)(void** ptr, FakeIpcHandle handle,
                                    unsigned flags) {
  S().last_ipc_open_flags = flags;
  if (handle.reserved[sizeof(void*)] != gpupool_fake::kIpcMagic) {
    return Count(gpupool_fake::kInvalidValue);
  }
  std::memcpy(ptr, handle.reserved, sizeof(*ptr));
  ++S().ipc_opens;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(IpcCloseMemHandle)(void* ptr) {
  if (ptr == nullptr) return Count(gpupool_fake::kInvalidValue);
  ++S().ipc_closes;
  return Count(gpupool_fake::kSuccess);
}
#endif  // GPUPOOL_FAKE_OMIT_OPTIONAL

// --- Graph user objects ------------------------------------------------------

#ifndef GPUPOOL_FAKE_OMIT_OPTIONAL

FAKE_API int FAKE(UserObjectCreate)(void** object, void* data,
                                    void (*destroy)(void*), unsigned refs,
                                    unsigned flags) {
  S().last_user_object_flags = flags;
  if (destroy == nullptr || refs == 0 || flags != 1) {
    return Count(gpupool_fake::kInvalidValue);
  }
  *object = new FakeUserObject{data, destroy, refs};
  ++S().live_user_objects;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(GraphRetainUserObject)(void* graph, void* object,
                                         unsigned count, unsigned flags) {
  S().last_retain_flags = flags;
  auto* fake = static_cast<FakeGraph*>(graph);
  if (fake == nullptr || object == nullptr || count != 1 || fake->count == 8) {
    return Count(gpupool_fake::kInvalidValue);
  }
  auto* user_object = static_cast<FakeUserObject*>(object);
  fake->held[fake->count++] = user_object;
  // cudaGraphUserObjectMove takes the caller's reference; 0 adds one.
  if ((flags & 1) == 0) user_object->refs += count;
  return Count(gpupool_fake::kSuccess);
}
FAKE_API int FAKE(UserObjectRelease)(void* object, unsigned count) {
  auto* user_object = static_cast<FakeUserObject*>(object);
  if (user_object == nullptr || count == 0 || count > user_object->refs) {
    return Count(gpupool_fake::kInvalidValue);
  }
  Unref(user_object, count);
  return Count(gpupool_fake::kSuccess);
}

#endif  // GPUPOOL_FAKE_OMIT_OPTIONAL
