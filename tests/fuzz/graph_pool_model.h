// The graph pools' model: pools made and released (or their handles dropped)
// with their scoped captures, the launches and destruction of the graphs
// those leave, and (through GraphOwnedModel) the pools graphs retain; who
// owns each device lease in the simulator's graph oracle; and the checks
// that no block a pool keeps is leased to general work and that the cache's
// graph-pool stats agree with the model.

#ifndef GPUPOOL_TESTS_FUZZ_GRAPH_POOL_MODEL_H_
#define GPUPOOL_TESTS_FUZZ_GRAPH_POOL_MODEL_H_

#include <cstdint>
#include <vector>

#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "tests/fuzz/capture_model.h"
#include "tests/fuzz/graph_model.h"
#include "tests/fuzz/graph_owned_model.h"
#include "tests/fuzz/harness.h"

namespace gpupool::fuzz {

class GraphPoolModel {
 public:
  GraphPoolModel(Harness& harness, CaptureModel& captures)
      : harness_(harness), captures_(captures) {}
  GraphPoolModel(const GraphPoolModel&) = delete;
  GraphPoolModel& operator=(const GraphPoolModel&) = delete;

  // A new graph pool, the release of one, or a graph-owned pool step.
  void PoolStep();
  // A capture begins (scoped on a pool, or unregistered) or ends.
  void CaptureStep();
  // A captured graph is launched or destroyed, or the unregistered
  // captures' graphs go.
  void ReplayStep();

  // Claims a new device lease allocated on `stream` (or nullptr): inside a
  // registered capture the block is the pool's and the graph writes it; any
  // other lease is its own owner's and must be no block a pool keeps.
  void ClaimDeviceLease(const PooledAllocation& lease, NativeStream stream);

  // Whether a pool's capture or replays run on `stream` (its Release fences
  // on it, so the stream must stay leased).
  bool UsesStream(NativeStream stream) const;

  // `device` was reset: its pools' captures, graphs and launches are gone.
  void ForgetDevice(int device);

  // Checks the cache's graph-pool stats against the model.
  void CheckStats(const AllocationCacheStats& cache) const;

  // The end of an input: the open captures end; then, once work completed,
  // every graph goes and every pool is released and must go back.
  void EndCaptures();
  // Ends `model`'s open capture and its scope; notes the graph it made.
  void EndCapture(GraphModel& model);
  void ReleaseAll();

 private:
  // The model whose scope's capture runs on `stream`, or nullptr.
  GraphModel* CaptureOf(NativeStream stream);
  void CheckNotAPoolBlock(void* ptr);

  Harness& harness_;
  CaptureModel& captures_;
  FuzzedDataProvider& input_ = harness_.input();
  SimBackend& sim_ = harness_.sim();
  // The pools whose handle the fuzzer holds, not released.
  std::vector<GraphModel> graph_models_;
  GraphOwnedModel owned_{harness_, captures_, graph_models_};
  // Pool handles dropped unreleased (held by the cache while they keep a
  // block).
  int64_t dropped_graph_pools_ = 0;
};

}  // namespace gpupool::fuzz

#endif  // GPUPOOL_TESTS_FUZZ_GRAPH_POOL_MODEL_H_
