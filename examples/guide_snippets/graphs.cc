// docs/guide.md and docs/allocation_cache.md, "Graphs": a graph-replaying
// trainer keeps the memory of its captured step in a GraphPool. Runs on
// SimBackend, whose capture controls stand in for cudaStreamBeginCapture,
// cudaStreamEndCapture, cudaGraphInstantiate and cudaGraphLaunch; the sim's
// graph oracle proves no replay wrote memory the cache gave to anyone else.

#include <cstddef>
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"
#include "gpupool/sim_backend.h"

// Captures one training step into a graph whose scratch memory lives in
// `pool`. The scope is opened before the capture begins and ends after it
// ended, so every allocation of the capture is routed to the pool.
absl::StatusOr<gpupool::SimGraph> CaptureStep(gpupool::SimBackend& sim,
                                              gpupool::AllocationCache& cache,
                                              const gpupool::GraphPool& pool,
                                              gpupool::NativeStream stream) {
  absl::StatusOr<gpupool::CaptureScope> scope = pool.BeginCapture(stream);
  if (!scope.ok()) return scope.status();
  absl::Status begun =
      sim.BeginCapture(stream, gpupool::SimCaptureMode::kGlobal, pool.id());
  if (!begun.ok()) return begun;
  for (int layer = 0; layer < 4; ++layer) {
    absl::StatusOr<gpupool::PooledAllocation> activations = cache.Allocate(
        pool.device(), size_t{8} << 20, gpupool::MemoryKind::kDevice, stream);
    if (!activations.ok()) return activations.status();
    sim.TouchMemory(stream, activations->data(), activations->size());
  }  // released during the capture: the next layer reuses the block
  absl::StatusOr<gpupool::SimGraph> graph = sim.EndCaptureToGraph(stream);
  scope->End();
  return graph;
}

int main() {
  gpupool::SimBackend sim;
  gpupool::EventPool events(sim);
  gpupool::AllocationCache cache(sim, events);
  absl::StatusOr<gpupool::NativeStream> stream = sim.CreateStream(0, {});
  if (!stream.ok()) return 1;
  {
    absl::StatusOr<gpupool::GraphPool> pool =
        gpupool::GraphPool::Create(cache, 0);
    if (!pool.ok()) return 1;
    absl::StatusOr<gpupool::SimGraph> step =
        CaptureStep(sim, cache, *pool, *stream);
    if (!step.ok() || !sim.InstantiateGraph(*step).ok()) return 1;
    for (int iteration = 0; iteration < 10; ++iteration) {
      if (!sim.LaunchGraph(*step, *stream).ok()) return 1;
      // Eager work beside the replays never gets the graph's block.
      absl::StatusOr<gpupool::PooledAllocation> eager = cache.Allocate(
          0, size_t{8} << 20, gpupool::MemoryKind::kDevice, *stream);
      if (!eager.ok()) return 1;
    }
    if (!sim.DestroyGraph(*step).ok()) return 1;
    // Back to the general cache once the last replay on `stream` is done.
    if (!pool->Release({*stream}).ok()) return 1;
  }
  const gpupool::AllocationCacheStats stats = cache.GetStats();
  std::printf(
      "graphs: 10 replays, %lld runtime allocation(s), %lld oracle "
      "misuse(s)\n",
      static_cast<long long>(stats.runtime_allocations),
      static_cast<long long>(sim.graph_misuses()));
  sim.CompleteAllWork();
  const bool ok = sim.graph_misuses() == 0 && stats.runtime_allocations == 2;
  if (!cache.Trim(0).ok() || !sim.DestroyStream(0, *stream).ok()) return 1;
  return ok ? 0 : 2;
}
