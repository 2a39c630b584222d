// AllocationCacheCore: the allocation cache behind the public AllocationCache
// and its PooledAllocation leases, laid out by job, one file each:
//
//   cache_core.cc    allocation policy: Allocate (same stream, ready,
//                    checked pending, new block), Return
//   stream_fence.*   the stream-order fence (ready events)
//   oom_chain.cc     runtime allocation and the OOM chain
//   freeing.cc       freeing and retiring: Trim, drain, close
//   stable.cc        stable buffers (AcquireStable)
//   graph/           capture-private pools (GraphPool, CaptureScope)
//   ipc/             sharing stable buffers with other processes
//                    (exports, imports, cross-process reference counts)
//   cache_report.cc  stats, outstanding leases, DebugString
//   shard.*          the sealed per-(device, kind) bookkeeping
//
// It stands on the resource-lifetime kernel (pool_lifetime.h,
// fault_reaction.h, handle_care.h, gpupool/internal/lease.h). Every runtime
// call is made with no shard lock held.

#ifndef GPUPOOL_SRC_ALLOCATION_CACHE_CORE_H_
#define GPUPOOL_SRC_ALLOCATION_CACHE_CORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/internal/lease.h"
#include "gpupool/ipc_handle.h"
#include "src/allocation/block.h"
#include "src/allocation/graph/pool.h"
#include "src/allocation/ipc/exports.h"
#include "src/allocation/ipc/imports.h"
#include "src/allocation/shard.h"
#include "src/allocation/stream_fence.h"
#include "src/kernel/cache_line_allocator.h"
#include "src/kernel/pool_lifetime.h"

namespace gpupool::internal {

class AllocationCacheCore;

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
              uint64_t generation, bool discard) override;
  int device() const override { return shard_->device(); }
  // A cache shard has no handle config; the lease reports its MemoryKind.
  const void* config() const override { return nullptr; }

  // One more holder (a lease about to be handed out).
  LeaseOwner* Hold() {
    holders_.fetch_add(1, std::memory_order_relaxed);
    return this;
  }
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

  // --- cache_core.cc ---
  absl::StatusOr<PooledAllocation> Allocate(int device, size_t bytes,
                                            MemoryKind kind,
                                            NativeStream stream,
                                            SourceLocation where);
  // Takes back the block of a released lease.
  void Return(AllocationBlock* block);

  // --- stable.cc ---
  absl::StatusOr<void*> AcquireStable(absl::string_view name, int device,
                                      size_t bytes);
  absl::Status ReleaseStable(absl::string_view name, int device);

  // --- ipc/cache_methods.cc ---
  absl::StatusOr<IpcHandle> ExportStable(absl::string_view name, int device,
                                         size_t bytes);
  absl::StatusOr<ImportedBuffer> Import(const IpcHandle& handle, int device);
  IpcStats GetIpcStats() const;

  // --- freeing.cc ---
  absl::Status Trim(int device, size_t keep_bytes);
  absl::Status TrimAll();
  // Frees every cached, retiring and stable block while the runtime is
  // alive (`call_runtime`), else leaks them. `close`: the cache is being
  // destroyed; later releases leak.
  void FreeEverything(bool close, bool call_runtime);
  // The exit hook: free while the runtime is alive; the exiting flag set
  // right after makes every later release leak.
  void DrainForExit();

  // --- graph/pool.cc ---
  absl::StatusOr<std::shared_ptr<GraphPoolState>> NewGraphPool(int device);
  // A route for the capture on `origin` (one GetCaptureInfo call); its id.
  absl::StatusOr<uint64_t> OpenCaptureRoute(
      std::shared_ptr<GraphPoolState> pool, NativeStream origin);
  void CloseCaptureRoute(uint64_t route_id);
  absl::Status ReleaseGraphPool(GraphPoolState& pool,
                                const std::vector<NativeStream>& streams);

  // --- cache_report.cc ---
  AllocationCacheStats GetStats() const;
  AllocationCacheStats GetStats(int device) const;
  AllocationCacheStats GetStats(int device, MemoryKind kind) const;
  std::vector<OutstandingLease> GetOutstandingLeases() const;
  std::string DebugString() const;

 private:
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
  AllocationShard& Shard(int device, MemoryKind kind) const {
    return *shards_[ShardIndex(device, kind)];
  }
  DeviceHealth& device_health() const { return lifetime_.device_health(); }
  uint64_t generation(int device) const {
    return device_health().generation(device);
  }
  bool poisoned(int device) const {
    return device_health().is_poisoned(device);
  }
  // A sticky runtime error poisons `device`: true when `status` was one.
  bool PoisonIfSticky(int device, const absl::Status& status) const {
    if (FaultOf(status) != Fault::kDevice) return false;
    device_health().Poison(device, status);
    return true;
  }

  // --- cache_core.cc ---
  // The kernel's entry checks, with this cache's wording.
  absl::Status CheckUsable(int device, absl::string_view what);
  // Forgets, without runtime calls, every block of an older generation.
  void DropStale(int device);
  // Deletes host records (returning their events to the EventPool). Must be
  // called without our locks: the EventPool takes its own.
  static void DeleteBlocks(const BlockVector& blocks);
  AllocationBlock* NewBlock(const AllocationShard& shard, void* ptr,
                            size_t size, int size_class, uint64_t generation);
  PooledAllocation MakeLease(AllocationBlock* block);
  absl::StatusOr<PooledAllocation> AllocateUncached(
      AllocationShard& shard, const LeaseRequest& request);
  // Checks candidates (taken oldest first) until one is usable on the
  // request's stream; puts the others back. Returns the leased block or
  // nullptr.
  AllocationBlock* TakeFromCandidates(AllocationShard& shard,
                                      const BlockVector& candidates,
                                      const LeaseRequest& request);

  // --- graph/pool.cc ---
  // The pool whose open route matches the capture `info` of `stream` (by
  // capture id; an invalidated capture by its origin stream), or null.
  // Learns route capture ids on the way: runtime calls, no lock held.
  std::shared_ptr<GraphPoolState> MatchRoute(int device, NativeStream stream,
                                             const CaptureInfo& info);
  // Allocate for a stream whose capture is routed to `pool`.
  absl::StatusOr<PooledAllocation> AllocateInGraphPool(
      std::shared_ptr<GraphPoolState> pool, AllocationShard& shard,
      const LeaseRequest& request);
  // Return of a pool block: to the pool's free list, or (pool released) to
  // the general cache fenced by the replay streams.
  void ReturnToGraphPool(AllocationShard& shard, AllocationBlock* block);
  // A released block used on a capturing stream: adopted by the pool routed
  // to that capture, else held. False when no stream of it captures.
  bool HoldIfCapturing(AllocationShard& shard, AllocationBlock* block);
  void GiveBackToCache(AllocationShard& shard, AllocationBlock* block,
                       const std::vector<NativeStream>& streams);
  // Frees (or, without the runtime, leaks) the blocks pools hold free and the
  // held ones.
  void FreeGraphPoolBlocks(bool call_runtime);
  void AddGraphStats(int device, AllocationCacheStats* stats) const;
  std::string GraphPoolsDebugString() const;

  // --- oom_chain.cc ---
  // Backend::Allocate with the OOM chain: on kOutOfMemory, free the cached
  // blocks of this (device, kind) — idle ones first, then the pending ones
  // after waiting for their events — and retry once.
  absl::StatusOr<void*> RuntimeAllocate(AllocationShard& shard,
                                        size_t requested, size_t bytes);
  // Counts a failed allocation; a sticky device error poisons the device and
  // turns into FailedPrecondition naming it.
  absl::Status AllocationFailed(AllocationShard& shard, absl::Status status);
  absl::Status OutOfMemoryError(AllocationShard& shard, size_t requested,
                                size_t rounded,
                                const absl::StatusOr<MemoryInfo>& info,
                                size_t released, bool retried,
                                const absl::Status& runtime);

  // --- freeing.cc ---
  // Takes cached blocks of `shard` (largest first) until at least `bytes`
  // are taken, plus the retiring ones, and frees them: those already idle
  // first, then the pending ones after waiting for their events.
  Released ReleaseCached(AllocationShard& shard, size_t bytes,
                         bool with_retiring);
  Released ReleaseBlocks(AllocationShard& shard, BlockVector blocks);
  // Frees an idle block, or retires it per `state` (kDrop / kLeak).
  absl::Status Dispose(AllocationShard& shard, AllocationBlock* block,
                       BlockState state);
  // Frees the memory of an idle block (no pending events) and its record.
  absl::Status FreeBlock(AllocationShard& shard, AllocationBlock* block);
  absl::Status FreeRaw(AllocationShard& shard, void* ptr);
  // Retiring blocks wait for their events; check the oldest one now and then.
  void PollRetiring(AllocationShard& shard);
  void CheckRetiring(AllocationShard& shard, AllocationBlock* block);

  // --- ipc/cache_methods.cc ---
  // Frees a stable buffer's memory, unless it is exported and an importer
  // still has it mapped: then it waits (FreeReleasedExports frees it later).
  absl::Status FreeStableMemory(AllocationShard& shard, void* ptr);
  // Frees the exported versions no importer maps any more.
  void FreeReleasedExports();

  // --- stable.cc ---
  // Allocates the claimed buffer's new memory, then frees the memory it
  // replaces.
  absl::StatusOr<void*> FinishStable(AllocationShard& shard,
                                     StableBuffer* buffer, size_t bytes,
                                     size_t capacity);

  Backend& backend_;
  const AllocationCacheOptions options_;
  PoolLifetime lifetime_;
  StreamOrderFence fence_;
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
  GraphPoolRegistry graph_pools_;
  std::atomic<bool> closed_{false};
  // IPC (ipc/cache_methods.cc): this cache's exports, and its imports (shared
  // with the ImportedBuffer leases).
  IpcExports ipc_exports_{backend_};
  const std::shared_ptr<IpcImports> ipc_imports_ =
      std::make_shared<IpcImports>(backend_, lifetime_, ipc_exports_);
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_CACHE_CORE_H_
