// Uses the installed gpupool: pooled streams on the simulated backend.

#include <cstdio>

#include "gpupool/gpupool.h"

int main() {
  gpupool::SimBackend sim;
  gpupool::StreamPool pool(sim);
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<gpupool::PooledStream> stream = pool.Acquire(0);
    if (!stream.ok()) {
      std::fprintf(stderr, "acquire failed: %s\n",
                   stream.status().ToString().c_str());
      return 1;
    }
  }
  const gpupool::StreamPoolStats stats = pool.GetStats();
  if (stats.created != 1 || stats.reused != 9) return 2;
  std::printf(
      "install consumer: ok (created=%lld reused=%lld, cuda=%d hip=%d)\n",
      static_cast<long long>(stats.created),
      static_cast<long long>(stats.reused), gpupool::CudaBackendBuilt() ? 1 : 0,
      gpupool::HipBackendBuilt() ? 1 : 0);
  return 0;
}
