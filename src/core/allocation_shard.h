// One (device, MemoryKind) shard of the allocation cache: the free lists of
// every size class, the retiring list, the leases out, the stable buffers and
// the counters, all under one Mutex (src/core/mutex.h). Pure bookkeeping:
// nothing here calls the runtime, so every method is safe to run under the
// lock; the caller (AllocationCacheCore) makes runtime calls with the lock
// released.
//
// Per size class ("bin") a cached block is in one of two lists:
//   ready    no pending work anywhere: any request may take it (LIFO);
//   pending  events recorded at release may still be pending (FIFO by release
//            time, so the oldest — likeliest complete — is checked first).
// A pending block used on exactly one stream is also in its bin's per-stream
// LIFO, so a request on that stream takes it in O(1) without any check.

#ifndef GPUPOOL_SRC_CORE_ALLOCATION_SHARD_H_
#define GPUPOOL_SRC_CORE_ALLOCATION_SHARD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/pool_stats.h"
#include "src/core/allocation_block.h"
#include "src/core/mutex.h"

namespace gpupool::internal {

// A buffer of AcquireStable. `busy` while one thread (re)allocates it
// outside the lock; others wait for it.
struct StableBuffer {
  void* ptr = nullptr;
  size_t capacity = 0;
  uint64_t generation = 0;
  bool busy = false;
};

class AllocationShard {
 public:
  // `device_cached_bytes` counts cached bytes of the device over all its
  // shards (the max_cached_bytes cap is per device); it must outlive us.
  AllocationShard(int device, MemoryKind kind, int size_class_count,
                  std::atomic<size_t>* device_cached_bytes);
  // Deletes the host-side records of blocks still listed (never frees
  // memory: Close() handed those to the runtime first, or they are leaked).
  ~AllocationShard();
  AllocationShard(const AllocationShard&) = delete;
  AllocationShard& operator=(const AllocationShard&) = delete;

  int device() const { return device_; }
  MemoryKind kind() const { return kind_; }

  mutable Mutex mu;

  // --- Cached blocks -------------------------------------------------------
  // Caches `block` (its events and release_stream set) if the device stays
  // within `max_cached_bytes`; false (block untouched) otherwise.
  bool TryAddCachedLocked(AllocationBlock* block, size_t max_cached_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A pending block of `size_class` released on `stream` alone (newest
  // first), or nullptr.
  AllocationBlock* TakeSameStreamLocked(int size_class, NativeStream stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A ready block of `size_class` (newest first), or nullptr.
  AllocationBlock* TakeReadyLocked(int size_class)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The oldest pending block of `size_class`, or nullptr.
  AllocationBlock* TakeOldestPendingLocked(int size_class)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Puts back a block from TakeOldestPendingLocked as the oldest again.
  void RestorePendingLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Takes cached blocks, largest class first (ready before pending within a
  // class), until at least `bytes` were taken or none is left. Returns the
  // bytes taken.
  size_t TakeCachedLocked(size_t bytes, std::vector<AllocationBlock*>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // --- Retiring blocks (freed once their events complete) -----------------
  void AddRetiringLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  AllocationBlock* TakeOldestRetiringLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void RestoreRetiringLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void TakeAllRetiringLocked(std::vector<AllocationBlock*>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  bool has_retiring() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !retiring_.empty();
  }

  // --- Leases --------------------------------------------------------------
  // Marks `block` leased (its lease fields set) and counts it.
  void AddInUseLocked(AllocationBlock* block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void RemoveInUseLocked(AllocationBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void AppendOutstandingLocked(std::vector<OutstandingLease>* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // --- Stable buffers ------------------------------------------------------
  // Empties `buffer` (an entry of `stable`) and uncounts what it held.
  // Returns that memory, for the caller to free or leak, or nullptr.
  void* TakeStableLocked(StableBuffer* buffer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // --- Generations ---------------------------------------------------------
  // When the device generation (read under the lock) moved past the one last
  // seen, takes every
  // cached and retiring block of an older generation into `out` and forgets
  // stable buffers of an older generation (all counted as dropped; the
  // caller deletes the blocks without runtime calls).
  void TakeStaleLocked(uint64_t generation, std::vector<AllocationBlock*>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Counters; gauges are maintained by the methods above.
  AllocationCacheStats stats ABSL_GUARDED_BY(mu);
  // Set when the cache is destroyed: later releases leak.
  bool closed ABSL_GUARDED_BY(mu) = false;
  // AcquireStable buffers by name (kDevice shards only). unique_ptr: waiters
  // hold a pointer to the entry across a rehash.
  absl::flat_hash_map<std::string, std::unique_ptr<StableBuffer>> stable
      ABSL_GUARDED_BY(mu);

 private:
  struct Bin {
    PrimaryList ready;
    PrimaryList pending;
    absl::flat_hash_map<NativeStream, StreamList> by_stream;
  };

  void RemoveCachedLocked(AllocationBlock* block, Bin& bin, bool pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void UnlinkFromStreamLocked(AllocationBlock* block, Bin& bin)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  const int device_;
  const MemoryKind kind_;
  std::atomic<size_t>* const device_cached_bytes_;

  std::vector<Bin> bins_ ABSL_GUARDED_BY(mu);
  PrimaryList in_use_ ABSL_GUARDED_BY(mu);
  PrimaryList retiring_ ABSL_GUARDED_BY(mu);
  uint64_t seen_generation_ ABSL_GUARDED_BY(mu) = 0;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_CORE_ALLOCATION_SHARD_H_
