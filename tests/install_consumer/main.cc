// Uses the installed gpupool: pooled streams on the simulated backend. A
// sim-only consumer must not load a GPU runtime: the CUDA and HIP backends
// load theirs only when asked for, so none may be mapped into this process.

#include <link.h>

#include <cstdio>
#include <cstring>

#include "gpupool/gpupool.h"

// Counts the loaded objects whose name contains a GPU runtime's.
int LoadedVendorRuntimes() {
  int found = 0;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name;
        if (name != nullptr && (std::strstr(name, "libcudart") != nullptr ||
                                std::strstr(name, "libcuda.so") != nullptr ||
                                std::strstr(name, "libamdhip64") != nullptr)) {
          std::fprintf(stderr, "vendor runtime loaded: %s\n", name);
          ++*static_cast<int*>(data);
        }
        return 0;
      },
      &found);
  return found;
}

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
  // The process-wide pools over GPUPOOL_BACKEND=sim (run.cmake sets it): the
  // GPU backends are built in but never asked for, so no runtime loads.
  absl::StatusOr<gpupool::Pools*> pools = gpupool::ProcessPools();
  if (!pools.ok()) {
    std::fprintf(stderr, "ProcessPools: %s\n",
                 pools.status().ToString().c_str());
    return 3;
  }
  if ((*pools)->backend().name() != "sim") return 4;
  if (!(*pools)->streams().Acquire(0).ok()) return 5;
  if (LoadedVendorRuntimes() != 0) return 6;
  std::printf(
      "install consumer: ok (created=%lld reused=%lld, cuda=%d hip=%d)\n",
      static_cast<long long>(stats.created),
      static_cast<long long>(stats.reused), gpupool::CudaBackendBuilt() ? 1 : 0,
      gpupool::HipBackendBuilt() ? 1 : 0);
  return 0;
}
