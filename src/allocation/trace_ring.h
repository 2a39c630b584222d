// The allocation cache's trace (AllocationCacheOptions::trace_capacity): a
// bounded ring of what the cache did — allocations served from the cache or
// the runtime, releases, runtime mallocs and frees, trims, out-of-memory
// steps — with a timestamp, the lease and its call site, and the bytes the
// (device, kind) had reserved and in use after the event. The oldest events
// are overwritten. Off (no ring) by default: the cache then tests one
// pointer per event and takes no lock.
//
// Thread safety: every method is thread-safe (one mutex, held for a copy).

#ifndef GPUPOOL_SRC_ALLOCATION_TRACE_RING_H_
#define GPUPOOL_SRC_ALLOCATION_TRACE_RING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/snapshot.h"
#include "gpupool/source_location.h"
#include "src/lifetime/mutex.h"

namespace gpupool::internal {

class TraceRing {
 public:
  // `capacity` > 0 events; `devices` sizes the per-(device, kind) totals.
  TraceRing(size_t capacity, int devices);

  // A lease handed out (`reused`: from the cache, else after a runtime
  // malloc) or given back.
  void Allocated(int device, MemoryKind kind, size_t bytes, const void* ptr,
                 uint64_t lease_id, SourceLocation site, bool reused);
  void Released(int device, MemoryKind kind, size_t bytes, const void* ptr,
                uint64_t lease_id);
  // Runtime memory obtained or given back (`bytes` of a free is looked up).
  void RuntimeMalloc(int device, MemoryKind kind, size_t bytes,
                     const void* ptr);
  void RuntimeFree(int device, MemoryKind kind, const void* ptr);
  // Trim, an OOM chain's retry, or its final failure (`bytes`: requested).
  void Note(TraceOp op, int device, MemoryKind kind, size_t bytes);
  // A feature's transition (kGraphPool, kIpc; TraceEvent::what, a static
  // string): `bytes` at `ptr` (nullptr: several blocks), of graph pool
  // `graph_pool` (-1: none).
  void Transition(TraceOp op, absl::string_view what, int device,
                  MemoryKind kind, size_t bytes, const void* ptr,
                  int64_t graph_pool = -1);

  size_t capacity() const { return capacity_; }
  // The events, oldest first.
  std::vector<TraceEvent> Events() const;

 private:
  struct Totals {
    int64_t reserved = 0;
    int64_t in_use = 0;
  };
  void Push(TraceEvent event, const Totals& totals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Totals& TotalsOf(int device, MemoryKind kind)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  const int devices_;
  const int64_t start_ns_;
  mutable Mutex mu_;
  std::vector<TraceEvent> ring_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;  // the oldest once the ring is full
  std::vector<Totals> totals_ ABSL_GUARDED_BY(mu_);
  // Runtime allocations live now, by address: what a free gives back.
  absl::flat_hash_map<uintptr_t, size_t> runtime_bytes_ ABSL_GUARDED_BY(mu_);
};

// A runtime malloc this thread made for the lease it is about to make: the
// lease is traced as kAllocate, not kReuse. Used only while tracing.
void MarkRuntimeMalloc();
// Whether one was marked since the last call (and clears the mark).
bool TakeRuntimeMallocMark();

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_TRACE_RING_H_
