// AllocationCacheCore: the allocation cache behind the public AllocationCache
// and its PooledAllocation leases (the file map: src/allocation/README.md).
// Its methods live in cache_core.cc (allocate, return, the hooks) and
// freeing.cc (trim, free, retire); the check of blocks released on other
// streams is cross_stream.h's. The units over it use its public services
// alone: the runtime allocation with its OOM chain (oom_chain.h), stable
// buffers (stable.h), the report (cache_report.h), and the features, which
// reach it through the two hooks of hooks.h that they install; it includes
// none of them. Every runtime call is made with no shard lock held.

#ifndef GPUPOOL_SRC_ALLOCATION_CACHE_CORE_H_
#define GPUPOOL_SRC_ALLOCATION_CACHE_CORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/internal/lease.h"
#include "src/allocation/block.h"
#include "src/allocation/cross_stream.h"
#include "src/allocation/hooks.h"
#include "src/allocation/shard.h"
#include "src/allocation/size_classes.h"
#include "src/allocation/stream_fence.h"
#include "src/allocation/trace_ring.h"
#include "src/lifetime/cache_line_allocator.h"
#include "src/lifetime/pool_lifetime.h"
#include "src/lifetime/process_state.h"

namespace gpupool::internal {

class AllocationCacheCore;

struct AllocationCacheAccess {
  static const std::shared_ptr<AllocationCacheCore>& Core(
      const AllocationCache& cache) {
    return cache.core_;
  }
};

// Where a PooledAllocation goes back to: one shard of the cache. It counts
// its holders itself (gpupool/internal/lease.h): the cache, from
// MakeLeaseAnchors to DropLeaseAnchors, and each lease until its Return. The
// last one deletes it, and with it the reference it keeps on the core. One
// cache line each: leases on different devices count on different lines
// (one count written by every allocation and release of every device made
// the cache slower with two threads on two devices than with one).
class alignas(kCacheLine) AllocationLeaseOwner final : public LeaseOwner {
 public:
  AllocationLeaseOwner(std::shared_ptr<AllocationCacheCore> core,
                       const AllocationShard* shard)
      : core_(std::move(core)), shard_(shard) {}
  void Return(void* handle, uint64_t lease_id, uint32_t site,
              uint64_t generation, ReturnAs how) override;
  int device() const override { return shard_->device(); }
  // A cache shard has no handle config; the lease reports its MemoryKind.
  const void* config() const override { return nullptr; }

  // One more holder (a lease about to be handed out).
  LeaseOwner* Hold() {
    holders_.fetch_add(1, std::memory_order_relaxed);
    return this;
  }
  // The count itself, for the shard's release slot, whose block carries
  // its lease's hold to the next lease (AllocationShard::Stash).
  std::atomic<int64_t>* holders() { return &holders_; }
  // One holder fewer; the last one deletes the owner.
  void Drop() {
    if (holders_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  ~AllocationLeaseOwner() override = default;

  const std::shared_ptr<AllocationCacheCore> core_;
  const AllocationShard* const shard_;
  std::atomic<int64_t> holders_{1};  // the cache's own, until it drops it
};

class AllocationCacheCore
    : public std::enable_shared_from_this<AllocationCacheCore> {
 public:
  AllocationCacheCore(Backend& backend, EventPool& events,
                      std::shared_ptr<DeviceHealth> health,
                      AllocationCacheOptions options);
  ~AllocationCacheCore();
  // Cores alive in this process: a core goes with the last hold on its
  // shards' lease owners (the cache's own, each lease's, each release
  // slot's). For tests.
  static int64_t LiveForTesting();

  // Called once by the owning AllocationCache, right after construction
  // (they need shared_from_this()), and at its destruction after
  // FreeEverything(close): leases still out keep the core alive through the
  // anchors they hold.
  void MakeLeaseAnchors();
  void DropLeaseAnchors();

  bool Forked() const { return lifetime_.Forked(); }
  Backend& backend() const { return backend_; }
  const std::shared_ptr<DeviceHealth>& health() const {
    return lifetime_.health();
  }
  const AllocationCacheOptions& options() const { return options_; }

  absl::StatusOr<PooledAllocation> Allocate(int device, size_t bytes,
                                            MemoryKind kind,
                                            NativeStream stream,
                                            SourceLocation where);
  // Takes back the block of a released lease.
  // True when the block went into its shard's release slot with the
  // lease's hold (AllocationShard::Stash): the caller must not drop it.
  bool Return(AllocationBlock* block);

  absl::Status Trim(int device, size_t keep_bytes);
  absl::Status TrimAll();
  // Fences the blocks released on `stream` of `device` with their fence
  // deferred (AllocationCacheOptions::defer_same_stream_fences).
  absl::Status FenceStream(int device, NativeStream stream);
  // Frees every cached, retiring and stable block while the runtime is
  // alive (`call_runtime`), else leaks them. `close`: the cache is being
  // destroyed; later releases leak.
  void FreeEverything(bool close, bool call_runtime);
  // The exit hook: free while the runtime is alive; the exiting flag set
  // right after makes every later release leak.
  void DrainForExit();

  // --- Services for the units and features over the core ---
  // The router (or gate) installed in this cache, installing `make()`'s
  // result first if there is none. Installed once, kept for the core's life.
  CaptureRouter& InstallCaptureRouter(
      absl::FunctionRef<std::unique_ptr<CaptureRouter>()> make);
  FreeGate& InstallFreeGate(
      absl::FunctionRef<std::unique_ptr<FreeGate>()> make);
  // Whether CheckUsable refuses `device` only because it is poisoned: its
  // blocks were dropped, so a call that frees or fences has nothing to do.
  bool OnlyPoisoned(int device) const {
    return !Forked() && !ProcessIsExiting() && lifetime_.InRange(device) &&
           poisoned(device);
  }
  // The entry checks (device range, poisoned, forked, exiting); `what` names
  // the caller in the message.
  absl::Status CheckUsable(int device, absl::string_view what) {
    // The usual answer inline, without building a status or a message.
    if (ABSL_PREDICT_TRUE(lifetime_.EntryIsClear(device))) {
      return absl::OkStatus();
    }
    return CheckEntry(device, what);
  }
  const PoolLifetime& lifetime() const { return lifetime_; }
  absl::Status PoisonedError(int device) const {
    return lifetime_.PoisonedError(device);
  }
  // A sticky runtime error poisons `device`: true when `status` was one.
  bool PoisonIfSticky(int device, const absl::Status& status) const {
    if (FaultOf(status) != Fault::kDevice) return false;
    device_health().Poison(device, status);
    return true;
  }
  uint64_t generation(int device) const {
    return device_health().generation(device);
  }
  // Releases leak from now on: the cache is closed or the process exits.
  bool Leaking() const;
  AllocationShard& Shard(int device, MemoryKind kind) const {
    return *shards_[ShardIndex(device, kind)];
  }
  bool poisoned(int device) const {
    return device_health().is_poisoned(device);
  }
  // Every shard, indexed by (device, kind); fixed after construction.
  const std::vector<std::unique_ptr<AllocationShard>>& shards() const {
    return shards_;
  }
  // The installed hooks, or null.
  const CaptureRouter* capture_router() const {
    return capture_router_.load(std::memory_order_acquire);
  }
  const FreeGate* free_gate() const {
    return free_gate_.load(std::memory_order_acquire);
  }
  // The trace ring; null while tracing is off (the default).
  TraceRing* trace() const { return trace_.get(); }
  // For snapshots: every block held for a capture (under the held lock).
  void ForEachHeld(absl::FunctionRef<void(const AllocationBlock&)> visit) const;
  // The capture router's gauges and the held blocks' of `device` (-1: all).
  void AddCaptureStats(int device, AllocationCacheStats* stats) const;
  // Counts a failed allocation; a sticky device error poisons the device and
  // turns into FailedPrecondition naming it.
  absl::Status AllocationFailed(AllocationShard& shard, absl::Status status);
  // Frees every cached and retiring block of `shard` (the OOM chain's
  // step): the bytes freed, waiting for pending work first.
  size_t ReleaseAllCached(AllocationShard& shard);
  // The OOM chain's step: frees wholly free segments of `shard` worth at
  // least `bytes` (the smallest one that covers them alone, else the largest
  // first) and the retiring ones: the bytes freed, waiting for pending work
  // first.
  size_t ReleaseCachedFor(AllocationShard& shard, size_t bytes);
  // Frees a stable buffer's memory, unless the free gate keeps it (then
  // FreeReleasedByGate frees it later).
  absl::Status FreeStableMemory(AllocationShard& shard, void* ptr);
  AllocationBlock* NewBlock(const AllocationShard& shard, void* ptr,
                            size_t size, int size_class, uint64_t generation);
  PooledAllocation MakeLease(AllocationBlock* block);
  // Frees the memory of an idle block (no pending events) and its record; a
  // part of a segment goes back to the free index instead.
  absl::Status FreeBlock(AllocationShard& shard, AllocationBlock* block);
  // Frees a whole segment's memory and retires it (counted by the shard).
  absl::Status FreeRaw(AllocationShard& shard, void* ptr);
  // Frees the stable buffer memory the free gate no longer keeps.
  void FreeReleasedByGate();
  // A router keeps a released block it took out of use: ready events on
  // every stream it was used on now fence its later give-back. kPending or
  // kIdle; kDrop / kLeak: the caller must forget it (RetireReason). nullopt:
  // a stream it was used on captures now (an event recorded there would be
  // captured), so the core took it as any release there (held, or adopted
  // by that capture's pool): it is no longer the caller's.
  std::optional<BlockState> FenceKept(AllocationShard& shard,
                                      AllocationBlock* block);
  // Gives a block a router kept to the general cache, fenced by ready events
  // on `streams` on top of those it holds (FenceKept) and `recorded` (a
  // RecordFence's: events recorded earlier, on streams that may be gone
  // since). Counted as no lease: hits and peak_bytes_in_use are untouched.
  // Clears its owner.
  // With `hold`, a block that is to be kept is held out of reuse until the
  // cache frees everything instead (as a release on a capturing stream).
  void GiveBack(AllocationBlock* block,
                const std::vector<NativeStream>& streams,
                BlockEvents recorded = {}, bool hold = false);
  // Records `count` sets of ready events now, each with one event on each
  // of `streams` of `device`, into `sets`, for GiveBacks later: the work
  // enqueued there so far fences each block, and the streams need not
  // outlive the call. kPending when some set holds events; kIdle when
  // nothing is pending (no stream, or each was synchronized for want of an
  // event); kDrop on a dead device; kLeak when no fence can be proven (a
  // fault). nullopt when one of the streams captures now (asked once, with
  // a capture router routing or unregistered captures detected): an event
  // recorded there would be captured, not fence, so the blocks must be held
  // as any release there. No set is left but with kIdle or kPending.
  std::optional<BlockState> RecordFences(
      int device, const std::vector<NativeStream>& streams, int64_t count,
      std::vector<BlockEvents>* sets);

 private:
  // CheckUsable's answer when the entry is not clear.
  absl::Status CheckEntry(int device, absl::string_view what);
  struct Released {
    size_t bytes = 0;
    absl::Status status;
  };

  static constexpr int kKindCount = 2;
  static int KindIndex(MemoryKind kind) {
    return kind == MemoryKind::kDevice ? 0 : 1;
  }
  size_t ShardIndex(int device, MemoryKind kind) const {
    return static_cast<size_t>(device) * kKindCount + KindIndex(kind);
  }
  DeviceHealth& device_health() const { return lifetime_.device_health(); }

  // The state a released block's fence leaves it in, before its events.
  BlockState ReleaseState(const AllocationBlock* block) const;
  // Takes back a released block per `state` (cached, retired or freed).
  void Settle(AllocationShard& shard, AllocationBlock* block, BlockState state);
  // Forgets, without runtime calls, every block of an older generation.
  void DropStale(int device);
  absl::StatusOr<PooledAllocation> AllocateUncached(
      AllocationShard& shard, const LeaseRequest& request);

  // A released block used on a capturing stream: adopted by the capture
  // router's pool, else held out of reuse until the cache frees everything.
  // False when no stream of it captures.
  bool HoldIfCapturing(AllocationShard& shard, AllocationBlock* block);
  // --- freeing.cc ---
  // Parks a released whole segment used on one stream alone in that
  // stream's lane (parked.h; AllocationShard::Park refuses a part of a
  // segment): with deferred fences before its ready event is recorded
  // (ParkDeferred: no runtime call), else once it is (ParkFenced, after
  // RecordReadyEvents gave `state`: the one event of its one stream; with
  // deferred fences too for a block leased across streams,
  // AllocationBlock::fence_at_release). kNo when it was not parked;
  // kStashed when it went into the release slot with the lease's hold
  // (Return). Inline: a release pays a few tests.
  enum class Parked { kNo, kParked, kStashed };
  Parked ParkDeferred(AllocationShard& shard, AllocationBlock* block) {
    return options_.defer_same_stream_fences && !block->fence_at_release &&
                   block->uses.size() == 1 && block->size_class >= 0
               ? ParkIn(shard, block)
               : Parked::kNo;
  }
  Parked ParkFenced(AllocationShard& shard, AllocationBlock* block,
                    BlockState state) {
    return (!options_.defer_same_stream_fences || block->fence_at_release) &&
                   state == BlockState::kPending &&
                   block->release_stream != nullptr &&
                   block->uses.size() == 1 && block->size_class >= 0
               ? ParkIn(shard, block)
               : Parked::kNo;
  }
  Parked ParkIn(AllocationShard& shard, AllocationBlock* block);
  // Fences parked blocks (parked.h) of `stream` (all with nullopt) and
  // releases them as any other: a ready event recorded on the stream they
  // were released on, unless it captures now (they stay parked, or are
  // leaked when `stream_goes`: it is about to be destroyed), or the device
  // is dead (dropped without a call). Returns how many left the parked list.
  // With `deferred_only`, only those whose fence is deferred (a lane block
  // fenced at its release stays parked).
  size_t FenceParked(AllocationShard& shard,
                     std::optional<NativeStream> stream = std::nullopt,
                     bool stream_goes = false, bool deferred_only = false);
  // Frees (or, without the runtime, leaks) held blocks and the blocks the
  // capture router's pools hold unleased.
  void FreeCaptureBlocks(bool call_runtime);
  // Before a runtime allocation of `bytes` (a new segment, or an uncached
  // block): polls the oldest retiring block, then, while the shard would
  // hold more than give_back_above_percent above the most it has had in use
  // (this request included), frees wholly free segments too small for the
  // request, largest first, up to the excess and `bytes` at most — so that
  // memory stranded in sizes no longer asked for is exchanged rather than
  // added to. The poisoned device's error (counted as a failed allocation)
  // when a sticky fault met on the way killed the device, else OK.
  absl::Status MakeRoomToGrow(AllocationShard& shard, size_t bytes);
  // Takes wholly free segments of `shard` (largest first, or the best
  // single match first: AllocationShard::TakeForRelease) until at least
  // `bytes` are taken, plus the retiring ones, and frees them: those already
  // idle first, then the pending ones after waiting for their events.
  Released ReleaseCached(AllocationShard& shard, size_t bytes,
                         bool with_retiring, bool best_match = false,
                         size_t smaller_than = static_cast<size_t>(-1));
  // Queries `blocks` (waiting, once the others are done, for those still
  // pending) and frees those idle as a batch (FreeBlocks); retires the rest
  // without a call.
  Released ReleaseBlocks(AllocationShard& shard, BlockVector blocks);
  // Frees the memory of idle blocks and their records (parts of segments go
  // back to the free index instead), with one lock for all of them to
  // return the parts and one to retire what is freed: a cache's end, Trim
  // and the OOM chain free many; FreeBlock is the one-block case.
  absl::Status FreeBlocks(AllocationShard& shard, BlockVector blocks);
  // Retires (dropped, deleted) a block of a poisoned device or of a context
  // reset since it was made: true, and no call may touch it; else false.
  bool DropIfDead(AllocationShard& shard, AllocationBlock* block);
  // FreeRaw's call, leaving the count to the caller: kDestroyed, or kDropped
  // (no call) on a poisoned device; a failed free's status goes to `status`
  // (a sticky fault poisons the device).
  RetireReason ReturnToRuntime(AllocationShard& shard, void* ptr,
                               absl::Status* status);
  // Frees an idle block, or retires it per `state` (kDrop / kLeak).
  absl::Status Dispose(AllocationShard& shard, AllocationBlock* block,
                       BlockState state);
  // Retiring blocks wait for their events; check the oldest one now and then.
  void PollRetiring(AllocationShard& shard);
  void CheckRetiring(AllocationShard& shard, AllocationBlock* block);

  Backend& backend_;
  const AllocationCacheOptions options_;
  PoolLifetime lifetime_;
  StreamOrderFence fence_;
  CrossStreamCheck cross_stream_;
  // Cached bytes per device over both kinds (the cap is per device). One
  // cache line each: every hit and every return of a device writes its own.
  struct alignas(kCacheLine) DeviceBytes {
    std::atomic<size_t> value{0};
  };
  std::unique_ptr<DeviceBytes[]> device_cached_bytes_;
  // ShardIndex(device, kind); fixed after construction.
  std::vector<std::unique_ptr<AllocationShard>> shards_;
  // Each shard's lease owner (see AllocationLeaseOwner), indexed like
  // shards_; made by MakeLeaseAnchors, dropped by DropLeaseAnchors; fixed in
  // between.
  std::vector<AllocationLeaseOwner*> lease_anchors_;
  std::atomic<bool> closed_{false};
  // Made once at construction when options_.trace_capacity > 0.
  std::unique_ptr<TraceRing> trace_;
  // options_.record_lease_times, or the trace is on. Fixed at construction.
  bool record_lease_times_ = false;
  // options_' large_rounding_from_bytes and large_granule_bytes.
  LargeRounding rounding_;

  // The hooks (hooks.h): null until installed, then fixed. Read lock-free;
  // installed and owned under hooks_mu_.
  std::atomic<CaptureRouter*> capture_router_{nullptr};
  std::atomic<FreeGate*> free_gate_{nullptr};
  Mutex hooks_mu_;
  std::unique_ptr<CaptureRouter> capture_router_owner_
      ABSL_GUARDED_BY(hooks_mu_);
  std::unique_ptr<FreeGate> free_gate_owner_ ABSL_GUARDED_BY(hooks_mu_);
  // Blocks released while a stream they were used on captured, with no pool
  // for the capture: out of reuse until the cache frees everything.
  mutable Mutex held_mu_;
  std::vector<AllocationBlock*> held_for_captures_ ABSL_GUARDED_BY(held_mu_);
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_CACHE_CORE_H_
