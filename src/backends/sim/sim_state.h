// Shared internals of SimBackend: the backend-wide state behind the pimpl
// (devices, injected failures, misuse log) and the helpers every simulated
// primitive uses to enter a call, find a handle and report misuse.
//
// Only sim_*.cc include this. The split: sim_backend.cc holds the stream and
// event primitives, sim_memory.cc the memory ones, sim_capture.cc the capture
// model (its primitives, controls and graph oracle), sim_control.cc the other
// test controls and inspection, sim_state.cc what they share.
//
// Thread safety: `State` is shared by all callers; per-device data is guarded
// by each DeviceState's mutex, the rest by the mutexes annotated below or by
// atomics.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_STATE_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_STATE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_ipc.h"

namespace gpupool {
namespace sim_internal {

// Sleeps (or, below the timer slack, spins) for `latency`. Never call it
// while holding an internal lock.
void ChargeLatency(absl::Duration latency);

// "0x1000000000015".
std::string Hex(uintptr_t value);

// kCaller error with `code` and a "sim: " prefixed message.
absl::Status CallerError(absl::StatusCode code, absl::string_view message);

// kNotReady (Unavailable) for the stream or event `handle`.
absl::Status NotReady(absl::string_view what, uintptr_t handle);

// The calling thread's current device per SimBackend instance id.
absl::flat_hash_map<uint64_t, int>& ThreadCurrentDevices();

struct InjectedFailure {
  SimOp op;
  int device;  // -1: any device.
  absl::Status status;
};

}  // namespace sim_internal

struct SimBackend::State {
  // Holds a misuse found under a device lock and reports it on destruction.
  // Declared before the lock, it is destroyed after it, so the user's hook
  // never runs under an internal lock (it may call back into the backend).
  class MisuseReporter {
   public:
    explicit MisuseReporter(State* state) : state_(state) {}
    MisuseReporter(const MisuseReporter&) = delete;
    MisuseReporter& operator=(const MisuseReporter&) = delete;
    ~MisuseReporter() {
      if (!message_.empty()) state_->ReportMisuse(std::move(message_));
    }
    // Records `message`; returns the kCaller status the primitive returns.
    absl::Status Flag(std::string message) {
      message_ = std::move(message);
      return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                        absl::StrCat("sim misuse: ", message_));
    }

   private:
    State* state_;
    std::string message_;
  };

  explicit State(SimOptions opts);

  bool ValidDevice(int device) const {
    return device >= 0 && device < device_count;
  }
  sim_internal::DeviceState& device_state(int device) {
    return *devices[device];
  }

  // Steps 1-3 of every primitive naming `device` (see sim_backend.cc): count
  // the call, return a matching FailNext injection, reject a bad device.
  absl::Status Enter(SimOp op, int device) {
    int index = static_cast<int>(op);
    bool valid = ValidDevice(device);
    if (valid) {
      devices[device]->op_calls[index].fetch_add(1, std::memory_order_relaxed);
    } else {
      calls_without_device[index].fetch_add(1, std::memory_order_relaxed);
    }
    if (queued_failures.load(std::memory_order_acquire) > 0) {
      absl::optional<absl::Status> injected = TakeInjected(op, device);
      if (injected.has_value()) return *std::move(injected);
    }
    if (!valid) {
      return sim_internal::CallerError(
          absl::StatusCode::kInvalidArgument,
          absl::StrCat(SimOpName(op), ": device ", device, " out of range [0, ",
                       device_count, ")"));
    }
    return absl::OkStatus();
  }

  // A fresh stream or event handle of `device` (never reused): the device's
  // sticky error once poisoned, kOutOfMemory once the handle space is used
  // up.
  absl::StatusOr<uintptr_t> NewHandleLocked(sim_internal::DeviceState& d,
                                            int device,
                                            sim_internal::HandleKind kind)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
    if (d.poisoned) return d.sticky;
    if (d.next_handle_id > sim_internal::kMaxHandleId) {
      return FaultError(Fault::kOutOfMemory,
                        absl::StatusCode::kResourceExhausted,
                        "sim: handle space of the device exhausted");
    }
    return sim_internal::EncodeHandle(device, instance_tag, d.next_handle_id++,
                                      kind);
  }

  // The failed-entry path of DestroyStream/DestroyEvent. Backend contract:
  // after a destroy the handle is invalid whatever the status, so an injected
  // failure still releases a live handle. Returns `status`.
  absl::Status FailDestroy(absl::Status status, int device,
                           sim_internal::HandleKind kind, uintptr_t handle) {
    if (ValidDevice(device)) {
      sim_internal::DeviceState& d = device_state(device);
      absl::MutexLock lock(&d.mu);
      d.Forget(kind, handle);
    }
    return status;
  }

  // Steps 1-2 for primitives that name no device.
  absl::Status EnterWithoutDevice(SimOp op) {
    calls_without_device[static_cast<int>(op)].fetch_add(
        1, std::memory_order_relaxed);
    if (queued_failures.load(std::memory_order_acquire) > 0) {
      absl::optional<absl::Status> injected = TakeInjected(op, -1);
      if (injected.has_value()) return *std::move(injected);
    }
    return absl::OkStatus();
  }

  // Removes and returns the first queued injection matching the call.
  absl::optional<absl::Status> TakeInjected(SimOp op, int device);

  // The sticky status when `d` is poisoned, OK otherwise.
  static absl::Status CheckPoison(const sim_internal::DeviceState& d) {
    absl::ReaderMutexLock lock(&d.mu);
    return d.poisoned ? d.sticky : absl::OkStatus();
  }

  // Counts and logs `message` and runs the on_misuse hook. Call it without
  // holding any internal lock.
  void ReportMisuse(std::string message);

  // Why `handle` is not a live `kind` handle of `device` (whose state is `d`).
  std::string DiagnoseHandle(const sim_internal::DeviceState& d, int device,
                             uintptr_t handle, sim_internal::HandleKind kind,
                             absl::string_view op, bool destroying) const
      ABSL_SHARED_LOCKS_REQUIRED(d.mu);

  // The live stream (event) `handle` of `device`, or the misuse status after
  // flagging it on `misuse`.
  absl::StatusOr<sim_internal::StreamState*> FindStream(
      sim_internal::DeviceState& d, int device, NativeStream stream,
      absl::string_view op, MisuseReporter& misuse, bool destroying = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
    uintptr_t handle = sim_internal::HandleValue(stream);
    auto it = d.streams.find(handle);
    if (it != d.streams.end()) return &it->second;
    return misuse.Flag(DiagnoseHandle(
        d, device, handle, sim_internal::HandleKind::kStream, op, destroying));
  }
  absl::StatusOr<sim_internal::EventState*> FindEvent(
      sim_internal::DeviceState& d, int device, NativeEvent event,
      absl::string_view op, MisuseReporter& misuse, bool destroying = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
    uintptr_t handle = sim_internal::HandleValue(event);
    auto it = d.events.find(handle);
    if (it != d.events.end()) return &it->second;
    return misuse.Flag(DiagnoseHandle(
        d, device, handle, sim_internal::HandleKind::kEvent, op, destroying));
  }

  // The device a handle given to a test-control method belongs to, or -1
  // after reporting misuse (those methods have no device argument).
  int DeviceOfHandle(const void* handle, absl::string_view op);

  // Live handles on devices that are not poisoned, sorted for stable output.
  std::vector<std::string> CollectLeaks() const;

  SimOptions options;
  int device_count = 0;
  // Process-wide unique, never reused (keys the thread's current device).
  const uint64_t instance_id;
  // Low bits of instance_id stamped into handles to recognise foreign ones.
  const uint64_t instance_tag;
  std::vector<std::unique_ptr<sim_internal::DeviceState>> devices;
  // Calls that named no valid device (per op).
  std::atomic<int64_t> calls_without_device[kSimOpCount] = {};

  // Lets the hot path skip the injection lock when nothing is queued.
  std::atomic<int> queued_failures{0};
  absl::Mutex injection_mu;
  std::deque<sim_internal::InjectedFailure> injected
      ABSL_GUARDED_BY(injection_mu);

  std::atomic<int64_t> misuse_count{0};
  mutable absl::Mutex misuse_mu;
  std::vector<std::string> misuse_messages ABSL_GUARDED_BY(misuse_mu);

  // The graph oracle's findings (kept apart from misuse: tests assert on them
  // directly, and a deliberate violation must not fail through on_misuse).
  std::atomic<int64_t> graph_misuse_count{0};
  mutable absl::Mutex graph_misuse_mu;
  std::vector<std::string> graph_misuse_log ABSL_GUARDED_BY(graph_misuse_mu);
  // The shared-memory IPC registry (sim_ipc.h), named by
  // options.ipc_namespace.
  sim_internal::SimIpc ipc{options.ipc_namespace};
};

}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_STATE_H_
