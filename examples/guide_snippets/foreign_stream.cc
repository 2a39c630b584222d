// docs/guide.md, "Wrapping a stream the runtime gave you": scratch memory
// from the allocation cache, ordered on a stream gpupool did not create, and
// the one rule that comes with it: synchronize the stream before its owner
// destroys it. Runs on SimBackend, which stands in for the runtime that
// created the stream.

#include <cstddef>
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"
#include "gpupool/sim_backend.h"

// `stream` belongs to someone else (a framework, the runtime's own API):
// gpupool only orders the memory on it.
absl::Status StepOnForeignStream(gpupool::Pools& pools, int device,
                                 gpupool::NativeStream stream) {
  absl::StatusOr<gpupool::PooledAllocation> scratch =
      pools.allocations().Allocate(device, size_t{1} << 20,
                                   gpupool::MemoryKind::kDevice, stream);
  if (!scratch.ok()) return scratch.status();
  // Enqueue the work that uses scratch->data() on `stream` here.
  return absl::OkStatus();
}  // the block goes back ordered on `stream`: reusable on it at once

// Before the owner destroys the stream: blocks released on it may still have
// work pending there, and the runtime may reuse its handle value.
absl::Status BeforeTheStreamIsDestroyed(gpupool::Pools& pools, int device,
                                        gpupool::NativeStream stream) {
  return pools.backend().SynchronizeStream(device, stream);
}

int main() {
  absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
      gpupool::Pools::Create(std::make_unique<gpupool::SimBackend>());
  if (!pools.ok()) return 1;
  gpupool::Backend& runtime = (*pools)->backend();
  // The stream "the runtime gave you": created outside the pools.
  absl::StatusOr<gpupool::NativeStream> stream = runtime.CreateStream(0, {});
  if (!stream.ok()) return 1;
  for (int step = 0; step < 2; ++step) {
    if (!StepOnForeignStream(**pools, 0, *stream).ok()) return 1;
  }
  if (!BeforeTheStreamIsDestroyed(**pools, 0, *stream).ok()) return 1;
  if (!runtime.DestroyStream(0, *stream).ok()) return 1;
  const gpupool::AllocationCacheStats stats =
      (*pools)->allocations().GetStats();
  std::printf(
      "foreign_stream: 2 steps, %lld runtime allocation(s), %lld hit(s)\n",
      static_cast<long long>(stats.runtime_allocations),
      static_cast<long long>(stats.hits));
  return stats.runtime_allocations == 1 && stats.hits == 1 ? 0 : 2;
}
