// The state of capture-private pools (gpupool/graph_pool.h): one pool's
// blocks and flags, and the capture routes (open CaptureScopes) that send a
// capture's allocations to a pool. The policy is GraphPools
// (graph/graph_pools.h); the cache's core never sees any of it.
//
// Thread safety: each pool's block lists under its own mutex; the routes and
// the list of pools under CaptureRoutes' mutex; `open_routes` is read
// without a lock on the hot path (Allocate skips every capture query while
// it is 0). No runtime call is made under either lock.

#ifndef GPUPOOL_SRC_ALLOCATION_GRAPH_CAPTURE_ROUTES_H_
#define GPUPOOL_SRC_ALLOCATION_GRAPH_CAPTURE_ROUTES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "src/allocation/block.h"
#include "src/allocation/graph/recordings.h"
#include "src/allocation/graph/release_fence.h"
#include "src/lifetime/mutex.h"

namespace gpupool::internal {

class AllocationCacheCore;

struct GraphPoolState {
  GraphPoolState(uint64_t pool_id, int pool_device)
      : id(pool_id),
        device(pool_device),
        retain(std::make_shared<GraphRetain>()) {}

  const uint64_t id;
  const int device;
  const std::shared_ptr<GraphRetain> retain;

  Mutex mu;
  // Blocks the pool holds that no lease holds. Reusable by a capture into
  // the pool on their `release_stream` when they hold no events and belong
  // to the current recording or to none (`owner_tag`, see recordings.h); a
  // block returned after its capture ended holds ready events on the
  // streams it was used on (fenced, never reused inside the pool).
  std::vector<AllocationBlock*> free ABSL_GUARDED_BY(mu);
  // The captures since a graph last retained the pool, and those set apart
  // while their graphs may still run.
  PoolRecordings recordings ABSL_GUARDED_BY(mu);
  // Every block of the pool, leased or free (for stats).
  int64_t blocks ABSL_GUARDED_BY(mu) = 0;
  int64_t bytes ABSL_GUARDED_BY(mu) = 0;
  // Captures routed here whose id was seen (the graphs made from the pool).
  int64_t captures ABSL_GUARDED_BY(mu) = 0;
  bool scope_open ABSL_GUARDED_BY(mu) = false;
  bool released ABSL_GUARDED_BY(mu) = false;
  // The handle was dropped before Release: nobody can name the streams the
  // graphs replay on, so the blocks are held until the cache is destroyed.
  bool held ABSL_GUARDED_BY(mu) = false;
  // Retained by a graph (RetainBy succeeded once): the pool is released,
  // with no stream fence of the caller's, once `retain` counts no reference.
  bool graph_owned ABSL_GUARDED_BY(mu) = false;
  // The handle of a graph-owned pool let go (dropped or Release): only the
  // graphs' references are left.
  bool handle_let_go ABSL_GUARDED_BY(mu) = false;
  // Release's fence on the replay streams it named, recorded then for the
  // blocks it could not give back at once (leases out then; every block of
  // a graph-owned pool): each takes its share when it goes back.
  ReleaseFence release_fence ABSL_GUARDED_BY(mu);
};

// One open CaptureScope.
struct CaptureRoute {
  uint64_t route_id = 0;
  int device = -1;
  NativeStream origin = nullptr;
  // The capture's id, learned from the origin once its capture is active;
  // 0 until then.
  uint64_t capture_id = 0;
  std::shared_ptr<GraphPoolState> pool;
};

class CaptureRoutes {
 public:
  // Allocate's fast test: no scope open, no capture query.
  bool AnyRouteOpen() const {
    return open_routes_.load(std::memory_order_acquire) > 0;
  }

  std::shared_ptr<GraphPoolState> NewPool(int device);
  // FailedPrecondition when released or already scoped; else the route id.
  absl::StatusOr<uint64_t> OpenRoute(std::shared_ptr<GraphPoolState> pool,
                                     NativeStream origin, uint64_t capture_id);
  void CloseRoute(uint64_t route_id);
  // Routes of `device` (copies), for matching outside the lock.
  std::vector<CaptureRoute> Routes(int device) const;
  // Records a capture id learned for `route_id` (a later capture on the
  // route's origin replaces the earlier one's).
  void LearnCaptureId(uint64_t route_id, uint64_t capture_id);
  // The pool whose open route matches the capture `info` of `stream` on
  // `device` (by capture id; an invalidated capture by its origin stream),
  // or null. Learns route capture ids on the way (a capture learned begins
  // a pool's recording): capture queries through `core`, no lock held; a
  // sticky error poisons the device and matches nothing.
  std::shared_ptr<GraphPoolState> Match(AllocationCacheCore& core, int device,
                                        NativeStream stream,
                                        const CaptureInfo& info);
  // Live pools (weak: a pool dies with its handle and its last block).
  std::vector<std::shared_ptr<GraphPoolState>> Pools() const;

 private:
  mutable Mutex mu_;
  std::atomic<int> open_routes_{0};
  uint64_t next_route_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<CaptureRoute> routes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<GraphPoolState>> pools_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_GRAPH_CAPTURE_ROUTES_H_
