// gpupool/backend.h — the platform interface every GPU runtime implements.
//
// A `Backend` is a thin table of runtime primitives (streams, events, memory,
// device selection) with every native error translated into an `absl::Status`
// carrying a `Fault` class. Pools are written against this interface only, so
// a new runtime is supported by implementing the primitives below; the
// contract of each (preconditions, postconditions, which faults it may
// return) is written beside it so that a backend can be written from this
// header alone.
//
// Strings: Debian's Abseil keeps absl::string_view distinct from
// std::string_view; the public API (Backend::name,
// MakeBackend) use std::string_view, everything else absl::string_view.
//
// Thread safety: every primitive may be called concurrently from any thread.
// No primitive leaves the calling thread's current device changed.
//
// Errors: a failing primitive returns a non-OK status whose fault class
// (`FaultOf(status)`) tells the pool how to react:
//
//   kNotReady     work still pending                     keep, check later
//   kResource     this handle is bad                     destroy this handle
//   kDevice       sticky: the device context is dead     poison the device
//   kOutOfMemory  an allocation failed                   trim caches, retry
//   kShutdown     the runtime is unloading               leak quietly
//   kCaller       invalid argument / wrong device        return to caller
//
// Example:
//
//   absl::StatusOr<std::unique_ptr<gpupool::Backend>> backend =
//       gpupool::MakeBackend("sim");
//   absl::StatusOr<gpupool::NativeStream> stream =
//       (*backend)->CreateStream(/*device=*/0, gpupool::StreamConfig{});

#ifndef GPUPOOL_BACKEND_H_
#define GPUPOOL_BACKEND_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/export.h"

namespace gpupool {

// Opaque native handles: `cudaStream_t`/`hipStream_t` and
// `cudaEvent_t`/`hipEvent_t` on the runtime backends.
using NativeStream = void*;
using NativeEvent = void*;
// `cudaGraph_t`/`hipGraph_t` (SimBackend: see SimBackend::NativeGraphOf) and
// `cudaUserObject_t`/`hipUserObject_t`.
using NativeGraph = void*;
using NativeUserObject = void*;

// The destructor of a user object (Backend::CreateUserObject). It runs on a
// runtime thread where no runtime call is allowed.
using UserObjectDestructor = void (*)(void* data);

// ---------------------------------------------------------------------------
// Fault classes
// ---------------------------------------------------------------------------

// How a pool must react to a failed runtime call. Travels in the status's
// message, in words: a fixed tag at its end (" (device fault)", see
// `FaultTag`), so a printed status reads as words and the class survives any
// copy of the status.
enum class Fault {
  kNone,         // success
  kNotReady,     // work still pending: keep the handle, check later
  kResource,     // this handle is bad: destroy this handle only
  kDevice,       // sticky device error: poison the whole device
  kOutOfMemory,  // allocation failed: trim caches, retry once
  kShutdown,     // runtime unloading: leak quietly, never call it again
  kCaller,       // invalid argument or wrong device: change nothing
};

// Deprecated: gpupool no longer attaches a payload under this URL (Abseil
// prints every payload with the status, in wire form). `FaultOf` still
// honours one a caller attached to a status without a fault tag, and
// `WithFault` removes it.
inline constexpr absl::string_view kFaultPayloadUrl =
    "type.googleapis.com/gpupool.Fault";

// Returns the fault class of `status`: `kNone` for OK (the message is not
// read); the class its message's trailing fault tag names; a
// `kFaultPayloadUrl` payload when one is attached; otherwise a class inferred
// from the code (ResourceExhausted → kOutOfMemory, InvalidArgument/OutOfRange/
// NotFound → kCaller, Unavailable → kShutdown, everything else → kResource).
GPUPOOL_EXPORT Fault FaultOf(const absl::Status& status);

// Returns `status` with the fault tag of `fault` at the end of its message:
// an earlier tag is replaced, never stacked. The code and other payloads are
// kept. OK stays OK.
GPUPOOL_EXPORT absl::Status WithFault(absl::Status status, Fault fault);

// Builds a non-OK status with `code`, `message` and the fault tag.
GPUPOOL_EXPORT absl::Status FaultError(Fault fault, absl::StatusCode code,
                                       absl::string_view message);

// The words that mark `fault` at the end of a message, after a space:
// "(no fault)", "(not-ready fault)", "(handle fault)", "(device fault)",
// "(out-of-memory fault)", "(shutdown fault)", "(caller fault)".
GPUPOOL_EXPORT absl::string_view FaultTag(Fault fault);

// The message of `status` without its trailing fault tag: the words to nest
// in another status's message. Nest these, never `ToString()`, which adds
// the code ("INTERNAL: ...") and any payload in wire form.
GPUPOOL_EXPORT absl::string_view MessageWithoutFault(
    const absl::Status& status);

// "kDevice", "kResource", ... for messages and stats.
GPUPOOL_EXPORT absl::string_view FaultName(Fault fault);

// ---------------------------------------------------------------------------
// Configurations (pool keys)
// ---------------------------------------------------------------------------

// How a stream is created. Two different configs never share a stream.
struct GPUPOOL_EXPORT StreamConfig {
  // Runtime priority; lower is higher priority (CUDA: [-5, 0] on Hopper,
  // HIP: -1, 0, 1). Out-of-range values are a kCaller error, never clamped.
  int priority = 0;
  // Create with the non-blocking flag (no implicit sync with stream 0).
  bool non_blocking = true;
  // HIP only: compute-unit mask; empty means all CUs. Non-empty on CUDA is a
  // kCaller error.
  std::vector<uint32_t> cu_mask;

  friend bool operator==(const StreamConfig& a, const StreamConfig& b) {
    return a.priority == b.priority && a.non_blocking == b.non_blocking &&
           a.cu_mask == b.cu_mask;
  }
  friend bool operator!=(const StreamConfig& a, const StreamConfig& b) {
    return !(a == b);
  }
  template <typename H>
  friend H AbslHashValue(H h, const StreamConfig& c) {
    return H::combine(std::move(h), c.priority, c.non_blocking, c.cu_mask);
  }
  // "priority=0,non_blocking=1" (+ ",cu_mask=ff,0f" when set).
  std::string ToString() const;
};

// How an event is created. Two different configs never share an event.
struct GPUPOOL_EXPORT EventConfig {
  bool disable_timing = true;
  bool blocking_sync = false;
  // Requires disable_timing (runtime rule); otherwise a kCaller error.
  bool interprocess = false;

  friend bool operator==(const EventConfig& a, const EventConfig& b) {
    return a.disable_timing == b.disable_timing &&
           a.blocking_sync == b.blocking_sync &&
           a.interprocess == b.interprocess;
  }
  friend bool operator!=(const EventConfig& a, const EventConfig& b) {
    return !(a == b);
  }
  template <typename H>
  friend H AbslHashValue(H h, const EventConfig& c) {
    return H::combine(std::move(h), c.disable_timing, c.blocking_sync,
                      c.interprocess);
  }
  std::string ToString() const;
};

enum class MemoryKind { kDevice, kPinnedHost };
GPUPOOL_EXPORT absl::string_view MemoryKindName(MemoryKind kind);

// Graph-capture state of a stream.
enum class CaptureStatus { kNone, kActive, kInvalidated };

// --- Graph capture with the capture's id ------------------------------------
// What GetCaptureInfo reports: the stream's capture status and, while the
// status is kActive, the id of the capture sequence. Ids are unique over the
// lifetime of the process (cudaStreamGetCaptureInfo, hipStreamGetCaptureInfo),
// and every stream joined into one capture reports the same id, so an id
// tells "this stream belongs to that capture" without asking which thread
// began it. `id` is 0 unless `status` is kActive.
struct GPUPOOL_EXPORT CaptureInfo {
  CaptureStatus status = CaptureStatus::kNone;
  uint64_t id = 0;

  friend bool operator==(const CaptureInfo& a, const CaptureInfo& b) {
    return a.status == b.status && a.id == b.id;
  }
  friend bool operator!=(const CaptureInfo& a, const CaptureInfo& b) {
    return !(a == b);
  }
};

struct GPUPOOL_EXPORT MemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

// The runtime's interprocess memory handle, opaque: the bytes of a
// `cudaIpcMemHandle_t` / `hipIpcMemHandle_t` (64 bytes on both), or the
// simulator's own encoding. Plain bytes so that any transport (a pipe, MPI, a
// TCP store) can carry it.
inline constexpr size_t kIpcMemHandleBytes = 64;
struct GPUPOOL_EXPORT IpcMemHandle {
  std::array<uint8_t, kIpcMemHandleBytes> bytes{};

  friend bool operator==(const IpcMemHandle& a, const IpcMemHandle& b) {
    return a.bytes == b.bytes;
  }
  friend bool operator!=(const IpcMemHandle& a, const IpcMemHandle& b) {
    return !(a == b);
  }
  template <typename H>
  friend H AbslHashValue(H h, const IpcMemHandle& handle) {
    return H::combine_contiguous(std::move(h), handle.bytes.data(),
                                 handle.bytes.size());
  }
};

// The allocation that contains an address (Backend::GetAddressRange).
struct GPUPOOL_EXPORT AddressRange {
  void* base = nullptr;
  size_t bytes = 0;
};

// ---------------------------------------------------------------------------
// Backend
// ---------------------------------------------------------------------------

// The runtime primitives. Conventions for every method below:
//  * `device` must be in [0, DeviceCount()); otherwise kCaller
//    (InvalidArgument) and nothing happens.
//  * A handle must have been created by this backend on `device` and not yet
//    destroyed; a foreign or destroyed handle is undefined on a real runtime
//    (SimBackend detects and counts it as misuse).
//  * The calling thread's current device is the same on return as on entry.
//  * Any primitive may return kDevice (sticky error: the device is dead and
//    every later call on it fails the same way) or kShutdown (the runtime is
//    unloading).
class GPUPOOL_EXPORT Backend {
 public:
  virtual ~Backend();

  // "cuda", "hip", "sim".
  virtual std::string_view name() const = 0;

  // Number of usable devices. A runtime with no device returns its own error
  // (e.g. Unavailable "hipErrorNoDevice") rather than 0.
  virtual absl::StatusOr<int> DeviceCount() = 0;

  // --- Current device (used by `ScopedDevice`) ---------------------------
  // The calling thread's current device.
  virtual absl::StatusOr<int> GetCurrentDevice() = 0;
  // Makes `device` the calling thread's current device. kCaller when out of
  // range.
  virtual absl::Status SetCurrentDevice(int device) = 0;

  // --- Streams -------------------------------------------------------------
  // Creates a stream on `device` with `config`. Post: the stream is idle, not
  // capturing, attributes at creation defaults. Faults: kCaller (bad
  // priority, cu_mask unsupported), kOutOfMemory, kDevice.
  virtual absl::StatusOr<NativeStream> CreateStream(
      int device, const StreamConfig& config) = 0;

  // Destroys `stream`. May block until pending work completes (HIP does).
  // After return the handle is invalid whatever the status.
  virtual absl::Status DestroyStream(int device, NativeStream stream) = 0;

  // OK when all work on `stream` is complete; kNotReady (Unavailable) while
  // work is pending; kResource when the stream faulted. A capturing stream
  // is never reported OK or kNotReady (the runtimes refuse to query it): a
  // pool asks GetCaptureStatus only after a failed query. Never invalidates
  // another thread's graph capture (see each backend for how).
  virtual absl::Status QueryStream(int device, NativeStream stream) = 0;

  // Blocks until all work on `stream` completes. Faults as QueryStream.
  virtual absl::Status SynchronizeStream(int device, NativeStream stream) = 0;

  // Graph-capture status of `stream`. Default: Unimplemented (pools then
  // treat the stream as not capturing).
  virtual absl::StatusOr<CaptureStatus> GetCaptureStatus(int device,
                                                         NativeStream stream);

  // Graph-capture status of `stream` with the capture's id (see CaptureInfo).
  // Never invalidates a capture and never blocks. The null stream reports
  // kNone. Default: Unimplemented (callers then fall back to
  // GetCaptureStatus, which cannot tell one capture from another).
  virtual absl::StatusOr<CaptureInfo> GetCaptureInfo(int device,
                                                     NativeStream stream) {
    (void)device;
    (void)stream;
    return absl::UnimplementedError("GetCaptureInfo: not supported");
  }

  // Ends an active or invalidated capture on `stream` and destroys the
  // resulting graph. Post: GetCaptureStatus is kNone. Default: Unimplemented.
  virtual absl::Status EndCapture(int device, NativeStream stream);

  // Resets per-stream attributes (e.g. the CUDA L2 access-policy window) to
  // their creation defaults. Default: OK (nothing to reset).
  virtual absl::Status ResetStreamAttributes(int device, NativeStream stream);

  // Whether streams on `device` can carry an attribute that
  // ResetStreamAttributes must clear. Pools ask once per (device, config)
  // and, where it is false, never call ResetStreamAttributes: one runtime
  // call less per returned stream. Default: true (a backend that overrides
  // ResetStreamAttributes keeps getting the call).
  virtual bool HasResettableStreamAttributes(int device);

  // Makes future work on `stream` wait for `event` without blocking the
  // host. Default: Unimplemented.
  virtual absl::Status StreamWaitEvent(int device, NativeStream stream,
                                       NativeEvent event);

  // --- Events --------------------------------------------------------------
  // Creates an event with `config`. Post: the event is complete (a query
  // returns OK). Faults: kCaller (interprocess without disable_timing),
  // kOutOfMemory, kDevice.
  virtual absl::StatusOr<NativeEvent> CreateEvent(
      int device, const EventConfig& config) = 0;

  // Destroys `event`. After return the handle is invalid whatever the status.
  virtual absl::Status DestroyEvent(int device, NativeEvent event) = 0;

  // Records `event` on `stream` (both on `device`).
  virtual absl::Status RecordEvent(int device, NativeEvent event,
                                   NativeStream stream) = 0;

  // OK when the work captured by the last record is complete (or the event
  // was never recorded); kNotReady while pending. Capture-safe like
  // QueryStream.
  virtual absl::Status QueryEvent(int device, NativeEvent event) = 0;

  // Blocks until the event completes.
  virtual absl::Status SynchronizeEvent(int device, NativeEvent event) = 0;

  // --- Memory --------------------------------------------------------------
  // Allocates `bytes` (> 0) of `kind` memory associated with `device`.
  // Faults: kOutOfMemory (ResourceExhausted) when the runtime is out of
  // memory, the thread's sticky last-error cleared; kCaller for bytes == 0.
  virtual absl::StatusOr<void*> Allocate(int device, size_t bytes,
                                         MemoryKind kind) = 0;

  // Frees memory returned by Allocate with the same device and kind.
  virtual absl::Status Free(int device, void* ptr, MemoryKind kind) = 0;

  // Free and total device memory of `device`.
  virtual absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) = 0;

  // --- Interprocess memory (IPC) --------------------------------------------
  // Legacy runtime IPC (cudaIpc* / hipIpc*). Defaults: Unimplemented.
  //
  // GetIpcHandle: the handle naming the device allocation `ptr`, which must be
  // a pointer Allocate(device, ..., kDevice) returned (the allocation's base:
  // a runtime names the whole allocation, so a caller sharing an interior
  // address carries the offset itself; HIP even gives different bytes for
  // interior pointers that all open at the base). Cheap and repeatable; after
  // a Free and a new Allocate at the same address the bytes differ. Faults:
  // kCaller (not a device allocation of this process), kDevice.
  virtual absl::StatusOr<IpcMemHandle> GetIpcHandle(int device, void* ptr);

  // OpenIpcHandle: maps a handle exported by *another* process into this
  // process on `device` and returns the mapped base address. Opening a handle
  // this process exported fails (kCaller). Opening the same handle again in
  // one process returns the same mapping and counts a reference on current
  // CUDA (it was fatal before CUDA 11.1, and HIP need not return the same
  // address): callers should open a handle once per process and device. Each
  // successful open needs one CloseIpcHandle. Faults: kCaller (forged,
  // corrupt or foreign handle; NotFound when the exporter freed the
  // allocation or exited, as far as the runtime can tell), kOutOfMemory,
  // kDevice.
  virtual absl::StatusOr<void*> OpenIpcHandle(int device,
                                              const IpcMemHandle& handle);

  // CloseIpcHandle: unmaps `ptr`, an address OpenIpcHandle returned on
  // `device`. The exporter's allocation is unaffected. The exporter must not
  // free the allocation before every importer closed it: that is undefined
  // behaviour on CUDA and HIP (SimBackend reports it as misuse).
  virtual absl::Status CloseIpcHandle(int device, void* ptr);

  // GetAddressRange: the base and size of the allocation that contains `ptr`
  // on `device` (cuMemGetAddressRange / hipMemGetAddressRange), including a
  // mapping OpenIpcHandle returned: how an importer learns the real extent
  // of what it mapped. Default: Unimplemented (a runtime without the entry
  // point; callers fall back to what the exporter recorded). Faults:
  // kCaller (`ptr` is not in an allocation of this process), kDevice.
  virtual absl::StatusOr<AddressRange> GetAddressRange(int device, void* ptr);

  // --- User objects (graph-retained release) --------------------------------
  // CUDA user objects (cudaUserObjectCreate, cudaGraphRetainUserObject,
  // cudaUserObjectRelease; HIP 6 has the same): a reference-counted object
  // whose `destroy(data)` runs once its last reference is gone *and* every
  // launch of a graph that held it completed. A graph holds references; an
  // executable graph instantiated from it holds its own. `destroy` runs
  // asynchronously on a runtime thread and must not call the runtime (nor
  // wait on anything a runtime call may hold). Defaults: Unimplemented (a
  // runtime without user objects: callers release graph memory explicitly).
  //
  // CreateUserObject: a new object with one reference, the caller's.
  // Faults: kCaller (null `destroy`), kOutOfMemory, kDevice.
  virtual absl::StatusOr<NativeUserObject> CreateUserObject(
      int device, UserObjectDestructor destroy, void* data);

  // RetainUserObjectByGraph: moves one of the caller's references to
  // `object` into `graph` (cudaGraphRetainUserObject with
  // cudaGraphUserObjectMove): on success the caller holds one reference
  // fewer and the graph one more, released when the graph is destroyed.
  // On failure the caller keeps its reference. Faults: kCaller (unknown
  // graph or object), kDevice.
  virtual absl::Status RetainUserObjectByGraph(int device, NativeGraph graph,
                                               NativeUserObject object);

  // ReleaseUserObject: drops one of the caller's references
  // (cudaUserObjectRelease). Faults: kCaller (no reference left), kDevice.
  virtual absl::Status ReleaseUserObject(int device, NativeUserObject object);

 protected:
  Backend() = default;
};

// Makes `device` current for the lifetime of the guard and restores the
// previous current device afterwards (errors on restore are ignored: a
// destructor cannot report them). Use `Create` to learn about errors.
class GPUPOOL_EXPORT ScopedDevice {
 public:
  static absl::StatusOr<ScopedDevice> Create(Backend& backend, int device);
  ScopedDevice(ScopedDevice&& other) noexcept;
  ScopedDevice& operator=(ScopedDevice&&) = delete;
  ~ScopedDevice();

 private:
  ScopedDevice(Backend* backend, int previous)
      : backend_(backend), previous_(previous) {}
  Backend* backend_;
  int previous_;
};

// Builds the backend named `name`: "sim" (always), "cuda", "hip" (only when
// built with them; otherwise Unavailable with the reason). InvalidArgument
// for an unknown name.
GPUPOOL_EXPORT absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(
    std::string_view name);

}  // namespace gpupool

#endif  // GPUPOOL_BACKEND_H_
