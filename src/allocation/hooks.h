// The two seams the allocation core offers the features built over it. The
// core calls these interfaces and knows nothing else of what implements them:
//
//   CaptureRouter  does this allocation, or this released block, belong to a
//                  capture pool? (graph pools, graph/)
//   FreeGate       may this stable buffer's memory be freed now? (sharing
//                  with other processes, ipc/)
//
// Each is installed at most once per cache, by the first use of its feature
// (GraphPool::Create, StableBuffers), and lives as long as the cache's core.
// Neither is ever called with a shard lock held; both may call back into the
// core's room services (cache_core.h).

#ifndef GPUPOOL_SRC_ALLOCATION_HOOKS_H_
#define GPUPOOL_SRC_ALLOCATION_HOOKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/pool_stats.h"
#include "gpupool/snapshot.h"

namespace gpupool::internal {

class AllocationShard;
struct AllocationBlock;
struct LeaseRequest;

class CaptureRouter {
 public:
  virtual ~CaptureRouter() = default;

  // Whether a capture may be routed now: read lock-free on every Allocate
  // and release. While false the core makes no capture query of its own
  // (unless AllocationCacheOptions::detect_unregistered_captures is set).
  virtual bool Routing() const = 0;
  // `request`'s stream captures (`info`: active or invalidated). A pool's
  // lease or error when a pool claims the capture; nullopt to let the cache
  // serve it.
  virtual std::optional<absl::StatusOr<PooledAllocation>> Allocate(
      AllocationShard& shard, const LeaseRequest& request,
      const CaptureInfo& info) = 0;
  // A released general-cache block, used on `stream` alone, which captures
  // (`info`). True when a pool adopted it (it left the shard's in-use
  // list); false leaves it to the core, which holds it out of reuse.
  virtual bool Adopt(AllocationShard& shard, AllocationBlock* block,
                     NativeStream stream, const CaptureInfo& info) = 0;
  // The release of a block whose `owner` this router set.
  virtual void Return(AllocationShard& shard, AllocationBlock* block) = 0;
  // Whether the router has blocks to give back that no call of its own will
  // reach (their owner let go of them from another thread): read lock-free
  // on every Allocate and at Trim, which then call Collect with no lock
  // held. Collect gives them back (runtime calls allowed).
  virtual bool HasCollectable() const { return false; }
  virtual void Collect() {}
  // Every block the pools hold unleased, taken out of them (owner cleared):
  // the cache is freeing everything.
  virtual std::vector<AllocationBlock*> TakeAllUnleased() = 0;
  // Adds the pools' gauges of `device` (-1: all) to `stats`.
  virtual void AddStats(int device, AllocationCacheStats* stats) const = 0;
  // One line per pool, each starting with "\n  ".
  virtual std::string DebugString() const = 0;
  // What the pools keep out of reuse on `device`, in words for an
  // out-of-memory message (e.g. "in graph pools 8388608 bytes").
  virtual std::string DescribeHeld(int device) const = 0;
  // For snapshots: the id of the pool a block's `owner` names, and every
  // block the pools hold that no lease holds, with its pool's id (each
  // pool's lock held while its blocks are visited).
  virtual int64_t PoolIdOf(const void* owner) const = 0;
  virtual void ForEachUnleased(
      absl::FunctionRef<void(const AllocationBlock&, int64_t pool_id)> visit)
      const = 0;
};

class FreeGate {
 public:
  virtual ~FreeGate() = default;

  // May the stable buffer memory `ptr` of `device` be freed now? False: the
  // gate keeps it, and TakeFreeable hands it back once it may be.
  virtual bool MayFree(int device, void* ptr) = 0;
  // (device, ptr) pairs the gate kept that may be freed now.
  virtual std::vector<std::pair<int, void*>> TakeFreeable() = 0;
  // `device` is poisoned: forget its records without runtime calls.
  virtual void DropDevice(int device) = 0;
  // Let go of what nothing uses any more on `device` (-1: every device),
  // making runtime calls (Trim, and before the cache frees everything).
  virtual void Trim(int device) = 0;
  // The cache is destroyed: later releases make no runtime call.
  virtual void Close() = 0;
  // Leases of the feature's own still out.
  virtual void AppendOutstanding(std::vector<OutstandingLease>* out) const = 0;
  // For snapshots: whether stable buffer memory `ptr` of `device` is
  // exported (with its current version's importers, -1 when unknown), and
  // the mappings of other processes' buffers open here.
  virtual bool IsExported(int device, const void* ptr, int* importers) const {
    return false;
  }
  virtual void AppendImports(std::vector<ImportSnapshot>* out) const {}
  // What the feature keeps of `device`'s memory, in words for an
  // out-of-memory message; empty when nothing.
  virtual std::string DescribeHeld(int device) const { return ""; }
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_HOOKS_H_
