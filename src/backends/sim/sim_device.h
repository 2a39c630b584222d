// Per-device state of SimBackend: live handles, allocations, pending work,
// poison, and the call counters of that device.
//
// SimBackend keeps one DeviceState per simulated device, each with its own
// mutex, so that callers working on different devices never serialise on a
// shared lock (pool contention benchmarks run on top of the simulator).
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
#include <limits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_capture.h"
#include "src/backends/sim/sim_handles.h"

namespace gpupool {
namespace sim_internal {

struct StreamState {
  StreamConfig config;
  // Tickets this stream must complete (its own work and awaited events).
  std::vector<uint64_t> work;
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

struct AllocationState {
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::kDevice;
};

// Accounting of one memory kind of one device.
struct MemoryAccount {
  size_t live_bytes = 0;
  size_t limit = std::numeric_limits<size_t>::max();
  // Bump offset into the kind's address region; never moves back, so an
  // address is never handed out twice.
  uint64_t next_offset = 0;
};

// How a wait for a handle's work to complete ended.
enum class WaitResult {
  kIdle,      // all work complete
  kPoisoned,  // the device was poisoned meanwhile
  kGone,      // the handle was destroyed meanwhile (ResetDevice or a race)
  kFaulted,   // FaultStream hit the stream meanwhile
};

// alignas keeps the counters of different devices on different cache lines.
struct alignas(64) DeviceState {
  explicit DeviceState(size_t memory_per_device);
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;

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
  absl::flat_hash_map<uintptr_t, AllocationState> allocations
      ABSL_GUARDED_BY(mu);
  // Indexed by KindIndex(kind).
  MemoryAccount memory[2] ABSL_GUARDED_BY(mu);
  // Open captures, graphs and memory claims (sim_capture.h).
  CaptureModel capture ABSL_GUARDED_BY(mu);

  // --- Capture helpers (sim_capture.cc)
  // --------------------------------------- Invalidates capture `id` (every
  // stream of it reports kInvalidated).
  void InvalidateCapture(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Ends capture `id`: its streams stop capturing; the state is erased.
  void DropCapture(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A destroyed stream leaves its capture (the whole capture when it is the
  // origin: HIP ends it silently, CUDA leaves it undefined).
  void DetachFromCapture(uintptr_t stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // OK unless `event` is a captured event; then the refusal
  // (cudaErrorStreamCaptureUnsupported / hipErrorCapturedEvent), after
  // invalidating the event's capture while it is open.
  absl::Status RefuseCapturedEvent(const EventState& event,
                                   absl::string_view op, uintptr_t handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // StreamWaitEvent's capture rules: a wait on a captured event joins the
  // waiter `handle` into that capture; waiting on another capture's event
  // from a capturing stream merges two captures: refused, both invalidated.
  absl::Status JoinCapture(const EventState& event, uintptr_t handle,
                           StreamState* waiter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The live allocation containing [ptr, ptr + bytes), as a touched range.
  bool FindRange(uintptr_t ptr, size_t bytes, TouchedRange* range) const
      ABSL_SHARED_LOCKS_REQUIRED(mu);

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

  // Erases the stream or event `handle` and counts it destroyed. Returns
  // false (and counts nothing) when it was not live.
  bool Forget(HandleKind kind, uintptr_t handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // --- Counters --------------------------------------------------------------
  // Calls per SimOp that named this device; their sum is calls_on_device.
  std::atomic<int64_t> op_calls[kSimOpCount] = {};
  std::atomic<int64_t> streams_created{0};
  std::atomic<int64_t> streams_destroyed{0};
  std::atomic<int64_t> events_created{0};
  std::atomic<int64_t> events_destroyed{0};
  std::atomic<int64_t> allocations_made{0};
  std::atomic<int64_t> allocations_freed{0};
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

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_DEVICE_H_
