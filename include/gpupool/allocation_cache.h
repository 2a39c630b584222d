// gpupool/allocation_cache.h — a process-lifetime cache of GPU memory blocks.
//
// Runtime allocation (cudaMalloc/hipMalloc, and pinned host memory) is slow
// and often synchronising; AllocationCache keeps released blocks, keyed by
// (device, MemoryKind), and hands them out again:
//
//   * size classes: requests are rounded up to one of four geometric sub-bins
//     per power of two above a 512-byte minimum (waste < 25% of the request,
//     < 20% of the block); finding a request's class is O(1). Requests above
//     `max_cached_block_bytes` go straight to the runtime and back.
//   * stream-ordered safety: a block remembers the streams it was used on
//     (Allocate's stream plus RecordUse). On release a ready event is
//     recorded on each of them (from the EventPool, or one the block kept
//     from a same-stream hit: a same-stream cycle costs one record). The
//     block is handed out at once to a request on the same single stream,
//     and to any other stream only once all its events completed — or, with
//     CrossStreamPolicy::kWaitOnStream, by making the new stream wait on
//     them (no host sync). A release never waits for the EventPool: when a
//     bounded pool has no event free, it synchronizes the stream instead.
//   * streams are known by their handle value: a block released on stream S
//     with work pending goes at once to the next request on the same
//     NativeStream value. Runtimes recycle handle values, so a stream must
//     outlive its blocks' pending work: synchronize a stream before
//     destroying it while work that used a cached block may still run on it
//     (streams leased from a StreamPool are never destroyed while leased).
//   * caps: at most `max_cached_bytes` cached per device; Trim(device, keep).
//   * OOM chain: a runtime out-of-memory frees the cached blocks of that
//     device and kind (waiting for their pending work), retries once, then
//     returns ResourceExhausted naming requested, rounded, in-use and cached
//     bytes and the device's free/total memory. Never aborts.
//   * features over the cache, each a type of its own: named buffers that
//     never move and sharing them with other processes (StableBuffers,
//     gpupool/stable_buffers.h); capture-private pools for CUDA/HIP graphs
//     (GraphPool, gpupool/graph_pool.h).
//   * faults: a sticky device error poisons the device (shared DeviceHealth);
//     its blocks are then dropped without runtime calls.
//   * exit and fork: cached blocks are freed by an exit hook while the runtime
//     is alive; afterwards releases leak. In a fork() child Allocate fails
//     with FailedPrecondition and releases leak without taking any lock.
//
// As with cudaMallocAsync, an allocation made on stream S is ready in S's
// order: before using it on another stream T, make T wait on S, and call
// RecordUse(T) so that the release protects T's work too. An allocation made
// with no stream (nullptr) is ready for any use at once.
//
// Thread safety: every AllocationCache method is thread-safe; locks are
// sharded by (device, MemoryKind) and the runtime is never called while one is
// held. A PooledAllocation is a move-only lease used by one thread at a time.
// The backend and the EventPool must outlive the cache; leases may outlive it
// (their memory is then leaked on release, without runtime calls).
//
// Example:
//
//   gpupool::AllocationCache cache(backend, events);
//   absl::StatusOr<gpupool::PooledAllocation> buffer =
//       cache.Allocate(/*device=*/0, 1 << 20, gpupool::MemoryKind::kDevice,
//                      stream);
//   if (!buffer.ok()) return buffer.status();
//   Launch(stream, buffer->data());
//   // ~PooledAllocation returns the block; reusable at once on `stream`.

#ifndef GPUPOOL_ALLOCATION_CACHE_H_
#define GPUPOOL_ALLOCATION_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/export.h"
#include "gpupool/internal/lease.h"
#include "gpupool/pool_stats.h"
#include "gpupool/source_location.h"

namespace gpupool {

class DeviceHealth;
class EventPool;

namespace internal {
class AllocationCacheCore;
struct AllocationBlock;
// How the features over a cache (gpupool/graph_pool.h,
// gpupool/stable_buffers.h) reach its internals.
struct AllocationCacheAccess;
}  // namespace internal

// When a cached block released on stream A may serve a request on stream B.
enum class CrossStreamPolicy {
  // Only once every event recorded at its release completed (queried from
  // the host, never waited for).
  kWaitForCompletion,
  // At once, after making B wait on each of those events with
  // Backend::StreamWaitEvent (no host synchronisation). Falls back to
  // kWaitForCompletion for requests without a stream and on backends without
  // StreamWaitEvent.
  kWaitOnStream,
};

struct GPUPOOL_EXPORT AllocationCacheOptions {
  // Cached (idle) bytes kept per device, both memory kinds together; a
  // release beyond it frees the block (once its pending work completed).
  // Default: unbounded, the OOM chain being the safety valve.
  size_t max_cached_bytes = std::numeric_limits<size_t>::max();
  // Give-back threshold: before asking the runtime for memory (a new
  // segment, or a block above max_cached_block_bytes), wholly free cached
  // segments too small for the request are freed (up to the request's size)
  // while the (device, kind) would hold — in use plus cached, the request
  // included — more than this percentage above the most it has had in use
  // at once (or will have, with the request) — so that memory stranded in
  // sizes the workload no longer asks for is exchanged rather than added
  // to, and a workload below its peak keeps what its peak needed. Negative:
  // never (Trim, the cap and the OOM chain alone give memory back).
  // GPUPOOL_CONF key `give_back_above_percent`.
  int give_back_above_percent = 10;
  // How memory is cut (chosen by replaying the shipped allocation traces;
  // the results page has the figures). A free block larger than 1 MiB
  // serves only requests of at least 1/max_split_ratio of its size, so that
  // a large block is not shredded for small requests (they get segments of
  // their own); 0: any request that fits. Requests above
  // large_rounding_from_bytes are leased (and new segments made) in
  // multiples of large_granule_bytes (rounded up to a multiple of 512)
  // rather than their size class.
  size_t max_split_ratio = 8;
  size_t large_rounding_from_bytes = size_t{8} << 20;
  size_t large_granule_bytes = size_t{2} << 20;
  // Requests above this size are never cached: allocated exactly and freed on
  // release. Values above 2^62 are clamped to 2^62.
  size_t max_cached_block_bytes = size_t{1} << 30;
  CrossStreamPolicy cross_stream = CrossStreamPolicy::kWaitForCompletion;
  // Blocks released on other streams whose events are checked (one query
  // per event) per Allocate, when one of them fits the request better than
  // any block usable at once or none is usable at once; 0: never checked
  // (a request then takes only blocks usable at once, or a new one).
  int pending_checks_per_allocate = 2;
  // Config of the ready events taken from the EventPool.
  EventConfig event_config = {};
  // Graph captures the cache was not told about (no CaptureScope): when set,
  // every release asks the backend whether each stream the block was used on
  // is capturing (Backend::GetCaptureInfo, one call per stream) and keeps a
  // block released during a capture out of reuse until the cache is
  // destroyed. Off by default: it doubles the runtime calls of a same-stream
  // cycle (1 -> 2). While any CaptureScope is open the check is made anyway.
  // A backend whose GetCaptureInfo is Unimplemented is asked GetCaptureStatus
  // instead; one with neither never captures. A query that fails otherwise
  // leaves the capture unknown, and the block is held as if captured (a
  // sticky error poisons the device and the block is dropped).
  bool detect_unregistered_captures = false;
  // No runtime call per same-stream cycle: a block released on the one
  // stream it was used on is parked without recording its ready event, and a
  // request on that stream for the same size takes it back (stream order
  // makes that safe, as in PyTorch's caching allocator). Its event is
  // recorded on that stream (and the block cached as any other) before
  // anything else may have it: the first request that no parked block
  // serves fences them all, as do Trim, the out-of-memory chain, the
  // give-back, the cache's end and FenceStream. A steady loop on one stream
  // makes no call; a request of another size or stream costs the calls the
  // releases would have made. A block leased to another stream than its
  // previous lease's is fenced at its release instead (a buffer passed
  // between streams costs what it does without the option).
  // The contract that buys it: such a stream must stay alive until its
  // blocks are fenced — call FenceStream(device, stream) before destroying a
  // stream that released blocks. Streams of the stream pool of a Pools
  // (ProcessPools included) are fenced before the pool destroys them; for a
  // StreamPool of your own, set its PoolOptions::before_destroy to call
  // FenceStream; streams that outlive the cache need nothing. A block whose
  // stream captures when it is to be fenced stays parked until the capture
  // ends (FenceStream, whose stream is about to go, leaks it instead). With
  // detect_unregistered_captures a cycle still makes its capture query (1
  // call). Off by default. GPUPOOL_CONF: defer_same_stream_fences=1.
  bool defer_same_stream_fences = false;
  // Called with the error of every Allocate that fails with
  // ResourceExhausted (after the out-of-memory chain), on the allocating
  // thread, with no lock of the cache held: it may take a snapshot
  // (gpupool/snapshot.h) or trim other caches. Must not throw.
  std::function<void(const absl::Status&)> on_out_of_memory;
  // Events kept by the cache's trace (gpupool/snapshot.h, TraceEvent): the
  // last `trace_capacity` allocations, releases, runtime mallocs and frees,
  // trims and out-of-memory steps, listed by TakeSnapshot. 0 (the default)
  // turns it off: no lock and no call per event. GPUPOOL_CONF: trace=N.
  size_t trace_capacity = 0;
  // Record when each lease began, so that a snapshot gives leased blocks
  // their age (BlockSnapshot::age_ns). Off by default: it costs a clock read
  // per Allocate. Always on while the trace is (trace_capacity > 0).
  // GPUPOOL_CONF: lease_times=1.
  bool record_lease_times = false;
};

// A snapshot of the cache's counters, per (device, kind), per device, or in
// total. Gauges describe now; counters accumulate since construction.
struct GPUPOOL_EXPORT AllocationCacheStats {
  // --- gauges ---
  int64_t allocations_in_use = 0;  // leases out now (stable ones excluded)
  int64_t bytes_in_use = 0;        // bytes those leases occupy (rounded)
  int64_t bytes_requested = 0;     // bytes those leases asked for
  int64_t bytes_rounded = 0;       // == bytes_in_use; paired with requested
  int64_t peak_bytes_in_use = 0;   // high-water mark of bytes_in_use (per
                                   // key; sums add the per-key peaks)
  int64_t blocks_cached = 0;       // free blocks ready for reuse (several
                                   // may tile one runtime allocation)
  int64_t bytes_cached = 0;
  int64_t blocks_retiring = 0;     // over the cap or uncached, freed once their
  int64_t bytes_retiring = 0;      // pending work completes
  int64_t stable_allocations = 0;  // StableBuffers buffers alive
  int64_t bytes_stable = 0;
  // --- counters ---
  int64_t hits = 0;    // Allocate served from the cache
  int64_t misses = 0;  // Allocate served by a new runtime allocation
  int64_t uncached_allocations = 0;  // above max_cached_block_bytes
  int64_t cross_stream_waits = 0;    // hits made safe with StreamWaitEvent
  int64_t oom_retries = 0;           // runtime OOMs answered by trim + retry
  int64_t failed_allocations = 0;    // Allocate/StableBuffers::Acquire errors
  int64_t runtime_allocations = 0;   // Backend::Allocate successes
  int64_t runtime_frees = 0;         // Backend::Free calls
  int64_t stable_reallocations = 0;  // StableBuffers::Acquire grew a buffer
  int64_t blocks_dropped = 0;  // forgotten without a runtime call: poisoned
                               // device or older device generation
  int64_t blocks_leaked = 0;   // left to the OS: exit, fork, released after
                               // the cache was destroyed, unprovable safety
  // --- graph capture (gauges) ---
  int64_t graph_pools = 0;            // GraphPools not yet released
  int64_t blocks_in_graph_pools = 0;  // held by pools for their graphs, not
  int64_t bytes_in_graph_pools = 0;   // leased (leased ones are in_use)
  // Of graph_pools: pools whose handle was dropped before Release. Their
  // blocks stay in the pool (never given back unfenced) until the cache is
  // destroyed.
  int64_t graph_pools_held = 0;
  // Of graph_pools: pools retained by graphs (GraphPool::RetainBy) whose
  // handle let go; released once those graphs and their launches are gone.
  int64_t graph_pools_awaiting_graphs = 0;
  int64_t blocks_held_for_captures = 0;  // released during a capture the
  int64_t bytes_held_for_captures = 0;   // cache was not told about

  AllocationCacheStats& operator+=(const AllocationCacheStats& other);
  // Fraction of cacheable allocations served from the cache (0 when none).
  double hit_rate() const;
  // Bytes held from the runtime: in use + cached + retiring + stable + held
  // by graph pools and for unregistered captures.
  int64_t bytes_reserved() const;
  // "in_use=2 (1.25 MiB, requested 1.00 MiB) cached=1 (512 B) ..."
  std::string ToString() const;
};

// A leased block of memory. Move-only; returns the block to its cache when
// destroyed or released.
class GPUPOOL_EXPORT PooledAllocation {
 public:
  PooledAllocation() = default;
  PooledAllocation(PooledAllocation&& other) noexcept;
  PooledAllocation& operator=(PooledAllocation&& other) noexcept;
  PooledAllocation(const PooledAllocation&) = delete;
  PooledAllocation& operator=(const PooledAllocation&) = delete;
  ~PooledAllocation() {
    if (lease_) Release();  // a moved-from lease costs no call
  }

  // Start of the block; nullptr when empty.
  void* data() const { return data_; }
  // Bytes requested (the block holds capacity() >= size() bytes); 0 when
  // empty.
  size_t size() const { return size_; }
  // Bytes of the block (the request rounded up to its size class).
  size_t capacity() const { return capacity_; }
  // Device the memory belongs to; -1 when empty.
  int device() const { return device_; }
  MemoryKind kind() const { return kind_; }
  // Stream the allocation was made on (nullptr: none).
  NativeStream stream() const { return stream_; }
  // Unique per lease for the life of the process; 0 when empty.
  uint64_t lease_id() const { return lease_.lease_id(); }
  explicit operator bool() const { return static_cast<bool>(lease_); }

  // Declares that work on `stream` (of the same device) uses the memory, so
  // that its release waits for that work too. nullptr and repeats are
  // no-ops; so is an empty lease.
  void RecordUse(NativeStream stream);
  // Returns the block to the cache now. No-op when empty; the lease is empty
  // afterwards.
  void Release();

 private:
  friend class internal::AllocationCacheCore;
  PooledAllocation(internal::Lease&& lease,
                   const internal::AllocationBlock& block);

  // The same lease type as PooledStream's and PooledEvent's; its handle is
  // the block, owned while the lease is non-empty.
  internal::Lease lease_;
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  int device_ = -1;
  MemoryKind kind_ = MemoryKind::kDevice;
  NativeStream stream_ = nullptr;
};

class GPUPOOL_EXPORT AllocationCache {
 public:
  // Caches memory of `backend`, taking ready events from `events`; both must
  // outlive the cache. Shares the EventPool's DeviceHealth, so a sticky
  // error seen by either poisons the device for both. Devices are those
  // `backend.DeviceCount()` reports now; if it fails, every Allocate returns
  // that status.
  AllocationCache(Backend& backend, EventPool& events,
                  AllocationCacheOptions options = {});
  // Shares `health` (poisoning, generations) with other pools of `backend`.
  AllocationCache(Backend& backend, EventPool& events,
                  std::shared_ptr<DeviceHealth> health,
                  AllocationCacheOptions options = {});
  // Frees cached blocks and stable allocations (after waiting for their
  // pending work) unless the process is exiting. Leases still out stay valid
  // memory; when released later they are leaked without runtime calls.
  ~AllocationCache();
  AllocationCache(const AllocationCache&) = delete;
  AllocationCache& operator=(const AllocationCache&) = delete;

  // Leases at least `bytes` of `kind` memory of `device`, ordered on
  // `stream` (nullptr: ready for any use at once). Errors: InvalidArgument
  // (bytes == 0, device out of range, unknown kind); FailedPrecondition
  // (device poisoned — the message names the original error — or process
  // forked or exiting); ResourceExhausted (out of memory after trimming and
  // one retry, or larger than the device; the message gives the numbers);
  // otherwise the runtime's status.
  absl::StatusOr<PooledAllocation> Allocate(
      int device, size_t bytes, MemoryKind kind = MemoryKind::kDevice,
      NativeStream stream = nullptr,
      SourceLocation where = SourceLocation::Current());

  // Frees cached blocks of `device` (device memory first, then pinned host;
  // largest first) until at most `keep_bytes` remain cached, plus every
  // retiring block. Blocks whose last use is still pending are waited for
  // (SynchronizeEvent) before being freed: memory the GPU may still touch is
  // never freed. InvalidArgument for a bad device; FailedPrecondition when
  // forked or exiting; the first runtime error otherwise (the remaining
  // blocks are still freed). OK on a poisoned device (its blocks are
  // dropped).
  absl::Status Trim(int device, size_t keep_bytes = 0);
  // Trim(device, 0) for every device.
  absl::Status Trim();
  // Records the ready events of the blocks released on `stream` of `device`
  // with their fence deferred (defer_same_stream_fences) and caches them as
  // any other release: after it `stream` may be destroyed. A block whose
  // stream is capturing cannot be fenced: it is leaked (counted in
  // blocks_leaked), never reused or freed. A no-op when nothing is deferred
  // (one atomic load per kind, no call). InvalidArgument
  // for a bad device; FailedPrecondition when forked or exiting; OK on a
  // poisoned device (its blocks were dropped).
  absl::Status FenceStream(int device, NativeStream stream);

  // Totals over every device and kind.
  AllocationCacheStats GetStats() const;
  // One device, both kinds (empty for a bad device).
  AllocationCacheStats GetStats(int device) const;
  AllocationCacheStats GetStats(int device, MemoryKind kind) const;
  // Leases still out and where they were acquired (resource "allocation").
  std::vector<OutstandingLease> GetOutstandingLeases() const;
  std::string DebugString() const;

  Backend& backend() const;
  const std::shared_ptr<DeviceHealth>& health() const;
  const AllocationCacheOptions& options() const;

 private:
  friend struct internal::AllocationCacheAccess;
  std::shared_ptr<internal::AllocationCacheCore> core_;
  uint64_t exit_registration_ = 0;
};

// The size a cacheable request of `bytes` (>= 1) occupies in an
// AllocationCache: its size class.
GPUPOOL_EXPORT size_t RoundedAllocationSize(size_t bytes);

}  // namespace gpupool

#endif  // GPUPOOL_ALLOCATION_CACHE_H_
