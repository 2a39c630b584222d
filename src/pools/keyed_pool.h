// The keyed-pool engine shared by StreamPool and EventPool: the pool itself
// — its devices and their shards, the entry checks, fork and exit — over
//   src/pools/keyed_shard.h         one (device, config): acquire, return,
//                                   prewarm, trim, close (the runtime calls);
//   src/pools/keyed_shard_state.h   the shard's lists, counts and decisions
//                                   under its lock (no runtime call);
//   src/pools/lease_sites.h         the leases out: ids, sites, peak;
//   src/lifetime/handle_ledger.h        handles in a shard's care, one retire
//   path; src/lifetime/fault_reaction.h     the one fault -> reaction table;
//   src/pools/keyed_prewarm.h       the background prewarm worker.
// Every lock is a shard's or a device slot's own (src/lifetime/mutex.h, a
// std::mutex), never a process-wide one: no lock is global on the hot path.
//
// What differs between streams and events is a `Kind` traits struct
// (src/pools/resource_kinds.h):
//
//   struct Kind {
//     using Config = ...;                 // hashable, ==, ToString()
//     using Lease = ...;                  // PooledStream / PooledEvent
//     static constexpr absl::string_view kName;
//     static absl::StatusOr<void*> Create(Backend&, int device, const Config&);
//     static absl::Status Destroy(Backend&, int device, void* handle);
//     static absl::Status Query(Backend&, int device, void* handle);
//     // Whether a return the caller vouches for (ReturnAs::kKnownIdle,
//     // gpupool/internal/lease.h) skips the query: events only.
//     static constexpr bool kKnownIdleSkipsQuery;
//     // Return protocol: what a failed (not merely pending) query means
//     // (streams: examine and end a capture), and the attribute reset,
//     // called only where HasResettableAttributes said so (once per shard).
//     static Check CheckFailedQuery(Backend&, int device, void* handle,
//                                   const absl::Status& query);
//     static bool HasResettableAttributes(Backend&, int device);
//     static Check ResetAttributes(Backend&, int device, void* handle);
//   };
//
// Fork: a fork() child touches nothing the parent built — no lock (a parent
// thread may have held it at fork time), no runtime call (the handles belong
// to the parent's context) and no destructor of an absl::Mutex (it takes
// Abseil's process-wide deadlock-detection lock, which Debian builds with
// NDEBUG unset): what a child would have to destroy is leaked instead.

#ifndef GPUPOOL_SRC_POOLS_KEYED_POOL_H_
#define GPUPOOL_SRC_POOLS_KEYED_POOL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
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
#include "src/lifetime/cache_line_allocator.h"
#include "src/lifetime/mutex.h"
#include "src/lifetime/pool_lifetime.h"
#include "src/lifetime/process_state.h"
#include "src/pools/keyed_prewarm.h"
#include "src/pools/keyed_shard.h"
#include "src/pools/prewarm_state.h"

namespace gpupool::internal {

template <typename Kind>
class KeyedPool {
 public:
  using Config = typename Kind::Config;
  using LeaseType = typename Kind::Lease;
  using Shard = KeyedShard<Kind>;

  KeyedPool(Backend& backend, std::shared_ptr<DeviceHealth> health,
            PoolOptions options)
      : backend_(backend),
        options_(options),
        lifetime_(backend, std::move(health)) {
    for (int d = 0; d < lifetime_.device_count(); ++d) {
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
      // The prewarm queue holds a thread that does not exist in the child:
      // leaked too (and lifetime_ leaks its reference to the health).
      prewarm_.release();  // NOLINT: deliberate leak
      return;
    }
    UnregisterExitDrain(exit_registration_);
    prewarm_->Stop();
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
    return (*shard)->Prewarm(count, prewarm_->stop_flag());
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
      // A fork()ed child must not destroy the ticket's absl::Mutex (see
      // "Fork" above): keep its state for good.
      if (Forked()) new std::shared_ptr<PrewarmState>(state);  // NOLINT: leak
      return ticket;
    }
    std::shared_ptr<Shard> owned = (*shard)->shared_from_this();
    const std::atomic<bool>* stop = prewarm_->stop_flag();
    if (!prewarm_->Submit([owned, state, count, stop] {
          state->Finish(owned->Prewarm(count, stop));
        })) {
      state->Finish(ProcessExitingError(Kind::kPoolName, Kind::kPoolName));
    }
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
    if (Forked() || !lifetime_.InRange(device)) return {};
    std::shared_ptr<Shard> shard = FindShard(device, config);
    return shard == nullptr ? PoolStats{} : shard->Stats();
  }

  std::vector<PoolKeyStats> GetStatsPerKey() const {
    std::vector<PoolKeyStats> out;
    if (Forked()) return out;
    for (const auto& shard : AllShards()) {
      out.push_back(PoolKeyStats{
          shard->device(), shard->config_value().ToString(), shard->Stats()});
    }
    return out;
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
                     " (", lifetime_.device_count(), " devices)");
    if (Forked()) return absl::StrCat(out, " [forked: unusable]");
    if (!lifetime_.device_count_status().ok()) {
      absl::StrAppend(&out, " [",
                      MessageWithoutFault(lifetime_.device_count_status()),
                      "]");
    }
    absl::StrAppend(&out, "\n  total: ", GetStats().ToString());
    for (const auto& shard : AllShards()) {
      absl::StrAppend(
          &out, "\n  dev", shard->device(), " {",
          shard->config_value().ToString(), "}",
          health_ref().is_poisoned(shard->device()) ? " POISONED" : "", ": ",
          shard->Stats().ToString());
    }
    return out;
  }

  absl::Status RecoverDevice(int device) {
    absl::Status status = health_ref().Recover(device);
    if (status.ok()) Purge(device);
    return status;
  }

  Backend& backend() const { return backend_; }
  const std::shared_ptr<DeviceHealth>& health() const {
    return lifetime_.health();
  }
  const PoolOptions& options() const { return options_; }

 private:
  struct alignas(kCacheLine) DeviceSlot {
    mutable Mutex mu;
    absl::flat_hash_map<Config, std::shared_ptr<Shard>> shards
        ABSL_GUARDED_BY(mu);
    // The shard used last on this device: most clients use one or two
    // configs, so the hot path usually finds its shard without a lock or a
    // hash. Shards live as long as the pool, so the pointer stays valid.
    std::atomic<Shard*> recent{nullptr};
  };

  bool Forked() const { return lifetime_.Forked(); }
  DeviceHealth& health_ref() const { return lifetime_.device_health(); }

  // The shard for (device, config) after the checks every entry point makes
  // (the lifetime layer's, src/lifetime/pool_lifetime.h; a poisoned device's
  // handles are forgotten first).
  absl::StatusOr<Shard*> UsableShard(int device, const Config& config) {
    if (ABSL_PREDICT_FALSE(!lifetime_.EntryIsClear(device))) {
      absl::Status entry =
          lifetime_.CheckEntry(Kind::kPoolName, Kind::kPoolName, device,
                               [this](int poisoned) { Purge(poisoned); });
      if (!entry.ok()) return entry;
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
        // The pool's references end in Orphan: a shard with leases out
        // lives on until the last one is back.
        it->second = std::shared_ptr<Shard>(
            new Shard(&backend_, lifetime_.health(), options_, device, config,
                      resettable),
            &Shard::Orphan);
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

  // At exit, while the runtime is alive: finish prewarms, destroy idle.
  void DrainForExit() {
    if (Forked()) return;
    prewarm_->Stop();
    for (const auto& shard : AllShards()) shard->Trim();
  }

  Backend& backend_;
  const PoolOptions options_;
  // Devices, shared health, fork: the lifetime layer every pool stands on.
  PoolLifetime lifetime_;
  std::vector<std::unique_ptr<DeviceSlot>> slots_;
  uint64_t exit_registration_ = 0;
  // On the heap so that a fork()ed child can leak it (see the destructor).
  std::unique_ptr<PrewarmQueue> prewarm_ = std::make_unique<PrewarmQueue>();
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_POOLS_KEYED_POOL_H_
