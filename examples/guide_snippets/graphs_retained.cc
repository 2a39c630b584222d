// docs/guide.md, "Graphs": a command buffer whose graphs release its pool.
// The pool is tied to each recording's graph with RetainBy; re-recorded
// while the old graph's launch is still queued, the new recording keeps
// apart from the old one's memory, and the pool goes back once the handle
// and every graph are gone. Runs on SimBackend, whose capture controls and
// user objects stand in for cudaStreamBeginCapture, cudaGraphInstantiate,
// cudaGraphLaunch and cudaUserObjectCreate; the sim's graph oracle proves no
// launch wrote memory the cache gave to anyone else.

#include <cstddef>
#include <cstdio>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"
#include "gpupool/sim_backend.h"

// Records the command sequence into a graph over `pool`: its scratch memory
// is the pool's.
absl::StatusOr<gpupool::SimGraph> Record(gpupool::SimBackend& sim,
                                         gpupool::AllocationCache& cache,
                                         const gpupool::GraphPool& pool,
                                         gpupool::NativeStream stream) {
  absl::StatusOr<gpupool::CaptureScope> scope = pool.BeginCapture(stream);
  if (!scope.ok()) return scope.status();
  absl::Status begun =
      sim.BeginCapture(stream, gpupool::SimCaptureMode::kGlobal, pool.id());
  if (!begun.ok()) return begun;
  absl::StatusOr<gpupool::PooledAllocation> scratch = cache.Allocate(
      pool.device(), size_t{16} << 20, gpupool::MemoryKind::kDevice, stream);
  if (!scratch.ok()) return scratch.status();
  sim.TouchMemory(stream, scratch->data(), scratch->size());
  scratch->Release();  // during the capture: the pool's
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
  std::vector<gpupool::SimGraph> recorded;
  {
    absl::StatusOr<gpupool::GraphPool> pool =
        gpupool::GraphPool::Create(cache, 0);
    if (!pool.ok()) return 1;
    for (int recording = 0; recording < 10; ++recording) {
      absl::StatusOr<gpupool::SimGraph> graph =
          Record(sim, cache, *pool, *stream);
      if (!graph.ok()) return 1;
      // Before instantiating: every executable graph holds the pool too.
      if (!pool->RetainBy(gpupool::NativeGraphOf(*graph)).ok()) return 1;
      if (!sim.InstantiateGraph(*graph).ok()) return 1;
      if (!sim.LaunchGraph(*graph, *stream).ok()) return 1;
      // The old graph goes while its launch may still be queued.
      if (!recorded.empty() && !sim.DestroyGraph(recorded.back()).ok()) {
        return 1;
      }
      recorded.push_back(*graph);
    }
  }  // the handle lets go: the graphs release the pool
  if (!sim.DestroyGraph(recorded.back()).ok()) return 1;
  sim.CompleteAllWork();  // the last launches end: the pool goes back
  if (!cache.Trim(0).ok()) return 1;
  const gpupool::AllocationCacheStats stats = cache.GetStats();
  std::printf(
      "graphs: 10 recordings, %lld runtime allocation(s), %lld graph "
      "pool(s) left, %lld oracle misuse(s)\n",
      static_cast<long long>(stats.runtime_allocations),
      static_cast<long long>(stats.graph_pools),
      static_cast<long long>(sim.graph_misuses()));
  const bool ok = sim.graph_misuses() == 0 && stats.graph_pools == 0;
  if (!sim.DestroyStream(0, *stream).ok()) return 1;
  return ok ? 0 : 2;
}
