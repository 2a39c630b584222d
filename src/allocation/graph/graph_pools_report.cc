// What the graph pools report (graph_pools.h): their gauges for the cache's
// stats, DebugString lines, the words of an out-of-memory message, and the
// blocks a snapshot lists, and their trace events. No runtime call; each
// pool's lock briefly.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/graph/graph_pools.h"
#include "src/allocation/trace_ring.h"
#include "src/base/readable_bytes.h"

namespace gpupool::internal {

void GraphPools::AddStats(int device, AllocationCacheStats* stats) const {
  for (const std::shared_ptr<GraphPoolState>& pool : routes_.Pools()) {
    if (device >= 0 && pool->device != device) continue;
    MutexLock lock(&pool->mu);
    if (!pool->released) ++stats->graph_pools;
    if (!pool->released && pool->held) ++stats->graph_pools_held;
    if (!pool->released && pool->handle_let_go) {
      ++stats->graph_pools_awaiting_graphs;
    }
    stats->blocks_in_graph_pools += static_cast<int64_t>(pool->free.size());
    for (const AllocationBlock* block : pool->free) {
      stats->bytes_in_graph_pools += static_cast<int64_t>(block->size);
    }
  }
}

std::string GraphPools::DescribeHeld(int device) const {
  AllocationCacheStats stats;
  AddStats(device, &stats);
  const int64_t bytes = stats.bytes_in_graph_pools;
  return bytes < 1024 ? absl::StrCat("in graph pools ", bytes, " bytes")
                      : absl::StrCat("in graph pools ", ReadableBytes(bytes),
                                     " (", bytes, " bytes)");
}

int64_t GraphPools::PoolIdOf(const void* owner) const {
  return owner == nullptr ? -1
                          : static_cast<int64_t>(
                                static_cast<const GraphPoolState*>(owner)->id);
}

void GraphPools::ForEachUnleased(
    absl::FunctionRef<void(const AllocationBlock&, int64_t pool_id)> visit)
    const {
  for (const std::shared_ptr<GraphPoolState>& pool : routes_.Pools()) {
    MutexLock lock(&pool->mu);
    for (const AllocationBlock* block : pool->free) {
      visit(*block, static_cast<int64_t>(pool->id));
    }
  }
}

std::string GraphPools::DebugString() const {
  std::string out;
  for (const std::shared_ptr<GraphPoolState>& pool : routes_.Pools()) {
    MutexLock lock(&pool->mu);
    int64_t free_bytes = 0;
    for (const AllocationBlock* block : pool->free) {
      free_bytes += static_cast<int64_t>(block->size);
    }
    absl::StrAppend(
        &out, "\n  graph pool ", pool->id, " dev", pool->device, ": ",
        pool->blocks, " blocks (", pool->bytes, " bytes), ", pool->free.size(),
        " free (", free_bytes, " bytes), ", pool->captures, " captures",
        pool->scope_open ? ", capturing" : "",
        pool->released ? ", released" : "",
        pool->held ? ", held (handle dropped unreleased)" : "",
        pool->graph_owned ? ", retained by graphs" : "",
        pool->handle_let_go && !pool->released ? ", awaiting its graphs" : "");
  }
  return out;
}

void GraphPools::Trace(const GraphPoolState& pool, absl::string_view what,
                       const std::vector<AllocationBlock*>& blocks) {
  TraceRing* trace = core_.trace();
  if (ABSL_PREDICT_TRUE(trace == nullptr)) return;
  size_t bytes = 0;
  for (const AllocationBlock* block : blocks) bytes += block->size;
  trace->Transition(TraceOp::kGraphPool, what, pool.device, MemoryKind::kDevice,
                    bytes, /*ptr=*/nullptr, static_cast<int64_t>(pool.id));
}

}  // namespace gpupool::internal
