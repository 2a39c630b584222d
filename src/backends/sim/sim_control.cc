// SimBackend test controls (fault injection, work, attributes, memory
// limits) and inspection; the capture controls are in sim_capture.cc. The
// Backend primitives are in sim_backend.cc.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_state.h"

namespace gpupool {

using sim_internal::DecodeHandle;
using sim_internal::DeviceState;
using sim_internal::HandleValue;
using sim_internal::InjectedFailure;
using sim_internal::KindIndex;
using sim_internal::MemoryAccount;
using sim_internal::StreamState;

// --- Fault injection ---------------------------------------------------------

void SimBackend::FailNext(SimOp op, absl::Status status, int device) {
  if (status.ok()) {
    // An injected OK would make a StatusOr primitive ill-formed.
    state_->ReportMisuse(absl::StrCat("FailNext(", SimOpName(op),
                                      "): the injected status must not be OK"));
    return;
  }
  absl::MutexLock lock(&state_->injection_mu);
  state_->injected.push_back(InjectedFailure{op, device, std::move(status)});
  state_->queued_failures.fetch_add(1, std::memory_order_release);
}

void SimBackend::FaultStream(NativeStream stream, absl::Status status) {
  int device = state_->DeviceOfHandle(stream, "FaultStream");
  if (device < 0) return;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "FaultStream", misuse);
  if (!found.ok()) return;
  if (!status.ok() && !status.GetPayload(kFaultPayloadUrl).has_value()) {
    status = WithFault(std::move(status), Fault::kResource);
  }
  (*found)->fault = std::move(status);
  d.changed.SignalAll();
}

void SimBackend::PoisonDevice(int device, absl::Status sticky) {
  if (!state_->ValidDevice(device)) {
    state_->ReportMisuse(
        absl::StrCat("PoisonDevice: device ", device, " out of range"));
    return;
  }
  if (sticky.ok()) sticky = absl::InternalError("sim: device poisoned");
  DeviceState& d = state_->device_state(device);
  absl::MutexLock lock(&d.mu);
  d.poisoned = true;
  d.sticky = WithFault(std::move(sticky), Fault::kDevice);
  d.changed.SignalAll();
}

void SimBackend::ResetDevice(int device) {
  if (!state_->ValidDevice(device)) {
    state_->ReportMisuse(
        absl::StrCat("ResetDevice: device ", device, " out of range"));
    return;
  }
  DeviceState& d = state_->device_state(device);
  absl::MutexLock lock(&d.mu);
  // Handle ids and address offsets carry on, so old handles stay detectable.
  d.streams_destroyed.fetch_add(static_cast<int64_t>(d.streams.size()),
                                std::memory_order_relaxed);
  d.events_destroyed.fetch_add(static_cast<int64_t>(d.events.size()),
                               std::memory_order_relaxed);
  d.allocations_freed.fetch_add(static_cast<int64_t>(d.allocations.size()),
                                std::memory_order_relaxed);
  d.streams.clear();
  d.events.clear();
  d.allocations.clear();
  d.capture = sim_internal::CaptureModel();
  for (MemoryAccount& account : d.memory) account.live_bytes = 0;
  d.CompleteAllTickets();
  d.poisoned = false;
  d.sticky = absl::OkStatus();
  d.changed.SignalAll();
}

void SimBackend::SubmitWork(NativeStream stream, absl::Duration duration) {
  int device = state_->DeviceOfHandle(stream, "SubmitWork");
  if (device < 0) return;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "SubmitWork", misuse);
  if (!found.ok() || duration <= absl::ZeroDuration()) return;
  if ((*found)->capture != CaptureStatus::kNone) {
    // Captured, not run: a graph node every launch replays (an invalidated
    // capture records nothing more).
    auto capture = d.capture.captures.find((*found)->capture_id);
    if (capture != d.capture.captures.end() && !capture->second.invalidated) {
      capture->second.work.push_back(sim_internal::CapturedWork{duration, {}});
    }
    return;
  }
  absl::Time now = absl::Now();
  absl::Time deadline = duration == absl::InfiniteDuration()
                            ? absl::InfiniteFuture()
                            : now + duration;
  absl::Time latest;
  d.PruneWork(&(*found)->work, now, &latest);
  (*found)->work.push_back(d.AddTicket(deadline));
}

void SimBackend::CompleteAllWork() {
  for (const std::unique_ptr<DeviceState>& d : state_->devices) {
    absl::MutexLock lock(&d->mu);
    d->CompleteAllTickets();
  }
}

void SimBackend::CompleteWork(NativeStream stream) {
  int device = state_->DeviceOfHandle(stream, "CompleteWork");
  if (device < 0) return;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "CompleteWork", misuse);
  if (!found.ok()) return;
  d.CompleteTickets(&(*found)->work);
}

// BeginCapture and the other capture controls: sim_capture.cc.

void SimBackend::SetStreamAttribute(NativeStream stream) {
  int device = state_->DeviceOfHandle(stream, "SetStreamAttribute");
  if (device < 0) return;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "SetStreamAttribute", misuse);
  if (!found.ok()) return;
  (*found)->attributes_dirty = true;
}

void SimBackend::SetMemoryLimit(int device, size_t bytes, MemoryKind kind) {
  if (!state_->ValidDevice(device)) {
    state_->ReportMisuse(
        absl::StrCat("SetMemoryLimit: device ", device, " out of range"));
    return;
  }
  DeviceState& d = state_->device_state(device);
  absl::MutexLock lock(&d.mu);
  d.memory[KindIndex(kind)].limit = bytes;
}

// --- Inspection --------------------------------------------------------------

namespace {

// Sums one counter over all devices.
template <typename Counter>
int64_t SumOverDevices(const std::vector<std::unique_ptr<DeviceState>>& devices,
                       Counter counter) {
  int64_t sum = 0;
  for (const std::unique_ptr<DeviceState>& d : devices) {
    sum += counter(*d).load(std::memory_order_relaxed);
  }
  return sum;
}

}  // namespace

int SimBackend::live_streams(int device) const {
  if (!state_->ValidDevice(device)) return 0;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  return static_cast<int>(d.streams.size());
}

int64_t SimBackend::streams_created() const {
  return SumOverDevices(
      state_->devices,
      [](const DeviceState& d) -> auto& { return d.streams_created; });
}

int64_t SimBackend::streams_destroyed() const {
  return SumOverDevices(
      state_->devices,
      [](const DeviceState& d) -> auto& { return d.streams_destroyed; });
}

int SimBackend::live_events(int device) const {
  if (!state_->ValidDevice(device)) return 0;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  return static_cast<int>(d.events.size());
}

int64_t SimBackend::events_created() const {
  return SumOverDevices(
      state_->devices,
      [](const DeviceState& d) -> auto& { return d.events_created; });
}

int64_t SimBackend::events_destroyed() const {
  return SumOverDevices(
      state_->devices,
      [](const DeviceState& d) -> auto& { return d.events_destroyed; });
}

int SimBackend::live_allocations(int device) const {
  if (!state_->ValidDevice(device)) return 0;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  return static_cast<int>(d.allocations.size());
}

size_t SimBackend::bytes_allocated(int device, MemoryKind kind) const {
  if (!state_->ValidDevice(device)) return 0;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  return d.memory[KindIndex(kind)].live_bytes;
}

int64_t SimBackend::allocations_made() const {
  return SumOverDevices(
      state_->devices,
      [](const DeviceState& d) -> auto& { return d.allocations_made; });
}

int64_t SimBackend::allocations_freed() const {
  return SumOverDevices(
      state_->devices,
      [](const DeviceState& d) -> auto& { return d.allocations_freed; });
}

int64_t SimBackend::calls(SimOp op) const {
  int index = static_cast<int>(op);
  return state_->calls_without_device[index].load(std::memory_order_relaxed) +
         SumOverDevices(
             state_->devices, [index](const DeviceState& d) -> auto& {
               return d.op_calls[index];
             });
}

int64_t SimBackend::total_calls() const {
  int64_t total = 0;
  for (int op = 0; op < kSimOpCount; ++op)
    total += calls(static_cast<SimOp>(op));
  return total;
}

int64_t SimBackend::calls_on_device(int device) const {
  if (!state_->ValidDevice(device)) return 0;
  int64_t total = 0;
  for (const std::atomic<int64_t>& count : state_->devices[device]->op_calls) {
    total += count.load(std::memory_order_relaxed);
  }
  return total;
}

int64_t SimBackend::stream_wait_edges() const {
  return SumOverDevices(
      state_->devices,
      [](const DeviceState& d) -> auto& { return d.wait_edges; });
}

bool SimBackend::is_live_stream(NativeStream stream) const {
  int device = DecodeHandle(HandleValue(stream)).device;
  if (!state_->ValidDevice(device)) return false;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  return d.streams.contains(HandleValue(stream));
}

bool SimBackend::is_live_event(NativeEvent event) const {
  int device = DecodeHandle(HandleValue(event)).device;
  if (!state_->ValidDevice(device)) return false;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  return d.events.contains(HandleValue(event));
}

bool SimBackend::has_pending_work(NativeStream stream) const {
  int device = DecodeHandle(HandleValue(stream)).device;
  if (!state_->ValidDevice(device)) return false;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  auto it = d.streams.find(HandleValue(stream));
  return it != d.streams.end() &&
         d.HasPendingWork(it->second.work, absl::Now());
}

bool SimBackend::attributes_dirty(NativeStream stream) const {
  int device = DecodeHandle(HandleValue(stream)).device;
  if (!state_->ValidDevice(device)) return false;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  auto it = d.streams.find(HandleValue(stream));
  return it != d.streams.end() && it->second.attributes_dirty;
}

bool SimBackend::is_poisoned(int device) const {
  if (!state_->ValidDevice(device)) return false;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  return d.poisoned;
}

int64_t SimBackend::misuse_count() const {
  return state_->misuse_count.load(std::memory_order_relaxed);
}

std::vector<std::string> SimBackend::misuse_messages() const {
  absl::MutexLock lock(&state_->misuse_mu);
  return state_->misuse_messages;
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

// Graph inspection (the capture model is in sim_capture.cc).

int SimBackend::live_graphs(int device) const {
  if (!state_->ValidDevice(device)) return 0;
  const DeviceState& d = *state_->devices[device];
  absl::ReaderMutexLock lock(&d.mu);
  return static_cast<int>(d.capture.graphs.size());
}

bool SimBackend::graph_launch_pending(SimGraph graph) const {
  if (!state_->ValidDevice(graph.device)) return false;
  const DeviceState& d = *state_->devices[graph.device];
  absl::ReaderMutexLock lock(&d.mu);
  auto it = d.capture.graphs.find(graph.id);
  return it != d.capture.graphs.end() &&
         d.HasPendingWork(it->second.last_launch, absl::Now());
}

int64_t SimBackend::graph_misuses() const {
  return state_->graph_misuse_count.load(std::memory_order_relaxed);
}

std::vector<std::string> SimBackend::graph_misuse_log() const {
  absl::MutexLock lock(&state_->graph_misuse_mu);
  return state_->graph_misuse_log;
}

const SimProfile& SimBackend::profile() const {
  return state_->options.profile;
}

}  // namespace gpupool
