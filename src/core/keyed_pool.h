// The keyed-pool engine shared by StreamPool and EventPool.
//
// A pool is a set of shards, one per (device, config). A shard owns an idle
// LIFO, a draining list (handles returned with work still pending), counters
// and the sites of its outstanding leases, all under its own Mutex
// (src/core/mutex.h: a std::mutex, never a process-wide lock): no lock is
// global on the hot path. The runtime is never called while a shard
// lock is held: every create, query, destroy happens with the lock released,
// with capacity reserved beforehand (`live_`) so that bounds hold.
//
// What differs between streams and events is a `Kind` traits struct:
//
//   struct Kind {
//     using Config = ...;                 // hashable, ==, ToString()
//     using Lease = ...;                  // PooledStream / PooledEvent
//     static constexpr absl::string_view kName;
//     static absl::StatusOr<void*> Create(Backend&, int device, const Config&);
//     static absl::Status Destroy(Backend&, int device, void* handle);
//     static absl::Status Query(Backend&, int device, void* handle);
//     // Return protocol: what a failed (not merely pending) query means
//     // (streams: examine and end a capture), and the attribute reset,
//     // called only where HasResettableAttributes said so (once per shard).
//     static Check CheckFailedQuery(Backend&, int device, void* handle,
//                                   const absl::Status& query);
//     static bool HasResettableAttributes(Backend&, int device);
//     static Check ResetAttributes(Backend&, int device, void* handle);
//   };
//
// Shards are shared with the leases they hand out, so a lease returned after
// its pool was destroyed finds a closed shard and leaks its handle (defined,
// no runtime call) instead of touching freed memory.

#ifndef GPUPOOL_SRC_CORE_KEYED_POOL_H_
#define GPUPOOL_SRC_CORE_KEYED_POOL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/internal/lease.h"
#include "gpupool/pool_options.h"
#include "gpupool/pool_stats.h"
#include "gpupool/prewarm.h"
#include "gpupool/source_location.h"
#include "src/core/mutex.h"
#include "src/core/prewarm_state.h"
#include "src/core/process_state.h"

namespace gpupool::internal {

// What to do with a handle after a failed runtime call.
enum class Disposition {
  kProceed,  // nothing wrong (yet)
  kDestroy,  // this handle is bad: destroy it through the runtime
  kPoison,   // sticky device error: poison the device, drop without a call
  kLeak,     // runtime unloading: forget it without a call
};

struct Check {
  Disposition disposition = Disposition::kProceed;
  absl::Status status;
};

// The pool's reaction to a fault class (DESIGN.md, "Backend contract").
inline Check CheckFor(const absl::Status& status) {
  switch (FaultOf(status)) {
    case Fault::kNone:
      return {Disposition::kProceed, status};
    case Fault::kDevice:
      return {Disposition::kPoison, status};
    case Fault::kShutdown:
      return {Disposition::kLeak, status};
    default:
      return {Disposition::kDestroy, status};
  }
}

// Unique across every shard of every pool in the process.
inline uint64_t NextShardIndex() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

inline absl::Status ForkedError(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "gpupool: this process is a fork() child of the one that created the ",
      what,
      " pool; inherited GPU handles belong to the parent's context and are "
      "never reused (create a new pool in the child)"));
}

inline absl::Status ExitingError() {
  return absl::FailedPreconditionError(
      "gpupool: the process is exiting; pools no longer hand out resources");
}

template <typename Kind>
class KeyedPool {
 public:
  using Config = typename Kind::Config;
  using LeaseType = typename Kind::Lease;

  KeyedPool(Backend& backend, std::shared_ptr<DeviceHealth> health,
            PoolOptions options)
      : backend_(backend), options_(options), fork_epoch_(ForkEpoch()) {
    absl::StatusOr<int> count = backend_.DeviceCount();
    if (count.ok()) {
      device_count_ = *count;
    } else {
      device_count_status_ = count.status();
    }
    if (health == nullptr) {
      health = std::make_shared<DeviceHealth>(device_count_);
    }
    health_ = std::move(health);
    if (health_->device_count() < device_count_) {
      device_count_ = health_->device_count();
    }
    for (int d = 0; d < device_count_; ++d) {
      slots_.push_back(std::make_unique<DeviceSlot>());
    }
    // After DeviceCount() initialised the runtime, so that our exit drain
    // runs before the runtime's own atexit teardown.
    InstallProcessHooks();
    exit_registration_ = RegisterExitDrain([this] { DrainForExit(); });
  }

  ~KeyedPool() {
    if (Forked()) {
      // The parent's threads may have held our locks at fork time: touch
      // nothing, leak everything (the child's address space dies with it).
      // The exit registry's lock is fork-safe (held across fork), and the
      // drain must go: it would run on this freed pool at the child's exit.
      UnregisterExitDrain(exit_registration_);
      for (auto& slot : slots_) slot.release();  // NOLINT: deliberate leak
      // Not even an absl::Mutex may be destroyed here: ~absl::Mutex takes
      // Abseil's process-wide deadlock-detection lock (Debian builds it with
      // NDEBUG unset), which a parent thread may have held at fork time.
      // The pool's own locks are std::mutex (src/core/mutex.h), but the
      // shards and a reference of ours keep the health (absl::Mutex) alive,
      // and the prewarm state holds threads that do not exist in the child:
      // all leaked.
      prewarm_.release();                                     // NOLINT: leak
      new std::shared_ptr<DeviceHealth>(std::move(health_));  // NOLINT: leak
      return;
    }
    UnregisterExitDrain(exit_registration_);
    StopPrewarms();
    const bool call_runtime = !ProcessIsExiting();
    for (const auto& shard : AllShards()) shard->Close(call_runtime);
  }

  KeyedPool(const KeyedPool&) = delete;
  KeyedPool& operator=(const KeyedPool&) = delete;

  absl::StatusOr<LeaseType> Acquire(int device, const Config& config,
                                    absl::Duration timeout,
                                    SourceLocation where) {
    absl::StatusOr<Shard*> shard = UsableShard(device, config);
    if (!shard.ok()) return shard.status();
    absl::StatusOr<Lease> lease = (*shard)->Acquire(timeout, where);
    if (!lease.ok()) return lease.status();
    return LeaseType(*std::move(lease));
  }

  absl::Status Prewarm(int device, const Config& config, int count) {
    if (count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Prewarm count must be >= 0, got ", count));
    }
    absl::StatusOr<Shard*> shard = UsableShard(device, config);
    if (!shard.ok()) return shard.status();
    return (*shard)->Prewarm(count, &stop_prewarm_);
  }

  PrewarmTicket PrewarmAsync(int device, const Config& config, int count) {
    auto state = std::make_shared<PrewarmState>();
    PrewarmTicket ticket(state);
    absl::StatusOr<Shard*> shard =
        count < 0 ? absl::InvalidArgumentError(
                        absl::StrCat("Prewarm count must be >= 0, got ", count))
                  : UsableShard(device, config);
    if (!shard.ok()) {
      state->FinishUnshared(shard.status());  // no lock: maybe a forked child
      // In a fork()ed child not even the ticket's mutex may be destroyed
      // (see ~KeyedPool): keep its state for good.
      if (Forked()) new std::shared_ptr<PrewarmState>(state);  // NOLINT: leak
      return ticket;
    }
    std::shared_ptr<Shard> owned = (*shard)->shared_from_this();
    MutexLock lock(&prewarm_->mu);
    if (prewarm_->stopped) {
      state->Finish(ExitingError());
      return ticket;
    }
    prewarm_->threads.emplace_back([this, owned, state, count] {
      state->Finish(owned->Prewarm(count, &stop_prewarm_));
    });
    return ticket;
  }

  void Trim(int device) {
    if (Forked()) return;
    for (const auto& shard : AllShards()) {
      if (device < 0 || shard->device() == device) shard->Trim();
    }
  }

  PoolStats GetStats() const {
    PoolStats total;
    if (Forked()) return total;
    for (const auto& shard : AllShards()) total += shard->Stats();
    return total;
  }

  PoolStats GetStats(int device, const Config& config) const {
    if (Forked() || device < 0 || device >= device_count_) return {};
    std::shared_ptr<Shard> shard = FindShard(device, config);
    return shard == nullptr ? PoolStats{} : shard->Stats();
  }

  std::vector<OutstandingLease> GetOutstandingLeases() const {
    std::vector<OutstandingLease> out;
    if (Forked()) return out;
    for (const auto& shard : AllShards()) shard->AppendOutstanding(&out);
    return out;
  }

  std::string DebugString() const {
    std::string out =
        absl::StrCat(Kind::kName, " pool over ", std::string(backend_.name()),
                     " (", device_count_, " devices)");
    if (Forked()) return absl::StrCat(out, " [forked: unusable]");
    if (!device_count_status_.ok()) {
      absl::StrAppend(&out, " [", device_count_status_.ToString(), "]");
    }
    absl::StrAppend(&out, "\n  total: ", GetStats().ToString());
    for (const auto& shard : AllShards()) {
      absl::StrAppend(&out, "\n  dev", shard->device(), " {",
                      shard->config_value().ToString(), "}",
                      health_->is_poisoned(shard->device()) ? " POISONED" : "",
                      ": ", shard->Stats().ToString());
    }
    return out;
  }

  absl::Status RecoverDevice(int device) {
    absl::Status status = health_->Recover(device);
    if (status.ok()) Purge(device);
    return status;
  }

  Backend& backend() const { return backend_; }
  const std::shared_ptr<DeviceHealth>& health() const { return health_; }
  const PoolOptions& options() const { return options_; }

 private:
  // One (device, config): idle LIFO, draining list, counters. Outlives the
  // pool while leases are out (they hold it), then is closed. Cache-line
  // aligned: shards of different devices are used by different threads,
  // and each one's lock, lists and (make_shared) reference count are
  // written on every hit; sharing a line with a neighbour's would make two
  // threads on two devices slow each other down.
  class alignas(64) Shard final : public LeaseOwner,
                                  public std::enable_shared_from_this<Shard> {
   public:
    Shard(Backend* backend, std::shared_ptr<DeviceHealth> health,
          const PoolOptions& options, int device, Config config,
          uint64_t fork_epoch, bool resettable_attributes)
        : backend_(backend),
          health_(std::move(health)),
          options_(options),
          device_(device),
          config_(std::move(config)),
          fork_epoch_(fork_epoch),
          lease_prefix_(NextShardIndex() << 40),
          resettable_attributes_(resettable_attributes) {}

    int device() const override { return device_; }
    const void* config() const override { return &config_; }
    const Config& config_value() const { return config_; }

    absl::StatusOr<Lease> Acquire(absl::Duration timeout,
                                  SourceLocation where) {
      // Read the clock only if we ever have to wait (bounded pools).
      absl::Time deadline = absl::InfiniteFuture();
      bool deadline_set = false;
      int drain_checks = 0;
      for (;;) {
        // Health is re-read every round: a poison seen by another thread
        // while we waited must stop us from creating on a dead device.
        if (health_->is_poisoned(device_)) {
          DropStale();
          return health_->CheckHealthy(device_);
        }
        const uint64_t generation = health_->generation(device_);
        enum { kIdle, kDrained, kCreate } source;
        Entry entry;
        Ticket ticket;
        {
          MutexLock lock(&mu_);
          if (closed_) return ClosedError();
          DropStaleLocked(generation);
          // A reused handle is counted as leased in this same critical
          // section (one lock per hit); a failed validation undoes it.
          if (!idle_.empty()) {
            entry = idle_.back();
            idle_.pop_back();
            source = kIdle;
            ticket = ReserveLeaseLocked(where, /*reused=*/true);
          } else if (!draining_.empty() &&
                     drain_checks < options_.drain_checks_per_acquire) {
            entry = draining_.front();
            draining_.pop_front();
            source = kDrained;
            ticket = ReserveLeaseLocked(where, /*reused=*/true);
            ++drain_checks;
          } else if (options_.max_live_per_key <= 0 ||
                     live_ < options_.max_live_per_key) {
            ++live_;  // reserve capacity for the creation below
            source = kCreate;
          } else {
            if (!deadline_set) {
              deadline = absl::Now() + timeout;
              deadline_set = true;
            }
            if (!WaitForCapacityLocked(deadline)) {
              ++stats_.acquire_timeouts;
              return absl::ResourceExhaustedError(absl::StrFormat(
                  "%s pool: max_live_per_key=%d reached on device %d {%s} "
                  "(in_use=%d, draining=%d) and nothing was returned within "
                  "%s",
                  Kind::kName, options_.max_live_per_key, device_,
                  config_.ToString(), in_use_, draining_.size(),
                  absl::FormatDuration(timeout)));
            }
            drain_checks = 0;
            continue;
          }
        }

        if (source == kCreate) {
          absl::Duration latency;
          absl::StatusOr<void*> created = CreateInReservedSlot(&latency);
          if (!created.ok()) return created.status();
          {
            MutexLock lock(&mu_);
            RecordCreatedLocked(latency);
            ticket = ReserveLeaseLocked(where, /*reused=*/false);
          }
          return MakeLease(*created, ticket, generation);
        }

        // An idle handle was validated when it came back and nobody could
        // enqueue on it since: trusted unless validate_on_acquire (opt-in).
        // A drained one was still busy at return: always queried.
        if (source == kDrained || options_.validate_on_acquire) {
          absl::Status query = Kind::Query(*backend_, device_, entry.handle);
          if (!query.ok()) {
            if (FaultOf(query) == Fault::kNotReady) {
              MutexLock lock(&mu_);
              UndoReservationLocked(ticket);
              draining_.push_back(entry);
            } else {
              {
                MutexLock lock(&mu_);
                UndoReservationLocked(ticket);
              }
              Dispose(entry.handle, CheckFor(query), /*faulty=*/true);
            }
            continue;
          }
        }
        if (entry.generation != health_->generation(device_)) {
          // Poisoned or recovered while we validated: never hand it out.
          MutexLock lock(&mu_);
          UndoReservationLocked(ticket);
          --live_;
          ++stats_.dropped;
          continue;
        }
        return MakeLease(entry.handle, ticket, entry.generation);
      }
    }

    void Return(void* handle, uint64_t lease_id, uint32_t site,
                uint64_t generation, bool discard) override {
      const Ticket ticket{lease_id, site};
      // A forked child must take no lock and make no runtime call. Nor may
      // it destroy this shard (the lease may hold the last reference, its
      // pool gone): it holds the health, whose ~absl::Mutex takes a
      // process-wide lock that a parent
      // thread may have held at fork time. Keep it alive for good.
      if (ForkEpoch() != fork_epoch_) {
        new std::shared_ptr<Shard>(this->shared_from_this());  // NOLINT: leak
        return;
      }
      // Screened without the lock (re-checked under it below): after the
      // pool was destroyed (closed) or exit began, never touch the runtime;
      // a handle of an older generation belongs to a dead context.
      if (closed_flag_.load(std::memory_order_acquire) || ProcessIsExiting() ||
          generation != health_->generation(device_)) {
        MutexLock lock(&mu_);
        ForgetLocked(ticket, generation);
        return;
      }
      if (discard) {
        {
          MutexLock lock(&mu_);
          FinishLeaseLocked(ticket);
        }
        Destroy(handle, /*faulty=*/true);
        return;
      }
      // One validating call: the query. Its failure is also how a capturing
      // stream shows (the query of a capturing stream is refused), so the
      // capture is examined only then; attributes are reset only where the
      // backend has any.
      absl::Status query = Kind::Query(*backend_, device_, handle);
      Check check;
      if (!query.ok() && FaultOf(query) != Fault::kNotReady) {
        check = Kind::CheckFailedQuery(*backend_, device_, handle, query);
      } else if (resettable_attributes_) {
        check = Kind::ResetAttributes(*backend_, device_, handle);
      }
      if (check.disposition != Disposition::kProceed) {
        {
          MutexLock lock(&mu_);
          FinishLeaseLocked(ticket);
        }
        Dispose(handle, check, /*faulty=*/true);
        return;
      }
      {
        MutexLock lock(&mu_);
        if (closed_ || ProcessIsExiting() ||
            generation != health_->generation(device_)) {
          ForgetLocked(ticket, generation);
          return;
        }
        FinishLeaseLocked(ticket);
        if (static_cast<int>(idle_.size() + draining_.size()) <
            options_.max_idle_per_key) {
          if (query.ok()) {
            idle_.push_back(Entry{handle, generation});
          } else {
            draining_.push_back(Entry{handle, generation});
          }
          return;
        }
      }
      Destroy(handle, /*faulty=*/false);
    }

    // Creates handles until `count` are idle, bounded by the caps.
    absl::Status Prewarm(int count, const std::atomic<bool>* stop) {
      for (;;) {
        if (stop->load(std::memory_order_acquire) || ProcessIsExiting()) {
          return absl::CancelledError("prewarm stopped: pool shutting down");
        }
        absl::Status healthy = health_->CheckHealthy(device_);
        if (!healthy.ok()) return healthy;
        const uint64_t generation = health_->generation(device_);
        {
          MutexLock lock(&mu_);
          if (closed_) return ClosedError();
          DropStaleLocked(generation);
          const int held = static_cast<int>(idle_.size());
          if (held >= count || held >= options_.max_idle_per_key ||
              (options_.max_live_per_key > 0 &&
               live_ >= options_.max_live_per_key)) {
            return absl::OkStatus();
          }
          ++live_;
        }
        absl::Duration latency;
        absl::StatusOr<void*> created = CreateInReservedSlot(&latency);
        if (!created.ok()) return created.status();
        MutexLock lock(&mu_);
        RecordCreatedLocked(latency);
        idle_.push_back(Entry{*created, generation});
      }
    }

    // Destroys idle handles and drained handles whose work finished.
    void Trim() {
      DropStale();
      std::vector<Entry> idle;
      std::deque<Entry> draining;
      {
        MutexLock lock(&mu_);
        if (closed_) return;
        idle.swap(idle_);
        draining.swap(draining_);
      }
      // A sticky fault met on one handle poisons the device (new
      // generation): the rest of the batch must be dropped without a call.
      for (const Entry& entry : idle) {
        if (entry.generation != health_->generation(device_)) {
          DropHeld();
          continue;
        }
        Destroy(entry.handle, false);
      }
      for (const Entry& entry : draining) {
        if (entry.generation != health_->generation(device_)) {
          DropHeld();
          continue;
        }
        absl::Status query = Kind::Query(*backend_, device_, entry.handle);
        if (FaultOf(query) == Fault::kNotReady) {
          MutexLock lock(&mu_);
          draining_.push_back(entry);
        } else if (query.ok()) {
          Destroy(entry.handle, false);
        } else {
          Dispose(entry.handle, CheckFor(query), /*faulty=*/true);
        }
      }
    }

    // Pool destruction: hand back every idle/draining handle (destroyed
    // through the runtime when `call_runtime`, else leaked) and refuse
    // everything afterwards.
    void Close(bool call_runtime) {
      std::vector<Entry> handles;
      {
        MutexLock lock(&mu_);
        closed_ = true;
        closed_flag_.store(true, std::memory_order_release);
        handles.swap(idle_);
        handles.insert(handles.end(), draining_.begin(), draining_.end());
        draining_.clear();
      }
      for (const Entry& entry : handles) {
        // Re-read per handle: a destroy that fails with a sticky fault
        // poisons the device, and the remaining handles must then be
        // dropped without a runtime call.
        if (call_runtime && entry.generation == health_->generation(device_)) {
          Destroy(entry.handle, false);
        } else {
          MutexLock lock(&mu_);
          --live_;
          ++(call_runtime ? stats_.dropped : stats_.leaked);
        }
      }
    }

    // Drops (without runtime calls) handles of an older device generation.
    void DropStale() {
      const uint64_t generation = health_->generation(device_);
      MutexLock lock(&mu_);
      DropStaleLocked(generation);
    }

    PoolStats Stats() const {
      MutexLock lock(&mu_);
      PoolStats stats = stats_;
      const uint64_t generation = health_->generation(device_);
      stats.in_use = in_use_;
      stats.idle = 0;
      for (const Entry& e : idle_) stats.idle += e.generation == generation;
      stats.draining = 0;
      for (const Entry& e : draining_) {
        stats.draining += e.generation == generation;
      }
      return stats;
    }

    void AppendOutstanding(std::vector<OutstandingLease>* out) const {
      MutexLock lock(&mu_);
      for (const Site& site : sites_) {
        if (site.lease_id == 0) continue;
        out->push_back(OutstandingLease{std::string(Kind::kName), device_,
                                        config_.ToString(), site.lease_id,
                                        site.where});
      }
    }

   private:
    struct Entry {
      void* handle = nullptr;
      uint64_t generation = 0;
    };

    // A lease's id and its slot in `sites_` (kNoSite when not tracked).
    static constexpr uint32_t kNoSite = 0xFFFFFFFF;
    struct Ticket {
      uint64_t id = 0;
      uint32_t site = kNoSite;
    };
    // An outstanding lease's acquire site; lease_id 0: a free slot.
    struct Site {
      uint64_t lease_id = 0;
      SourceLocation where;
    };

    absl::Status ClosedError() const {
      return absl::FailedPreconditionError(
          absl::StrCat(Kind::kName, " pool was destroyed"));
    }

    // Handles of an older generation belong to a dead (or reset) context:
    // forget them without calling the runtime.
    void DropStaleLocked(uint64_t generation)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (generation == seen_generation_) return;
      seen_generation_ = generation;
      const int64_t dropped = EraseOtherGenerations(idle_, generation) +
                              EraseOtherGenerations(draining_, generation);
      live_ -= dropped;
      stats_.dropped += dropped;
    }

    template <typename List>
    static int64_t EraseOtherGenerations(List& list, uint64_t generation) {
      int64_t erased = 0;
      for (auto it = list.begin(); it != list.end();) {
        if (it->generation != generation) {
          it = list.erase(it);
          ++erased;
        } else {
          ++it;
        }
      }
      return erased;
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
      mu_.AwaitWithDeadline(absl::Condition(this, &Shard::HasCapacity), until);
      return true;
    }

    bool HasCapacity() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || closed_ || live_ < options_.max_live_per_key;
    }

    // Counts a lease about to be handed out and records its site in a free
    // slot of `sites_` (no hashing on the hot path).
    Ticket ReserveLeaseLocked(SourceLocation where, bool reused)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      Ticket ticket{lease_prefix_ | ++lease_sequence_, kNoSite};
      ++stats_.acquired;
      if (reused) ++stats_.reused;
      ++in_use_;
      if (in_use_ > stats_.peak_in_use) stats_.peak_in_use = in_use_;
      if (options_.track_lease_sites) {
        if (free_sites_.empty()) {
          ticket.site = static_cast<uint32_t>(sites_.size());
          sites_.push_back(Site{ticket.id, where});
        } else {
          ticket.site = free_sites_.back();
          free_sites_.pop_back();
          sites_[ticket.site] = Site{ticket.id, where};
        }
      }
      return ticket;
    }

    // A reserved lease whose handle failed validation: it was never out.
    void UndoReservationLocked(const Ticket& ticket)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      --stats_.acquired;
      --stats_.reused;
      FinishLeaseLocked(ticket);
    }

    // A lease came back (its handle is accounted separately).
    void FinishLeaseLocked(const Ticket& ticket)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      --in_use_;
      // The id check keeps a corrupted or foreign ticket from freeing
      // another lease's slot.
      if (ticket.site < sites_.size() &&
          sites_[ticket.site].lease_id == ticket.id) {
        sites_[ticket.site].lease_id = 0;
        free_sites_.push_back(ticket.site);
      }
    }

    // A lease came back but its handle must not reach the runtime: leaked
    // (pool closed, process exiting) or dropped (dead device generation).
    void ForgetLocked(const Ticket& ticket, uint64_t generation)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      FinishLeaseLocked(ticket);
      --live_;
      if (closed_ || ProcessIsExiting()) {
        ++stats_.leaked;
      } else {
        ++stats_.dropped;
      }
      (void)generation;
    }

    Lease MakeLease(void* handle, const Ticket& ticket, uint64_t generation) {
      return Lease(this->shared_from_this(), handle, ticket.id, ticket.site,
                   generation);
    }

    // Forgets a handle we hold (not in any list) without a runtime call.
    void DropHeld() {
      MutexLock lock(&mu_);
      --live_;
      ++stats_.dropped;
    }

    // Applies a non-proceed check to a handle we hold (not in any list).
    void Dispose(void* handle, const Check& check, bool faulty) {
      switch (check.disposition) {
        case Disposition::kProceed:
        case Disposition::kDestroy:
          Destroy(handle, faulty);
          return;
        case Disposition::kPoison: {
          health_->Poison(device_, check.status);
          MutexLock lock(&mu_);
          --live_;
          ++stats_.dropped;
          return;
        }
        case Disposition::kLeak: {
          MutexLock lock(&mu_);
          --live_;
          ++stats_.leaked;
          return;
        }
      }
    }

    // Creates a handle for a live slot the caller has reserved (`++live_`).
    // On failure the slot is given back and a sticky fault poisons the
    // device; on success the caller records it with RecordCreatedLocked.
    absl::StatusOr<void*> CreateInReservedSlot(absl::Duration* latency)
        ABSL_LOCKS_EXCLUDED(mu_) {
      const absl::Time start = absl::Now();
      absl::StatusOr<void*> created = Kind::Create(*backend_, device_, config_);
      *latency = absl::Now() - start;
      if (!created.ok()) {
        {
          MutexLock lock(&mu_);
          --live_;
        }
        if (FaultOf(created.status()) == Fault::kDevice) {
          health_->Poison(device_, created.status());
        }
      }
      return created;
    }

    void RecordCreatedLocked(absl::Duration latency)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      ++stats_.created;
      stats_.create_latency.Record(latency);
    }

    void Destroy(void* handle, bool faulty) {
      const absl::Time start = absl::Now();
      absl::Status status = Kind::Destroy(*backend_, device_, handle);
      const absl::Duration latency = absl::Now() - start;
      if (FaultOf(status) == Fault::kDevice) {
        health_->Poison(device_, status);
      }
      MutexLock lock(&mu_);
      --live_;
      ++stats_.destroyed;
      if (faulty) ++stats_.discarded_faulty;
      stats_.destroy_latency.Record(latency);
    }

    Backend* const backend_;
    const std::shared_ptr<DeviceHealth> health_;
    const PoolOptions options_;
    const int device_;
    const Config config_;
    const uint64_t fork_epoch_;
    const uint64_t lease_prefix_;
    // Asked once per shard: whether returned handles need an attribute reset.
    const bool resettable_attributes_;

    mutable Mutex mu_;
    std::vector<Entry> idle_ ABSL_GUARDED_BY(mu_);  // LIFO: warmest on top
    std::deque<Entry> draining_ ABSL_GUARDED_BY(mu_);
    // Handles in this shard's custody: leased, idle, draining, or reserved
    // for a creation or validation in flight.
    int live_ ABSL_GUARDED_BY(mu_) = 0;
    int in_use_ ABSL_GUARDED_BY(mu_) = 0;
    uint64_t lease_sequence_ ABSL_GUARDED_BY(mu_) = 0;
    uint64_t seen_generation_ ABSL_GUARDED_BY(mu_) = 0;
    bool closed_ ABSL_GUARDED_BY(mu_) = false;
    // closed_, readable without the lock for Return's fast screening.
    std::atomic<bool> closed_flag_{false};
    PoolStats stats_ ABSL_GUARDED_BY(mu_);
    // Acquire sites of the outstanding leases, by slot; `free_sites_` lists
    // the free slots. Grows to the peak number of leases out at once.
    std::vector<Site> sites_ ABSL_GUARDED_BY(mu_);
    std::vector<uint32_t> free_sites_ ABSL_GUARDED_BY(mu_);
  };

  struct alignas(64) DeviceSlot {
    mutable Mutex mu;
    absl::flat_hash_map<Config, std::shared_ptr<Shard>> shards
        ABSL_GUARDED_BY(mu);
    // The shard used last on this device: most clients use one or two
    // configs, so the hot path usually finds its shard without a lock or a
    // hash. Shards live as long as the pool, so the pointer stays valid.
    std::atomic<Shard*> recent{nullptr};
  };

  bool Forked() const { return ForkEpoch() != fork_epoch_; }

  // The shard for (device, config) after the checks every entry point makes.
  absl::StatusOr<Shard*> UsableShard(int device, const Config& config) {
    if (Forked()) return ForkedError(Kind::kName);
    if (ProcessIsExiting()) return ExitingError();
    if (!device_count_status_.ok()) return device_count_status_;
    if (device < 0 || device >= device_count_) {
      return absl::InvalidArgumentError(
          absl::StrCat(Kind::kName, " pool: device ", device,
                       " out of range [0, ", device_count_, ")"));
    }
    if (health_->is_poisoned(device)) {
      Purge(device);
      return health_->CheckHealthy(device);
    }
    return GetOrCreateShard(device, config);
  }

  Shard* GetOrCreateShard(int device, const Config& config) {
    DeviceSlot& slot = *slots_[device];
    Shard* recent = slot.recent.load(std::memory_order_acquire);
    if (recent != nullptr && recent->config_value() == config) return recent;
    Shard* shard = nullptr;
    {
      MutexLock lock(&slot.mu);
      auto it = slot.shards.find(config);
      if (it != slot.shards.end()) shard = it->second.get();
    }
    if (shard == nullptr) {
      // Asked before the lock: on CUDA the first answer per device reads a
      // device attribute, and no runtime call is made under a pool lock.
      const bool resettable = Kind::HasResettableAttributes(backend_, device);
      MutexLock lock(&slot.mu);
      auto [it, inserted] = slot.shards.try_emplace(config);
      if (inserted) {
        it->second =
            std::make_shared<Shard>(&backend_, health_, options_, device,
                                    config, fork_epoch_, resettable);
      }
      shard = it->second.get();
    }
    slot.recent.store(shard, std::memory_order_release);
    return shard;
  }

  std::shared_ptr<Shard> FindShard(int device, const Config& config) const {
    const DeviceSlot& slot = *slots_[device];
    MutexLock lock(&slot.mu);
    auto it = slot.shards.find(config);
    return it == slot.shards.end() ? nullptr : it->second;
  }

  std::vector<std::shared_ptr<Shard>> AllShards() const {
    std::vector<std::shared_ptr<Shard>> shards;
    for (const auto& slot : slots_) {
      MutexLock lock(&slot->mu);
      for (const auto& [config, shard] : slot->shards) shards.push_back(shard);
    }
    return shards;
  }

  void Purge(int device) {
    for (const auto& shard : AllShards()) {
      if (shard->device() == device) shard->DropStale();
    }
  }

  void StopPrewarms() {
    std::vector<std::thread> threads;
    {
      MutexLock lock(&prewarm_->mu);
      prewarm_->stopped = true;
      threads.swap(prewarm_->threads);
    }
    stop_prewarm_.store(true, std::memory_order_release);
    for (std::thread& t : threads) t.join();
  }

  // At exit, while the runtime is alive: finish prewarms, destroy idle.
  void DrainForExit() {
    if (Forked()) return;
    StopPrewarms();
    for (const auto& shard : AllShards()) shard->Trim();
  }

  Backend& backend_;
  std::shared_ptr<DeviceHealth> health_;
  const PoolOptions options_;
  const uint64_t fork_epoch_;
  int device_count_ = 0;
  absl::Status device_count_status_;
  std::vector<std::unique_ptr<DeviceSlot>> slots_;
  uint64_t exit_registration_ = 0;

  // Background prewarms. On the heap so that a fork()ed child can leak it
  // (see the destructor).
  struct PrewarmThreads {
    Mutex mu;
    std::vector<std::thread> threads ABSL_GUARDED_BY(mu);
    bool stopped ABSL_GUARDED_BY(mu) = false;
  };
  std::unique_ptr<PrewarmThreads> prewarm_ = std::make_unique<PrewarmThreads>();
  std::atomic<bool> stop_prewarm_{false};
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_CORE_KEYED_POOL_H_
