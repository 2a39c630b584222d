// SimEvents: event primitives and inspection (sim_events.h), in the order of
// checks every primitive follows (sim_backend.cc lists it).

#include "src/backends/sim/sim_events.h"

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_support.h"

namespace gpupool {
namespace sim_internal {

SimEvents::SimEvents(const SimProfile& profile, SimFaultInjector& faults,
                     SimDevices& devices, SimCaptureModel& captures,
                     SimMisuseLog& misuse)
    : profile_(profile),
      faults_(faults),
      devices_(devices),
      captures_(captures),
      misuse_(misuse) {}

// --- Backend primitives ------------------------------------------------------

absl::StatusOr<NativeEvent> SimEvents::CreateEvent(int device,
                                                   const EventConfig& config) {
  absl::Status status = faults_.Enter(SimOp::kEventCreate, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  status = d.PoisonStatus();
  if (!status.ok()) return status;
  if (config.interprocess && !config.disable_timing) {
    return CallerError(
        absl::StatusCode::kInvalidArgument,
        "CreateEvent: an interprocess event requires disable_timing");
  }
  ChargeLatency(profile_.event_create);
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<uintptr_t> handle = d.NewHandleLocked(HandleKind::kEvent);
  if (!handle.ok()) return handle.status();
  EventState event;
  event.config = config;
  d.events.emplace(*handle, std::move(event));
  d.events_created.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<NativeEvent>(*handle);
}

absl::Status SimEvents::DestroyEvent(int device, NativeEvent event) {
  absl::Status status = faults_.Enter(SimOp::kEventDestroy, device);
  if (!status.ok()) {
    return devices_.FailDestroy(std::move(status), device, HandleKind::kEvent,
                                HandleValue(event));
  }
  DeviceState& d = devices_.device(device);
  {
    SimMisuseLog::Reporter misuse(misuse_);
    absl::MutexLock lock(&d.mu);
    if (d.poisoned) return d.sticky;
    absl::StatusOr<EventState*> found =
        d.FindEvent(event, "DestroyEvent", misuse, /*destroying=*/true);
    if (!found.ok()) return found.status();
    d.Forget(HandleKind::kEvent, HandleValue(event));
  }
  ChargeLatency(profile_.event_destroy);
  return absl::OkStatus();
}

absl::Status SimEvents::RecordEvent(int device, NativeEvent event,
                                    NativeStream stream) {
  absl::Status status = faults_.Enter(SimOp::kEventRecord, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<EventState*> recorded =
      d.FindEvent(event, "RecordEvent", misuse);
  if (!recorded.ok()) return recorded.status();
  if (stream == nullptr) {
    (*recorded)->work.clear();
    (*recorded)->captured_in = 0;
    return absl::OkStatus();
  }
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "RecordEvent", misuse);
  if (!found.ok()) return found.status();
  if ((*found)->capture == CaptureStatus::kInvalidated) {
    return CallerError(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("RecordEvent: stream ", Hex(HandleValue(stream)),
                     " has an invalidated capture"));
  }
  if ((*found)->capture == CaptureStatus::kActive) {
    // A captured event: a node of the graph, not a point in executed work.
    (*recorded)->work.clear();
    (*recorded)->captured_in = (*found)->capture_id;
    return absl::OkStatus();
  }
  absl::Time latest;
  d.PruneWork(&(*found)->work, absl::Now(), &latest);
  (*recorded)->work = (*found)->work;
  (*recorded)->captured_in = 0;
  return absl::OkStatus();
}

absl::Status SimEvents::QueryEvent(int device, NativeEvent event) {
  absl::Status status = faults_.Enter(SimOp::kEventQuery, device);
  if (!status.ok()) return status;
  ChargeLatency(profile_.query);
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<EventState*> found = d.FindEvent(event, "QueryEvent", misuse);
  if (!found.ok()) return found.status();
  if (absl::Status captured = captures_.RefuseCapturedEvent(
          d, **found, "QueryEvent", HandleValue(event));
      !captured.ok()) {
    return captured;
  }
  absl::Time latest;
  if (d.PruneWork(&(*found)->work, absl::Now(), &latest)) {
    return NotReady("event", HandleValue(event));
  }
  return absl::OkStatus();
}

absl::Status SimEvents::SynchronizeEvent(int device, NativeEvent event) {
  absl::Status status = faults_.Enter(SimOp::kEventSynchronize, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<EventState*> found =
      d.FindEvent(event, "SynchronizeEvent", misuse);
  if (!found.ok()) return found.status();
  if (absl::Status captured = captures_.RefuseCapturedEvent(
          d, **found, "SynchronizeEvent", HandleValue(event));
      !captured.ok()) {
    return captured;
  }
  switch (d.WaitEventIdle(HandleValue(event))) {
    case WaitResult::kIdle:
    case WaitResult::kFaulted:
      return absl::OkStatus();
    case WaitResult::kPoisoned:
      return d.sticky;
    case WaitResult::kGone:
      break;
  }
  return FaultError(Fault::kResource, absl::StatusCode::kAborted,
                    absl::StrCat("sim: event ", Hex(HandleValue(event)),
                                 " destroyed while synchronizing"));
}

// --- Inspection
// ---------------------------------------------------------------

int SimEvents::live_events(int device) const {
  if (!devices_.ValidDevice(device)) return 0;
  const DeviceState& d = devices_.device(device);
  absl::ReaderMutexLock lock(&d.mu);
  return static_cast<int>(d.events.size());
}

bool SimEvents::is_live_event(NativeEvent event) const {
  int device = DecodeHandle(HandleValue(event)).device;
  if (!devices_.ValidDevice(device)) return false;
  const DeviceState& d = devices_.device(device);
  absl::ReaderMutexLock lock(&d.mu);
  return d.events.contains(HandleValue(event));
}

}  // namespace sim_internal
}  // namespace gpupool
