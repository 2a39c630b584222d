// docs/guide.md, "Threads": every pool method may be called from any thread,
// and a lease may be handed to another thread and returned there; a lease is
// used by one thread at a time. Runs on SimBackend.

#include <cstdio>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"
#include "gpupool/sim_backend.h"

// Several threads lease from the same pools at once: no lock of yours needed.
absl::Status LeaseFromManyThreads(gpupool::Pools& pools, int threads) {
  std::vector<absl::Status> results(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&pools, &results, t] {
      for (int step = 0; step < 100; ++step) {
        absl::StatusOr<gpupool::PooledStream> stream =
            pools.streams().Acquire(/*device=*/0);
        if (!stream.ok()) {
          results[t] = stream.status();
          return;
        }
      }  // each lease goes back at the end of its step
    });
  }
  for (std::thread& worker : workers) worker.join();
  for (const absl::Status& result : results) {
    if (!result.ok()) return result;
  }
  return absl::OkStatus();
}

// A lease moves to the thread that finishes the work and is returned there.
absl::Status HandOffALease(gpupool::Pools& pools) {
  absl::StatusOr<gpupool::PooledStream> stream = pools.streams().Acquire(0);
  if (!stream.ok()) return stream.status();
  std::thread worker([lease = *std::move(stream)]() mutable {
    // Launch on lease.get() here; this thread now owns the lease.
    lease.Release();
  });
  worker.join();
  return absl::OkStatus();
}

int main() {
  absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
      gpupool::Pools::Create(std::make_unique<gpupool::SimBackend>());
  if (!pools.ok()) return 1;
  absl::Status status = LeaseFromManyThreads(**pools, 4);
  if (status.ok()) status = HandOffALease(**pools);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  const gpupool::StreamPoolStats stats = (*pools)->streams().GetStats();
  std::printf("threads: %lld leases, %lld streams created, %lld in use\n",
              static_cast<long long>(stats.acquired),
              static_cast<long long>(stats.created),
              static_cast<long long>(stats.in_use));
  return stats.acquired == 401 && stats.created <= 4 && stats.in_use == 0 ? 0
                                                                          : 2;
}
