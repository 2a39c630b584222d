// How a graph holds a capture-private pool (graph/graph_retain.h).

#include "src/allocation/graph/graph_retain.h"

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/graph/recordings.h"
#include "src/lifetime/mutex.h"

namespace gpupool::internal {
namespace {

// What a retaining graph's user object holds: the graph's reference to the
// pool and to the recording it retained.
struct RetainToken {
  std::shared_ptr<GraphRetain> pool;
  std::shared_ptr<GraphRetain> recording;
};

// A retaining graph's user object is gone, with every launch that used it:
// runs on a runtime thread, so no runtime call and no lock, only the counts.
void GraphLetGo(void* data) {
  auto* token = static_cast<RetainToken*>(data);
  token->recording->Drop();
  token->pool->Drop();
  delete token;
}

}  // namespace

absl::Status RetainPoolByGraph(
    AllocationCacheCore& core, GraphPoolState& pool, NativeGraph graph,
    const std::shared_ptr<std::atomic<bool>>& collect) {
  if (graph == nullptr) {
    return absl::InvalidArgumentError("GraphPool::RetainBy: null graph");
  }
  if (absl::Status usable =
          core.CheckUsable(pool.device, "GraphPool::RetainBy");
      !usable.ok()) {
    return usable;
  }
  auto* token = new RetainToken{pool.retain, nullptr};
  {
    MutexLock lock(&pool.mu);
    if (pool.released || pool.handle_let_go) {
      delete token;
      return absl::FailedPreconditionError(absl::StrCat(
          "GraphPool::RetainBy: pool ", pool.id, " was already released"));
    }
    // The reference of the recording the graph was captured in.
    token->recording = pool.recordings.RetainCurrent(collect);
  }
  // The token may be gone once the graph holds it: marked held through this.
  const std::shared_ptr<GraphRetain> recording = token->recording;
  absl::StatusOr<NativeUserObject> object =
      core.backend().CreateUserObject(pool.device, &GraphLetGo, token);
  if (!object.ok()) {
    token->recording->Drop();
    delete token;
    if (core.PoisonIfSticky(pool.device, object.status())) {
      return core.PoisonedError(pool.device);
    }
    return object.status();
  }
  // The graph's reference, counted before anything can drop it: from here
  // on the destructor runs exactly once whatever happens.
  pool.retain->refs.fetch_add(1, std::memory_order_acq_rel);
  absl::Status moved =
      core.backend().RetainUserObjectByGraph(pool.device, graph, *object);
  if (!moved.ok()) {
    // A dead device is called no more: its object dies with the context
    // (the count it holds no longer matters, the pool is dropped with the
    // device's memory).
    if (core.PoisonIfSticky(pool.device, moved)) {
      return core.PoisonedError(pool.device);
    }
    // Still ours: releasing it runs the destructor, which drops the count.
    // A refused release keeps the reference (the object leaks rather than
    // run its destructor twice); a sticky one still poisons.
    const absl::Status released =
        core.backend().ReleaseUserObject(pool.device, *object);
    if (core.PoisonIfSticky(pool.device, released)) {
      return core.PoisonedError(pool.device);
    }
    return moved;
  }
  MutexLock lock(&pool.mu);
  recording->held_by_graph = true;
  if (!pool.graph_owned) {
    pool.graph_owned = true;
    // The handle's reference, until it lets go.
    pool.retain->refs.fetch_add(1, std::memory_order_acq_rel);
  }
  return absl::OkStatus();
}

}  // namespace gpupool::internal
