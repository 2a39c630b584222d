// GraphPools: the capture router of one cache (src/allocation/hooks.h) and
// the policy of its capture-private pools (gpupool/graph_pool.h): routing an
// allocation by its stream's capture id, returns into a pool, a pool's
// release back to the general cache, adopting a block a registered capture
// used. Installed in the cache's core by the first GraphPool::Create.
//
// Thread safety: as CaptureRoutes (graph/capture_routes.h); every runtime
// call is made with no lock held.

#ifndef GPUPOOL_SRC_ALLOCATION_GRAPH_GRAPH_POOLS_H_
#define GPUPOOL_SRC_ALLOCATION_GRAPH_GRAPH_POOLS_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "src/allocation/graph/capture_routes.h"
#include "src/allocation/hooks.h"
#include "src/lifetime/handle_ledger.h"

namespace gpupool::internal {

class AllocationCacheCore;

class GraphPools final : public CaptureRouter {
 public:
  // The router of `core`'s cache, installed on first use.
  static GraphPools& Of(AllocationCacheCore& core);

  explicit GraphPools(AllocationCacheCore& core) : core_(core) {}

  // GraphPool::Create's work. Errors as the cache's entry checks.
  absl::StatusOr<std::shared_ptr<GraphPoolState>> NewPool(int device);
  // A route for the capture on `origin` (one GetCaptureInfo call); its id.
  absl::StatusOr<uint64_t> OpenRoute(std::shared_ptr<GraphPoolState> pool,
                                     NativeStream origin);
  void CloseRoute(uint64_t route_id) {
    routes_.CloseRoute(route_id);
    // A graph-owned pool whose references went while the scope was open.
    collect_->store(true, std::memory_order_release);
  }
  // GraphPool::RetainBy's work: a user object whose destructor drops one
  // reference to `pool`, moved into `graph`.
  absl::Status RetainBy(GraphPoolState& pool, NativeGraph graph);
  absl::Status Release(GraphPoolState& pool,
                       const std::vector<NativeStream>& streams);
  // The handle of an unreleased pool is gone: nobody can name its replay
  // streams, so its blocks are held (never given back unfenced) until the
  // cache is destroyed; a graph-owned pool waits for its graphs instead.
  void Hold(GraphPoolState& pool);

  // --- CaptureRouter ---
  bool Routing() const override { return routes_.AnyRouteOpen(); }
  std::optional<absl::StatusOr<PooledAllocation>> Allocate(
      AllocationShard& shard, const LeaseRequest& request,
      const CaptureInfo& info) override;
  bool Adopt(AllocationShard& shard, AllocationBlock* block,
             NativeStream stream, const CaptureInfo& info) override;
  void Return(AllocationShard& shard, AllocationBlock* block) override;
  bool HasCollectable() const override {
    return collect_->load(std::memory_order_acquire);
  }
  // Releases the graph-owned pools that no reference holds any more.
  void Collect() override;
  std::vector<AllocationBlock*> TakeAllUnleased() override;
  void AddStats(int device, AllocationCacheStats* stats) const override;
  std::string DebugString() const override;
  std::string DescribeHeld(int device) const override;
  int64_t PoolIdOf(const void* owner) const override;
  void ForEachUnleased(
      absl::FunctionRef<void(const AllocationBlock&, int64_t pool_id)> visit)
      const override;

 private:
  // A kGraphPool trace event for `pool` (`what`: TraceEvent::what), of
  // `blocks`' bytes, when the cache's trace is on.
  void Trace(const GraphPoolState& pool, absl::string_view what,
             const std::vector<AllocationBlock*>& blocks);
  absl::StatusOr<PooledAllocation> AllocateInPool(
      std::shared_ptr<GraphPoolState> pool, AllocationShard& shard,
      const LeaseRequest& request);
  // Drops a block of `pool` out of use without a runtime call (`how`).
  void Forget(GraphPoolState& pool, AllocationShard& shard,
              AllocationBlock* block, RetireReason how);

  // Takes every free block out of `pool` and marks it released; the blocks
  // and the streams that fence them.
  std::vector<AllocationBlock*> TakeForRelease(GraphPoolState& pool)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool.mu);

  AllocationCacheCore& core_;
  CaptureRoutes routes_;
  // Raised when a graph-owned pool may have become releasable.
  const std::shared_ptr<std::atomic<bool>> collect_ =
      std::make_shared<std::atomic<bool>>(false);
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_GRAPH_GRAPH_POOLS_H_
