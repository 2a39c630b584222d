// libgpupool_standin_cuda.so: a stand-in CUDA driver (libcuda) for the
// preload tests: primary contexts, streams, events, device reset through
// cuDevicePrimaryCtxReset, and cuGetProcAddress (how the static CUDA runtime
// finds every other driver function). Over the shared stand-in state
// (tests/preload/standin_runtime.h). The C ABI is declared here with plain
// types: cuda.h renames several functions to their _v2 versions, and this
// library exports both.

#include <cstdint>
#include <cstring>

#include "tests/preload/standin_counters.h"
#include "tests/preload/standin_runtime.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kNotFound = 500;  // CUDA_ERROR_NOT_FOUND
constexpr int kMaxDevices = 64;

gpupool_standin::Runtime& State() {
  // CUDA: destroy returns at once; priorities [-5, 0].
  static auto* runtime = new gpupool_standin::Runtime(
      {/*destroy_blocks=*/false, /*least_priority=*/0,
       /*greatest_priority=*/-5});
  return *runtime;
}

struct Context {
  int device;
  int references;
};
Context primary[kMaxDevices];
thread_local Context* current = nullptr;

bool ValidDevice(int device) {
  return device >= 0 && device < State().device_count() && device < kMaxDevices;
}

}  // namespace

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

STANDIN_EXPORT void gpupool_standin_cu_counters(StandinCounters* out) {
  *out = State().counters();
}
STANDIN_EXPORT int gpupool_standin_cu_launch(void* stream, int64_t micros) {
  return State().Launch(stream, micros);
}
STANDIN_EXPORT int gpupool_standin_cu_work_pending(void* stream) {
  return State().WorkPending(stream);
}

STANDIN_EXPORT int cuInit(unsigned) { return kSuccess; }
STANDIN_EXPORT int cuDriverGetVersion(int* version) {
  *version = 13000;
  return kSuccess;
}
STANDIN_EXPORT int cuGetErrorName(int error, const char** name) {
  switch (error) {
    case 0:
      *name = "CUDA_SUCCESS";
      return kSuccess;
    case 1:
      *name = "CUDA_ERROR_INVALID_VALUE";
      return kSuccess;
    case 400:
      *name = "CUDA_ERROR_INVALID_HANDLE";
      return kSuccess;
    case 600:
      *name = "CUDA_ERROR_NOT_READY";
      return kSuccess;
    default:
      *name = "CUDA_ERROR_UNKNOWN";
      return kSuccess;
  }
}
STANDIN_EXPORT int cuDeviceGetCount(int* count) {
  *count = State().device_count();
  return kSuccess;
}
STANDIN_EXPORT int cuDeviceGet(int* device, int ordinal) {
  if (!ValidDevice(ordinal)) return 101;
  *device = ordinal;
  return kSuccess;
}
STANDIN_EXPORT int cuDevicePrimaryCtxRetain(void** context, int device) {
  if (!ValidDevice(device)) return 101;
  primary[device].device = device;
  ++primary[device].references;
  *context = &primary[device];
  return kSuccess;
}
STANDIN_EXPORT int cuDevicePrimaryCtxRelease_v2(int device) {
  if (!ValidDevice(device)) return 101;
  if (primary[device].references > 0) --primary[device].references;
  return kSuccess;
}
STANDIN_EXPORT int cuDevicePrimaryCtxRelease(int device) {
  return cuDevicePrimaryCtxRelease_v2(device);
}
STANDIN_EXPORT int cuDevicePrimaryCtxGetState(int device, unsigned* flags,
                                              int* active) {
  if (!ValidDevice(device)) return 101;
  *flags = 0;
  *active = primary[device].references > 0 ? 1 : 0;
  return kSuccess;
}
STANDIN_EXPORT int cuDevicePrimaryCtxReset_v2(int device) {
  return State().ResetDevice(device);
}
STANDIN_EXPORT int cuDevicePrimaryCtxReset(int device) {
  return cuDevicePrimaryCtxReset_v2(device);
}
STANDIN_EXPORT int cuCtxSetCurrent(void* context) {
  current = static_cast<Context*>(context);
  return current == nullptr ? kSuccess : State().SetDevice(current->device);
}
STANDIN_EXPORT int cuCtxGetCurrent(void** context) {
  *context = current;
  return kSuccess;
}
STANDIN_EXPORT int cuCtxGetDevice(int* device) {
  if (current == nullptr) return 201;  // CUDA_ERROR_INVALID_CONTEXT
  *device = current->device;
  return kSuccess;
}
STANDIN_EXPORT int cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  *least = State().dialect().least_priority;
  *greatest = State().dialect().greatest_priority;
  return kSuccess;
}

STANDIN_EXPORT int cuStreamCreate(void** stream, unsigned flags) {
  if (current == nullptr) return 201;
  return State().CreateStream(stream, flags, 0, nullptr, 0);
}
STANDIN_EXPORT int cuStreamCreateWithPriority(void** stream, unsigned flags,
                                              int priority) {
  if (current == nullptr) return 201;
  return State().CreateStream(stream, flags, priority, nullptr, 0);
}
STANDIN_EXPORT int cuStreamDestroy_v2(void* stream) {
  return State().DestroyStream(stream);
}
STANDIN_EXPORT int cuStreamDestroy(void* stream) {
  return cuStreamDestroy_v2(stream);
}
STANDIN_EXPORT int cuStreamQuery(void* stream) {
  return State().QueryStream(stream);
}
STANDIN_EXPORT int cuStreamSynchronize(void* stream) {
  return State().SynchronizeStream(stream);
}
STANDIN_EXPORT int cuStreamGetPriority(void* stream, int* priority) {
  return State().StreamGetPriority(stream, priority);
}
STANDIN_EXPORT int cuStreamGetFlags(void* stream, unsigned* flags) {
  return State().StreamGetFlags(stream, flags);
}
STANDIN_EXPORT int cuEventCreate(void** event, unsigned flags) {
  if (current == nullptr) return 201;
  return State().CreateEvent(event, flags);
}
STANDIN_EXPORT int cuEventDestroy_v2(void* event) {
  return State().DestroyEvent(event);
}
STANDIN_EXPORT int cuEventDestroy(void* event) {
  return cuEventDestroy_v2(event);
}
STANDIN_EXPORT int cuEventRecord(void* event, void* stream) {
  return State().RecordEvent(event, stream);
}
STANDIN_EXPORT int cuEventQuery(void* event) {
  return State().QueryEvent(event);
}
STANDIN_EXPORT int cuEventSynchronize(void* event) {
  return State().SynchronizeEvent(event);
}

STANDIN_EXPORT int cuGetProcAddress_v2(const char* symbol, void** function,
                                       int cuda_version, uint64_t flags,
                                       int* status);

namespace {

// What cuGetProcAddress hands out: the newest version of each name, as the
// driver does for a CUDA 13 caller. Addresses taken directly, never through
// dlsym (which an interposer may own).
struct ProcEntry {
  const char* name;
  void* function;
};

const ProcEntry* FindProc(const char* symbol) {
  static const ProcEntry kEntries[] = {
#define ENTRY(name, function) {name, reinterpret_cast<void*>(&function)}
      ENTRY("cuInit", cuInit),
      ENTRY("cuDriverGetVersion", cuDriverGetVersion),
      ENTRY("cuGetErrorName", cuGetErrorName),
      ENTRY("cuDeviceGetCount", cuDeviceGetCount),
      ENTRY("cuDeviceGet", cuDeviceGet),
      ENTRY("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
      ENTRY("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2),
      ENTRY("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState),
      ENTRY("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2),
      ENTRY("cuCtxSetCurrent", cuCtxSetCurrent),
      ENTRY("cuCtxGetCurrent", cuCtxGetCurrent),
      ENTRY("cuCtxGetDevice", cuCtxGetDevice),
      ENTRY("cuCtxGetStreamPriorityRange", cuCtxGetStreamPriorityRange),
      ENTRY("cuStreamCreate", cuStreamCreate),
      ENTRY("cuStreamCreateWithPriority", cuStreamCreateWithPriority),
      ENTRY("cuStreamDestroy", cuStreamDestroy_v2),
      ENTRY("cuStreamQuery", cuStreamQuery),
      ENTRY("cuStreamSynchronize", cuStreamSynchronize),
      ENTRY("cuStreamGetPriority", cuStreamGetPriority),
      ENTRY("cuStreamGetFlags", cuStreamGetFlags),
      ENTRY("cuEventCreate", cuEventCreate),
      ENTRY("cuEventDestroy", cuEventDestroy_v2),
      ENTRY("cuEventRecord", cuEventRecord),
      ENTRY("cuEventQuery", cuEventQuery),
      ENTRY("cuEventSynchronize", cuEventSynchronize),
      ENTRY("cuGetProcAddress", cuGetProcAddress_v2),
#undef ENTRY
  };
  for (const ProcEntry& entry : kEntries) {
    if (std::strcmp(entry.name, symbol) == 0) return &entry;
  }
  return nullptr;
}

}  // namespace

STANDIN_EXPORT int cuGetProcAddress_v2(const char* symbol, void** function, int,
                                       uint64_t, int* status) {
  if (symbol == nullptr || function == nullptr) return kInvalidValue;
  const ProcEntry* entry = FindProc(symbol);
  *function = entry != nullptr ? entry->function : nullptr;
  if (status != nullptr) *status = entry != nullptr ? 0 : 1;
  return entry != nullptr ? kSuccess : kNotFound;
}
STANDIN_EXPORT int cuGetProcAddress(const char* symbol, void** function,
                                    int cuda_version, uint64_t flags) {
  return cuGetProcAddress_v2(symbol, function, cuda_version, flags, nullptr);
}
