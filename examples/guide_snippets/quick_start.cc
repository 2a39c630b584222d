// docs/guide.md, "Quick start": lease a stream from the process-wide pools.
// Run with GPUPOOL_BACKEND=sim (no GPU) or cuda/hip.

#include <cstdio>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"

namespace {

// Stands in for the user's kernel launch.
void LaunchMyKernel(gpupool::NativeStream stream) { (void)stream; }

}  // namespace

absl::Status RunStep(int device) {
  absl::StatusOr<gpupool::Pools*> pools = gpupool::ProcessPools();
  if (!pools.ok()) return pools.status();  // e.g. no GPU, GPUPOOL_BACKEND unset
  gpupool::StreamConfig config;  // pools are keyed by (device, config)
  config.priority = -1;
  absl::StatusOr<gpupool::PooledStream> stream =
      (*pools)->streams().Acquire(device, config);
  if (!stream.ok()) return stream.status();  // FailedPrecondition: poisoned
  LaunchMyKernel(stream->get());             // cudaStream_t / hipStream_t
  return absl::OkStatus();  // ~PooledStream checks the stream and returns it
}

int main() {
  for (int step = 0; step < 100; ++step) {
    absl::Status status = RunStep(/*device=*/0);
    if (!status.ok()) {
      std::fprintf(stderr, "quick_start: %s\n", status.ToString().c_str());
      return 1;
    }
  }
  const gpupool::StreamPoolStats stats =
      (*gpupool::ProcessPools())->streams().GetStats();
  std::printf("quick_start: 100 steps, %lld stream(s) created, %lld reused\n",
              static_cast<long long>(stats.created),
              static_cast<long long>(stats.reused));
  return stats.created == 1 ? 0 : 1;
}
