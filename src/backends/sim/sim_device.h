// The simulated devices: DeviceState holds one device's streams, events,
// pending work and poison; SimDevices owns them all, with the device-wide
// primitives and controls (device count, current device, poison, completing
// all work).
//
// Each device has its own mutex, so that callers working on different
// devices never serialise on a shared lock (pool contention benchmarks run on
// top of the simulator). Streams, events and work tickets share it: recording
// an event copies a stream's tickets, a wait appends an event's to a stream.
// Memory (sim_memory.h) and captures (sim_capture.h) are models of their own
// with their own locks, taken after a device's (the order is in
// sim_backend.cc).
//
// Work model: every SubmitWork creates a ticket with a completion deadline in
// real time (absl::InfiniteFuture() for work that completes only when a test
// says so). A stream holds the tickets it must finish; an event recording
// copies the stream's tickets; StreamWaitEvent appends the event's tickets to
// the stream. A ticket is complete once its deadline passed or once it was
// removed from `tickets` (CompleteWork / CompleteAllWork), so completing work
// completes every event and stream that depends on it.
//
// Thread safety: fields marked ABSL_GUARDED_BY(mu) need `mu`; counters are
// atomics read and written without it.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_DEVICE_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_DEVICE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
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
#include "src/backends/sim/sim_faults.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_misuse.h"

namespace gpupool {
namespace sim_internal {

struct StreamState {
  StreamConfig config;
  // Tickets this stream must complete (its own work and awaited events).
  std::vector<uint64_t> work;
  // Kept here, not in the capture model, because every stream primitive
  // reads it under the device's lock; the capture model writes it.
  CaptureStatus capture = CaptureStatus::kNone;
  // The capture this stream belongs to (origin or joined); 0 when none.
  uint64_t capture_id = 0;
  bool attributes_dirty = false;
  // Injected by FaultStream; returned by queries and synchronizes.
  absl::Status fault;
};

struct EventState {
  EventConfig config;
  // Tickets captured by the last RecordEvent.
  std::vector<uint64_t> work;
  // The capture the last RecordEvent was recorded into (a "captured event",
  // which no query or synchronize may touch); 0 when recorded eagerly.
  uint64_t captured_in = 0;
};

// How a wait for a handle's work to complete ended.
enum class WaitResult {
  kIdle,      // all work complete
  kPoisoned,  // the device was poisoned meanwhile
  kGone,      // the handle was destroyed meanwhile (ResetDevice or a race)
  kFaulted,   // FaultStream hit the stream meanwhile
};

// Live handles found at a leak check: (handle or address, description).
using LeakList = std::vector<std::pair<uintptr_t, std::string>>;

// alignas keeps the counters of different devices on different cache lines.
struct alignas(64) DeviceState {
  // `instance_tag` is stamped into handles to recognise foreign ones.
  DeviceState(int device, uint64_t instance_tag);
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;

  const int device;
  const uint64_t instance_tag;

  mutable absl::Mutex mu;
  // Signalled whenever a waiter may have to re-check: work completed, a
  // device poisoned or reset, a stream faulted.
  absl::CondVar changed;

  bool poisoned ABSL_GUARDED_BY(mu) = false;
  absl::Status sticky ABSL_GUARDED_BY(mu);
  // Sequence number of the next stream or event handle; never reset.
  uint64_t next_handle_id ABSL_GUARDED_BY(mu) = 1;
  absl::flat_hash_map<uintptr_t, StreamState> streams ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uintptr_t, EventState> events ABSL_GUARDED_BY(mu);

  // The sticky status when poisoned, OK otherwise.
  absl::Status PoisonStatus() const ABSL_LOCKS_EXCLUDED(mu);

  // --- Handles ---------------------------------------------------------------
  // A fresh stream or event handle (never reused): the sticky error once
  // poisoned, kOutOfMemory once the handle space is used up.
  absl::StatusOr<uintptr_t> NewHandleLocked(HandleKind kind)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Why `handle` is not a live `kind` handle of this device.
  std::string DiagnoseHandle(uintptr_t handle, HandleKind kind,
                             absl::string_view op, bool destroying) const
      ABSL_SHARED_LOCKS_REQUIRED(mu);
  // The live stream (event) `handle`, or the misuse status after flagging it
  // on `misuse`.
  absl::StatusOr<StreamState*> FindStream(NativeStream stream,
                                          absl::string_view op,
                                          SimMisuseLog::Reporter& misuse,
                                          bool destroying = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::StatusOr<EventState*> FindEvent(NativeEvent event, absl::string_view op,
                                        SimMisuseLog::Reporter& misuse,
                                        bool destroying = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Erases the stream or event `handle` and counts it destroyed. Returns
  // false (and counts nothing) when it was not live.
  bool Forget(HandleKind kind, uintptr_t handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Live streams and events, for the leak check.
  void AppendLeaks(LeakList* leaks) const ABSL_SHARED_LOCKS_REQUIRED(mu);
  // ResetDevice's part for this state: destroys every stream and event,
  // completes all work, clears the poison. Ids carry on.
  void ResetLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // --- Work tickets ---------------------------------------------------------
  // Adds a ticket completing at `deadline`; returns its id.
  uint64_t AddTicket(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Drops complete tickets from `work`. Returns true while some remain and
  // sets `*latest` to the latest remaining deadline.
  bool PruneWork(std::vector<uint64_t>* work, absl::Time now,
                 absl::Time* latest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Like PruneWork without changing anything (for const inspection).
  bool HasPendingWork(const std::vector<uint64_t>& work, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu);
  // Completes the tickets in `work` (and so everything depending on them).
  void CompleteTickets(std::vector<uint64_t>* work)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Completes every ticket of this device.
  void CompleteAllTickets() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Blocks, releasing `mu` while waiting, until the work of the stream or
  // event `handle` is complete (or something makes waiting pointless).
  WaitResult WaitStreamIdle(uintptr_t handle, bool stop_on_fault)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  WaitResult WaitEventIdle(uintptr_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // --- Counters --------------------------------------------------------------
  std::atomic<int64_t> streams_created{0};
  std::atomic<int64_t> streams_destroyed{0};
  std::atomic<int64_t> events_created{0};
  std::atomic<int64_t> events_destroyed{0};
  std::atomic<int64_t> wait_edges{0};

 private:
  // Waits for `latest` (a deadline or InfiniteFuture) or a signal.
  void WaitUntil(absl::Time latest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Pending tickets and their deadlines; a missing id is complete.
  absl::flat_hash_map<uint64_t, absl::Time> tickets_ ABSL_GUARDED_BY(mu);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu) = 1;
  // Size at which AddTicket sweeps expired tickets nobody asked about, so
  // fire-and-forget work does not grow the map forever.
  size_t sweep_at_ ABSL_GUARDED_BY(mu) = 1024;
};

class SimDevices {
 public:
  // `device_count` is already clamped to what addresses can encode.
  SimDevices(int device_count, SimFaultInjector& faults, SimMisuseLog& misuse);
  SimDevices(const SimDevices&) = delete;
  SimDevices& operator=(const SimDevices&) = delete;

  int device_count() const { return static_cast<int>(devices_.size()); }
  bool ValidDevice(int device) const {
    return device >= 0 && device < device_count();
  }
  DeviceState& device(int device) { return *devices_[device]; }
  const DeviceState& device(int device) const { return *devices_[device]; }

  // The device a handle given to a test-control method belongs to, or -1
  // after reporting misuse (those methods have no device argument).
  int DeviceOfHandle(const void* handle, absl::string_view op);
  // The failed-entry path of DestroyStream/DestroyEvent. Backend contract:
  // after a destroy the handle is invalid whatever the status, so an injected
  // failure still releases a live handle. Returns `status`.
  absl::Status FailDestroy(absl::Status status, int device, HandleKind kind,
                           uintptr_t handle);

  // --- Backend primitives ----------------------------------------------------
  absl::StatusOr<int> DeviceCount();
  absl::StatusOr<int> GetCurrentDevice();
  absl::Status SetCurrentDevice(int device);

  // --- Test controls and inspection ---------------------------------------
  void PoisonDevice(int device, absl::Status sticky);
  void CompleteAllWork();
  bool is_poisoned(int device) const;
  // Sums one atomic counter of DeviceState over all devices.
  int64_t Sum(std::atomic<int64_t> DeviceState::*counter) const;

 private:
  SimFaultInjector& faults_;
  SimMisuseLog& misuse_;
  // Process-wide unique, never reused (keys the thread's current device).
  const uint64_t instance_id_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_DEVICE_H_
