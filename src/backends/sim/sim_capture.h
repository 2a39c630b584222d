// SimCaptureModel: the simulator's open graph captures (a model of
// cudaStreamBeginCapture ... cudaStreamEndCapture). It implements the
// Backend's capture primitives (capture status, capture info, end capture)
// and BeginCapture, and gives the stream and event primitives the capture
// rules they must apply: work and event records on a capturing stream are
// captured, not run; querying or synchronizing a capturing stream or a
// captured event invalidates the capture; a wait on a captured event joins
// the waiting stream into the capture. The runtime behaviour modelled, with
// its sources, is in docs/backends.md ("Graph capture in the simulator");
// graphs made from captures are SimGraphModel's (sim_graphs.h).
//
// A capture belongs to the device of the stream that began it. Each stream
// records its capture status and id (StreamState, under the device's lock);
// this model keeps each capture's state under its own per-device mutex,
// always taken after the device's DeviceState::mu.
//
// Thread safety: all methods may be called concurrently; those marked
// ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) need the device's lock.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_CAPTURE_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_CAPTURE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_faults.h"
#include "src/backends/sim/sim_memory.h"
#include "src/backends/sim/sim_misuse.h"

namespace gpupool {
namespace sim_internal {

// Part of one allocation that a piece of work reads or writes.
struct TouchedRange {
  uintptr_t base = 0;  // the allocation's address (never reused by the sim)
  uintptr_t begin = 0;
  uintptr_t end = 0;  // exclusive
};

// One piece of work recorded into a capture (SubmitWork or TouchMemory on a
// capturing stream): not run, replayed by every launch of the graph.
struct CapturedWork {
  absl::Duration duration = absl::ZeroDuration();
  std::vector<TouchedRange> touched;
};

// What a capture ended into a graph hands over.
struct FinishedCapture {
  uint64_t capture_id = 0;
  uint64_t owner = 0;  // the graph oracle's owner (BeginCapture's `owner`)
  std::vector<CapturedWork> work;
};

class SimCaptureModel {
 public:
  SimCaptureModel(const SimProfile& profile, SimFaultInjector& faults,
                  SimDevices& devices, SimMemory& memory, SimMisuseLog& misuse);
  SimCaptureModel(const SimCaptureModel&) = delete;
  SimCaptureModel& operator=(const SimCaptureModel&) = delete;

  // --- Backend primitives (SimBackend documents them) ----------------------
  absl::StatusOr<CaptureStatus> GetCaptureStatus(int device,
                                                 NativeStream stream);
  absl::StatusOr<CaptureInfo> GetCaptureInfo(int device, NativeStream stream);
  absl::Status EndCapture(int device, NativeStream stream);

  // --- Test controls -----------------------------------------------------
  absl::Status BeginCapture(NativeStream stream, SimCaptureMode mode,
                            uint64_t owner);
  // Work on `stream` touching [ptr, ptr + bytes): captured when it captures.
  void TouchMemory(NativeStream stream, const void* ptr, size_t bytes);

  // --- For the stream, event and graph models ----------------------------
  // Invalidates capture `id` (every stream of it reports kInvalidated).
  void InvalidateCapture(DeviceState& d, uint64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);
  // A destroyed stream leaves its capture (the whole capture when it is the
  // origin: HIP ends it silently, CUDA leaves it undefined).
  void DetachFromCapture(DeviceState& d, uintptr_t stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);
  // OK unless `event` is a captured event; then the refusal
  // (cudaErrorStreamCaptureUnsupported / hipErrorCapturedEvent), after
  // invalidating the event's capture while it is open.
  absl::Status RefuseCapturedEvent(DeviceState& d, const EventState& event,
                                   absl::string_view op, uintptr_t handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);
  // StreamWaitEvent's capture rules: a wait on a captured event joins the
  // waiter `handle` into that capture; waiting on another capture's event
  // from a capturing stream merges two captures: refused, both invalidated.
  absl::Status JoinCapture(DeviceState& d, const EventState& event,
                           uintptr_t handle, StreamState* waiter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);
  // Records `duration` of work into the capture `stream` belongs to (an
  // invalidated capture records nothing more).
  void RecordWork(DeviceState& d, const StreamState& stream,
                  absl::Duration duration) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);
  // EndCaptureToGraph's half: ends the capture begun on `stream` (named
  // `name` in messages) and hands over what it captured. FailedPrecondition
  // when it is not the origin, was begun by another thread in a non-Relaxed
  // mode (both invalidate it) or was invalidated (ends it, no graph).
  absl::StatusOr<FinishedCapture> FinishCapture(DeviceState& d,
                                                StreamState& stream,
                                                uintptr_t handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);
  // ResetDevice: forgets every capture of the device.
  void ResetDevice(DeviceState& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);

 private:
  struct CaptureState {
    uintptr_t origin = 0;  // the stream BeginCapture named
    SimCaptureMode mode = SimCaptureMode::kGlobal;
    std::thread::id thread;  // the thread that began it
    uint64_t owner = 0;      // the graph oracle's owner of the graph it makes
    bool invalidated = false;
    // The origin and every stream joined through a wait on a captured event.
    std::vector<uintptr_t> streams;
    std::vector<CapturedWork> work;
  };
  struct DeviceCaptures {
    mutable absl::Mutex mu;
    absl::flat_hash_map<uint64_t, CaptureState> captures
        ABSL_GUARDED_BY(mu);  // by capture id
  };

  DeviceCaptures& captures_of(const DeviceState& d) {
    return *captures_[d.device];
  }
  void InvalidateLocked(DeviceState& d, DeviceCaptures& c, uint64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu, c.mu);
  // Ends capture `id`: its streams stop capturing; the state is erased.
  void DropLocked(DeviceState& d, DeviceCaptures& c, uint64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu, c.mu);

  const SimProfile& profile_;
  SimFaultInjector& faults_;
  SimDevices& devices_;
  SimMemory& memory_;
  SimMisuseLog& misuse_;
  std::vector<std::unique_ptr<DeviceCaptures>> captures_;
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_CAPTURE_H_
