// docs/allocation_cache.md: lease scratch memory ordered on a stream, tell
// the cache about a second stream that uses it, and give it back. Runs on
// SimBackend; the second step is served from the cache.

#include <cstddef>
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"
#include "gpupool/sim_backend.h"

absl::Status StepWithScratch(gpupool::Pools& pools, int device,
                             gpupool::NativeStream stream,
                             gpupool::NativeStream other_stream, size_t bytes) {
  absl::StatusOr<gpupool::PooledAllocation> buffer =
      pools.allocations().Allocate(device, bytes, gpupool::MemoryKind::kDevice,
                                   stream);
  if (!buffer.ok()) return buffer.status();
  // Enqueue the work that uses buffer->data() on `stream` here.
  buffer->RecordUse(other_stream);  // if other_stream also touches it
  return absl::OkStatus();
}  // ~PooledAllocation (or Release()) returns the block

int main() {
  absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
      gpupool::Pools::Create(std::make_unique<gpupool::SimBackend>());
  if (!pools.ok()) return 1;
  absl::StatusOr<gpupool::PooledStream> compute =
      (*pools)->streams().Acquire(0);
  absl::StatusOr<gpupool::PooledStream> copy = (*pools)->streams().Acquire(0);
  if (!compute.ok() || !copy.ok()) return 1;
  for (int step = 0; step < 2; ++step) {
    absl::Status status = StepWithScratch(**pools, /*device=*/0, compute->get(),
                                          copy->get(), size_t{3} << 20);
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      return 1;
    }
  }
  const gpupool::AllocationCacheStats stats =
      (*pools)->allocations().GetStats();
  std::printf(
      "allocation_cache: 2 steps, %lld runtime allocation(s), %lld hit(s)\n",
      static_cast<long long>(stats.runtime_allocations),
      static_cast<long long>(stats.hits));
  return stats.runtime_allocations == 1 && stats.hits == 1 ? 0 : 2;
}
