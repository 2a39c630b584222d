// SimBackend: the simulated runtime's Backend primitives for devices, streams
// and events (memory ones are in sim_memory.cc). Test controls and inspection
// are in sim_control.cc, shared internals in sim_state.h, the per-device
// state and work model in sim_device.h, handle and address encoding in
// sim_handles.h.
//
// Every primitive follows the same order, so tests can rely on it:
//   1. count the call (per op, and per device when it names a valid one);
//   2. consume a matching FailNext injection: return it, do nothing else;
//   3. reject an out-of-range device (kCaller);
//   4. return the sticky status of a poisoned device (kDevice);
//   5. check arguments and handles (misuse → kCaller, nothing changes);
//   6. charge the profile's latency outside every lock, and do the work.

#include "gpupool/sim_backend.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_state.h"

namespace gpupool {
namespace {

using sim_internal::AllocationState;
using sim_internal::CallerError;
using sim_internal::ChargeLatency;
using sim_internal::DecodeAddress;
using sim_internal::DecodedAddress;
using sim_internal::DeviceState;
using sim_internal::EventState;
using sim_internal::HandleKind;
using sim_internal::HandleValue;
using sim_internal::Hex;
using sim_internal::KindIndex;
using sim_internal::MemoryAccount;
using sim_internal::NotReady;
using sim_internal::StreamState;
using sim_internal::ThreadCurrentDevices;
using sim_internal::WaitResult;

absl::Status NoDeviceError() {
  return CallerError(absl::StatusCode::kFailedPrecondition,
                     "no simulated device (SimOptions::device_count is 0)");
}

}  // namespace

SimBackend::SimBackend(SimOptions options)
    : state_(std::make_unique<State>(std::move(options))) {}

SimBackend::~SimBackend() {
  for (std::string& leak : state_->CollectLeaks()) {
    state_->ReportMisuse(absl::StrCat("leaked at destruction: ", leak));
  }
}

// --- Devices -----------------------------------------------------------------

absl::StatusOr<int> SimBackend::DeviceCount() {
  absl::Status entered = state_->EnterWithoutDevice(SimOp::kDeviceCount);
  if (!entered.ok()) return entered;
  if (state_->device_count == 0) return NoDeviceError();
  return state_->device_count;
}

absl::StatusOr<int> SimBackend::GetCurrentDevice() {
  absl::Status entered = state_->EnterWithoutDevice(SimOp::kGetCurrentDevice);
  if (!entered.ok()) return entered;
  if (state_->device_count == 0) return NoDeviceError();
  const auto& current = ThreadCurrentDevices();
  auto it = current.find(state_->instance_id);
  return it == current.end() ? 0 : it->second;
}

absl::Status SimBackend::SetCurrentDevice(int device) {
  absl::Status status = state_->Enter(SimOp::kSetCurrentDevice, device);
  if (!status.ok()) return status;
  status = State::CheckPoison(state_->device_state(device));
  if (!status.ok()) return status;
  ThreadCurrentDevices()[state_->instance_id] = device;
  return absl::OkStatus();
}

// --- Streams -----------------------------------------------------------------

absl::StatusOr<NativeStream> SimBackend::CreateStream(
    int device, const StreamConfig& config) {
  absl::Status status = state_->Enter(SimOp::kStreamCreate, device);
  if (!status.ok()) return status;
  DeviceState& d = state_->device_state(device);
  status = State::CheckPoison(d);
  if (!status.ok()) return status;
  const SimProfile& profile = state_->options.profile;
  if (config.priority < profile.greatest_priority ||
      config.priority > profile.least_priority) {
    return CallerError(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("CreateStream: priority ", config.priority, " outside [",
                     profile.greatest_priority, ", ", profile.least_priority,
                     "] of profile ", profile.name));
  }
  if (!config.cu_mask.empty() && !profile.supports_cu_mask) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("CreateStream: profile ", profile.name,
                                    " does not support CU masks"));
  }
  ChargeLatency(profile.stream_create);
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<uintptr_t> handle =
      state_->NewHandleLocked(d, device, HandleKind::kStream);
  if (!handle.ok()) return handle.status();
  StreamState stream;
  stream.config = config;
  d.streams.emplace(*handle, std::move(stream));
  d.streams_created.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<NativeStream>(*handle);
}

absl::Status SimBackend::DestroyStream(int device, NativeStream stream) {
  absl::Status status = state_->Enter(SimOp::kStreamDestroy, device);
  if (!status.ok()) {
    return state_->FailDestroy(std::move(status), device, HandleKind::kStream,
                               HandleValue(stream));
  }
  DeviceState& d = state_->device_state(device);
  const SimProfile& profile = state_->options.profile;
  {
    State::MisuseReporter misuse(state_.get());
    absl::MutexLock lock(&d.mu);
    if (d.poisoned) return d.sticky;
    absl::StatusOr<StreamState*> found = state_->FindStream(
        d, device, stream, "DestroyStream", misuse, /*destroying=*/true);
    if (!found.ok()) return found.status();
    uintptr_t handle = HandleValue(stream);
    if (profile.destroy_blocks_until_idle) {
      // hipStreamDestroy: ends a capture silently, then waits for the work.
      (*found)->capture = CaptureStatus::kNone;
      switch (d.WaitStreamIdle(handle, /*stop_on_fault=*/false)) {
        case WaitResult::kPoisoned:
          return d.sticky;
        case WaitResult::kGone:
          // ResetDevice destroyed it meanwhile: nothing left to do.
          return absl::OkStatus();
        case WaitResult::kIdle:
        case WaitResult::kFaulted:
          break;
      }
    }
    d.Forget(HandleKind::kStream, handle);
  }
  ChargeLatency(profile.stream_destroy);
  return absl::OkStatus();
}

absl::Status SimBackend::QueryStream(int device, NativeStream stream) {
  absl::Status status = state_->Enter(SimOp::kStreamQuery, device);
  if (!status.ok()) return status;
  ChargeLatency(state_->options.profile.query);
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  // The null (legacy default) stream exists on every device and stays idle.
  if (stream == nullptr) return absl::OkStatus();
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "QueryStream", misuse);
  if (!found.ok()) return found.status();
  StreamState& s = **found;
  uintptr_t handle = HandleValue(stream);
  // Like cudaErrorStreamCaptureUnsupported: querying the capturing stream
  // itself is illegal even in Relaxed mode, and kills the capture.
  if (s.capture == CaptureStatus::kActive) {
    s.capture = CaptureStatus::kInvalidated;
    return CallerError(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("QueryStream: stream ", Hex(handle),
                                    " is capturing; capture invalidated"));
  }
  if (s.capture == CaptureStatus::kInvalidated) {
    return CallerError(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("QueryStream: stream ", Hex(handle),
                                    " has an invalidated capture"));
  }
  if (!s.fault.ok()) return s.fault;
  absl::Time latest;
  if (d.PruneWork(&s.work, absl::Now(), &latest)) {
    return NotReady("stream", handle);
  }
  return absl::OkStatus();
}

absl::Status SimBackend::SynchronizeStream(int device, NativeStream stream) {
  absl::Status status = state_->Enter(SimOp::kStreamSynchronize, device);
  if (!status.ok()) return status;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  if (stream == nullptr) return absl::OkStatus();
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "SynchronizeStream", misuse);
  if (!found.ok()) return found.status();
  uintptr_t handle = HandleValue(stream);
  if ((*found)->capture != CaptureStatus::kNone) {
    (*found)->capture = CaptureStatus::kInvalidated;
    return CallerError(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("SynchronizeStream: stream ", Hex(handle),
                                    " is capturing; capture invalidated"));
  }
  switch (d.WaitStreamIdle(handle, /*stop_on_fault=*/true)) {
    case WaitResult::kIdle:
      return absl::OkStatus();
    case WaitResult::kPoisoned:
      return d.sticky;
    case WaitResult::kFaulted:
      return d.streams.find(handle)->second.fault;
    case WaitResult::kGone:
      break;
  }
  return FaultError(Fault::kResource, absl::StatusCode::kAborted,
                    absl::StrCat("sim: stream ", Hex(handle),
                                 " destroyed while synchronizing"));
}

absl::StatusOr<CaptureStatus> SimBackend::GetCaptureStatus(
    int device, NativeStream stream) {
  absl::Status status = state_->Enter(SimOp::kCaptureStatus, device);
  if (!status.ok()) return status;
  ChargeLatency(state_->options.profile.query);
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  if (stream == nullptr) return CaptureStatus::kNone;
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "GetCaptureStatus", misuse);
  if (!found.ok()) return found.status();
  return (*found)->capture;
}

absl::Status SimBackend::EndCapture(int device, NativeStream stream) {
  absl::Status status = state_->Enter(SimOp::kEndCapture, device);
  if (!status.ok()) return status;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::Status not_capturing =
      CallerError(absl::StatusCode::kFailedPrecondition,
                  absl::StrCat("EndCapture: stream ", Hex(HandleValue(stream)),
                               " is not capturing"));
  if (stream == nullptr) return not_capturing;
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "EndCapture", misuse);
  if (!found.ok()) return found.status();
  if ((*found)->capture == CaptureStatus::kNone) return not_capturing;
  (*found)->capture = CaptureStatus::kNone;
  return absl::OkStatus();
}

absl::Status SimBackend::ResetStreamAttributes(int device,
                                               NativeStream stream) {
  absl::Status status = state_->Enter(SimOp::kResetAttributes, device);
  if (!status.ok()) return status;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  if (stream == nullptr) return absl::OkStatus();
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "ResetStreamAttributes", misuse);
  if (!found.ok()) return found.status();
  (*found)->attributes_dirty = false;
  return absl::OkStatus();
}

bool SimBackend::HasResettableStreamAttributes(int) {
  return state_->options.profile.stream_attributes;
}

absl::Status SimBackend::StreamWaitEvent(int device, NativeStream stream,
                                         NativeEvent event) {
  absl::Status status = state_->Enter(SimOp::kStreamWaitEvent, device);
  if (!status.ok()) return status;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<EventState*> waited =
      state_->FindEvent(d, device, event, "StreamWaitEvent", misuse);
  if (!waited.ok()) return waited.status();
  StreamState* waiter = nullptr;
  if (stream != nullptr) {
    absl::StatusOr<StreamState*> found =
        state_->FindStream(d, device, stream, "StreamWaitEvent", misuse);
    if (!found.ok()) return found.status();
    waiter = *found;
  }
  absl::Time latest;
  if (waiter != nullptr &&
      d.PruneWork(&(*waited)->work, absl::Now(), &latest)) {
    waiter->work.insert(waiter->work.end(), (*waited)->work.begin(),
                        (*waited)->work.end());
  }
  d.wait_edges.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

// --- Events ------------------------------------------------------------------

absl::StatusOr<NativeEvent> SimBackend::CreateEvent(int device,
                                                    const EventConfig& config) {
  absl::Status status = state_->Enter(SimOp::kEventCreate, device);
  if (!status.ok()) return status;
  DeviceState& d = state_->device_state(device);
  status = State::CheckPoison(d);
  if (!status.ok()) return status;
  if (config.interprocess && !config.disable_timing) {
    return CallerError(
        absl::StatusCode::kInvalidArgument,
        "CreateEvent: an interprocess event requires disable_timing");
  }
  ChargeLatency(state_->options.profile.event_create);
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<uintptr_t> handle =
      state_->NewHandleLocked(d, device, HandleKind::kEvent);
  if (!handle.ok()) return handle.status();
  EventState event;
  event.config = config;
  d.events.emplace(*handle, std::move(event));
  d.events_created.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<NativeEvent>(*handle);
}

absl::Status SimBackend::DestroyEvent(int device, NativeEvent event) {
  absl::Status status = state_->Enter(SimOp::kEventDestroy, device);
  if (!status.ok()) {
    return state_->FailDestroy(std::move(status), device, HandleKind::kEvent,
                               HandleValue(event));
  }
  DeviceState& d = state_->device_state(device);
  {
    State::MisuseReporter misuse(state_.get());
    absl::MutexLock lock(&d.mu);
    if (d.poisoned) return d.sticky;
    absl::StatusOr<EventState*> found = state_->FindEvent(
        d, device, event, "DestroyEvent", misuse, /*destroying=*/true);
    if (!found.ok()) return found.status();
    d.Forget(HandleKind::kEvent, HandleValue(event));
  }
  ChargeLatency(state_->options.profile.event_destroy);
  return absl::OkStatus();
}

absl::Status SimBackend::RecordEvent(int device, NativeEvent event,
                                     NativeStream stream) {
  absl::Status status = state_->Enter(SimOp::kEventRecord, device);
  if (!status.ok()) return status;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<EventState*> recorded =
      state_->FindEvent(d, device, event, "RecordEvent", misuse);
  if (!recorded.ok()) return recorded.status();
  if (stream == nullptr) {
    (*recorded)->work.clear();
    return absl::OkStatus();
  }
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "RecordEvent", misuse);
  if (!found.ok()) return found.status();
  absl::Time latest;
  d.PruneWork(&(*found)->work, absl::Now(), &latest);
  (*recorded)->work = (*found)->work;
  return absl::OkStatus();
}

absl::Status SimBackend::QueryEvent(int device, NativeEvent event) {
  absl::Status status = state_->Enter(SimOp::kEventQuery, device);
  if (!status.ok()) return status;
  ChargeLatency(state_->options.profile.query);
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<EventState*> found =
      state_->FindEvent(d, device, event, "QueryEvent", misuse);
  if (!found.ok()) return found.status();
  absl::Time latest;
  if (d.PruneWork(&(*found)->work, absl::Now(), &latest)) {
    return NotReady("event", HandleValue(event));
  }
  return absl::OkStatus();
}

absl::Status SimBackend::SynchronizeEvent(int device, NativeEvent event) {
  absl::Status status = state_->Enter(SimOp::kEventSynchronize, device);
  if (!status.ok()) return status;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<EventState*> found =
      state_->FindEvent(d, device, event, "SynchronizeEvent", misuse);
  if (!found.ok()) return found.status();
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

}  // namespace gpupool
