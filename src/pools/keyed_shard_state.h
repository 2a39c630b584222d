// The locked state of one keyed-pool shard (src/pools/keyed_shard.h): its
// idle and draining lists, the count of handles in its care and their single
// retire path (src/lifetime/handle_ledger.h), the leases out
// (src/pools/lease_sites.h), counters, and the decisions made under its lock.
// No runtime call is made here: KeyedShard makes them with the lock released.

#ifndef GPUPOOL_SRC_POOLS_KEYED_SHARD_STATE_H_
#define GPUPOOL_SRC_POOLS_KEYED_SHARD_STATE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/device_health.h"
#include "gpupool/pool_options.h"
#include "gpupool/pool_stats.h"
#include "gpupool/source_location.h"
#include "src/lifetime/cache_line_allocator.h"
#include "src/lifetime/handle_ledger.h"
#include "src/lifetime/mutex.h"
#include "src/lifetime/process_state.h"
#include "src/lifetime/stale_handles.h"
#include "src/pools/lease_sites.h"

namespace gpupool::internal {

class ShardState {
 public:
  ShardState(std::shared_ptr<DeviceHealth> health, const PoolOptions& options,
             int device)
      : health_(std::move(health)),
        options_(options),
        device_(device),
        leases_(options.track_lease_sites) {
    // Room for the first returns at once, not a reallocation at 1, 2, 4, ...
    // idle handles (each an aligned allocation; a pool made per client pays
    // them all).
    idle_.reserve(std::min<size_t>(
        kFirstIdle,
        static_cast<size_t>(std::max(options.max_idle_per_key, 0))));
  }

  // Drops (without runtime calls) handles of an older device generation.
  void DropStale() {
    MutexLock lock(&mu_);
    CurrentGenerationLocked();
  }

  PoolStats Stats() const {
    MutexLock lock(&mu_);
    PoolStats stats = stats_;
    stats.destroyed = ledger_.departed(RetireReason::kDestroyed);
    stats.dropped = ledger_.departed(RetireReason::kDropped);
    stats.leaked = ledger_.departed(RetireReason::kLeaked);
    stats.peak_in_use = leases_.peak();
    stats.in_use = leases_.in_use();
    const uint64_t generation = health_->generation(device_);
    stats.idle = 0;
    for (const Entry& e : idle_) stats.idle += e.generation == generation;
    stats.draining = 0;
    for (const Entry& e : draining_)
      stats.draining += e.generation == generation;
    return stats;
  }

  // Appends the outstanding leases, named by the shard's kind and config.
  void AppendOutstanding(absl::string_view kind, const std::string& config,
                         std::vector<OutstandingLease>* out) const {
    MutexLock lock(&mu_);
    leases_.ForEach([&](uint64_t id, SourceLocation where) {
      out->push_back(
          OutstandingLease{std::string(kind), device_, config, id, where});
    });
  }

 protected:
  struct Entry {
    Entry() = default;
    // Built in place by emplace_back: a temporary's two halves copied as
    // one would stall the store-to-load forwarding on every return.
    Entry(void* handle, uint64_t generation)
        : handle(handle), generation(generation) {}
    void* handle = nullptr;
    uint64_t generation = 0;
  };
  // Written on every acquire and return: on cache lines of their own (see
  // src/lifetime/cache_line_allocator.h).
  using EntryList = std::vector<Entry, CacheLineAllocator<Entry>>;
  using DrainList = std::deque<Entry, CacheLineAllocator<Entry>>;
  enum Source { kIdle, kDrained, kCreate, kWait };
  // What one round of Acquire found under the lock.
  struct AcquireChoice {
    Source source = kWait;
    Entry entry;                // kIdle, kDrained
    LeaseSites::Ticket ticket;  // kIdle, kDrained: reserved
    uint64_t generation = 0;    // kCreate: the handle's generation
  };

  // The next handle for Acquire: an idle one (its lease counted in the same
  // critical section: one lock per hit), a drained one to validate, a slot
  // to create in, or nothing (wait).
  AcquireChoice ChooseForAcquireLocked(SourceLocation where, int* drain_checks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    AcquireChoice pick;
    pick.generation = CurrentGenerationLocked();
    if (!idle_.empty()) {
      pick.source = kIdle;
      pick.entry = idle_.back();
      idle_.pop_back();
    } else if (!draining_.empty() &&
               *drain_checks < options_.drain_checks_per_acquire) {
      pick.source = kDrained;
      pick.entry = draining_.front();
      draining_.pop_front();
      ++*drain_checks;
    } else if (HasRoomLocked()) {
      ++reserved_;  // capacity for the creation Acquire makes next
      pick.source = kCreate;
      return pick;
    } else {
      return pick;
    }
    // An idle handle was validated when it came back and nobody could
    // enqueue on it since: trusted unless validate_on_acquire (opt-in). A
    // drained one was still busy at return: always queried.
    ++stats_.acquired;
    ++stats_.reused;
    pick.ticket = ReserveLeaseLocked(
        where, pick.source == kDrained || options_.validate_on_acquire);
    return pick;
  }

  // Counts a lease about to go out (see LeaseSites::Reserve); it holds the
  // shard until its return is over (EndReturnLocked) or the reservation is
  // undone.
  LeaseSites::Ticket ReserveLeaseLocked(SourceLocation where, bool validating)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++holders_;
    return leases_.Reserve(where, validating);
  }

  // A Return is over: counted done when it was counted as started (Close
  // waits for that; `announced`: it was not) and its lease no longer holds
  // the shard. True when the shard must now delete itself: its pool let go
  // of it (Orphan) and this was the last lease.
  ABSL_MUST_USE_RESULT bool EndReturnLocked(bool announced)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!announced) ++returns_done_;
    --holders_;
    return orphaned_ && holders_ == 0;
  }

  // The pool let go of the shard: true when no lease holds it any more (the
  // caller deletes it), else the last lease's return will.
  ABSL_MUST_USE_RESULT bool OrphanLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    orphaned_ = true;
    return holders_ == 0;
  }

  // The device's generation, read under the lock: generations only grow and
  // every reader takes this lock, so no thread acts on a generation older
  // than one another thread already acted on. Handles of an older
  // generation belong to a dead (or reset) context: forgotten here.
  uint64_t CurrentGenerationLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint64_t generation = health_->generation(device_);
    if (generation <= seen_generation_) return seen_generation_;
    seen_generation_ = generation;
    RetireLocked(RetireReason::kDropped,
                 EraseOlderGenerations(idle_, generation) +
                     EraseOlderGenerations(draining_, generation));
    return generation;
  }

  bool Current(const Entry& entry) const {
    return entry.generation == health_->generation(device_);
  }

  // Room for one more handle under max_live_per_key (live or being created).
  bool HasRoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return options_.max_live_per_key <= 0 ||
           ledger_.in_care() + reserved_ < options_.max_live_per_key;
  }

  // Waits until a handle is returned or capacity frees up; false once the
  // deadline passed. Draining handles complete without notifying us, so
  // while any exist we wake up periodically to re-check them.
  bool WaitForCapacityLocked(absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    const absl::Time until =
        draining_.empty() ? deadline
                          : std::min(deadline, now + absl::Microseconds(200));
    mu_.AwaitWithDeadline(absl::Condition(this, &ShardState::HasCapacity),
                          until);
    return true;
  }

  bool HasCapacity() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !idle_.empty() || closed_ || HasRoomLocked();
  }

  // Waits until no Return is between its entry and its end.
  void AwaitNoReturnInFlight() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &ShardState::NoReturnInFlight));
  }

  bool NoReturnInFlight() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return returns_started_.load(std::memory_order_seq_cst) == returns_done_;
  }

  // A reserved lease whose handle was not handed out: it was never out.
  void UndoReservationLocked(const LeaseSites::Ticket& ticket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --stats_.acquired;
    --stats_.reused;
    leases_.Finish(ticket);
    --holders_;
  }

  void FinishLease(const LeaseSites::Ticket& ticket) {
    MutexLock lock(&mu_);
    leases_.Finish(ticket);
  }

  // A lease came back but its handle must not reach the runtime: leaked
  // (pool closed, process exiting) or dropped (dead device generation).
  void ForgetLocked(const LeaseSites::Ticket& ticket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    leases_.Finish(ticket);
    RetireLocked(closed_ || ProcessIsExiting() ? RetireReason::kLeaked
                                               : RetireReason::kDropped);
  }

  // The single retire path: handles leave the shard's care only here.
  void RetireLocked(RetireReason how, int64_t count = 1, bool faulty = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ledger_.Retire(how, count);
    if (faulty) stats_.discarded_faulty += count;
  }
  void Retire(RetireReason how) {
    MutexLock lock(&mu_);
    RetireLocked(how);
  }

  static constexpr size_t kFirstIdle = 32;

  const std::shared_ptr<DeviceHealth> health_;
  const PoolOptions options_;
  const int device_;

  mutable Mutex mu_;
  EntryList idle_ ABSL_GUARDED_BY(mu_);  // LIFO: warmest on top
  DrainList draining_ ABSL_GUARDED_BY(mu_);
  // Handles in this shard's care: leased, idle, draining, or in a thread's
  // hands being validated or disposed of.
  HandleLedger ledger_ ABSL_GUARDED_BY(mu_);
  // Creations in flight: capacity taken under max_live_per_key.
  int reserved_ ABSL_GUARDED_BY(mu_) = 0;
  LeaseSites leases_ ABSL_GUARDED_BY(mu_);
  uint64_t seen_generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // closed_, readable without the lock for Return's screening.
  std::atomic<bool> closed_flag_{false};
  // Return calls entered without an announcement, and those done with the
  // backend (see Return).
  std::atomic<int64_t> returns_started_{0};
  int64_t returns_done_ ABSL_GUARDED_BY(mu_) = 0;
  // Leases reserved or out whose return is not over: the shard outlives its
  // pool (orphaned_) until they are back (gpupool/internal/lease.h).
  int64_t holders_ ABSL_GUARDED_BY(mu_) = 0;
  bool orphaned_ ABSL_GUARDED_BY(mu_) = false;
  // Counters other than the handles' departures (ledger_) and leases
  // (leases_).
  PoolStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_POOLS_KEYED_SHARD_STATE_H_
