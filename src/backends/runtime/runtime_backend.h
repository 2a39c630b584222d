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
// per-device cache of "does this device support an L2 access-policy window",
// kept in atomics whose racing initialisations compute the same value.
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
//              kCaptureStatusActive, kCaptureStatusInvalidated
//   device     GetDeviceCount(int*), GetDevice(int*), SetDevice(int),
//              DeviceGetStreamPriorityRange(int* least, int* greatest)
//   streams    StreamCreateWithPriority(Stream*, unsigned, int),
//              StreamDestroy, StreamQuery, StreamSynchronize,
//              StreamIsCapturing(Stream, CaptureStatus*),
//              StreamEndCapture(Stream, Graph*), GraphDestroy(Graph),
//              StreamWaitEvent(Stream, Event),
//              ThreadExchangeStreamCaptureMode(CaptureMode*)
//   events     EventCreateWithFlags(Event*, unsigned), EventDestroy,
//              EventRecord(Event, Stream), EventQuery, EventSynchronize
//   memory     Malloc(void**, size_t), Free(void*),
//              HostAlloc(void**, size_t, unsigned), FreeHost(void*),
//              MemGetInfo(size_t* free, size_t* total)
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
#include <atomic>
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

namespace gpupool {
namespace runtime_internal {

template <typename Api>
class RuntimeBackend final : public Backend {
 public:
  using Error = typename Api::Error;
  using Stream = typename Api::Stream;
  using Event = typename Api::Event;

  // Marks a status as not tied to one device (device count, current device).
  static constexpr int kNoDevice = -1;

  // Builds the backend. Fails with the runtime's own status when it cannot
  // be used here: no driver, no device (code Unavailable, fault kCaller, the
  // message naming the runtime error, e.g. "hipErrorNoDevice").
  static absl::StatusOr<std::unique_ptr<Backend>> Create() {
    int count = 0;
    absl::Status status =
        ToStatus(Api::GetDeviceCount(&count), "GetDeviceCount", kNoDevice);
    if (!status.ok()) return status;
    if (count <= 0) return NoDeviceStatus();
    return std::unique_ptr<Backend>(new RuntimeBackend(count));
  }

  // The choke point every native error of this runtime passes through: OK
  // for success (inlined), otherwise a status whose code and fault class come
  // from the runtime's table and whose message names the call, the device,
  // the error name, number and description. `call` is the function name
  // without the runtime prefix ("StreamQuery").
  static absl::Status ToStatus(Error error, absl::string_view call, int device,
                               CallKind kind = CallKind::kOther) {
    if (ABSL_PREDICT_TRUE(error == Api::kSuccess)) return absl::OkStatus();
    return ErrorToStatus(error, call, device, kind);
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
    if (count <= 0) return NoDeviceStatus();
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
    if (absl::Status valid = CheckCuMask(device, config); !valid.ok()) {
      return valid;
    }
    CurrentDeviceGuard guard(device);
    if (!guard.status().ok()) return guard.status();
    if (absl::Status valid = CheckPriority(device, config.priority);
        !valid.ok()) {
      return valid;
    }
    RelaxedCaptureMode relaxed(device);
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
    CurrentDeviceGuard guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return ToStatus(Api::StreamDestroy(ToStream(stream)), "StreamDestroy",
                    device);
  }

  absl::Status QueryStream(int device, NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    // Only the null stream resolves through the current device.
    CurrentDeviceGuard guard(device, /*needed=*/stream == nullptr);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    const Error error = Api::StreamQuery(ToStream(stream));
    // The pending answer is the routine one: hand out a prebuilt status
    // (copying it is a refcount bump) instead of formatting a message.
    if (error == Api::kErrorNotReady) return stream_not_ready_;
    return ToStatus(error, "StreamQuery", device, CallKind::kCompletion);
  }

  absl::Status SynchronizeStream(int device, NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard guard(device, /*needed=*/stream == nullptr);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return ToStatus(Api::StreamSynchronize(ToStream(stream)),
                    "StreamSynchronize", device, CallKind::kCompletion);
  }

  absl::StatusOr<CaptureStatus> GetCaptureStatus(int device,
                                                 NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    typename Api::CaptureStatus capture = Api::kCaptureStatusNone;
    absl::Status status =
        ToStatus(Api::StreamIsCapturing(ToStream(stream), &capture),
                 "StreamIsCapturing", device);
    if (!status.ok()) return status;
    if (capture == Api::kCaptureStatusNone) return CaptureStatus::kNone;
    if (capture == Api::kCaptureStatusActive) return CaptureStatus::kActive;
    if (capture == Api::kCaptureStatusInvalidated) {
      return CaptureStatus::kInvalidated;
    }
    // A status newer than this code: the capture is in no state a pool can
    // use, and ending it then destroying the stream is the safe reaction.
    return CaptureStatus::kInvalidated;
  }

  absl::Status EndCapture(int device, NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    typename Api::Graph graph = nullptr;
    const Error error = Api::StreamEndCapture(ToStream(stream), &graph);
    // Nobody will ever launch what was captured into a pooled stream; an
    // undestroyed graph would leak with every returned capture.
    if (graph != nullptr) {
      absl::Status destroyed =
          ToStatus(Api::GraphDestroy(graph), "GraphDestroy", device);
      if (!destroyed.ok()) return destroyed;
    }
    // Ending an invalidated capture reports the invalidation and yields no
    // graph, but the capture is over: that is the postcondition we want.
    if (error != Api::kErrorCaptureInvalidated) {
      if (absl::Status status = ToStatus(error, "StreamEndCapture", device);
          !status.ok()) {
        return status;
      }
    }
    absl::StatusOr<CaptureStatus> after = GetCaptureStatus(device, stream);
    if (!after.ok()) return after.status();
    if (*after != CaptureStatus::kNone) {
      return FaultError(
          Fault::kResource, absl::StatusCode::kFailedPrecondition,
          absl::StrCat(Api::kCallPrefix, "StreamEndCapture on device ", device,
                       " left the stream capturing"));
    }
    return absl::OkStatus();
  }

  absl::Status ResetStreamAttributes(int device, NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    if constexpr (Api::kHasAccessPolicyWindow) {
      absl::StatusOr<bool> supported = AccessPolicyWindowSupported(device);
      if (!supported.ok()) return supported.status();
      // Devices without persisting L2 cannot have a window set; skipping them
      // avoids an error that would otherwise discard every returned stream.
      if (!*supported) return absl::OkStatus();
      return ToStatus(Api::ClearAccessPolicyWindow(ToStream(stream)),
                      "StreamSetAttribute", device);
    } else {
      (void)stream;
      return absl::OkStatus();
    }
  }

  // Asked once per pool shard, so that pools skip the reset call where it
  // could only be a no-op: a window exists only on a runtime that has one
  // (CUDA, not HIP) and a device with persisting L2. A failed attribute query
  // answers true: the reset at return then reports the runtime's error.
  bool HasResettableStreamAttributes(int device) override {
    if constexpr (Api::kHasAccessPolicyWindow) {
      if (!CheckDevice(device).ok()) return false;
      absl::StatusOr<bool> supported = AccessPolicyWindowSupported(device);
      return !supported.ok() || *supported;
    } else {
      (void)device;
      return false;
    }
  }

  absl::Status StreamWaitEvent(int device, NativeStream stream,
                               NativeEvent event) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard guard(device, /*needed=*/stream == nullptr);
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
    CurrentDeviceGuard guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    Event event = nullptr;
    absl::Status status = ToStatus(Api::EventCreateWithFlags(&event, flags),
                                   "EventCreateWithFlags", device);
    if (!status.ok()) return status;
    return static_cast<NativeEvent>(event);
  }

  absl::Status DestroyEvent(int device, NativeEvent event) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return ToStatus(Api::EventDestroy(ToEvent(event)), "EventDestroy", device);
  }

  absl::Status RecordEvent(int device, NativeEvent event,
                           NativeStream stream) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard guard(device, /*needed=*/stream == nullptr);
    if (!guard.status().ok()) return guard.status();
    return ToStatus(Api::EventRecord(ToEvent(event), ToStream(stream)),
                    "EventRecord", device);
  }

  absl::Status QueryEvent(int device, NativeEvent event) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    RelaxedCaptureMode relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    const Error error = Api::EventQuery(ToEvent(event));
    if (error == Api::kErrorNotReady) return event_not_ready_;
    return ToStatus(error, "EventQuery", device, CallKind::kCompletion);
  }

  absl::Status SynchronizeEvent(int device, NativeEvent event) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    RelaxedCaptureMode relaxed(device);
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
    CurrentDeviceGuard guard(device);
    if (!guard.status().ok()) return guard.status();
    // Allocation is a "potentially unsafe" call during another thread's
    // global-mode capture; Relaxed keeps it from invalidating that capture.
    RelaxedCaptureMode relaxed(device);
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
            absl::StrCat(status.message(), " (requested ", bytes, " bytes of ",
                         MemoryKindName(kind), " memory)")),
        fault);
  }

  absl::Status Free(int device, void* ptr, MemoryKind kind) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    if (ptr == nullptr) return absl::OkStatus();
    CurrentDeviceGuard guard(device);
    if (!guard.status().ok()) return guard.status();
    // Free synchronizes the device: also "potentially unsafe" during capture.
    RelaxedCaptureMode relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    if (kind == MemoryKind::kDevice) {
      return ToStatus(Api::Free(ptr), "Free", device);
    }
    return ToStatus(Api::FreeHost(ptr), Api::kHostFreeCall, device);
  }

  absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) override {
    if (absl::Status valid = CheckDevice(device); !valid.ok()) return valid;
    CurrentDeviceGuard guard(device);
    if (!guard.status().ok()) return guard.status();
    MemoryInfo info;
    absl::Status status =
        ToStatus(Api::MemGetInfo(&info.free_bytes, &info.total_bytes),
                 "MemGetInfo", device);
    if (!status.ok()) return status;
    return info;
  }

 private:
  // Makes `device` the calling thread's current device for the guard's
  // lifetime: set only if different (setting is not free, and on CUDA it
  // may initialise a context), always restored. A failed restore cannot be
  // reported from a destructor; the next call on this thread will see the
  // runtime's error itself.
  class CurrentDeviceGuard {
   public:
    explicit CurrentDeviceGuard(int device, bool needed = true) {
      if (!needed) return;
      status_ = ToStatus(Api::GetDevice(&previous_), "GetDevice", device);
      if (!status_.ok() || previous_ == device) return;
      status_ = ToStatus(Api::SetDevice(device), "SetDevice", device);
      restore_ = status_.ok();
    }
    CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
    CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;
    ~CurrentDeviceGuard() {
      if (restore_) (void)Api::SetDevice(previous_);
    }

    const absl::Status& status() const { return status_; }

   private:
    absl::Status status_;
    int previous_ = 0;
    bool restore_ = false;
  };

  // Switches the calling thread's stream-capture mode to Relaxed for the
  // guard's lifetime. In the default (global) mode a "potentially unsafe"
  // call (query, synchronize, malloc, free, ...) issued while any thread
  // captures in global mode is prohibited and invalidates that capture; pools
  // validate, create and destroy on arbitrary threads and must never break a
  // user's graph. Creation and destruction are guarded too: they are off the
  // hot path, and the runtimes do not document them as capture-safe.
  //
  // Cost: one thread-local exchange, plus one to restore unless the thread
  // was already Relaxed; neither takes a driver lock. It cannot be skipped
  // more cleverly: no runtime call says whether some other thread has a
  // global-mode capture open, and a prohibited call has already invalidated
  // that capture by the time its error comes back, so "try, then switch" is
  // unsound. Pools keep the guarded calls few instead: one query per
  // returned handle, none at acquire, and the capture status
  // (StreamIsCapturing, capture-safe, unguarded) only after a failed query.
  class RelaxedCaptureMode {
   public:
    explicit RelaxedCaptureMode(int device) {
      status_ = ToStatus(Api::ThreadExchangeStreamCaptureMode(&mode_),
                         "ThreadExchangeStreamCaptureMode", device);
      restore_ = status_.ok() && mode_ != Api::kCaptureModeRelaxed;
    }
    RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
    RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;
    ~RelaxedCaptureMode() {
      if (restore_) (void)Api::ThreadExchangeStreamCaptureMode(&mode_);
    }

    const absl::Status& status() const { return status_; }

   private:
    typename Api::CaptureMode mode_ = Api::kCaptureModeRelaxed;
    absl::Status status_;
    bool restore_ = false;
  };

  // Per-device answer to "can a stream carry an access-policy window".
  enum : int { kPolicyUnknown = 0, kPolicySupported = 1, kPolicyAbsent = 2 };

  explicit RuntimeBackend(int device_count)
      : device_count_(device_count),
        stream_not_ready_(ErrorToStatus(Api::kErrorNotReady, "StreamQuery",
                                        kNoDevice, CallKind::kCompletion)),
        event_not_ready_(ErrorToStatus(Api::kErrorNotReady, "EventQuery",
                                       kNoDevice, CallKind::kCompletion)),
        access_policy_(new std::atomic<int>[device_count]) {
    for (int i = 0; i < device_count; ++i) {
      access_policy_[i].store(kPolicyUnknown, std::memory_order_relaxed);
    }
  }

  static Stream ToStream(NativeStream stream) {
    return static_cast<Stream>(stream);
  }
  static Event ToEvent(NativeEvent event) { return static_cast<Event>(event); }

  static absl::Status NoDeviceStatus() {
    return FaultError(
        Fault::kCaller, absl::StatusCode::kUnavailable,
        absl::StrCat(Api::kCallPrefix, "GetDeviceCount reported no device"));
  }

  ABSL_ATTRIBUTE_NOINLINE static absl::Status ErrorToStatus(
      Error error, absl::string_view call, int device, CallKind kind) {
    const ErrorClass error_class = Api::Classify(error, kind);
    const char* name = Api::ErrorName(error);
    const char* description = Api::ErrorString(error);
    if (name == nullptr) name = "unnamed error";
    std::string message = absl::StrCat(Api::kCallPrefix, call);
    if (device != kNoDevice) absl::StrAppend(&message, " on device ", device);
    absl::StrAppend(&message, ": ", name, " (", static_cast<int>(error), ")");
    // HIP's error "string" is often the name again.
    if (description != nullptr && std::strcmp(description, name) != 0) {
      absl::StrAppend(&message, ": ", description);
    }
    return FaultError(error_class.fault, error_class.code, message);
  }

  absl::Status CheckDevice(int device) const {
    if (ABSL_PREDICT_TRUE(device >= 0 && device < device_count_)) {
      return absl::OkStatus();
    }
    return FaultError(
        Fault::kCaller, absl::StatusCode::kInvalidArgument,
        absl::StrCat(Api::kCallPrefix, " device ", device,
                     " is out of range [0, ", device_count_, ")"));
  }

  // A CU mask is a HIP extension; where it exists the create call takes no
  // flags or priority, so a config asking for others would be silently
  // ignored. Both cases are the caller's to fix.
  static absl::Status CheckCuMask(int device, const StreamConfig& config) {
    if (config.cu_mask.empty()) return absl::OkStatus();
    if constexpr (!Api::kSupportsCuMask) {
      return FaultError(
          Fault::kCaller, absl::StatusCode::kInvalidArgument,
          absl::StrCat("cu_mask is a HIP extension; the ", Api::kCallPrefix,
                       " backend cannot restrict a stream to compute units "
                       "(device ",
                       device, ", ", config.ToString(), ")"));
    } else {
      if (config.cu_mask.size() > std::numeric_limits<uint32_t>::max()) {
        return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                          "cu_mask has more than 2^32 words");
      }
      if (config.priority != Api::kCuMaskStreamPriority ||
          config.non_blocking != Api::kCuMaskStreamNonBlocking) {
        return FaultError(
            Fault::kCaller, absl::StatusCode::kInvalidArgument,
            absl::StrCat(
                Api::kCallPrefix, "ExtStreamCreateWithCUMask creates only ",
                Api::kCuMaskStreamNonBlocking ? "non-blocking" : "blocking",
                " streams of priority ", Api::kCuMaskStreamPriority,
                "; a config with a cu_mask must say non_blocking=",
                Api::kCuMaskStreamNonBlocking ? 1 : 0,
                ", priority=", Api::kCuMaskStreamPriority, " (device ", device,
                ", ", config.ToString(), ")"));
      }
      return absl::OkStatus();
    }
  }

  // Validates against the runtime's own range on the current device (the
  // caller holds the device guard). Runtimes clamp silently; we refuse, so
  // that a pool key always describes the stream it maps to.
  static absl::Status CheckPriority(int device, int priority) {
    int least = 0;
    int greatest = 0;
    absl::Status status =
        ToStatus(Api::DeviceGetStreamPriorityRange(&least, &greatest),
                 "DeviceGetStreamPriorityRange", device);
    if (!status.ok()) return status;
    const int low = std::min(least, greatest);
    const int high = std::max(least, greatest);
    if (priority >= low && priority <= high) return absl::OkStatus();
    return FaultError(
        Fault::kCaller, absl::StatusCode::kInvalidArgument,
        absl::StrCat("stream priority ", priority, " is outside [", low, ", ",
                     high, "], the range ", Api::kCallPrefix, " device ",
                     device,
                     " supports (lower is higher priority; never clamped)"));
  }

  absl::StatusOr<bool> AccessPolicyWindowSupported(int device) {
    std::atomic<int>& state = access_policy_[device];
    const int known = state.load(std::memory_order_relaxed);
    if (ABSL_PREDICT_TRUE(known != kPolicyUnknown)) {
      return known == kPolicySupported;
    }
    int max_bytes = 0;
    absl::Status status =
        ToStatus(Api::MaxAccessPolicyWindowBytes(device, &max_bytes),
                 "DeviceGetAttribute", device);
    if (!status.ok()) return status;
    // Racing first callers compute the same answer; either store wins.
    state.store(max_bytes > 0 ? kPolicySupported : kPolicyAbsent,
                std::memory_order_relaxed);
    return max_bytes > 0;
  }

  const int device_count_;
  const absl::Status stream_not_ready_;
  const absl::Status event_not_ready_;
  const std::unique_ptr<std::atomic<int>[]> access_policy_;
};

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_BACKEND_H_
