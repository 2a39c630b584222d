// SimCaptureModel: open captures, their Backend primitives and the capture
// rules of the stream and event primitives (sim_capture.h).

#include "src/backends/sim/sim_capture.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_support.h"

namespace gpupool {
namespace sim_internal {
namespace {

// Process-wide, never reused (cudaStreamGetCaptureInfo: "unique over the
// lifetime of the process").
uint64_t NextCaptureId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

SimCaptureModel::SimCaptureModel(const SimProfile& profile,
                                 SimFaultInjector& faults, SimDevices& devices,
                                 SimMemory& memory, SimMisuseLog& misuse)
    : profile_(profile),
      faults_(faults),
      devices_(devices),
      memory_(memory),
      misuse_(misuse) {
  captures_.reserve(devices.device_count());
  for (int i = 0; i < devices.device_count(); ++i) {
    captures_.push_back(std::make_unique<DeviceCaptures>());
  }
}

// --- Backend primitives ------------------------------------------------------

absl::StatusOr<CaptureStatus> SimCaptureModel::GetCaptureStatus(
    int device, NativeStream stream) {
  absl::Status status = faults_.Enter(SimOp::kCaptureStatus, device);
  if (!status.ok()) return status;
  ChargeLatency(profile_.capture_query);
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  if (stream == nullptr) return CaptureStatus::kNone;
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "GetCaptureStatus", misuse);
  if (!found.ok()) return found.status();
  return (*found)->capture;
}

// Counted as a capture-status call (one SimOp for both), so call counts of
// pools that switch from one to the other stay comparable.
absl::StatusOr<CaptureInfo> SimCaptureModel::GetCaptureInfo(
    int device, NativeStream stream) {
  absl::Status status = faults_.Enter(SimOp::kCaptureStatus, device);
  if (!status.ok()) return status;
  ChargeLatency(profile_.capture_query);
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  if (stream == nullptr) return CaptureInfo{};
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "GetCaptureInfo", misuse);
  if (!found.ok()) return found.status();
  CaptureInfo info;
  info.status = (*found)->capture;
  if (info.status == CaptureStatus::kActive) info.id = (*found)->capture_id;
  return info;
}

absl::Status SimCaptureModel::EndCapture(int device, NativeStream stream) {
  absl::Status status = faults_.Enter(SimOp::kEndCapture, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::Status not_capturing =
      CallerError(absl::StatusCode::kFailedPrecondition,
                  absl::StrCat("EndCapture: stream ", Hex(HandleValue(stream)),
                               " is not capturing"));
  if (stream == nullptr) return not_capturing;
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "EndCapture", misuse);
  if (!found.ok()) return found.status();
  if ((*found)->capture == CaptureStatus::kNone) return not_capturing;
  const uint64_t id = (*found)->capture_id;
  DeviceCaptures& c = captures_of(d);
  absl::MutexLock capture_lock(&c.mu);
  auto capture = c.captures.find(id);
  if (capture != c.captures.end() &&
      capture->second.origin != HandleValue(stream)) {
    // cudaErrorStreamCaptureUnmatched: only the origin ends a capture.
    InvalidateLocked(d, c, id);
    return CallerError(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("EndCapture: stream ", Hex(HandleValue(stream)),
                     " joined a capture begun on another stream; capture "
                     "invalidated"));
  }
  // The graph is discarded: this primitive is the pools' teardown.
  DropLocked(d, c, id);
  return absl::OkStatus();
}

// --- Test controls -----------------------------------------------------------

absl::Status SimCaptureModel::BeginCapture(NativeStream stream,
                                           SimCaptureMode mode,
                                           uint64_t owner) {
  if (stream == nullptr) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       "BeginCapture: the null (legacy) stream cannot capture");
  }
  int device = devices_.DeviceOfHandle(stream, "BeginCapture");
  if (device < 0) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       "BeginCapture: unknown stream");
  }
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "BeginCapture", misuse);
  if (!found.ok()) return found.status();
  if ((*found)->capture != CaptureStatus::kNone) {
    return CallerError(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("BeginCapture: stream ", Hex(HandleValue(stream)),
                     " is already capturing"));
  }
  const uint64_t id = NextCaptureId();
  CaptureState capture;
  capture.origin = HandleValue(stream);
  capture.mode = mode;
  capture.thread = std::this_thread::get_id();
  capture.owner = owner;
  capture.streams.push_back(capture.origin);
  DeviceCaptures& c = captures_of(d);
  absl::MutexLock capture_lock(&c.mu);
  c.captures.emplace(id, std::move(capture));
  (*found)->capture = CaptureStatus::kActive;
  (*found)->capture_id = id;
  return absl::OkStatus();
}

void SimCaptureModel::TouchMemory(NativeStream stream, const void* ptr,
                                  size_t bytes) {
  int device = devices_.DeviceOfHandle(stream, "TouchMemory");
  if (device < 0) return;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "TouchMemory", misuse);
  if (!found.ok()) return;
  const uintptr_t begin = HandleValue(ptr);
  const size_t length = bytes == 0 ? 1 : bytes;
  uintptr_t base = 0;
  if (!memory_.FindRange(device, begin, length, &base)) {
    (void)misuse.Flag(absl::StrCat("TouchMemory: ", Hex(begin), " (+", bytes,
                                   ") is not inside a live "
                                   "allocation of device ",
                                   device));
    return;
  }
  if ((*found)->capture == CaptureStatus::kNone) return;  // eager: instant
  DeviceCaptures& c = captures_of(d);
  absl::MutexLock capture_lock(&c.mu);
  auto it = c.captures.find((*found)->capture_id);
  if (it == c.captures.end() || it->second.invalidated) return;
  it->second.work.push_back(CapturedWork{
      absl::ZeroDuration(), {TouchedRange{base, begin, begin + length}}});
}

// --- For the stream, event and graph models ----------------------------------

void SimCaptureModel::InvalidateCapture(DeviceState& d, uint64_t id) {
  DeviceCaptures& c = captures_of(d);
  absl::MutexLock lock(&c.mu);
  InvalidateLocked(d, c, id);
}

void SimCaptureModel::InvalidateLocked(DeviceState& d, DeviceCaptures& c,
                                       uint64_t id) {
  auto it = c.captures.find(id);
  if (it == c.captures.end()) return;
  it->second.invalidated = true;
  for (uintptr_t handle : it->second.streams) {
    auto stream = d.streams.find(handle);
    if (stream != d.streams.end()) {
      stream->second.capture = CaptureStatus::kInvalidated;
    }
  }
}

void SimCaptureModel::DropLocked(DeviceState& d, DeviceCaptures& c,
                                 uint64_t id) {
  auto it = c.captures.find(id);
  if (it == c.captures.end()) return;
  for (uintptr_t handle : it->second.streams) {
    auto stream = d.streams.find(handle);
    if (stream == d.streams.end()) continue;
    stream->second.capture = CaptureStatus::kNone;
    stream->second.capture_id = 0;
  }
  c.captures.erase(it);
}

void SimCaptureModel::DetachFromCapture(DeviceState& d, uintptr_t handle) {
  auto stream = d.streams.find(handle);
  if (stream == d.streams.end() || stream->second.capture_id == 0) return;
  const uint64_t id = stream->second.capture_id;
  DeviceCaptures& c = captures_of(d);
  absl::MutexLock lock(&c.mu);
  auto it = c.captures.find(id);
  if (it == c.captures.end()) return;
  if (it->second.origin == handle) {
    DropLocked(d, c, id);
    return;
  }
  std::vector<uintptr_t>& members = it->second.streams;
  members.erase(std::remove(members.begin(), members.end(), handle),
                members.end());
  stream->second.capture = CaptureStatus::kNone;
  stream->second.capture_id = 0;
}

absl::Status SimCaptureModel::RefuseCapturedEvent(DeviceState& d,
                                                  const EventState& event,
                                                  absl::string_view op,
                                                  uintptr_t handle) {
  if (event.captured_in == 0) return absl::OkStatus();
  InvalidateCapture(d, event.captured_in);
  return CallerError(
      absl::StatusCode::kFailedPrecondition,
      absl::StrCat(op, ": event ", Hex(handle), " was recorded inside capture ",
                   event.captured_in));
}

// The runtimes also refuse a capturing stream's wait on an event recorded
// outside any capture unless cudaEventWaitExternal is given; the sim lets it
// through (pools never make a capturing stream wait: documented).
absl::Status SimCaptureModel::JoinCapture(DeviceState& d,
                                          const EventState& event,
                                          uintptr_t handle,
                                          StreamState* waiter) {
  if (waiter == nullptr || event.captured_in == 0) return absl::OkStatus();
  DeviceCaptures& c = captures_of(d);
  absl::MutexLock lock(&c.mu);
  auto it = c.captures.find(event.captured_in);
  if (it == c.captures.end()) return absl::OkStatus();  // ended
  if (waiter->capture_id == event.captured_in) return absl::OkStatus();
  if (waiter->capture != CaptureStatus::kNone) {
    InvalidateLocked(d, c, event.captured_in);
    InvalidateLocked(d, c, waiter->capture_id);
    return CallerError(absl::StatusCode::kFailedPrecondition,
                       "StreamWaitEvent: waiting on an event of another "
                       "capture merges two captures (StreamCaptureMerge)");
  }
  it->second.streams.push_back(handle);
  waiter->capture_id = event.captured_in;
  waiter->capture = it->second.invalidated ? CaptureStatus::kInvalidated
                                           : CaptureStatus::kActive;
  return absl::OkStatus();
}

void SimCaptureModel::RecordWork(DeviceState& d, const StreamState& stream,
                                 absl::Duration duration) {
  DeviceCaptures& c = captures_of(d);
  absl::MutexLock lock(&c.mu);
  auto capture = c.captures.find(stream.capture_id);
  if (capture != c.captures.end() && !capture->second.invalidated) {
    capture->second.work.push_back(CapturedWork{duration, {}});
  }
}

absl::StatusOr<FinishedCapture> SimCaptureModel::FinishCapture(
    DeviceState& d, StreamState& stream, uintptr_t handle) {
  const std::string name = Hex(handle);
  DeviceCaptures& c = captures_of(d);
  absl::MutexLock lock(&c.mu);
  auto it = c.captures.find(stream.capture_id);
  if (it == c.captures.end()) {
    return CallerError(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("EndCaptureToGraph: stream ", name, " is not capturing"));
  }
  const uint64_t id = it->first;
  CaptureState& capture = it->second;
  if (capture.origin != handle) {
    InvalidateLocked(d, c, id);
    return CallerError(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("EndCaptureToGraph: stream ", name,
                                    " did not begin its capture "
                                    "(StreamCaptureUnmatched); invalidated"));
  }
  if (capture.mode != SimCaptureMode::kRelaxed &&
      capture.thread != std::this_thread::get_id()) {
    InvalidateLocked(d, c, id);
    return CallerError(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("EndCaptureToGraph: capture on ", name,
                                    " was begun by another thread "
                                    "(StreamCaptureWrongThread); invalidated"));
  }
  if (capture.invalidated) {
    DropLocked(d, c, id);
    return CallerError(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("EndCaptureToGraph: capture on ", name,
                     " was invalidated (StreamCaptureInvalidated)"
                     "; no graph"));
  }
  FinishedCapture finished;
  finished.capture_id = id;
  finished.owner = capture.owner;
  finished.work = std::move(capture.work);
  DropLocked(d, c, id);
  return finished;
}

void SimCaptureModel::ResetDevice(DeviceState& d) {
  DeviceCaptures& c = captures_of(d);
  absl::MutexLock lock(&c.mu);
  c.captures.clear();
}

}  // namespace sim_internal
}  // namespace gpupool
