// What the cache's policy hands an allocation shard with a request: the
// request itself, the counters the policy bumps, and the record of an
// unchecked lease (the release slot's block leased before its events are
// checked) that lets the shard undo it.

#ifndef GPUPOOL_SRC_ALLOCATION_LEASE_REQUEST_H_
#define GPUPOOL_SRC_ALLOCATION_LEASE_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpupool/backend.h"
#include "gpupool/source_location.h"
#include "src/allocation/block.h"

namespace gpupool::internal {

// What a lease asks for.
struct LeaseRequest {
  size_t bytes = 0;
  size_t lease_bytes = 0;  // `bytes` rounded (LeaseBytes): what a block gets
  NativeStream stream = nullptr;
  SourceLocation where;
  // Wall-clock nanoseconds at Allocate (AllocationCacheOptions::
  // record_lease_times); 0: not recorded.
  int64_t leased_unix_ns = 0;
};

// Counters bumped by the cache's policy (gauges and departures are kept by
// the shard's own methods).
enum class CacheCounter {
  kMiss,
  kUncached,
  kOomRetry,
  kFailedAllocation,
};

// The block of an unchecked lease (AllocationShard::TakeCached) and the
// fields of its release that the lease overwrote, for
// AllocationShard::UndoUncheckedLease to restore. Only `block`, `waits`
// (set by the caller: the request's stream waits on the events,
// CrossStreamPolicy::kWaitOnStream, counted as a wait with the hit) and
// `where` (a class) are initialized, the rest is set with `block`: every
// Allocate has one, and pays for no more. Such a block was used on one
// stream at most (its events are that stream's).
struct UncheckedLease {
  AllocationBlock* block = nullptr;
  bool waits = false;
  size_t requested;
  NativeStream stream;
  NativeStream release_stream;
  NativeStream use;  // its one use, or nullptr: none
  uint64_t lease_id;
  SourceLocation where;
  int64_t leased_unix_ns;
  uint64_t leased_at;
  bool fence_at_release;
};
static_assert(std::is_trivially_destructible_v<UncheckedLease>);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_LEASE_REQUEST_H_
