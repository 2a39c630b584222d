// The CUDA driver API as a Backend, for libgpupool_preload.so: pools of
// CUstream/CUevent for programs that create them with the driver API — and
// for programs linked with the static CUDA runtime, which reaches the driver
// through cuGetProcAddress. Streams and events only; memory is not served.
//
// Devices are contexts in the driver API. A handle belongs to the context
// current when it was created, so the backend serves only the primary
// context of a device (the one the CUDA runtime uses): GetCurrentDevice
// fails with FailedPrecondition when the current context is any other, and
// the preload then passes the call to the driver unpooled. Driver error
// codes share the runtime's numbers for every error the pools react to
// (CUDA_ERROR_NOT_READY = cudaErrorNotReady = 600, CUDA_ERROR_ILLEGAL_ADDRESS
// = cudaErrorIllegalAddress = 700, CUDA_ERROR_DEINITIALIZED =
// cudaErrorCudartUnloading = 4, ...), so the CUDA error table classifies
// them.

#include <cuda.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/cuda/cuda_backend_over.h"
#include "src/backends/cuda/cuda_errors.h"
#include "src/backends/loader/runtime_library.h"

namespace gpupool::cuda_internal {
namespace {

static_assert(CUDA_ERROR_NOT_READY == 600);
static_assert(CUDA_ERROR_ILLEGAL_ADDRESS == 700);
static_assert(CUDA_ERROR_DEINITIALIZED == 4);
static_assert(CU_STREAM_NON_BLOCKING == 0x1);
static_assert(CU_EVENT_BLOCKING_SYNC == 0x1);
static_assert(CU_EVENT_DISABLE_TIMING == 0x2);
static_assert(CU_EVENT_INTERPROCESS == 0x4);

// The driver entry points, by their exported names (cuda.h renames some to
// their _v2 versions; the table names the exported symbol).
struct DriverTable {
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxGetDevice)(CUdevice*) = nullptr;
  CUresult (*cuDevicePrimaryCtxGetState)(CUdevice, unsigned*, int*) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice) = nullptr;
  CUresult (*cuCtxGetStreamPriorityRange)(int*, int*) = nullptr;
  CUresult (*cuStreamCreateWithPriority)(CUstream*, unsigned, int) = nullptr;
  CUresult (*cuStreamDestroy_v2)(CUstream) = nullptr;
  CUresult (*cuStreamQuery)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventDestroy_v2)(CUevent) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventQuery)(CUevent) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
};

class CudaDriverBackend final : public Backend {
 public:
  CudaDriverBackend(const DriverTable& table, int device_count)
      : table_(table), device_count_(device_count) {}

  std::string_view name() const override { return "cuda-driver"; }

  absl::StatusOr<int> DeviceCount() override { return device_count_; }

  // The current context's device, when that context is the device's
  // primary context.
  absl::StatusOr<int> GetCurrentDevice() override {
    CUcontext current = nullptr;
    if (absl::Status s =
            Check(table_.cuCtxGetCurrent(&current), "cuCtxGetCurrent", -1);
        !s.ok()) {
      return s;
    }
    if (current == nullptr) {
      return absl::FailedPreconditionError("no current CUDA context");
    }
    CUdevice device = 0;
    if (absl::Status s =
            Check(table_.cuCtxGetDevice(&device), "cuCtxGetDevice", -1);
        !s.ok()) {
      return s;
    }
    unsigned flags = 0;
    int active = 0;
    if (absl::Status s =
            Check(table_.cuDevicePrimaryCtxGetState(device, &flags, &active),
                  "cuDevicePrimaryCtxGetState", device);
        !s.ok()) {
      return s;
    }
    // Retaining an active primary context only counts a reference; it is
    // released at once.
    CUcontext primary = nullptr;
    if (active != 0 &&
        table_.cuDevicePrimaryCtxRetain(&primary, device) == CUDA_SUCCESS) {
      table_.cuDevicePrimaryCtxRelease_v2(device);
    }
    if (active == 0 || primary != current) {
      return absl::FailedPreconditionError(
          absl::StrCat("the current CUDA context is not device ", device,
                       "'s primary context"));
    }
    return static_cast<int>(device);
  }

  absl::Status SetCurrentDevice(int device) override {
    return absl::UnimplementedError(
        "the CUDA driver backend does not change the current context");
  }

  absl::StatusOr<NativeStream> CreateStream(
      int device, const StreamConfig& config) override {
    if (absl::Status s = CheckCurrent(device); !s.ok()) return s;
    if (!config.cu_mask.empty()) {
      return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                        "CUDA has no compute-unit masks");
    }
    int least = 0;
    int greatest = 0;
    if (absl::Status s =
            Check(table_.cuCtxGetStreamPriorityRange(&least, &greatest),
                  "cuCtxGetStreamPriorityRange", device);
        !s.ok()) {
      return s;
    }
    // The driver clamps; the pools key on the exact priority, so refuse.
    if (config.priority < greatest || config.priority > least) {
      return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                        absl::StrCat("priority ", config.priority, " outside [",
                                     greatest, ", ", least, "]"));
    }
    CUstream stream = nullptr;
    if (absl::Status s =
            Check(table_.cuStreamCreateWithPriority(
                      &stream, config.non_blocking ? CU_STREAM_NON_BLOCKING : 0,
                      config.priority),
                  "cuStreamCreateWithPriority", device);
        !s.ok()) {
      return s;
    }
    return static_cast<NativeStream>(stream);
  }
  absl::Status DestroyStream(int device, NativeStream stream) override {
    return Check(table_.cuStreamDestroy_v2(static_cast<CUstream>(stream)),
                 "cuStreamDestroy_v2", device);
  }
  absl::Status QueryStream(int device, NativeStream stream) override {
    return Check(table_.cuStreamQuery(static_cast<CUstream>(stream)),
                 "cuStreamQuery", device);
  }
  absl::Status SynchronizeStream(int device, NativeStream stream) override {
    return Check(table_.cuStreamSynchronize(static_cast<CUstream>(stream)),
                 "cuStreamSynchronize", device);
  }

  absl::StatusOr<NativeEvent> CreateEvent(int device,
                                          const EventConfig& config) override {
    if (absl::Status s = CheckCurrent(device); !s.ok()) return s;
    unsigned flags = 0;
    if (config.disable_timing) flags |= CU_EVENT_DISABLE_TIMING;
    if (config.blocking_sync) flags |= CU_EVENT_BLOCKING_SYNC;
    if (config.interprocess) flags |= CU_EVENT_INTERPROCESS;
    CUevent event = nullptr;
    if (absl::Status s =
            Check(table_.cuEventCreate(&event, flags), "cuEventCreate", device);
        !s.ok()) {
      return s;
    }
    return static_cast<NativeEvent>(event);
  }
  absl::Status DestroyEvent(int device, NativeEvent event) override {
    return Check(table_.cuEventDestroy_v2(static_cast<CUevent>(event)),
                 "cuEventDestroy_v2", device);
  }
  absl::Status RecordEvent(int device, NativeEvent event,
                           NativeStream stream) override {
    return Check(table_.cuEventRecord(static_cast<CUevent>(event),
                                      static_cast<CUstream>(stream)),
                 "cuEventRecord", device);
  }
  absl::Status QueryEvent(int device, NativeEvent event) override {
    return Check(table_.cuEventQuery(static_cast<CUevent>(event)),
                 "cuEventQuery", device);
  }
  absl::Status SynchronizeEvent(int device, NativeEvent event) override {
    return Check(table_.cuEventSynchronize(static_cast<CUevent>(event)),
                 "cuEventSynchronize", device);
  }

  absl::StatusOr<void*> Allocate(int, size_t, MemoryKind) override {
    return absl::UnimplementedError("the CUDA driver backend serves no memory");
  }
  absl::Status Free(int, void*, MemoryKind) override {
    return absl::UnimplementedError("the CUDA driver backend serves no memory");
  }
  absl::StatusOr<MemoryInfo> GetMemoryInfo(int) override {
    return absl::UnimplementedError("the CUDA driver backend serves no memory");
  }

 private:
  absl::Status CheckCurrent(int device) {
    absl::StatusOr<int> current = GetCurrentDevice();
    if (!current.ok()) return current.status();
    if (*current != device) {
      return FaultError(
          Fault::kCaller, absl::StatusCode::kFailedPrecondition,
          absl::StrCat("device ", device, " is not the current device (",
                       *current, ")"));
    }
    return absl::OkStatus();
  }

  // The choke point: CUresult -> status, classified by the CUDA table.
  absl::Status Check(CUresult result, absl::string_view call, int device) {
    if (result == CUDA_SUCCESS) return absl::OkStatus();
    const char* name = nullptr;
    if (table_.cuGetErrorName(result, &name) != CUDA_SUCCESS ||
        name == nullptr) {
      name = "CUDA_ERROR";
    }
    const runtime_internal::ErrorClass error_class =
        CudaErrorClass(static_cast<int>(result));
    return FaultError(error_class.fault, error_class.code,
                      absl::StrCat(call, " on device ", device, ": ", name,
                                   " (", static_cast<int>(result), ")"));
  }

  const DriverTable table_;
  const int device_count_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaDriverBackendOver(
    absl::string_view source,
    absl::FunctionRef<void*(const char* name)> lookup) {
  DriverTable table;
#define GPUPOOL_DRIVER_ENTRY(name) \
  { #name, reinterpret_cast < void**>(&table.name) }
  const loader_internal::EntryPoint entries[] = {
      GPUPOOL_DRIVER_ENTRY(cuDeviceGetCount),
      GPUPOOL_DRIVER_ENTRY(cuCtxGetCurrent),
      GPUPOOL_DRIVER_ENTRY(cuCtxGetDevice),
      GPUPOOL_DRIVER_ENTRY(cuDevicePrimaryCtxGetState),
      GPUPOOL_DRIVER_ENTRY(cuDevicePrimaryCtxRetain),
      GPUPOOL_DRIVER_ENTRY(cuDevicePrimaryCtxRelease_v2),
      GPUPOOL_DRIVER_ENTRY(cuCtxGetStreamPriorityRange),
      GPUPOOL_DRIVER_ENTRY(cuStreamCreateWithPriority),
      GPUPOOL_DRIVER_ENTRY(cuStreamDestroy_v2),
      GPUPOOL_DRIVER_ENTRY(cuStreamQuery),
      GPUPOOL_DRIVER_ENTRY(cuStreamSynchronize),
      GPUPOOL_DRIVER_ENTRY(cuEventCreate),
      GPUPOOL_DRIVER_ENTRY(cuEventDestroy_v2),
      GPUPOOL_DRIVER_ENTRY(cuEventRecord),
      GPUPOOL_DRIVER_ENTRY(cuEventQuery),
      GPUPOOL_DRIVER_ENTRY(cuEventSynchronize),
      GPUPOOL_DRIVER_ENTRY(cuGetErrorName),
  };
#undef GPUPOOL_DRIVER_ENTRY
  if (absl::Status status =
          loader_internal::ResolveEntryPoints(source, lookup, entries);
      !status.ok()) {
    return status;
  }
  int count = 0;
  const CUresult result = table.cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS || count <= 0) {
    return FaultError(
        Fault::kCaller, absl::StatusCode::kUnavailable,
        absl::StrCat("cuDeviceGetCount: ", static_cast<int>(result), ", ",
                     count, " devices"));
  }
  return std::unique_ptr<Backend>(new CudaDriverBackend(table, count));
}

}  // namespace gpupool::cuda_internal
