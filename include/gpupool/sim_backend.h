// gpupool/sim_backend.h — a deterministic, in-process simulated GPU runtime.
//
// SimBackend implements every `Backend` primitive without a GPU. It tracks the
// state of every handle (live, pending work, graph capture, dirty attributes,
// faults), detects misuse loudly (use after destroy, double destroy, wrong
// device, foreign handles, handles still live when the backend is destroyed),
// and lets tests inject faults and latencies. It is the backbone of CI, where
// there is no GPU, and of the demo when no GPU is present (always labelled as
// simulated).
//
// Thread safety: all methods may be called concurrently. Latencies from the
// profile are slept outside internal locks, so concurrent callers overlap the
// way they would on a runtime that does not serialise.
//
// Handles are opaque, never-dereferenceable values; allocations are fake
// address ranges (never dereference them) that are never reused, so a use
// after free is always detectable and address-overlap checks are exact.
//
// Example:
//
//   gpupool::SimBackend sim({.device_count = 4});
//   sim.PoisonDevice(2, absl::InternalError("cudaErrorIllegalAddress"));
//   // Every later call on device 2 fails with Fault::kDevice.

#ifndef GPUPOOL_SIM_BACKEND_H_
#define GPUPOOL_SIM_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/export.h"

namespace gpupool {

// Every simulated primitive, for fault injection and call counters.
enum class SimOp {
  kDeviceCount,
  kGetCurrentDevice,
  kSetCurrentDevice,
  kStreamCreate,
  kStreamDestroy,
  kStreamQuery,
  kStreamSynchronize,
  kCaptureStatus,
  kEndCapture,
  kResetAttributes,
  kStreamWaitEvent,
  kEventCreate,
  kEventDestroy,
  kEventRecord,
  kEventQuery,
  kEventSynchronize,
  kAllocate,
  kFree,
  kMemoryInfo,
  // Interprocess memory (sim_ipc.h).
  kIpcGetHandle,
  kIpcOpenHandle,
  kIpcCloseHandle,
  // User objects (sim_user_objects.h).
  kUserObjectCreate,
  kUserObjectRetain,
  kUserObjectRelease,
};
inline constexpr int kSimOpCount =
    static_cast<int>(SimOp::kUserObjectRelease) + 1;
GPUPOOL_EXPORT absl::string_view SimOpName(SimOp op);

// Latencies charged (slept, outside locks) per primitive, and the runtime's
// blocking semantics.
struct GPUPOOL_EXPORT SimProfile {
  std::string name = "instant";
  absl::Duration stream_create = absl::ZeroDuration();
  absl::Duration stream_destroy = absl::ZeroDuration();
  absl::Duration event_create = absl::ZeroDuration();
  absl::Duration event_destroy = absl::ZeroDuration();
  absl::Duration allocate = absl::ZeroDuration();
  absl::Duration free = absl::ZeroDuration();
  // Charged by stream and event queries.
  absl::Duration query = absl::ZeroDuration();
  // Charged by capture-status calls (GetCaptureStatus, GetCaptureInfo): a
  // host-side lookup in the runtime, no device round trip.
  absl::Duration capture_query = absl::ZeroDuration();
  // HIP semantics: stream destroy blocks until pending work completes and
  // silently ends an active capture. CUDA: neither.
  bool destroy_blocks_until_idle = false;
  // Valid stream priorities [greatest, least] (numerically: greatest <= least).
  int greatest_priority = -5;
  int least_priority = 0;
  // Whether a non-empty cu_mask is accepted (HIP) or a kCaller error (CUDA).
  bool supports_cu_mask = false;
  // Whether streams carry a resettable attribute (CUDA's L2 access-policy
  // window on a device with persisting L2): HasResettableStreamAttributes,
  // so pools reset attributes on return only where this is set.
  bool stream_attributes = false;

  // No latency at all (unit tests).
  static SimProfile Instant();
  // CUDA-like: ~1.5 µs create/destroy, priorities [-5, 0], no CU masks.
  static SimProfile Cuda();
  // ROCm on MI300X, figures from the seed report: stream create 3.4 ms,
  // destroy 3.3 ms and blocking until idle; priorities [-1, 1]; CU masks.
  static SimProfile RocmMi300x();
};

struct GPUPOOL_EXPORT SimOptions {
  int device_count = 1;
  SimProfile profile = SimProfile::Instant();
  // Total memory per device (device kind); pinned host memory is unlimited
  // unless limited with SetMemoryLimit.
  size_t memory_per_device = size_t{80} << 30;
  // Called once per misuse with a description. Default: print to stderr.
  // Tests install a hook that fails the test (`ADD_FAILURE() << message`).
  std::function<void(absl::string_view)> on_misuse;
  // Names the shared-memory registry that IPC handles go through: processes
  // whose simulators share a namespace can open each other's handles. Empty:
  // one registry per user. Segments live under /dev/shm.
  std::string ipc_namespace;
};

// How a simulated capture interacts with other calls (cudaStreamCaptureMode).
// The sim's Backend primitives behave as the runtime backends do, which run
// every potentially unsafe call in Relaxed mode, so the mode decides only
// which thread may end the capture: any thread for kRelaxed, the beginning
// thread otherwise (cudaErrorStreamCaptureWrongThread).
enum class SimCaptureMode { kGlobal, kThreadLocal, kRelaxed };

// A graph made by SimBackend::EndCaptureToGraph. One handle names both the
// graph (its template) and its executable graph: InstantiateGraph makes the
// latter, DestroyGraphTemplate and DestroyGraphExec destroy each alone,
// DestroyGraph both.
struct SimGraph {
  int device = -1;
  uint64_t id = 0;  // process-unique; 0 = no graph
  explicit operator bool() const { return id != 0; }
};

// The NativeGraph that names `graph` to the Backend primitives
// (RetainUserObjectByGraph).
inline NativeGraph NativeGraphOf(SimGraph graph) {
  return reinterpret_cast<NativeGraph>(static_cast<uintptr_t>(graph.id));
}

class GPUPOOL_EXPORT SimBackend : public Backend {
 public:
  explicit SimBackend(SimOptions options = {});
  // Reports every handle still live on a device that is not poisoned as a
  // misuse ("leaked at destruction").
  ~SimBackend() override;

  SimBackend(const SimBackend&) = delete;
  SimBackend& operator=(const SimBackend&) = delete;

  // --- Backend -------------------------------------------------------------
  std::string_view name() const override { return "sim"; }
  absl::StatusOr<int> DeviceCount() override;
  absl::StatusOr<int> GetCurrentDevice() override;
  absl::Status SetCurrentDevice(int device) override;
  absl::StatusOr<NativeStream> CreateStream(
      int device, const StreamConfig& config) override;
  absl::Status DestroyStream(int device, NativeStream stream) override;
  absl::Status QueryStream(int device, NativeStream stream) override;
  absl::Status SynchronizeStream(int device, NativeStream stream) override;
  absl::StatusOr<CaptureStatus> GetCaptureStatus(int device,
                                                 NativeStream stream) override;
  // The capture's id is process-unique (shared by every SimBackend).
  absl::StatusOr<CaptureInfo> GetCaptureInfo(int device,
                                             NativeStream stream) override;
  absl::Status EndCapture(int device, NativeStream stream) override;
  absl::Status ResetStreamAttributes(int device, NativeStream stream) override;
  // The profile's `stream_attributes` (no runtime call, not counted).
  bool HasResettableStreamAttributes(int device) override;
  absl::Status StreamWaitEvent(int device, NativeStream stream,
                               NativeEvent event) override;
  absl::StatusOr<NativeEvent> CreateEvent(int device,
                                          const EventConfig& config) override;
  absl::Status DestroyEvent(int device, NativeEvent event) override;
  absl::Status RecordEvent(int device, NativeEvent event,
                           NativeStream stream) override;
  absl::Status QueryEvent(int device, NativeEvent event) override;
  absl::Status SynchronizeEvent(int device, NativeEvent event) override;
  absl::StatusOr<void*> Allocate(int device, size_t bytes,
                                 MemoryKind kind) override;
  absl::Status Free(int device, void* ptr, MemoryKind kind) override;
  absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) override;

  // IPC across real processes through a shared-memory registry: the exporter
  // holds each exported allocation's bytes in a shared segment, an importer
  // maps the same segment. Unlike other sim allocations, the pointer
  // OpenIpcHandle returns is host memory and may be dereferenced (it holds
  // the exporter's bytes, see ExportedBytes). Forged or corrupt bytes:
  // InvalidArgument. A stale handle (the exporter freed the allocation or
  // exited): NotFound. Opening this process's own handle: InvalidArgument.
  // Misuse: GetIpcHandle of a pointer that is not a live device allocation's
  // base, CloseIpcHandle of an address that is not open, and a Free of an
  // exported allocation that another process still has mapped (undefined
  // behaviour on CUDA and HIP; the free still happens).
  absl::StatusOr<IpcMemHandle> GetIpcHandle(int device, void* ptr) override;
  absl::StatusOr<void*> OpenIpcHandle(int device,
                                      const IpcMemHandle& handle) override;
  absl::Status CloseIpcHandle(int device, void* ptr) override;
  // The extent of an open IPC mapping (the exporter's allocation size) or of
  // a live allocation of this process containing `ptr`; NotFound otherwise.
  // Not a fault-injection point, and not counted (a pure lookup, like
  // cuMemGetAddressRange's driver-side table walk).
  absl::StatusOr<AddressRange> GetAddressRange(int device, void* ptr) override;

  // User objects as the CUDA Programming Guide describes them ("CUDA User
  // Objects"; docs/backends.md, "User objects in the simulator"): a graph's
  // template holds the references retained on it; InstantiateGraph gives
  // the executable graph a copy of those (a reference retained later is the
  // template's alone); each dies with its holder's destroy. A destructor
  // runs once no reference is left and every launch of an executable graph
  // that held the object completed. ResetDevice drops the device's objects
  // and runs their destructors. The simulator runs due
  // destructors after DestroyGraph, ReleaseUserObject, CompleteAllWork,
  // CompleteWork and stream and event queries and synchronizes, on the
  // calling thread with no lock held. Any primitive called from inside a
  // destructor is a misuse (and fails with kCaller). The graph is
  // NativeGraphOf(graph); an unknown or destroyed one is InvalidArgument.
  absl::StatusOr<NativeUserObject> CreateUserObject(
      int device, UserObjectDestructor destroy, void* data) override;
  absl::Status RetainUserObjectByGraph(int device, NativeGraph graph,
                                       NativeUserObject object) override;
  absl::Status ReleaseUserObject(int device, NativeUserObject object) override;

  // --- Fault injection -----------------------------------------------------
  // The next call of `op` (on `device`, or on any device when -1) returns
  // `status` instead of doing anything — except that an injected failure of
  // a stream or event destroy still invalidates the handle, as the Backend
  // contract says. Injections queue in FIFO order.
  void FailNext(SimOp op, absl::Status status, int device = -1);
  // From now on, queries and synchronizes of `stream` return `status`
  // (default fault class kResource); destroy still succeeds.
  void FaultStream(NativeStream stream, absl::Status status);
  // Sticky error: every later call on `device`, destroy included, returns
  // `sticky` with Fault::kDevice attached. Handles of a poisoned device are
  // not reported as leaks (their context is dead).
  void PoisonDevice(int device, absl::Status sticky);
  // Like cudaDeviceReset: destroys every handle, graph and allocation of
  // `device`, drops its user objects (running their destructors) and clears
  // its poison.
  void ResetDevice(int device);
  // Enqueues work on `stream` that completes after `duration` of real time
  // (absl::InfiniteDuration(): only when CompleteAllWork/CompleteWork runs).
  // On a capturing stream the work is captured, not run (see Graph capture).
  void SubmitWork(NativeStream stream, absl::Duration duration);
  // Completes all pending work on every stream (and so every recorded event).
  void CompleteAllWork();
  // Completes the pending work of one stream.
  void CompleteWork(NativeStream stream);
  // Starts a global-mode graph capture on `stream` (status becomes kActive);
  // a refused begin (already capturing, unknown stream) is reported as
  // misuse. See "Graph capture" below for the full model.
  void BeginCapture(NativeStream stream);
  // Marks a stream attribute as changed from its default (e.g. an L2 access
  // policy window); ResetStreamAttributes clears it. Meaningful only with a
  // profile whose `stream_attributes` is set (else pools never reset).
  void SetStreamAttribute(NativeStream stream);
  // Limits `kind` memory of `device` to `bytes` in total (live allocations
  // included). Allocations beyond it fail with kOutOfMemory.
  void SetMemoryLimit(int device, size_t bytes,
                      MemoryKind kind = MemoryKind::kDevice);

  // --- Graph capture --------------------------------------------------------
  // A model of cudaStreamBeginCapture ... cudaGraphLaunch (docs/backends.md,
  // "Graph capture in the simulator"): work and event records on a
  // capturing stream are captured, not run; querying or synchronizing a
  // capturing stream or a captured event fails and invalidates the capture;
  // a wait on a captured event joins the waiting stream into the capture.
  //
  // Begins a capture on `stream` with a fresh process-unique id.
  // `owner` names, for the graph oracle, whose memory the graph may touch
  // (see ClaimMemory); 0 means nobody's claims. FailedPrecondition when the
  // stream is already capturing; InvalidArgument for the null stream.
  absl::Status BeginCapture(NativeStream stream, SimCaptureMode mode,
                            uint64_t owner = 0);
  // Ends the capture begun on `stream` and returns its graph (caller owns it:
  // DestroyGraph). An invalidated capture ends with FailedPrecondition and no
  // graph; a stream joined into another's capture, or a non-Relaxed capture
  // ended from another thread, fails with FailedPrecondition and the capture
  // is invalidated (cudaErrorStreamCaptureUnmatched / WrongThread).
  absl::StatusOr<SimGraph> EndCaptureToGraph(NativeStream stream);
  // Makes `graph`'s executable graph (cudaGraphInstantiate), which holds a
  // copy of the template's user-object references; instantiating again
  // replaces it. InvalidArgument once the template is destroyed.
  absl::Status InstantiateGraph(SimGraph graph);
  // Replays the graph's captured work on `stream` (each piece again, with its
  // duration). The oracle checks every range the graph touches: freed, or
  // claimed by an owner other than the graph's, counts as a graph misuse.
  // FailedPrecondition when not instantiated; Unimplemented into a capture.
  absl::Status LaunchGraph(SimGraph graph, NativeStream stream);
  // Destroys the graph (its exec with it). A launch still running finishes.
  absl::Status DestroyGraph(SimGraph graph);
  // Destroys the template alone (cudaGraphDestroy): the executable graph
  // stays launchable; retaining on or instantiating the graph is
  // InvalidArgument from now on.
  absl::Status DestroyGraphTemplate(SimGraph graph);
  // Destroys the executable graph alone (cudaGraphExecDestroy); a launch
  // still running finishes. InvalidArgument when not instantiated.
  absl::Status DestroyGraphExec(SimGraph graph);
  // Work on `stream` that reads or writes [ptr, ptr + bytes), which must lie
  // in one live allocation (else misuse). Captured when the stream captures.
  void TouchMemory(NativeStream stream, const void* ptr, size_t bytes = 1);
  // Declares [ptr, ptr + bytes) as holding `owner`'s data until
  // ReleaseClaim(ptr): tests claim what an allocator leased them.
  void ClaimMemory(const void* ptr, size_t bytes, uint64_t owner);
  void ReleaseClaim(const void* ptr);
  // Graph inspection: live graphs of `device`, whether the latest launch of
  // `graph` is still running, and launches that broke the oracle.
  int live_graphs(int device) const;
  bool graph_launch_pending(SimGraph graph) const;
  int64_t graph_misuses() const;
  std::vector<std::string> graph_misuse_log() const;
  // User objects whose destructor has not run yet.
  int live_user_objects() const;

  // --- Inspection ----------------------------------------------------------
  int live_streams(int device) const;
  int64_t streams_created() const;
  int64_t streams_destroyed() const;
  int live_events(int device) const;
  int64_t events_created() const;
  int64_t events_destroyed() const;
  int live_allocations(int device) const;
  size_t bytes_allocated(int device,
                         MemoryKind kind = MemoryKind::kDevice) const;
  int64_t allocations_made() const;
  int64_t allocations_freed() const;
  // Calls of `op` so far (injected failures included); all ops summed.
  int64_t calls(SimOp op) const;
  int64_t total_calls() const;
  // Calls that named `device` (to check that a poisoned device is left alone).
  int64_t calls_on_device(int device) const;
  // StreamWaitEvent edges recorded so far.
  int64_t stream_wait_edges() const;
  // Handle state, for tests. False/kNone for unknown handles (no misuse).
  bool is_live_stream(NativeStream stream) const;
  bool is_live_event(NativeEvent event) const;
  bool has_pending_work(NativeStream stream) const;
  bool attributes_dirty(NativeStream stream) const;
  bool is_poisoned(int device) const;
  // Misuse detected so far: count and messages (in order).
  int64_t misuse_count() const;
  std::vector<std::string> misuse_messages() const;
  // Live handles on devices that are not poisoned, as misuse would report
  // them at destruction; OK when none.
  absl::Status CheckNoLeaks() const;

  const SimProfile& profile() const;

  // --- IPC inspection --------------------------------------------------------
  // Host view of the bytes of an allocation this process exported (what
  // importers read); nullptr when `ptr` was not exported or was freed.
  void* ExportedBytes(void* ptr) const;
  // Processes that have the allocation this process exported at `ptr`
  // mapped now (0 when not exported).
  int ipc_importers(void* ptr) const;
  // Allocations exported (segments created), segments mapped and unmapped by
  // this process, and mappings open now.
  int64_t ipc_exports() const;
  int64_t ipc_maps() const;
  int64_t ipc_unmaps() const;
  int ipc_mappings_live() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpupool

#endif  // GPUPOOL_SIM_BACKEND_H_
