// README.md, "Quick start": a complete C++17 program. One step leases a
// stream, an event and a scratch buffer, enqueues work, waits for it and
// gives everything back; after 100 steps the stats show that one of each was
// created and the rest reused. Without a GPU: GPUPOOL_BACKEND=sim.
#include <cstddef>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"

absl::Status RunStep(gpupool::Pools& pools, int device) {
  gpupool::StreamConfig config;  // pools are keyed by (device, config)
  config.priority = -1;
  absl::StatusOr<gpupool::PooledStream> stream =
      pools.streams().Acquire(device, config);
  if (!stream.ok()) return stream.status();  // FailedPrecondition: poisoned
  absl::StatusOr<gpupool::PooledAllocation> scratch =
      pools.allocations().Allocate(device, size_t{1} << 20,
                                   gpupool::MemoryKind::kDevice, stream->get());
  if (!scratch.ok()) return scratch.status();
  absl::StatusOr<gpupool::PooledEvent> done = pools.events().Acquire(device);
  if (!done.ok()) return done.status();

  // Launch your kernels here: stream->get() is a cudaStream_t/hipStream_t,
  // scratch->data() the device memory, done->get() a cudaEvent_t/hipEvent_t.
  gpupool::Backend& runtime = pools.backend();
  absl::Status status = runtime.RecordEvent(device, done->get(), stream->get());
  if (!status.ok()) return status;
  return runtime.SynchronizeEvent(device, done->get());
}  // the leases go back to the pools here: event, memory, stream

int main() {
  absl::StatusOr<gpupool::Pools*> pools = gpupool::ProcessPools();
  if (!pools.ok()) {  // no GPU and GPUPOOL_BACKEND unset, for instance
    std::fprintf(stderr, "%s\n", pools.status().ToString().c_str());
    return 1;
  }
  for (int step = 0; step < 100; ++step) {
    absl::Status status = RunStep(**pools, /*device=*/0);
    if (!status.ok()) {
      std::fprintf(stderr, "step %d: %s\n", step, status.ToString().c_str());
      return 1;
    }
  }
  const gpupool::StreamPoolStats streams = (*pools)->streams().GetStats();
  const gpupool::EventPoolStats events = (*pools)->events().GetStats();
  const gpupool::AllocationCacheStats memory =
      (*pools)->allocations().GetStats();
  std::printf(
      "%s backend, 100 steps: streams created %lld, reused %lld; "
      "events created %lld, reused %lld; memory allocated %lld, reused %lld\n",
      std::string((*pools)->backend().name()).c_str(),
      static_cast<long long>(streams.created),
      static_cast<long long>(streams.reused),
      static_cast<long long>(events.created),
      static_cast<long long>(events.reused),
      static_cast<long long>(memory.misses),
      static_cast<long long>(memory.hits));
  return 0;
}
