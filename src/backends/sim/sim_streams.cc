// SimStreams: stream primitives, controls and inspection (sim_streams.h), in
// the order of checks every primitive follows (sim_backend.cc lists it).

#include "src/backends/sim/sim_streams.h"

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

SimStreams::SimStreams(const SimProfile& profile, SimFaultInjector& faults,
                       SimDevices& devices, SimCaptureModel& captures,
                       SimMisuseLog& misuse)
    : profile_(profile),
      faults_(faults),
      devices_(devices),
      captures_(captures),
      misuse_(misuse) {}

// --- Backend primitives ------------------------------------------------------

absl::StatusOr<NativeStream> SimStreams::CreateStream(
    int device, const StreamConfig& config) {
  absl::Status status = faults_.Enter(SimOp::kStreamCreate, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  status = d.PoisonStatus();
  if (!status.ok()) return status;
  const SimProfile& profile = profile_;
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
  absl::StatusOr<uintptr_t> handle = d.NewHandleLocked(HandleKind::kStream);
  if (!handle.ok()) return handle.status();
  StreamState stream;
  stream.config = config;
  d.streams.emplace(*handle, std::move(stream));
  d.streams_created.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<NativeStream>(*handle);
}

absl::Status SimStreams::DestroyStream(int device, NativeStream stream) {
  absl::Status status = faults_.Enter(SimOp::kStreamDestroy, device);
  if (!status.ok()) {
    return devices_.FailDestroy(std::move(status), device, HandleKind::kStream,
                                HandleValue(stream));
  }
  DeviceState& d = devices_.device(device);
  const SimProfile& profile = profile_;
  {
    SimMisuseLog::Reporter misuse(misuse_);
    absl::MutexLock lock(&d.mu);
    if (d.poisoned) return d.sticky;
    absl::StatusOr<StreamState*> found =
        d.FindStream(stream, "DestroyStream", misuse, /*destroying=*/true);
    if (!found.ok()) return found.status();
    uintptr_t handle = HandleValue(stream);
    // HIP ends the capture silently; CUDA leaves it undefined (the pools end
    // it first): either way the capture loses this stream.
    captures_.DetachFromCapture(d, handle);
    if (profile.destroy_blocks_until_idle) {
      // hipStreamDestroy waits for the work.
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

absl::Status SimStreams::QueryStream(int device, NativeStream stream) {
  absl::Status status = faults_.Enter(SimOp::kStreamQuery, device);
  if (!status.ok()) return status;
  ChargeLatency(profile_.query);
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  // The null (legacy default) stream exists on every device and stays idle.
  if (stream == nullptr) return absl::OkStatus();
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "QueryStream", misuse);
  if (!found.ok()) return found.status();
  StreamState& s = **found;
  uintptr_t handle = HandleValue(stream);
  // Like cudaErrorStreamCaptureUnsupported: querying the capturing stream
  // itself is illegal even in Relaxed mode, and kills the capture.
  if (s.capture == CaptureStatus::kActive) {
    captures_.InvalidateCapture(d, s.capture_id);
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

absl::Status SimStreams::SynchronizeStream(int device, NativeStream stream) {
  absl::Status status = faults_.Enter(SimOp::kStreamSynchronize, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  if (stream == nullptr) return absl::OkStatus();
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "SynchronizeStream", misuse);
  if (!found.ok()) return found.status();
  uintptr_t handle = HandleValue(stream);
  if ((*found)->capture != CaptureStatus::kNone) {
    captures_.InvalidateCapture(d, (*found)->capture_id);
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

absl::Status SimStreams::ResetStreamAttributes(int device,
                                               NativeStream stream) {
  absl::Status status = faults_.Enter(SimOp::kResetAttributes, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  if (stream == nullptr) return absl::OkStatus();
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "ResetStreamAttributes", misuse);
  if (!found.ok()) return found.status();
  (*found)->attributes_dirty = false;
  return absl::OkStatus();
}

absl::Status SimStreams::StreamWaitEvent(int device, NativeStream stream,
                                         NativeEvent event) {
  absl::Status status = faults_.Enter(SimOp::kStreamWaitEvent, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<EventState*> waited =
      d.FindEvent(event, "StreamWaitEvent", misuse);
  if (!waited.ok()) return waited.status();
  StreamState* waiter = nullptr;
  if (stream != nullptr) {
    absl::StatusOr<StreamState*> found =
        d.FindStream(stream, "StreamWaitEvent", misuse);
    if (!found.ok()) return found.status();
    waiter = *found;
  }
  if (absl::Status joined =
          captures_.JoinCapture(d, **waited, HandleValue(stream), waiter);
      !joined.ok()) {
    return joined;
  }
  absl::Time latest;
  if (waiter != nullptr && waiter->capture == CaptureStatus::kNone &&
      d.PruneWork(&(*waited)->work, absl::Now(), &latest)) {
    waiter->work.insert(waiter->work.end(), (*waited)->work.begin(),
                        (*waited)->work.end());
  }
  d.wait_edges.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

// --- Test controls and inspection --------------------------------------------

void SimStreams::FaultStream(NativeStream stream, absl::Status status) {
  int device = devices_.DeviceOfHandle(stream, "FaultStream");
  if (device < 0) return;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "FaultStream", misuse);
  if (!found.ok()) return;
  // A status without a class of its own faults this stream's handle only.
  const bool classed =
      status.message().size() != MessageWithoutFault(status).size() ||
      status.GetPayload(kFaultPayloadUrl).has_value();
  if (!status.ok() && !classed) {
    status = WithFault(std::move(status), Fault::kResource);
  }
  (*found)->fault = std::move(status);
  d.changed.SignalAll();
}

void SimStreams::SubmitWork(NativeStream stream, absl::Duration duration) {
  int device = devices_.DeviceOfHandle(stream, "SubmitWork");
  if (device < 0) return;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "SubmitWork", misuse);
  if (!found.ok() || duration <= absl::ZeroDuration()) return;
  if ((*found)->capture != CaptureStatus::kNone) {
    // Captured, not run: a graph node every launch replays (an invalidated
    // capture records nothing more).
    captures_.RecordWork(d, **found, duration);
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

void SimStreams::CompleteWork(NativeStream stream) {
  int device = devices_.DeviceOfHandle(stream, "CompleteWork");
  if (device < 0) return;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "CompleteWork", misuse);
  if (!found.ok()) return;
  d.CompleteTickets(&(*found)->work);
}

void SimStreams::SetStreamAttribute(NativeStream stream) {
  int device = devices_.DeviceOfHandle(stream, "SetStreamAttribute");
  if (device < 0) return;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "SetStreamAttribute", misuse);
  if (!found.ok()) return;
  (*found)->attributes_dirty = true;
}

int SimStreams::live_streams(int device) const {
  if (!devices_.ValidDevice(device)) return 0;
  const DeviceState& d = devices_.device(device);
  absl::ReaderMutexLock lock(&d.mu);
  return static_cast<int>(d.streams.size());
}

bool SimStreams::is_live_stream(NativeStream stream) const {
  int device = DecodeHandle(HandleValue(stream)).device;
  if (!devices_.ValidDevice(device)) return false;
  const DeviceState& d = devices_.device(device);
  absl::ReaderMutexLock lock(&d.mu);
  return d.streams.contains(HandleValue(stream));
}

bool SimStreams::has_pending_work(NativeStream stream) const {
  int device = DecodeHandle(HandleValue(stream)).device;
  if (!devices_.ValidDevice(device)) return false;
  const DeviceState& d = devices_.device(device);
  absl::ReaderMutexLock lock(&d.mu);
  auto it = d.streams.find(HandleValue(stream));
  return it != d.streams.end() &&
         d.HasPendingWork(it->second.work, absl::Now());
}

bool SimStreams::attributes_dirty(NativeStream stream) const {
  int device = DecodeHandle(HandleValue(stream)).device;
  if (!devices_.ValidDevice(device)) return false;
  const DeviceState& d = devices_.device(device);
  absl::ReaderMutexLock lock(&d.mu);
  auto it = d.streams.find(HandleValue(stream));
  return it != d.streams.end() && it->second.attributes_dirty;
}

}  // namespace sim_internal
}  // namespace gpupool
