// docs/allocation_cache.md: a training-style loop on one stream with the
// ready events' fences deferred: after the first step no allocate/release
// cycle calls the runtime. Runs on SimBackend and checks it: 100 steps make
// as many runtime calls as 1 (both after a warm-up run).

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"
#include "gpupool/sim_backend.h"

absl::Status RunSteps(gpupool::Backend& backend, gpupool::EventPool& events,
                      gpupool::NativeStream stream, size_t bytes, int steps) {
  gpupool::AllocationCacheOptions options;
  options.defer_same_stream_fences = true;
  gpupool::AllocationCache cache(backend, events, options);
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<gpupool::PooledAllocation> scratch =
        cache.Allocate(0, bytes, gpupool::MemoryKind::kDevice, stream);
    if (!scratch.ok()) return scratch.status();
    // ... launch work on `stream` that uses scratch->data() ...
  }  // each release parks the block: no runtime call after the first step
  return cache.FenceStream(0, stream);  // before `stream` is destroyed
}

int main() {
  gpupool::SimBackend backend;
  gpupool::EventPool events(backend);
  absl::StatusOr<gpupool::NativeStream> stream = backend.CreateStream(0, {});
  if (!stream.ok()) return 1;
  // A first run warms the EventPool (its event is reused by the others).
  int64_t calls[3] = {0, 0, 0};
  const int steps[3] = {1, 1, 100};
  for (int run = 0; run < 3; ++run) {
    const int64_t before = backend.total_calls();
    absl::Status status =
        RunSteps(backend, events, *stream, size_t{1} << 20, steps[run]);
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      return 1;
    }
    calls[run] = backend.total_calls() - before;
  }
  if (!backend.DestroyStream(0, *stream).ok()) return 1;
  std::printf("deferred_fences: 1 step, %lld runtime calls; 100 steps, %lld\n",
              static_cast<long long>(calls[1]),
              static_cast<long long>(calls[2]));
  return calls[1] == calls[2] ? 0 : 2;
}
