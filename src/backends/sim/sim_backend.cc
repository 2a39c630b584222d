// SimBackend: owns the simulator's models and forwards its Backend
// primitives, test controls and inspection to them:
//
//   SimMisuseLog      sim_misuse.h   misuse count, log and hook
//   SimFaultInjector  sim_faults.h   call counts and FailNext injections
//   SimDevices        sim_device.h   devices (DeviceState: streams, events,
//                                    work tickets, poison), current device
//   SimStreams        sim_streams.h  stream primitives and controls
//   SimEvents         sim_events.h   event primitives
//   SimMemory         sim_memory.h   allocations, limits, the IPC primitives
//   SimIpcRegistry    sim_ipc.h      the shared-memory IPC registry
//   SimCaptureModel   sim_capture.h  open captures and their rules
//   SimGraphModel     sim_graphs.h   graphs, launches, the graph oracle
//   SimUserObjects    sim_user_objects.h  user objects, deferred destructors
//
// Every primitive follows the same order, so tests can rely on it:
//   1. count the call (per op, and per device when it names a valid one);
//   2. consume a matching FailNext injection: return it, do nothing else;
//   3. reject an out-of-range device (kCaller);
//   4. return the sticky status of a poisoned device (kDevice);
//   5. check arguments and handles (misuse → kCaller, nothing changes);
//   6. charge the profile's latency outside every lock, and do the work.
//
// Lock order (a model that needs another takes the locks in this order):
//   DeviceState::mu (per device) → SimCaptureModel's per-device mutex →
//   SimGraphModel's per-device mutex → SimMemory's per-device mutex →
//   SimIpcRegistry's mutex; SimUserObjects' mutex is taken after a device's
//   (the leak check) or alone, never before another. The misuse log's, the
//   injection queue's and the graph oracle log's mutexes are leaves: nothing is
//   taken under them, and the misuse hook runs under no lock at all.

#include "gpupool/sim_backend.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "src/backends/sim/sim_capture.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_events.h"
#include "src/backends/sim/sim_faults.h"
#include "src/backends/sim/sim_graphs.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_ipc.h"
#include "src/backends/sim/sim_memory.h"
#include "src/backends/sim/sim_misuse.h"
#include "src/backends/sim/sim_streams.h"
#include "src/backends/sim/sim_user_objects.h"

namespace gpupool {

using sim_internal::DeviceState;

// The models, in construction order: each is built after those it uses.
struct SimBackend::State {
  explicit State(SimOptions opts)
      : options(std::move(opts)),
        // Fake addresses give each device two 2^56-byte regions in 64 bits.
        device_count(std::clamp(options.device_count, 0,
                                sim_internal::kMaxAddressDevices)),
        misuse(options.on_misuse),
        faults(device_count, misuse),
        devices(device_count, faults, misuse),
        ipc(options.ipc_namespace),
        memory(options.memory_per_device, options.profile, faults, devices,
               misuse, ipc),
        captures(options.profile, faults, devices, memory, misuse),
        graphs(devices, captures, memory, misuse),
        streams(options.profile, faults, devices, captures, misuse),
        events(options.profile, faults, devices, captures, misuse),
        user_objects(faults, devices, graphs, misuse) {}

  // Live handles on devices that are not poisoned, sorted per device for
  // stable output.
  std::vector<std::string> CollectLeaks() const {
    std::vector<std::string> leaks;
    for (int device = 0; device < device_count; ++device) {
      const DeviceState& d = devices.device(device);
      sim_internal::LeakList found;
      {
        absl::ReaderMutexLock lock(&d.mu);
        if (d.poisoned) continue;
        d.AppendLeaks(&found);
        memory.AppendLeaks(device, &found);
        graphs.AppendLeaks(d, &found);
        user_objects.AppendLeaks(device, &found);
      }
      std::sort(found.begin(), found.end());
      for (auto& entry : found) leaks.push_back(std::move(entry.second));
    }
    return leaks;
  }

  const SimOptions options;
  const int device_count;
  sim_internal::SimMisuseLog misuse;
  sim_internal::SimFaultInjector faults;
  sim_internal::SimDevices devices;
  sim_internal::SimIpcRegistry ipc;
  sim_internal::SimMemory memory;
  sim_internal::SimCaptureModel captures;
  sim_internal::SimGraphModel graphs;
  sim_internal::SimStreams streams;
  sim_internal::SimEvents events;
  sim_internal::SimUserObjects user_objects;
};

SimBackend::SimBackend(SimOptions options)
    : state_(std::make_unique<State>(std::move(options))) {}

SimBackend::~SimBackend() {
  for (std::string& leak : state_->CollectLeaks()) {
    state_->misuse.Report(absl::StrCat("leaked at destruction: ", leak));
  }
}

// --- Backend: devices and streams
// ---------------------------------------------

absl::StatusOr<int> SimBackend::DeviceCount() {
  return state_->devices.DeviceCount();
}
absl::StatusOr<int> SimBackend::GetCurrentDevice() {
  return state_->devices.GetCurrentDevice();
}
absl::Status SimBackend::SetCurrentDevice(int device) {
  return state_->devices.SetCurrentDevice(device);
}
absl::StatusOr<NativeStream> SimBackend::CreateStream(
    int device, const StreamConfig& config) {
  return state_->streams.CreateStream(device, config);
}
absl::Status SimBackend::DestroyStream(int device, NativeStream stream) {
  return state_->streams.DestroyStream(device, stream);
}
absl::Status SimBackend::QueryStream(int device, NativeStream stream) {
  state_->user_objects.Sweep();
  return state_->streams.QueryStream(device, stream);
}
absl::Status SimBackend::SynchronizeStream(int device, NativeStream stream) {
  absl::Status status = state_->streams.SynchronizeStream(device, stream);
  state_->user_objects.Sweep();
  return status;
}
absl::StatusOr<CaptureStatus> SimBackend::GetCaptureStatus(
    int device, NativeStream stream) {
  return state_->captures.GetCaptureStatus(device, stream);
}
absl::StatusOr<CaptureInfo> SimBackend::GetCaptureInfo(int device,
                                                       NativeStream stream) {
  return state_->captures.GetCaptureInfo(device, stream);
}
absl::Status SimBackend::EndCapture(int device, NativeStream stream) {
  return state_->captures.EndCapture(device, stream);
}
absl::Status SimBackend::ResetStreamAttributes(int device,
                                               NativeStream stream) {
  return state_->streams.ResetStreamAttributes(device, stream);
}
bool SimBackend::HasResettableStreamAttributes(int) {
  return state_->options.profile.stream_attributes;
}
absl::Status SimBackend::StreamWaitEvent(int device, NativeStream stream,
                                         NativeEvent event) {
  return state_->streams.StreamWaitEvent(device, stream, event);
}

// --- Backend: events
// ----------------------------------------------------------

absl::StatusOr<NativeEvent> SimBackend::CreateEvent(int device,
                                                    const EventConfig& config) {
  return state_->events.CreateEvent(device, config);
}
absl::Status SimBackend::DestroyEvent(int device, NativeEvent event) {
  return state_->events.DestroyEvent(device, event);
}
absl::Status SimBackend::RecordEvent(int device, NativeEvent event,
                                     NativeStream stream) {
  return state_->events.RecordEvent(device, event, stream);
}
absl::Status SimBackend::QueryEvent(int device, NativeEvent event) {
  state_->user_objects.Sweep();
  return state_->events.QueryEvent(device, event);
}
absl::Status SimBackend::SynchronizeEvent(int device, NativeEvent event) {
  absl::Status status = state_->events.SynchronizeEvent(device, event);
  state_->user_objects.Sweep();
  return status;
}

// --- Backend: memory and IPC
// --------------------------------------------------

absl::StatusOr<void*> SimBackend::Allocate(int device, size_t bytes,
                                           MemoryKind kind) {
  return state_->memory.Allocate(device, bytes, kind);
}
absl::Status SimBackend::Free(int device, void* ptr, MemoryKind kind) {
  return state_->memory.Free(device, ptr, kind);
}
absl::StatusOr<MemoryInfo> SimBackend::GetMemoryInfo(int device) {
  return state_->memory.GetMemoryInfo(device);
}
absl::StatusOr<IpcMemHandle> SimBackend::GetIpcHandle(int device, void* ptr) {
  return state_->memory.GetIpcHandle(device, ptr);
}
absl::StatusOr<void*> SimBackend::OpenIpcHandle(int device,
                                                const IpcMemHandle& handle) {
  return state_->memory.OpenIpcHandle(device, handle);
}
absl::Status SimBackend::CloseIpcHandle(int device, void* ptr) {
  return state_->memory.CloseIpcHandle(device, ptr);
}
absl::StatusOr<AddressRange> SimBackend::GetAddressRange(int device,
                                                         void* ptr) {
  return state_->memory.GetAddressRange(device, ptr);
}

// --- Fault injection and test controls
// ----------------------------------------

void SimBackend::FailNext(SimOp op, absl::Status status, int device) {
  if (status.ok()) {
    // An injected OK would make a StatusOr primitive ill-formed.
    state_->misuse.Report(absl::StrCat(
        "FailNext(", SimOpName(op), "): the injected status must not be OK"));
    return;
  }
  state_->faults.Queue(op, std::move(status), device);
}
void SimBackend::FaultStream(NativeStream stream, absl::Status status) {
  state_->streams.FaultStream(stream, std::move(status));
}
void SimBackend::PoisonDevice(int device, absl::Status sticky) {
  state_->devices.PoisonDevice(device, std::move(sticky));
}
// Spans the models: under the device's lock, in the lock order above.
void SimBackend::ResetDevice(int device) {
  if (!state_->devices.ValidDevice(device)) {
    state_->misuse.Report(
        absl::StrCat("ResetDevice: device ", device, " out of range"));
    return;
  }
  DeviceState& d = state_->devices.device(device);
  {
    absl::MutexLock lock(&d.mu);
    state_->captures.ResetDevice(d);
    state_->graphs.ResetDevice(d);
    state_->memory.ResetDevice(device);
    d.ResetLocked();
  }
  // After the device's lock: destructors run with no lock held.
  state_->user_objects.ResetDevice(device);
}
void SimBackend::SubmitWork(NativeStream stream, absl::Duration duration) {
  state_->streams.SubmitWork(stream, duration);
}
void SimBackend::CompleteAllWork() {
  state_->devices.CompleteAllWork();
  state_->user_objects.Sweep();
}
void SimBackend::CompleteWork(NativeStream stream) {
  state_->streams.CompleteWork(stream);
  state_->user_objects.Sweep();
}
void SimBackend::BeginCapture(NativeStream stream) {
  absl::Status status = BeginCapture(stream, SimCaptureMode::kGlobal);
  if (!status.ok()) {
    state_->misuse.Report(std::string(MessageWithoutFault(status)));
  }
}
void SimBackend::SetStreamAttribute(NativeStream stream) {
  state_->streams.SetStreamAttribute(stream);
}
void SimBackend::SetMemoryLimit(int device, size_t bytes, MemoryKind kind) {
  state_->memory.SetMemoryLimit(device, bytes, kind);
}

// --- Graph capture
// ------------------------------------------------------------

absl::Status SimBackend::BeginCapture(NativeStream stream, SimCaptureMode mode,
                                      uint64_t owner) {
  return state_->captures.BeginCapture(stream, mode, owner);
}
absl::StatusOr<SimGraph> SimBackend::EndCaptureToGraph(NativeStream stream) {
  return state_->graphs.EndCaptureToGraph(stream);
}
absl::Status SimBackend::InstantiateGraph(SimGraph graph) {
  absl::Status status = state_->graphs.InstantiateGraph(graph);
  if (status.ok()) state_->user_objects.NoteInstantiated(graph.id);
  return status;
}
absl::Status SimBackend::LaunchGraph(SimGraph graph, NativeStream stream) {
  std::vector<uint64_t> tickets;
  absl::Status status = state_->graphs.LaunchGraph(graph, stream, &tickets);
  if (status.ok()) state_->user_objects.NoteLaunch(graph.id, tickets);
  return status;
}
absl::Status SimBackend::DestroyGraph(SimGraph graph) {
  absl::Status status = state_->graphs.DestroyGraph(graph);
  if (status.ok()) {
    state_->user_objects.NoteGraphDestroyed(graph.id, /*template_gone=*/true,
                                            /*exec_gone=*/true);
  }
  return status;
}
absl::Status SimBackend::DestroyGraphTemplate(SimGraph graph) {
  absl::Status status = state_->graphs.DestroyGraphTemplate(graph);
  if (status.ok()) {
    state_->user_objects.NoteGraphDestroyed(graph.id, /*template_gone=*/true,
                                            /*exec_gone=*/false);
  }
  return status;
}
absl::Status SimBackend::DestroyGraphExec(SimGraph graph) {
  absl::Status status = state_->graphs.DestroyGraphExec(graph);
  if (status.ok()) {
    state_->user_objects.NoteGraphDestroyed(graph.id, /*template_gone=*/false,
                                            /*exec_gone=*/true);
  }
  return status;
}
void SimBackend::TouchMemory(NativeStream stream, const void* ptr,
                             size_t bytes) {
  state_->captures.TouchMemory(stream, ptr, bytes);
}
void SimBackend::ClaimMemory(const void* ptr, size_t bytes, uint64_t owner) {
  state_->graphs.ClaimMemory(ptr, bytes, owner);
}
void SimBackend::ReleaseClaim(const void* ptr) {
  state_->graphs.ReleaseClaim(ptr);
}
int SimBackend::live_graphs(int device) const {
  return state_->graphs.live_graphs(device);
}
bool SimBackend::graph_launch_pending(SimGraph graph) const {
  return state_->graphs.graph_launch_pending(graph);
}
int64_t SimBackend::graph_misuses() const {
  return state_->graphs.graph_misuses();
}
std::vector<std::string> SimBackend::graph_misuse_log() const {
  return state_->graphs.graph_misuse_log();
}

// --- Inspection
// ---------------------------------------------------------------

int SimBackend::live_streams(int device) const {
  return state_->streams.live_streams(device);
}
int64_t SimBackend::streams_created() const {
  return state_->devices.Sum(&DeviceState::streams_created);
}
int64_t SimBackend::streams_destroyed() const {
  return state_->devices.Sum(&DeviceState::streams_destroyed);
}
int SimBackend::live_events(int device) const {
  return state_->events.live_events(device);
}
int64_t SimBackend::events_created() const {
  return state_->devices.Sum(&DeviceState::events_created);
}
int64_t SimBackend::events_destroyed() const {
  return state_->devices.Sum(&DeviceState::events_destroyed);
}
int SimBackend::live_allocations(int device) const {
  return state_->memory.live_allocations(device);
}
size_t SimBackend::bytes_allocated(int device, MemoryKind kind) const {
  return state_->memory.bytes_allocated(device, kind);
}
int64_t SimBackend::allocations_made() const {
  return state_->memory.allocations_made();
}
int64_t SimBackend::allocations_freed() const {
  return state_->memory.allocations_freed();
}
int64_t SimBackend::calls(SimOp op) const { return state_->faults.calls(op); }
int64_t SimBackend::total_calls() const { return state_->faults.total_calls(); }
int64_t SimBackend::calls_on_device(int device) const {
  return state_->faults.calls_on_device(device);
}
int64_t SimBackend::stream_wait_edges() const {
  return state_->devices.Sum(&DeviceState::wait_edges);
}
bool SimBackend::is_live_stream(NativeStream stream) const {
  return state_->streams.is_live_stream(stream);
}
bool SimBackend::is_live_event(NativeEvent event) const {
  return state_->events.is_live_event(event);
}
bool SimBackend::has_pending_work(NativeStream stream) const {
  return state_->streams.has_pending_work(stream);
}
bool SimBackend::attributes_dirty(NativeStream stream) const {
  return state_->streams.attributes_dirty(stream);
}
bool SimBackend::is_poisoned(int device) const {
  return state_->devices.is_poisoned(device);
}
int64_t SimBackend::misuse_count() const { return state_->misuse.count(); }
std::vector<std::string> SimBackend::misuse_messages() const {
  return state_->misuse.messages();
}
absl::Status SimBackend::CheckNoLeaks() const {
  std::vector<std::string> leaks = state_->CollectLeaks();
  if (leaks.empty()) return absl::OkStatus();
  constexpr size_t kShown = 10;
  std::string shown = absl::StrJoin(
      leaks.begin(), leaks.begin() + std::min(leaks.size(), kShown), "; ");
  if (leaks.size() > kShown) absl::StrAppend(&shown, "; ...");
  return absl::FailedPreconditionError(
      absl::StrCat("sim: ", leaks.size(), " handle(s) still live: ", shown));
}
const SimProfile& SimBackend::profile() const {
  return state_->options.profile;
}

// --- IPC inspection
// -----------------------------------------------------------

void* SimBackend::ExportedBytes(void* ptr) const {
  return state_->ipc.ExportedBytes(reinterpret_cast<uintptr_t>(ptr));
}
int SimBackend::ipc_importers(void* ptr) const {
  return state_->ipc.ImportersOf(reinterpret_cast<uintptr_t>(ptr));
}
int64_t SimBackend::ipc_exports() const { return state_->ipc.exports(); }
int64_t SimBackend::ipc_maps() const { return state_->ipc.maps(); }
int64_t SimBackend::ipc_unmaps() const { return state_->ipc.unmaps(); }
int SimBackend::ipc_mappings_live() const {
  return state_->ipc.mappings_live();
}

// --- User objects -----------------------------------------------------------

absl::StatusOr<NativeUserObject> SimBackend::CreateUserObject(
    int device, UserObjectDestructor destroy, void* data) {
  return state_->user_objects.Create(device, destroy, data);
}
absl::Status SimBackend::RetainUserObjectByGraph(int device, NativeGraph graph,
                                                 NativeUserObject object) {
  return state_->user_objects.RetainByGraph(device, graph, object);
}
absl::Status SimBackend::ReleaseUserObject(int device,
                                           NativeUserObject object) {
  return state_->user_objects.Release(device, object);
}
int SimBackend::live_user_objects() const {
  return state_->user_objects.live_user_objects();
}

}  // namespace gpupool
