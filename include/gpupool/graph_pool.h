// gpupool/graph_pool.h — capture-private memory pools over an allocation cache.
//
// A block that work captured into a CUDA or HIP graph touches is the graph's
// until the graph is gone: every replay writes it. GraphPool gives such
// blocks a home (after PyTorch's graph pools): open a CaptureScope on the
// pool (BeginCapture) *before* beginning the capture and end it *after*
// ending the capture;
// every Allocate in between whose stream belongs to that capture (decided by
// the stream's capture id, so side streams joined into the capture count and
// the thread does not matter) is served from the pool.
//
//   * A block released during the capture is reused only by a later
//     allocation of a capture into the same pool on the stream it was
//     released on (stream order makes that safe: the graph replays the same
//     order).
//   * After the capture the pool keeps its blocks, leased or not, away from
//     everyone else: Trim and the out-of-memory chain never free them.
//   * Graphs captured one after another may share a pool (open a new scope on
//     it) as long as they never run concurrently: a later capture reuses
//     blocks the earlier ones released. RetainBy ends that sharing for the
//     graphs it ties: a capture begun after RetainBy(graph) starts a new
//     recording, which never reuses the blocks of a recording whose graphs
//     may still run (a command buffer re-recorded while its old graph's
//     launch is still queued) and reuses them once those graphs and their
//     launches are gone, so re-recording holds at most the recordings
//     still alive. Retain graphs after all the captures that should share.
//   * Every allocation kind of the capture (device and pinned host) is the
//     pool's. A scope kept open across later captures on its origin routes
//     each of them.
//   * A lease that outlives its capture is fenced on every stream it was
//     used on when it comes back, and held by the pool (never reused by a
//     later capture) until the pool's release.
//   * Release(replay_streams) gives the blocks back to the general cache once
//     the work enqueued so far on `replay_streams` (the graphs' last replays)
//     completes — ready events recorded there fence them as for any release.
//     Leases given back later are fenced on those replays (events the
//     release recorded for them) and on their own streams: the replay
//     streams may be destroyed as soon as Release returns.
//   * RetainBy(graph) hands the release to the graphs: the pool goes back
//     once the handle let go and the graphs, with every launch of theirs,
//     are gone (runtime user objects tell when; no stream to name).
//   * Destroying an unreleased handle never releases: the pool holds its
//     blocks until the cache is destroyed (AllocationCacheStats::
//     graph_pools_held counts such pools), or, once retained by graphs,
//     until they are gone (graph_pools_awaiting_graphs). Call Release or
//     RetainBy.
//   * A poisoned device drops the pool's blocks without runtime calls.
//
// Thread safety: GraphPool and CaptureScope are move-only handles used by one
// thread at a time; the cache they come from is thread-safe.
//
// Example (one graph, replayed on `stream`):
//
//   absl::StatusOr<gpupool::GraphPool> pool =
//       gpupool::GraphPool::Create(cache, /*device=*/0);
//   {
//     absl::StatusOr<gpupool::CaptureScope> scope = pool->BeginCapture(stream);
//     cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
//     auto scratch = cache.Allocate(0, bytes, gpupool::MemoryKind::kDevice,
//                                   stream);   // from the pool
//     ...
//     cudaStreamEndCapture(stream, &graph);
//   }  // the scope ends after the capture
//   ... replay the graph ...
//   pool->Release({stream});  // when the graph is destroyed
//
// Or, where the runtime has user objects, the graphs release it:
//
//   pool->RetainBy(graph);  // after cudaStreamEndCapture, before instantiating
//   // drop the pool: it goes back once `graph` and its launches are gone

#ifndef GPUPOOL_GRAPH_POOL_H_
#define GPUPOOL_GRAPH_POOL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/export.h"

namespace gpupool {

namespace internal {
class AllocationCacheCore;
struct GraphPoolState;
}  // namespace internal

class AllocationCache;
class CaptureScope;

// A capture-private pool of one device (device memory). Move-only.
class GPUPOOL_EXPORT GraphPool {
 public:
  // A new pool of `device` over `cache` (which must outlive the pool's
  // use; the pool keeps the cache's internals alive). InvalidArgument for a
  // bad device; FailedPrecondition when poisoned, forked or exiting.
  static absl::StatusOr<GraphPool> Create(AllocationCache& cache, int device);

  GraphPool() = default;
  GraphPool(GraphPool&& other) noexcept = default;
  GraphPool& operator=(GraphPool&& other) noexcept;
  // An unreleased pool is not released but held: its blocks stay out of
  // reuse until the cache is destroyed (the graphs may still replay on
  // streams the handle does not know). Move assignment does the same to the
  // pool it replaces.
  ~GraphPool();

  // Process-unique id (for stats and DebugString); 0 for an empty handle.
  uint64_t id() const;
  int device() const;
  explicit operator bool() const { return state_ != nullptr; }

  // Routes the allocations of the capture that will be begun on `origin` (or
  // is already under way there), and of later captures begun there, to this
  // pool until the scope ends. One
  // runtime call (Backend::GetCaptureInfo). InvalidArgument for an empty
  // pool or a null origin; FailedPrecondition when the pool is released or
  // already has a scope open, or the device is poisoned; Unimplemented on a
  // backend without capture ids.
  absl::StatusOr<CaptureScope> BeginCapture(NativeStream origin) const;

  // Gives every block the pool holds back to the general cache, fenced by a
  // ready event on each of `replay_streams` (none: reusable at once); blocks
  // still leased follow when their lease is released. Name every stream the
  // pool's graphs were launched on, and any stream that used a pool block
  // outside a capture; the capture streams themselves are never touched
  // again (they may be destroyed once their capture ended). Call it after
  // the graphs are destroyed. The replay streams may be destroyed once it
  // returns: the events fencing the blocks that come back later (leases
  // still out; every block of a pool graphs retain) are recorded here, one
  // set per such block. FailedPrecondition while a CaptureScope is open on
  // the pool or after an earlier Release (then no capture may begin on it).
  absl::Status Release(const std::vector<NativeStream>& replay_streams = {});

  // Ties the pool to `graph` (a `cudaGraph_t`/`hipGraph_t` captured into
  // it; call after EndCapture and before instantiating): the graph holds a
  // reference to the pool through a runtime user object, and every
  // executable graph instantiated from it afterwards holds its own. An
  // executable graph instantiated earlier holds none (the runtime copies a
  // graph's references when it instantiates), so its launches do not keep
  // the pool. Several graphs may retain one pool. The graph retains the
  // recording it was captured in (the captures since the last RetainBy):
  // the next capture into the pool does not reuse that recording's blocks
  // until its graphs are gone; its blocks used outside a capture then go
  // back to the general cache, fenced by their own ready events.
  // Once the handle lets go (destroyed, or Release) and every retaining
  // graph, its executable graphs and their launches are gone, the pool's
  // blocks go back to the general cache on the next Allocate or Trim of the
  // cache, with no stream for the caller to name; leases still out are
  // fenced on their own streams when returned. Until then the handle works
  // as before (new scopes on the pool included). InvalidArgument for an
  // empty pool or a null graph; FailedPrecondition after Release;
  // Unimplemented on a backend without user objects (Release(streams) is
  // the way there); the runtime's error (kCaller) for a foreign graph.
  absl::Status RetainBy(NativeGraph graph);

 private:
  GraphPool(std::shared_ptr<internal::AllocationCacheCore> core,
            std::shared_ptr<internal::GraphPoolState> state);

  std::shared_ptr<internal::AllocationCacheCore> core_;
  std::shared_ptr<internal::GraphPoolState> state_;
};

// Routes the allocations of one capture to a GraphPool while it lives.
// Move-only; End() (or destruction) unregisters it.
class GPUPOOL_EXPORT CaptureScope {
 public:
  CaptureScope() = default;
  CaptureScope(CaptureScope&& other) noexcept;
  CaptureScope& operator=(CaptureScope&& other) noexcept;
  ~CaptureScope();

  // Stops routing. Call after the capture ended (EndCapture), never before:
  // a release racing the end must still see the scope.
  void End();
  explicit operator bool() const { return route_id_ != 0; }

 private:
  friend class GraphPool;
  CaptureScope(std::shared_ptr<internal::AllocationCacheCore> core,
               uint64_t route_id)
      : core_(std::move(core)), route_id_(route_id) {}

  std::shared_ptr<internal::AllocationCacheCore> core_;
  uint64_t route_id_ = 0;
};

}  // namespace gpupool

#endif  // GPUPOOL_GRAPH_POOL_H_
