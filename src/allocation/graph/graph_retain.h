// How a graph holds a capture-private pool (GraphPool::RetainBy): a runtime
// user object whose destructor drops the graph's references to the pool and
// to the recording it was captured in, once the graph, its executable
// graphs and their launches are gone.
//
// Thread safety: the destructor runs on a runtime thread and only drops
// lock-free counts (GraphRetain); every runtime call here is made with no
// lock held.

#ifndef GPUPOOL_SRC_ALLOCATION_GRAPH_GRAPH_RETAIN_H_
#define GPUPOOL_SRC_ALLOCATION_GRAPH_GRAPH_RETAIN_H_

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "gpupool/backend.h"
#include "src/allocation/graph/capture_routes.h"

namespace gpupool::internal {

class AllocationCacheCore;

// GraphPool::RetainBy's work: a user object whose destructor drops one
// reference to `pool` (and to its current recording), moved into `graph`;
// the first success makes the pool graph-owned. The last drop raises
// `collect`.
absl::Status RetainPoolByGraph(
    AllocationCacheCore& core, GraphPoolState& pool, NativeGraph graph,
    const std::shared_ptr<std::atomic<bool>>& collect);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_GRAPH_GRAPH_RETAIN_H_
