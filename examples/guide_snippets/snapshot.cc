// docs/memory_snapshots.md, "Taking a snapshot": where the memory of a
// bundle went, as a snapshot written to the file named by the first argument
// (default: snapshot.json in the working directory). Runs on SimBackend.

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"
#include "gpupool/sim_backend.h"

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "snapshot.json";
  absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
      gpupool::Pools::Create(std::make_unique<gpupool::SimBackend>());
  if (!pools.ok()) return 1;
  gpupool::AllocationCache& cache = (*pools)->allocations();
  absl::StatusOr<gpupool::PooledStream> stream = (*pools)->streams().Acquire(0);
  if (!stream.ok()) return 1;
  absl::StatusOr<gpupool::PooledAllocation> weights = cache.Allocate(
      0, size_t{48} << 20, gpupool::MemoryKind::kDevice, stream->get());
  {
    absl::StatusOr<gpupool::PooledAllocation> scratch = cache.Allocate(
        0, size_t{3} << 20, gpupool::MemoryKind::kDevice, stream->get());
  }  // released: cached, fenced by a ready event on the stream
  if (!weights.ok()) return 1;

  gpupool::MemorySnapshot snapshot = gpupool::TakeSnapshot(**pools);
  absl::Status written = gpupool::WriteSnapshot(snapshot, path);
  if (!written.ok()) {
    std::fprintf(stderr, "%s\n", std::string(written.message()).c_str());
    return 1;
  }
  for (const gpupool::MemoryKindSnapshot& memory : snapshot.devices[0].memory) {
    std::printf(
        "device 0 %s: %zu segments, %llu bytes reserved, %llu in use\n",
        memory.kind == gpupool::MemoryKind::kDevice ? "device" : "pinned_host",
        memory.segments.size(),
        static_cast<unsigned long long>(memory.reserved_bytes),
        static_cast<unsigned long long>(memory.in_use_bytes));
  }
  return 0;
}
