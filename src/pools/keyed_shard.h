// One shard of a keyed pool (src/pools/keyed_pool.h): the handles of one
// (device, config) — an idle LIFO, a draining list (returned with work still
// pending), the leases out (src/pools/lease_sites.h) and the count of handles
// in its care (src/lifetime/handle_ledger.h) — under its own Mutex. The runtime
// is never called while that lock is held: every create, query and destroy runs
// with it released, capacity reserved beforehand so that bounds hold.
//
// A shard outlives its pool while leases are out: it counts them under its
// lock (in the sections acquire and return take anyway, so a lease writes
// no shared reference count), and when the pool lets go of it (Orphan) the
// last return deletes it. A lease returned after its pool was destroyed thus
// finds a closed shard and leaks its handle (no runtime call) instead of
// touching freed memory; Close waits for releases already inside the
// runtime, so none reaches the backend after the pool's destructor returned.

#ifndef GPUPOOL_SRC_POOLS_KEYED_SHARD_H_
#define GPUPOOL_SRC_POOLS_KEYED_SHARD_H_

#include <algorithm>
#include <atomic>
#include <chrono>  // NOLINT(build/c++11): the monotonic clock, below
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/internal/lease.h"
#include "gpupool/pool_options.h"
#include "gpupool/pool_stats.h"
#include "gpupool/source_location.h"
#include "src/lifetime/cache_line_allocator.h"
#include "src/lifetime/fault_reaction.h"
#include "src/lifetime/handle_ledger.h"
#include "src/lifetime/mutex.h"
#include "src/lifetime/process_state.h"
#include "src/lifetime/return_announcements.h"
#include "src/pools/keyed_shard_state.h"
#include "src/pools/lease_sites.h"

namespace gpupool::internal {

// What a Kind's return protocol found: a reaction and the status behind it.
struct Check {
  Reaction reaction = Reaction::kProceed;
  absl::Status status;
};

inline Check CheckFor(const absl::Status& status) {
  return {ReactionTo(status), status};
}

// Cache-line aligned: shards of different devices are used by different
// threads, and each one's lock and lists are written on every hit; sharing a
// line with a neighbour's would make two threads on two devices slow each
// other down.
template <typename Kind>
class alignas(kCacheLine) KeyedShard final
    : public LeaseOwner,
      public std::enable_shared_from_this<KeyedShard<Kind>>,
      private ShardState {
 public:
  using Config = typename Kind::Config;

  KeyedShard(Backend* backend, std::shared_ptr<DeviceHealth> health,
             const PoolOptions& options, int device, Config config,
             bool resettable_attributes)
      : ShardState(std::move(health), options, device),
        backend_(backend),
        config_(std::move(config)),
        fork_epoch_(ForkEpoch()),
        resettable_attributes_(resettable_attributes) {}

  int device() const override { return device_; }
  const void* config() const override { return &config_; }
  const Config& config_value() const { return config_; }

  absl::StatusOr<Lease> Acquire(absl::Duration timeout, SourceLocation where) {
    // Read the clock only if we ever have to wait (bounded pools).
    absl::Time deadline = absl::InfiniteFuture();
    int drain_checks = 0;
    for (;;) {
      // Health is re-read every round: a poison seen by another thread
      // while we waited must stop us from creating on a dead device.
      if (health_->is_poisoned(device_)) {
        DropStale();
        return health_->CheckHealthy(device_);
      }
      AcquireChoice pick;
      {
        MutexLock lock(&mu_);
        if (closed_) return ClosedError();
        pick = ChooseForAcquireLocked(where, &drain_checks);
        if (pick.source == kWait) {
          if (deadline == absl::InfiniteFuture()) {
            deadline = absl::Now() + timeout;
          }
          if (!WaitForCapacityLocked(deadline)) return TimeoutLocked(timeout);
          drain_checks = 0;
          continue;
        }
      }
      if (pick.source == kCreate) {
        absl::StatusOr<void*> created =
            CreateInReservedSlot(&where, &pick.ticket);
        if (!created.ok()) return created.status();
        return MakeLease(*created, pick.ticket, pick.generation);
      }
      if (pick.ticket.validating && !Validated(pick)) continue;
      if (pick.ticket.validating ||
          pick.entry.generation != health_->generation(device_)) {
        MutexLock lock(&mu_);
        if (pick.entry.generation != health_->generation(device_)) {
          // Poisoned or recovered while we validated: never hand it out.
          UndoReservationLocked(pick.ticket);
          RetireLocked(RetireReason::kDropped);
          continue;
        }
        leases_.Confirm(pick.ticket);
      }
      return MakeLease(pick.entry.handle, pick.ticket, pick.entry.generation);
    }
  }

  void Return(void* handle, uint64_t lease_id, uint32_t site,
              uint64_t generation, ReturnAs how) override {
    // A forked child must take no lock and make no runtime call, nor delete
    // this shard (see "Fork" in keyed_pool.h): the lease keeps holding it,
    // so it lives for good.
    if (ForkEpoch() != fork_epoch_) return;
    // Announced (or, where it cannot be, counted as started) before the
    // closed screening below; Close publishes closed_flag_ before it looks
    // for announced and started returns (src/lifetime/return_announcements.h):
    // either this return sees the pool closed and makes no runtime call, or
    // Close waits until it is done with the backend. "Done" is counted in the
    // last locked section the return takes anyway, and that lock's release
    // wakes Close.
    const bool announced = BeginAnnouncedReturn(this);
    if (!announced) returns_started_.fetch_add(1, std::memory_order_seq_cst);
    const bool last = ReturnAndEnd(handle, LeaseSites::Ticket{lease_id, site},
                                   generation, how, announced);
    if (announced) EndAnnouncedReturn();
    if (last) delete this;  // orphaned by its pool, and this the last lease
  }

  // The deleter of the pool's references (KeyedPool::GetOrCreateShard): the
  // shard is deleted now if no lease holds it, else by the last return.
  static void Orphan(KeyedShard* shard) {
    // A forked child leaks it (see Return).
    if (ForkEpoch() != shard->fork_epoch_) return;
    bool unheld;
    {
      MutexLock lock(&shard->mu_);
      unheld = shard->OrphanLocked();
    }
    if (unheld) delete shard;
  }

  // Creates handles until `count` are idle, bounded by the caps.
  absl::Status Prewarm(int count, const std::atomic<bool>* stop) {
    for (;;) {
      if (stop->load(std::memory_order_acquire) || ProcessIsExiting()) {
        return absl::CancelledError("prewarm stopped: pool shutting down");
      }
      absl::Status healthy = health_->CheckHealthy(device_);
      if (!healthy.ok()) return healthy;
      uint64_t generation = 0;
      {
        MutexLock lock(&mu_);
        if (closed_) return ClosedError();
        generation = CurrentGenerationLocked();
        const int held = static_cast<int>(idle_.size());
        if (held >= count || held >= options_.max_idle_per_key ||
            !HasRoomLocked()) {
          return absl::OkStatus();
        }
        ++reserved_;
      }
      absl::StatusOr<void*> created = CreateInReservedSlot();
      if (!created.ok()) return created.status();
      MutexLock lock(&mu_);
      idle_.emplace_back(*created, generation);
    }
  }

  // Destroys idle handles and drained handles whose work finished.
  void Trim() {
    DropStale();
    EntryList idle;
    DrainList draining;
    {
      MutexLock lock(&mu_);
      if (closed_) return;
      idle.swap(idle_);
      draining.swap(draining_);
    }
    // A sticky fault met on one handle poisons the device (new generation):
    // the rest of the batch must be dropped without a call.
    for (const Entry& entry : idle) {
      if (!Current(entry)) {
        Retire(RetireReason::kDropped);
      } else {
        Destroy(entry.handle, /*faulty=*/false);
      }
    }
    for (const Entry& entry : draining) {
      if (!Current(entry)) {
        Retire(RetireReason::kDropped);
        continue;
      }
      absl::Status query = Kind::Query(*backend_, device_, entry.handle);
      if (FaultOf(query) == Fault::kNotReady) {
        MutexLock lock(&mu_);
        draining_.push_back(entry);
      } else if (query.ok()) {
        Destroy(entry.handle, /*faulty=*/false);
      } else {
        Dispose(entry.handle, CheckFor(query), /*faulty=*/true);
      }
    }
  }

  // Pool destruction: hands back every idle/draining handle (destroyed
  // through the runtime when `call_runtime`, else leaked), refuses
  // everything afterwards, and waits for releases inside the runtime.
  void Close(bool call_runtime) {
    EntryList handles;
    bool leases_out;
    {
      MutexLock lock(&mu_);
      closed_ = true;
      closed_flag_.store(true, std::memory_order_seq_cst);
      // With no lease out (none reserved, none returning), no return can be
      // in flight or start: nothing to fence or wait for.
      leases_out = holders_ > 0;
      handles.swap(idle_);
      handles.insert(handles.end(), draining_.begin(), draining_.end());
      draining_.clear();
    }
    // Only the pool's destruction closes a shard, after which its statistics
    // can no longer be read: the handles are destroyed untimed (no clock
    // reads, no latency sample) and retired under one lock.
    int64_t destroyed = 0;
    int64_t dropped = 0;
    for (const Entry& entry : handles) {
      // Re-read per handle: a destroy that fails with a sticky fault poisons
      // the device, and the remaining handles must then be dropped.
      if (call_runtime && Current(entry) &&
          DestroyHandle(entry.handle, /*latency=*/nullptr)) {
        ++destroyed;
      } else {
        ++dropped;
      }
    }
    if (!handles.empty()) {
      MutexLock lock(&mu_);
      if (destroyed > 0) RetireLocked(RetireReason::kDestroyed, destroyed);
      if (dropped > 0) {
        RetireLocked(
            call_runtime ? RetireReason::kDropped : RetireReason::kLeaked,
            dropped);
      }
    }
    if (leases_out) {
      AwaitAnnouncedReturns(this);
      AwaitNoReturnInFlight();
    }
  }

  using ShardState::DropStale;
  using ShardState::Stats;

  void AppendOutstanding(std::vector<OutstandingLease>* out) const {
    ShardState::AppendOutstanding(Kind::kName, config_.ToString(), out);
  }

 private:
  // Queries a reserved handle; false (reservation undone, the handle back in
  // the draining list or disposed of) when it cannot go out.
  bool Validated(const AcquireChoice& pick) {
    absl::Status query = Kind::Query(*backend_, device_, pick.entry.handle);
    if (query.ok()) return true;
    {
      MutexLock lock(&mu_);
      UndoReservationLocked(pick.ticket);
      if (FaultOf(query) == Fault::kNotReady) {
        draining_.push_back(pick.entry);
        return false;
      }
    }
    Dispose(pick.entry.handle, CheckFor(query), /*faulty=*/true);
    return false;
  }

  // The return protocol, ending in the locked section that ends the return
  // (EndReturnLocked); returns its answer: whether to delete the shard.
  // `announced`: counted by an announcement, not in returns_started_.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool ReturnAndEnd(void* handle,
                                                 LeaseSites::Ticket ticket,
                                                 uint64_t generation,
                                                 ReturnAs how, bool announced) {
    // Screened without the lock (re-checked under it below): after the pool
    // was destroyed (closed) or exit began, never touch the runtime; a
    // handle of an older generation belongs to a dead context.
    if (closed_flag_.load(std::memory_order_seq_cst) || ProcessIsExiting() ||
        generation != health_->generation(device_)) {
      MutexLock lock(&mu_);
      ForgetLocked(ticket);
      return EndReturnLocked(announced);
    }
    if (how == ReturnAs::kDiscard) {
      FinishLease(ticket);
      Destroy(handle, /*faulty=*/true);
      return EndReturn(announced);
    }
    // One validating call: the query. Its failure is also how a capturing
    // stream shows (the query of a capturing stream is refused), so the
    // capture is examined only then; attributes are reset only where the
    // backend has any. An event the caller saw complete needs no query.
    absl::Status query =
        how == ReturnAs::kKnownIdle && Kind::kKnownIdleSkipsQuery
            ? absl::OkStatus()
            : Kind::Query(*backend_, device_, handle);
    Check check;
    if (!query.ok() && FaultOf(query) != Fault::kNotReady) {
      check = Kind::CheckFailedQuery(*backend_, device_, handle, query);
    } else if (resettable_attributes_) {
      check = Kind::ResetAttributes(*backend_, device_, handle);
    }
    if (check.reaction != Reaction::kProceed) {
      FinishLease(ticket);
      Dispose(handle, check, /*faulty=*/true);
      return EndReturn(announced);
    }
    {
      MutexLock lock(&mu_);
      if (closed_ || ProcessIsExiting() ||
          generation != health_->generation(device_)) {
        ForgetLocked(ticket);
        return EndReturnLocked(announced);
      }
      leases_.Finish(ticket);
      if (static_cast<int>(idle_.size() + draining_.size()) <
          options_.max_idle_per_key) {
        if (query.ok()) {
          idle_.emplace_back(handle, generation);
        } else {
          draining_.emplace_back(handle, generation);
        }
        return EndReturnLocked(announced);
      }
    }
    Destroy(handle, /*faulty=*/false);
    return EndReturn(announced);
  }

  bool EndReturn(bool announced) {
    MutexLock lock(&mu_);
    return EndReturnLocked(announced);
  }

  absl::Status ClosedError() const {
    return absl::FailedPreconditionError(
        absl::StrCat(Kind::kName, " pool was destroyed"));
  }

  absl::Status TimeoutLocked(absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++stats_.acquire_timeouts;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s pool: max_live_per_key=%d reached on device %d {%s} "
        "(in_use=%d, draining=%d) and nothing was returned within %s",
        Kind::kName, options_.max_live_per_key, device_, config_.ToString(),
        leases_.in_use(), draining_.size(), absl::FormatDuration(timeout)));
  }

  Lease MakeLease(void* handle, const LeaseSites::Ticket& ticket,
                  uint64_t generation) {
    return Lease(this, handle, ticket.id, ticket.site, generation);
  }

  // Applies a non-proceed check to a handle we hold (not in any list).
  void Dispose(void* handle, const Check& check, bool faulty) {
    switch (check.reaction) {
      case Reaction::kProceed:
      case Reaction::kDestroy:
        Destroy(handle, faulty);
        return;
      case Reaction::kPoison:
        health_->Poison(device_, check.status);
        Retire(RetireReason::kDropped);
        return;
      case Reaction::kLeak:
        Retire(RetireReason::kLeaked);
        return;
    }
  }

  // Creates a handle in a slot the caller reserved (`++reserved_`), which
  // becomes a handle in care on success and is given back on failure, where
  // a sticky fault poisons the device. With `lease_at`, a new handle is
  // leased (an acquire from `*lease_at`, its ticket in `*ticket`) in the
  // same locked section that takes it into care.
  absl::StatusOr<void*> CreateInReservedSlot(
      const SourceLocation* lease_at = nullptr,
      LeaseSites::Ticket* ticket = nullptr) ABSL_LOCKS_EXCLUDED(mu_) {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<void*> created = Kind::Create(*backend_, device_, config_);
    const absl::Duration latency = absl::FromChrono(Clock::now() - start);
    if (!created.ok() && FaultOf(created.status()) == Fault::kDevice) {
      health_->Poison(device_, created.status());
    }
    MutexLock lock(&mu_);
    --reserved_;
    if (created.ok()) {
      ledger_.Admit();
      ++stats_.created;
      stats_.create_latency.Record(latency);
      if (lease_at != nullptr) {
        ++stats_.acquired;
        *ticket = ReserveLeaseLocked(*lease_at, /*validating=*/false);
      }
    }
    return created;
  }

  void Destroy(void* handle, bool faulty) {
    absl::Duration latency;
    if (!DestroyHandle(handle, &latency)) {
      Retire(RetireReason::kDropped);
      return;
    }
    MutexLock lock(&mu_);
    RetireLocked(RetireReason::kDestroyed, 1, faulty);
    stats_.destroy_latency.Record(latency);
  }

  // The before_destroy hook, then the runtime's destroy (a sticky fault
  // poisons the device), timed into `latency` when given. False, with no
  // runtime call, when the hook met a sticky fault: a dead device's handle
  // is dropped.
  bool DestroyHandle(void* handle, absl::Duration* latency) {
    if (options_.before_destroy) {
      options_.before_destroy(device_, handle);
      if (health_->is_poisoned(device_)) return false;
    }
    absl::Status status;
    if (latency != nullptr) {
      const Clock::time_point start = Clock::now();
      status = Kind::Destroy(*backend_, device_, handle);
      *latency = absl::FromChrono(Clock::now() - start);
    } else {
      status = Kind::Destroy(*backend_, device_, handle);
    }
    if (FaultOf(status) == Fault::kDevice) health_->Poison(device_, status);
    return true;
  }

  // Create and destroy latencies are read on the monotonic clock: one vDSO
  // read each, where absl::Now (the wall clock, which may step) costs a
  // calibrated cycle-clock read under a lock in the Abseil Debian ships.
  using Clock = std::chrono::steady_clock;

  Backend* const backend_;
  const Config config_;
  // Shards are made only after the pool's entry checks found it not forked,
  // so this is the epoch of the process that built the pool.
  const uint64_t fork_epoch_;
  // Asked once per shard: whether returned handles need an attribute reset.
  const bool resettable_attributes_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_POOLS_KEYED_SHARD_H_
