// The stream and event leases pool_fuzzer holds, and what it does with them.

#include "tests/fuzz/stream_event_model.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gpupool/sim_backend.h"

namespace gpupool::fuzz {
namespace {

const StreamConfig kStreamConfigs[] = {
    {}, {.priority = -1}, {.priority = 0, .non_blocking = false}};
const EventConfig kEventConfigs[] = {
    {}, {.disable_timing = false}, {.blocking_sync = true}};

}  // namespace

void StreamEventModel::Compact() {
  fuzz::Compact(streams_held_);
  fuzz::Compact(events_held_);
}

void StreamEventModel::AcquireStream() {
  const int device = harness_.PickDevice();
  const auto& config = kStreamConfigs[input_.ConsumeIntegralInRange(0, 2)];
  if (streams_held_.size() >= kMaxLeases) return;
  const bool poisoned =
      device < kDevices && harness_.health().is_poisoned(device);
  absl::StatusOr<PooledStream> lease =
      harness_.streams().Acquire(device, config, absl::ZeroDuration());
  if (device >= kDevices || poisoned) {
    FUZZ_CHECK(!lease.ok(), "a lease on an unusable device");
    harness_.CheckRefusal(device, lease.status(), "stream Acquire");
    return;
  }
  if (!lease.ok()) return;  // injected fault, bound reached, ...
  FUZZ_CHECK(harness_.sim().is_live_stream(lease->get()),
             "a dead stream was handed out");
  FUZZ_CHECK(lease->config() == config, "stream of another config");
  streams_held_.push_back({*std::move(lease), false});
}

void StreamEventModel::ReleaseStream(bool discard, StreamBusy busy) {
  Held<PooledStream>* held = PickHeldEntry(input_, streams_held_);
  if (held == nullptr || !held->lease || busy(held->lease.get())) return;
  discard ? held->lease.Discard() : held->lease.Release();
}

void StreamEventModel::AcquireEvent() {
  const int device = harness_.PickDevice();
  const auto& config = kEventConfigs[input_.ConsumeIntegralInRange(0, 2)];
  if (events_held_.size() >= kMaxLeases) return;
  const bool poisoned =
      device < kDevices && harness_.health().is_poisoned(device);
  absl::StatusOr<PooledEvent> lease =
      harness_.events().Acquire(device, config, absl::ZeroDuration());
  if (device >= kDevices || poisoned) {
    FUZZ_CHECK(!lease.ok(), "a lease on an unusable device");
    harness_.CheckRefusal(device, lease.status(), "event Acquire");
    return;
  }
  if (!lease.ok()) return;
  FUZZ_CHECK(harness_.sim().is_live_event(lease->get()),
             "a dead event was handed out");
  events_held_.push_back({*std::move(lease), false});
}

void StreamEventModel::ReleaseEvent(bool discard) {
  PooledEvent* lease = PickHeld(input_, events_held_);
  if (lease == nullptr) return;
  discard ? lease->Discard() : lease->Release();
}

// Work that completes only when told to.
void StreamEventModel::SubmitWork() {
  const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
  NativeStream stream = PickUsableStream(device);
  if (stream != nullptr) {
    harness_.sim().SubmitWork(stream, absl::InfiniteDuration());
  }
}

void StreamEventModel::CompleteWork() {
  if (input_.ConsumeBool()) {
    harness_.sim().CompleteAllWork();
    return;
  }
  const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
  NativeStream stream = PickUsableStream(device);
  if (stream != nullptr) harness_.sim().CompleteWork(stream);
}

void StreamEventModel::Prewarm() {
  const int device = harness_.PickDevice();
  const int count = input_.ConsumeIntegralInRange(-1, 3);
  const bool async = input_.ConsumeBool();
  absl::Status status;
  if (input_.ConsumeBool()) {
    const auto& config = kStreamConfigs[input_.ConsumeIntegralInRange(0, 2)];
    StreamPool& streams = harness_.streams();
    status = async ? streams.PrewarmAsync(device, config, count).Wait()
                   : streams.Prewarm(device, config, count);
  } else {
    const auto& config = kEventConfigs[input_.ConsumeIntegralInRange(0, 2)];
    EventPool& events = harness_.events();
    status = async ? events.PrewarmAsync(device, config, count).Wait()
                   : events.Prewarm(device, config, count);
  }
  if (count < 0 || device >= kDevices) {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument,
               absl::StrCat("Prewarm(", device, ", ", count,
                            "): ", status.ToString()));
  }
}

// The user records an event lease on a stream lease.
void StreamEventModel::RecordEvent() {
  Held<PooledEvent>* event = PickHeldEntry(input_, events_held_);
  if (event == nullptr || !event->lease || event->stale) return;
  NativeStream stream = PickUsableStream(event->lease.device());
  if (stream == nullptr) return;
  (void)harness_.sim().RecordEvent(event->lease.device(), event->lease.get(),
                                   stream);
}

// A stream faults (its work failed).
void StreamEventModel::FaultStream() {
  const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
  NativeStream stream = PickUsableStream(device);
  if (stream == nullptr) return;
  harness_.sim().FaultStream(stream,
                             absl::AbortedError("cudaErrorLaunchFailure"));
  harness_.NoteFault();
}

// Moved-from and empty leases are inert.
void StreamEventModel::MoveStreamLease(StreamBusy busy) {
  Held<PooledStream>* held = PickHeldEntry(input_, streams_held_);
  if (held == nullptr || busy(held->lease.get())) return;
  PooledStream moved = std::move(held->lease);
  FUZZ_CHECK(!held->lease && held->lease.get() == nullptr &&
                 held->lease.device() == -1,
             "a moved-from lease is not empty");
  held->lease.Release();  // no-op
  held->lease.Discard();  // no-op
  held->lease = std::move(moved);
}

NativeStream StreamEventModel::PickUsableStream(int device) {
  std::vector<NativeStream> usable;
  for (const auto& held : streams_held_) {
    if (held.lease && !held.stale && held.lease.device() == device) {
      usable.push_back(held.lease.get());
    }
  }
  if (usable.empty()) return nullptr;
  return usable[input_.ConsumeIntegralInRange<size_t>(0, usable.size() - 1)];
}

void StreamEventModel::MarkDeviceReset(int device) {
  for (auto& held : streams_held_) {
    if (held.lease && held.lease.device() == device) held.stale = true;
  }
  for (auto& held : events_held_) {
    if (held.lease && held.lease.device() == device) held.stale = true;
  }
}

int64_t StreamEventModel::CheckHandles() {
  std::vector<void*>& handles = scratch_handles_;
  handles.clear();
  int64_t streams_out = 0;
  for (const auto& held : streams_held_) {
    if (!held.lease) continue;
    ++streams_out;
    handles.push_back(held.lease.get());
    FUZZ_CHECK(held.stale || harness_.sim().is_live_stream(held.lease.get()),
               "a leased stream was destroyed");
  }
  for (const auto& held : events_held_) {
    if (!held.lease) continue;
    handles.push_back(held.lease.get());
    FUZZ_CHECK(held.stale || harness_.sim().is_live_event(held.lease.get()),
               "a leased event was destroyed");
  }
  std::sort(handles.begin(), handles.end());
  FUZZ_CHECK(
      std::adjacent_find(handles.begin(), handles.end()) == handles.end(),
      "a stream or event in two leases");
  return streams_out;
}

int64_t StreamEventModel::events_out() const {
  return std::count_if(
      events_held_.begin(), events_held_.end(),
      [](const auto& h) { return static_cast<bool>(h.lease); });
}

void StreamEventModel::ReleaseAll() {
  for (auto& held : events_held_) held.lease.Release();
  for (auto& held : streams_held_) held.lease.Release();
}

}  // namespace gpupool::fuzz
