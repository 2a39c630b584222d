// SimBackend's graph-capture model: the capture primitives of the Backend
// (capture status, capture info, end capture), the capture and graph test
// controls, and the graph oracle. State in sim_capture.h; what is modelled
// and from which sources in docs/backends.md.

#include "src/backends/sim/sim_capture.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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
#include "src/backends/sim/sim_state.h"

namespace gpupool {
namespace sim_internal {

uint64_t NextCaptureId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

uint64_t NextGraphId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void DeviceState::InvalidateCapture(uint64_t id) {
  auto it = capture.captures.find(id);
  if (it == capture.captures.end()) return;
  it->second.invalidated = true;
  for (uintptr_t handle : it->second.streams) {
    auto stream = streams.find(handle);
    if (stream != streams.end())
      stream->second.capture = CaptureStatus::kInvalidated;
  }
}

void DeviceState::DropCapture(uint64_t id) {
  auto it = capture.captures.find(id);
  if (it == capture.captures.end()) return;
  for (uintptr_t handle : it->second.streams) {
    auto stream = streams.find(handle);
    if (stream == streams.end()) continue;
    stream->second.capture = CaptureStatus::kNone;
    stream->second.capture_id = 0;
  }
  capture.captures.erase(it);
}

void DeviceState::DetachFromCapture(uintptr_t handle) {
  auto stream = streams.find(handle);
  if (stream == streams.end() || stream->second.capture_id == 0) return;
  const uint64_t id = stream->second.capture_id;
  auto it = capture.captures.find(id);
  if (it == capture.captures.end()) return;
  if (it->second.origin == handle) {
    DropCapture(id);
    return;
  }
  std::vector<uintptr_t>& members = it->second.streams;
  members.erase(std::remove(members.begin(), members.end(), handle),
                members.end());
  stream->second.capture = CaptureStatus::kNone;
  stream->second.capture_id = 0;
}

absl::Status DeviceState::RefuseCapturedEvent(const EventState& event,
                                              absl::string_view op,
                                              uintptr_t handle) {
  if (event.captured_in == 0) return absl::OkStatus();
  InvalidateCapture(event.captured_in);
  return CallerError(
      absl::StatusCode::kFailedPrecondition,
      absl::StrCat(op, ": event ", Hex(handle), " was recorded inside capture ",
                   event.captured_in));
}

// The runtimes also refuse a capturing stream's wait on an event recorded
// outside any capture unless cudaEventWaitExternal is given; the sim lets it
// through (pools never make a capturing stream wait: documented).
absl::Status DeviceState::JoinCapture(const EventState& event, uintptr_t handle,
                                      StreamState* waiter) {
  if (waiter == nullptr || event.captured_in == 0) return absl::OkStatus();
  auto it = capture.captures.find(event.captured_in);
  if (it == capture.captures.end()) return absl::OkStatus();  // ended
  if (waiter->capture_id == event.captured_in) return absl::OkStatus();
  if (waiter->capture != CaptureStatus::kNone) {
    InvalidateCapture(event.captured_in);
    InvalidateCapture(waiter->capture_id);
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

bool DeviceState::FindRange(uintptr_t ptr, size_t bytes,
                            TouchedRange* range) const {
  for (const auto& [base, allocation] : allocations) {
    if (ptr >= base && ptr - base < allocation.bytes &&
        bytes <= allocation.bytes - (ptr - base)) {
      *range = TouchedRange{base, ptr, ptr + bytes};
      return true;
    }
  }
  return false;
}

}  // namespace sim_internal

using sim_internal::CallerError;
using sim_internal::CapturedWork;
using sim_internal::CaptureState;
using sim_internal::ChargeLatency;
using sim_internal::DeviceState;
using sim_internal::GraphState;
using sim_internal::HandleValue;
using sim_internal::Hex;
using sim_internal::MemoryClaim;
using sim_internal::StreamState;
using sim_internal::TouchedRange;

// --- Backend primitives
// --------------------------------------------------------

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

// Counted as a capture-status call (one SimOp for both), so call counts of
// pools that switch from one to the other stay comparable.
absl::StatusOr<CaptureInfo> SimBackend::GetCaptureInfo(int device,
                                                       NativeStream stream) {
  absl::Status status = state_->Enter(SimOp::kCaptureStatus, device);
  if (!status.ok()) return status;
  ChargeLatency(state_->options.profile.query);
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  if (stream == nullptr) return CaptureInfo{};
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "GetCaptureInfo", misuse);
  if (!found.ok()) return found.status();
  CaptureInfo info;
  info.status = (*found)->capture;
  if (info.status == CaptureStatus::kActive) info.id = (*found)->capture_id;
  return info;
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
  const uint64_t id = (*found)->capture_id;
  auto capture = d.capture.captures.find(id);
  if (capture != d.capture.captures.end() &&
      capture->second.origin != HandleValue(stream)) {
    // cudaErrorStreamCaptureUnmatched: only the origin ends a capture.
    d.InvalidateCapture(id);
    return CallerError(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("EndCapture: stream ", Hex(HandleValue(stream)),
                     " joined a capture begun on another stream; capture "
                     "invalidated"));
  }
  // The graph is discarded: this primitive is the pools' teardown.
  d.DropCapture(id);
  return absl::OkStatus();
}

// --- Test controls
// ---------------------------------------------------------------

void SimBackend::BeginCapture(NativeStream stream) {
  absl::Status status = BeginCapture(stream, SimCaptureMode::kGlobal);
  if (!status.ok()) state_->ReportMisuse(std::string(status.message()));
}

absl::Status SimBackend::BeginCapture(NativeStream stream, SimCaptureMode mode,
                                      uint64_t owner) {
  if (stream == nullptr) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       "BeginCapture: the null (legacy) stream cannot capture");
  }
  int device = state_->DeviceOfHandle(stream, "BeginCapture");
  if (device < 0) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       "BeginCapture: unknown stream");
  }
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "BeginCapture", misuse);
  if (!found.ok()) return found.status();
  if ((*found)->capture != CaptureStatus::kNone) {
    return CallerError(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("BeginCapture: stream ", Hex(HandleValue(stream)),
                     " is already capturing"));
  }
  const uint64_t id = sim_internal::NextCaptureId();
  CaptureState capture;
  capture.origin = HandleValue(stream);
  capture.mode = mode;
  capture.thread = std::this_thread::get_id();
  capture.owner = owner;
  capture.streams.push_back(capture.origin);
  d.capture.captures.emplace(id, std::move(capture));
  (*found)->capture = CaptureStatus::kActive;
  (*found)->capture_id = id;
  return absl::OkStatus();
}

absl::StatusOr<SimGraph> SimBackend::EndCaptureToGraph(NativeStream stream) {
  int device = state_->DeviceOfHandle(stream, "EndCaptureToGraph");
  if (device < 0) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       "EndCaptureToGraph: unknown stream");
  }
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "EndCaptureToGraph", misuse);
  if (!found.ok()) return found.status();
  const std::string name = Hex(HandleValue(stream));
  auto it = d.capture.captures.find((*found)->capture_id);
  if (it == d.capture.captures.end()) {
    return CallerError(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("EndCaptureToGraph: stream ", name, " is not capturing"));
  }
  const uint64_t id = it->first;
  CaptureState& capture = it->second;
  if (capture.origin != HandleValue(stream)) {
    d.InvalidateCapture(id);
    return CallerError(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("EndCaptureToGraph: stream ", name,
                                    " did not begin its capture "
                                    "(StreamCaptureUnmatched); invalidated"));
  }
  if (capture.mode != SimCaptureMode::kRelaxed &&
      capture.thread != std::this_thread::get_id()) {
    d.InvalidateCapture(id);
    return CallerError(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("EndCaptureToGraph: capture on ", name,
                                    " was begun by another thread "
                                    "(StreamCaptureWrongThread); invalidated"));
  }
  if (capture.invalidated) {
    d.DropCapture(id);
    return CallerError(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("EndCaptureToGraph: capture on ", name,
                     " was invalidated (StreamCaptureInvalidated)"
                     "; no graph"));
  }
  GraphState graph;
  graph.capture_id = id;
  graph.owner = capture.owner;
  graph.work = std::move(capture.work);
  d.DropCapture(id);
  const uint64_t graph_id = sim_internal::NextGraphId();
  d.capture.graphs.emplace(graph_id, std::move(graph));
  return SimGraph{device, graph_id};
}

namespace {

absl::Status UnknownGraph(absl::string_view op, SimGraph graph) {
  return CallerError(absl::StatusCode::kInvalidArgument,
                     absl::StrCat(op, ": unknown or destroyed graph ", graph.id,
                                  " (device ", graph.device, ")"));
}

}  // namespace

absl::Status SimBackend::InstantiateGraph(SimGraph graph) {
  if (!state_->ValidDevice(graph.device)) {
    return UnknownGraph("InstantiateGraph", graph);
  }
  DeviceState& d = state_->device_state(graph.device);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  auto it = d.capture.graphs.find(graph.id);
  if (it == d.capture.graphs.end())
    return UnknownGraph("InstantiateGraph", graph);
  it->second.instantiated = true;
  return absl::OkStatus();
}

absl::Status SimBackend::LaunchGraph(SimGraph graph, NativeStream stream) {
  if (!state_->ValidDevice(graph.device)) {
    return UnknownGraph("LaunchGraph", graph);
  }
  DeviceState& d = state_->device_state(graph.device);
  std::vector<std::string> findings;
  {
    State::MisuseReporter misuse(state_.get());
    absl::MutexLock lock(&d.mu);
    if (d.poisoned) return d.sticky;
    auto it = d.capture.graphs.find(graph.id);
    if (it == d.capture.graphs.end()) return UnknownGraph("LaunchGraph", graph);
    GraphState& g = it->second;
    if (!g.instantiated) {
      return CallerError(absl::StatusCode::kFailedPrecondition,
                         absl::StrCat("LaunchGraph: graph ", graph.id,
                                      " was never instantiated"));
    }
    StreamState* target = nullptr;
    if (stream != nullptr) {
      absl::StatusOr<StreamState*> found =
          state_->FindStream(d, graph.device, stream, "LaunchGraph", misuse);
      if (!found.ok()) return found.status();
      target = *found;
      if (target->capture != CaptureStatus::kNone) {
        return CallerError(absl::StatusCode::kUnimplemented,
                           "LaunchGraph: launching into a capture (a child "
                           "graph node) is not modelled");
      }
    }
    // The oracle: every range the replay writes must still be allocated and
    // must not hold anyone else's data.
    const int64_t launch = g.launches + 1;
    for (const CapturedWork& work : g.work) {
      for (const TouchedRange& range : work.touched) {
        if (!d.allocations.contains(range.base)) {
          findings.push_back(
              absl::StrCat("launch ", launch, " of graph ", graph.id,
                           " writes ", Hex(range.begin), " of allocation ",
                           Hex(range.base), ", which was freed"));
          continue;
        }
        for (const MemoryClaim& claim : d.capture.claims) {
          if (claim.owner != g.owner && claim.begin < range.end &&
              range.begin < claim.end) {
            findings.push_back(absl::StrCat("launch ", launch, " of graph ",
                                            graph.id, " (owner ", g.owner,
                                            ") writes ", Hex(range.begin),
                                            ", leased to owner ", claim.owner));
          }
        }
      }
    }
    ++g.launches;
    g.last_launch.clear();
    const absl::Time now = absl::Now();
    for (const CapturedWork& work : g.work) {
      if (work.duration <= absl::ZeroDuration()) continue;
      const absl::Time deadline = work.duration == absl::InfiniteDuration()
                                      ? absl::InfiniteFuture()
                                      : now + work.duration;
      const uint64_t ticket = d.AddTicket(deadline);
      g.last_launch.push_back(ticket);
      if (target != nullptr) target->work.push_back(ticket);
    }
  }
  if (!findings.empty()) {
    state_->graph_misuse_count.fetch_add(static_cast<int64_t>(findings.size()),
                                         std::memory_order_relaxed);
    absl::MutexLock lock(&state_->graph_misuse_mu);
    for (std::string& finding : findings) {
      state_->graph_misuse_log.push_back(std::move(finding));
    }
  }
  return absl::OkStatus();
}

absl::Status SimBackend::DestroyGraph(SimGraph graph) {
  if (!state_->ValidDevice(graph.device)) {
    return UnknownGraph("DestroyGraph", graph);
  }
  DeviceState& d = state_->device_state(graph.device);
  absl::MutexLock lock(&d.mu);
  if (d.capture.graphs.erase(graph.id) == 0) {
    return UnknownGraph("DestroyGraph", graph);
  }
  return absl::OkStatus();
}

void SimBackend::TouchMemory(NativeStream stream, const void* ptr,
                             size_t bytes) {
  int device = state_->DeviceOfHandle(stream, "TouchMemory");
  if (device < 0) return;
  DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  absl::StatusOr<StreamState*> found =
      state_->FindStream(d, device, stream, "TouchMemory", misuse);
  if (!found.ok()) return;
  TouchedRange range;
  if (!d.FindRange(HandleValue(ptr), bytes == 0 ? 1 : bytes, &range)) {
    (void)misuse.Flag(absl::StrCat("TouchMemory: ", Hex(HandleValue(ptr)),
                                   " (+", bytes,
                                   ") is not inside a live "
                                   "allocation of device ",
                                   device));
    return;
  }
  if ((*found)->capture == CaptureStatus::kNone) return;  // eager: instant
  auto it = d.capture.captures.find((*found)->capture_id);
  if (it == d.capture.captures.end() || it->second.invalidated) return;
  it->second.work.push_back(CapturedWork{absl::ZeroDuration(), {range}});
}

void SimBackend::ClaimMemory(const void* ptr, size_t bytes, uint64_t owner) {
  const int device = sim_internal::DecodeAddress(HandleValue(ptr)).device;
  if (!state_->ValidDevice(device)) {
    state_->ReportMisuse(
        absl::StrCat("ClaimMemory: unknown pointer ", Hex(HandleValue(ptr))));
    return;
  }
  DeviceState& d = state_->device_state(device);
  absl::MutexLock lock(&d.mu);
  const uintptr_t begin = HandleValue(ptr);
  d.capture.claims.push_back(MemoryClaim{begin, begin + bytes, owner});
}

void SimBackend::ReleaseClaim(const void* ptr) {
  const int device = sim_internal::DecodeAddress(HandleValue(ptr)).device;
  if (!state_->ValidDevice(device)) return;
  DeviceState& d = state_->device_state(device);
  absl::MutexLock lock(&d.mu);
  std::vector<MemoryClaim>& claims = d.capture.claims;
  claims.erase(std::remove_if(claims.begin(), claims.end(),
                              [&](const MemoryClaim& claim) {
                                return claim.begin == HandleValue(ptr);
                              }),
               claims.end());
}

}  // namespace gpupool
