// RuntimeBackend<Api>: the one implementation of gpupool::Backend over a
// CUDA-like runtime API. CUDA and HIP are isomorphic, so all backend logic
// lives here (device-range checks, the current-device guard, Relaxed capture
// mode around potentially unsafe calls, priority validation, capture teardown,
// the error choke point) and each runtime contributes only a traits struct of
// function forwards, constants and an error table. Every GPU run of the CUDA
// backend therefore also exercises the code the HIP backend runs.
//
// This header is generic: it never includes a vendor header. The traits
// structs (src/backends/cuda/cuda_api.h, src/backends/hip/hip_api.h) do.
//
// Thread safety: RuntimeBackend holds no lock. Its only mutable state is a
// per-device cache of "does this device support an L2 access-policy window"
// (runtime_access_policy.h), kept in atomics whose racing initialisations
// compute the same value.
//
// Its helpers: runtime_status.h (the error choke point), runtime_guards.h
// (current device, Relaxed capture mode), runtime_checks.h (CU mask and
// priority checks), runtime_features.h (optional features: what a runtime
// without their entry points answers), runtime_access_policy.h (the L2
// window reset); and the components its overrides call once the device is
// checked: runtime_capture.h (capture status, id and teardown),
// runtime_ipc.h (the IPC calls) and runtime_user_objects.h (graph user
// objects).
//
// The Api traits struct must provide (every function is a static forward that
// returns Api::Error):
//   types      Error, Stream, Event, Graph, CaptureMode, CaptureStatus
//   names      kName (std::string_view "cuda", for Backend::name), kCallPrefix
//              (absl::string_view "cuda": prefixes call names and messages),
//              kHostAllocCall / kHostFreeCall (the pinned-host call names
//              without the prefix, which differ between runtimes)
//   errors     kSuccess, kErrorNotReady, kErrorCaptureInvalidated,
//              ErrorName(Error), ErrorString(Error) -> const char*,
//              Classify(Error, CallKind) -> ErrorClass, GetLastError()
//   flags      kStreamDefault, kStreamNonBlocking, kEventDefault,
//              kEventBlockingSync, kEventDisableTiming, kEventInterprocess,
//              kHostAllocDefault, kCaptureModeRelaxed, kCaptureStatusNone,
//              kCaptureStatusActive (any other status counts as invalidated)
//   device     GetDeviceCount(int*), GetDevice(int*), SetDevice(int),
//              DeviceGetStreamPriorityRange(int* least, int* greatest)
//   streams    StreamCreateWithPriority(Stream*, unsigned, int),
//              StreamDestroy, StreamQuery, StreamSynchronize,
//              StreamIsCapturing(Stream, CaptureStatus*),
//              StreamGetCaptureInfo (see runtime_capture.h),
//              StreamEndCapture(Stream, Graph*), GraphDestroy(Graph),
//              StreamWaitEvent(Stream, Event),
//              ThreadExchangeStreamCaptureMode(CaptureMode*)
//   events     EventCreateWithFlags(Event*, unsigned), EventDestroy,
//              EventRecord(Event, Stream), EventQuery, EventSynchronize
//   memory     Malloc(void**, size_t), Free(void*),
//              HostAlloc(void**, size_t, unsigned), FreeHost(void*),
//              MemGetInfo(size_t* free, size_t* total)
//   ipc        IpcMemHandle, kIpcMemLazyEnablePeerAccess, IpcGetMemHandle,
//              IpcOpenMemHandle, IpcCloseMemHandle (runtime_ipc.h)
//   features   MissingEntryPoints(Feature), RuntimeSource()
//              (runtime_features.h): which optional entry points the loaded
//              runtime lacks (capture info, IPC, L2 window, CU mask,
//              user objects)
//   user objs  UserObject, UserObjectCreate, GraphRetainUserObject,
//              UserObjectRelease and their flags (runtime_user_objects.h)
//   optional   kSupportsCuMask; when true also kCuMaskStreamPriority,
//              kCuMaskStreamNonBlocking (what the CU-mask create call gives)
//              and ExtStreamCreateWithCuMask(Stream*, uint32_t,
//              const uint32_t*).
//              kHasAccessPolicyWindow; when true also
//              MaxAccessPolicyWindowBytes(int device, int*) and
//              ClearAccessPolicyWindow(Stream).

#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_BACKEND_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_BACKEND_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/runtime/error_class.h"
#include "src/backends/runtime/runtime_access_policy.h"
#include "src/backends/runtime/runtime_capture.h"
#include "src/backends/runtime/runtime_checks.h"
#include "src/backends/runtime/runtime_guards.h"
#include "src/backends/runtime/runtime_ipc.h"
#include "src/backends/runtime/runtime_status.h"
#include "src/backends/runtime/runtime_user_objects.h"

namespace gpupool {
namespace runtime_internal {

template <typename Api>
class RuntimeBackend final : public Backend {
 public:
  using Error = typename Api::Error;
  using Stream = typename Api::Stream;
  using Event = typename Api::Event;

  // Marks a status as not tied to one device (device count, current device).
  static constexpr int kNoDevice = RuntimeStatus<Api>::kNoDevice;

  // Builds the backend. Fails with the runtime's own status when it cannot
  // be used here: no driver, no device (code Unavailable, fault kCaller, the
  // message naming the runtime error, e.g. "hipErrorNoDevice").
  static absl::StatusOr<std::unique_ptr<Backend>> Create() {
    int count = 0;
    absl::Status status =
        ToStatus(Api::GetDeviceCount(&count), "GetDeviceCount", kNoDevice);
    if (!status.ok()) return status;
    if (count <= 0) return RuntimeStatus<Api>::NoDeviceStatus();
    return std::unique_ptr<Backend>(new RuntimeBackend(count));
  }

  // The error choke point (runtime_status.h), here for the backend's tests.
  static absl::Status ToStatus(Error error, absl::string_view call, int device,
                               CallKind kind = CallKind::kOther) {
    return RuntimeStatus<Api>::ToStatus(error, call, device, kind);
  }

  RuntimeBackend(const RuntimeBackend&) = delete;
  RuntimeBackend& operator=(const RuntimeBackend&) = delete;
  ~RuntimeBackend() override = default;

  std::string_view name() const override { return Api::kName; }

  absl::StatusOr<int> DeviceCount() override {
    int count = 0;
    absl::Status status =
        ToStatus(Api::GetDeviceCount(&count), "GetDeviceCount", kNoDevice);
    if (!status.ok()) return status;
    if (count <= 0) return RuntimeStatus<Api>::NoDeviceStatus();
    return count;
  }

  // --- Current device ------------------------------------------------------

  absl::StatusOr<int> GetCurrentDevice() override {
    int device = 0;
    absl::Status status =
        ToStatus(Api::GetDevice(&device), "GetDevice", kNoDevice);
    if (!status.ok()) return status;
    return device;
  }

  absl::Status SetCurrentDevice(int device) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return ToStatus(Api::SetDevice(device), "SetDevice", device);
  }

  // --- Streams -------------------------------------------------------------

  absl::StatusOr<NativeStream> CreateStream(
      int device, const StreamConfig& config) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    if (absl::Status valid = CheckCuMask<Api>(device, config); !valid.ok()) {
      return valid;
    }
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    if (absl::Status valid = CheckPriority<Api>(device, config.priority);
        !valid.ok()) {
      return valid;
    }
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    Stream stream = nullptr;
    Error error = Api::kSuccess;
    absl::string_view call;
    if (config.cu_mask.empty()) {
      const unsigned flags =
          config.non_blocking ? Api::kStreamNonBlocking : Api::kStreamDefault;
      error = Api::StreamCreateWithPriority(&stream, flags, config.priority);
      call = "StreamCreateWithPriority";
    } else if constexpr (Api::kSupportsCuMask) {
      // CheckCuMask guaranteed the size fits and that priority/flags match
      // what the CU-mask call creates.
      error = Api::ExtStreamCreateWithCuMask(
          &stream, static_cast<uint32_t>(config.cu_mask.size()),
          config.cu_mask.data());
      call = "ExtStreamCreateWithCUMask";
    }
    if (absl::Status status = ToStatus(error, call, device); !status.ok()) {
      return status;
    }
    return static_cast<NativeStream>(stream);
  }

  // CUDA returns at once and frees the stream when its work completes; HIP
  // blocks until pending work completes (and ends an active capture
  // silently). Either way the handle is gone on return.
  absl::Status DestroyStream(int device, NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return ToStatus(Api::StreamDestroy(ToStream(stream)), "StreamDestroy",
                    device);
  }

  absl::Status QueryStream(int device, NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    // Only the null stream resolves through the current device.
    CurrentDeviceGuard<Api> guard(device, /*needed=*/stream == nullptr);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    const Error error = Api::StreamQuery(ToStream(stream));
    // The pending answer is the routine one: hand out a prebuilt status
    // (copying it is a refcount bump) instead of formatting a message.
    if (error == Api::kErrorNotReady) return stream_not_ready_;
    return ToStatus(error, "StreamQuery", device, CallKind::kCompletion);
  }

  absl::Status SynchronizeStream(int device, NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard<Api> guard(device, /*needed=*/stream == nullptr);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return ToStatus(Api::StreamSynchronize(ToStream(stream)),
                    "StreamSynchronize", device, CallKind::kCompletion);
  }

  // The capture calls are RuntimeCapture's (runtime_capture.h). A status
  // newer than this code counts as invalidated: ending the capture then
  // destroying the stream is the safe reaction.
  absl::StatusOr<CaptureStatus> GetCaptureStatus(int device,
                                                 NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeCapture<Api>::GetStatus(device, ToStream(stream));
  }

  absl::StatusOr<CaptureInfo> GetCaptureInfo(int device,
                                             NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeCapture<Api>::GetCaptureInfo(device, ToStream(stream));
  }

  absl::Status EndCapture(int device, NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeCapture<Api>::End(device, ToStream(stream));
  }

  // The L2 access-policy window (runtime_access_policy.h); nothing to reset
  // on a runtime whose streams carry none.
  absl::Status ResetStreamAttributes(int device, NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    if constexpr (Api::kHasAccessPolicyWindow) {
      return access_policy_.Reset(device, ToStream(stream));
    } else {
      (void)stream;
      return absl::OkStatus();
    }
  }

  // Asked once per pool shard, so that pools skip the reset call where it
  // could only be a no-op (a runtime or device without the window).
  bool HasResettableStreamAttributes(int device) override {
    if constexpr (Api::kHasAccessPolicyWindow) {
      return CheckDevice(device).ok() && access_policy_.Resettable(device);
    } else {
      (void)device;
      return false;
    }
  }

  absl::Status StreamWaitEvent(int device, NativeStream stream,
                               NativeEvent event) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard<Api> guard(device, /*needed=*/stream == nullptr);
    if (!guard.status().ok()) return guard.status();
    return ToStatus(Api::StreamWaitEvent(ToStream(stream), ToEvent(event)),
                    "StreamWaitEvent", device);
  }

  // --- Events --------------------------------------------------------------

  absl::StatusOr<NativeEvent> CreateEvent(int device,
                                          const EventConfig& config) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    if (config.interprocess && !config.disable_timing) {
      return FaultError(
          Fault::kCaller, absl::StatusCode::kInvalidArgument,
          absl::StrCat("an interprocess event requires disable_timing (",
                       Api::kCallPrefix, " rule); got ", config.ToString()));
    }
    unsigned flags = Api::kEventDefault;
    if (config.disable_timing) flags |= Api::kEventDisableTiming;
    if (config.blocking_sync) flags |= Api::kEventBlockingSync;
    if (config.interprocess) flags |= Api::kEventInterprocess;
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    Event event = nullptr;
    absl::Status status = ToStatus(Api::EventCreateWithFlags(&event, flags),
                                   "EventCreateWithFlags", device);
    if (!status.ok()) return status;
    return static_cast<NativeEvent>(event);
  }

  absl::Status DestroyEvent(int device, NativeEvent event) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return ToStatus(Api::EventDestroy(ToEvent(event)), "EventDestroy", device);
  }

  absl::Status RecordEvent(int device, NativeEvent event,
                           NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    if (ABSL_PREDICT_TRUE(stream != nullptr)) {  // the stream names the device
      return ToStatus(Api::EventRecord(ToEvent(event), ToStream(stream)),
                      "EventRecord", device);
    }
    return RecordOnLegacyStream(device, event);
  }

  absl::Status QueryEvent(int device, NativeEvent event) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    const Error error = Api::EventQuery(ToEvent(event));
    if (error == Api::kErrorNotReady) return event_not_ready_;
    return ToStatus(error, "EventQuery", device, CallKind::kCompletion);
  }

  absl::Status SynchronizeEvent(int device, NativeEvent event) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return ToStatus(Api::EventSynchronize(ToEvent(event)), "EventSynchronize",
                    device, CallKind::kCompletion);
  }

  // --- Memory --------------------------------------------------------------

  absl::StatusOr<void*> Allocate(int device, size_t bytes,
                                 MemoryKind kind) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    if (bytes == 0) {
      return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                        absl::StrCat("cannot allocate 0 bytes of ",
                                     MemoryKindName(kind), " memory"));
    }
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    // Allocation is a "potentially unsafe" call during another thread's
    // global-mode capture; Relaxed keeps it from invalidating that capture.
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    void* ptr = nullptr;
    Error error = Api::kSuccess;
    absl::string_view call;
    if (kind == MemoryKind::kDevice) {
      error = Api::Malloc(&ptr, bytes);
      call = "Malloc";
    } else {
      error = Api::HostAlloc(&ptr, bytes, Api::kHostAllocDefault);
      call = Api::kHostAllocCall;
    }
    if (ABSL_PREDICT_TRUE(error == Api::kSuccess)) return ptr;
    absl::Status status = ToStatus(error, call, device);
    const Fault fault = FaultOf(status);
    if (fault == Fault::kOutOfMemory) {
      // The runtime also records the failure as the thread's last error. The
      // caches handle the OOM (trim, retry); left there, it would surface in
      // the user's next GetLastError check and be blamed on their kernel.
      (void)Api::GetLastError();
    }
    return WithFault(
        absl::Status(
            status.code(),
            absl::StrCat(MessageWithoutFault(status), " (requested ", bytes,
                         " bytes of ", MemoryKindName(kind), " memory)")),
        fault);
  }

  absl::Status Free(int device, void* ptr, MemoryKind kind) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    if (ptr == nullptr) return absl::OkStatus();
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    // Free synchronizes the device: also "potentially unsafe" during capture.
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    if (kind == MemoryKind::kDevice) {
      return ToStatus(Api::Free(ptr), "Free", device);
    }
    return ToStatus(Api::FreeHost(ptr), Api::kHostFreeCall, device);
  }

  absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    MemoryInfo info;
    absl::Status status =
        ToStatus(Api::MemGetInfo(&info.free_bytes, &info.total_bytes),
                 "MemGetInfo", device);
    if (!status.ok()) return status;
    return info;
  }

  // --- Interprocess memory: RuntimeIpc's calls (runtime_ipc.h) -------------

  absl::StatusOr<IpcMemHandle> GetIpcHandle(int device, void* ptr) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeIpc<Api>::GetHandle(device, ptr);
  }

  absl::StatusOr<void*> OpenIpcHandle(int device,
                                      const IpcMemHandle& handle) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeIpc<Api>::OpenHandle(device, handle);
  }

  absl::Status CloseIpcHandle(int device, void* ptr) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeIpc<Api>::CloseHandle(device, ptr);
  }

  absl::StatusOr<AddressRange> GetAddressRange(int device, void* ptr) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeIpc<Api>::GetAddressRange(device, ptr);
  }

  // --- Graph user objects: RuntimeUserObjects' calls ----------------------

  absl::StatusOr<NativeUserObject> CreateUserObject(
      int device, UserObjectDestructor destroy, void* data) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeUserObjects<Api>::Create(device, destroy, data);
  }

  absl::Status RetainUserObjectByGraph(int device, NativeGraph graph,
                                       NativeUserObject object) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeUserObjects<Api>::RetainByGraph(device, graph, object);
  }

  absl::Status ReleaseUserObject(int device, NativeUserObject object) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    return RuntimeUserObjects<Api>::Release(device, object);
  }

 private:
  explicit RuntimeBackend(int device_count)
      : device_count_(device_count),
        stream_not_ready_(RuntimeStatus<Api>::ErrorToStatus(
            Api::kErrorNotReady, "StreamQuery", kNoDevice,
            CallKind::kCompletion)),
        event_not_ready_(RuntimeStatus<Api>::ErrorToStatus(
            Api::kErrorNotReady, "EventQuery", kNoDevice,
            CallKind::kCompletion)),
        access_policy_(device_count) {}

  static Stream ToStream(NativeStream stream) {
    return static_cast<Stream>(stream);
  }
  static Event ToEvent(NativeEvent event) { return static_cast<Event>(event); }

  absl::Status CheckDevice(int device) const {
    return CheckDeviceRange<Api>(device, device_count_);
  }

  // RecordEvent on the null stream, which names no device: recorded with
  // `device` current (out of line: the path with a stream stays small).
  ABSL_ATTRIBUTE_NOINLINE absl::Status RecordOnLegacyStream(int device,
                                                            NativeEvent event) {
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    return ToStatus(Api::EventRecord(ToEvent(event), nullptr), "EventRecord",
                    device);
  }

  const int device_count_;
  const absl::Status stream_not_ready_;
  const absl::Status event_not_ready_;
  AccessPolicyWindowReset<Api> access_policy_;
};

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_BACKEND_H_
