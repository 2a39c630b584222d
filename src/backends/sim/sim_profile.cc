// Latency profiles of SimBackend: what each simulated runtime charges per
// primitive, and its blocking semantics.

#include "absl/time/time.h"
#include "gpupool/sim_backend.h"

namespace gpupool {

SimProfile SimProfile::Instant() {
  // The struct defaults: no latency, CUDA-like priority range and no CU masks.
  return SimProfile{};
}

SimProfile SimProfile::Cuda() {
  SimProfile profile;
  profile.name = "cuda";
  // An estimate: about 3 µs per cudaStreamCreate + cudaStreamDestroy pair (an
  // H100 measured 3.8-6.4 µs, docs/benchmarks.md); events cost about the
  // same. Split evenly between create and destroy.
  profile.stream_create = absl::Nanoseconds(1500);
  profile.stream_destroy = absl::Nanoseconds(1500);
  profile.event_create = absl::Nanoseconds(1500);
  profile.event_destroy = absl::Nanoseconds(1500);
  // Estimates, not measurements: cudaMalloc/cudaFree of a small block cost
  // on the order of ten microseconds (cudaFree also synchronises).
  profile.allocate = absl::Microseconds(10);
  profile.free = absl::Microseconds(10);
  // Data-centre GPUs (persisting L2) have an access-policy window to reset.
  profile.stream_attributes = true;
  // cudaStreamQuery/cudaEventQuery on an idle handle: ~100 ns.
  profile.query = absl::Nanoseconds(100);
  // Measured: cudaStreamIsCapturing took 65 ns per call on an H100
  // (runtime_call_probe, docs/benchmarks.md); cudaStreamGetCaptureInfo
  // reads the same host-side state.
  profile.capture_query = absl::Nanoseconds(65);
  profile.destroy_blocks_until_idle = false;
  profile.greatest_priority = -5;  // Hopper: [-5, 0].
  profile.least_priority = 0;
  profile.supports_cu_mask = false;
  return profile;
}

SimProfile SimProfile::RocmMi300x() {
  SimProfile profile;
  profile.name = "rocm-mi300x";
  // Seed report (PJRT client on MI300X): hipStreamCreate x112 = 385 ms and
  // hipStreamDestroy x112 = 375 ms, i.e. about 3.4 ms and 3.3 ms each.
  profile.stream_create = absl::Microseconds(3400);
  profile.stream_destroy = absl::Microseconds(3300);
  // Estimates, not measurements: events, allocations and queries do not show
  // up in the seed profile, so they are taken to be tens of microseconds
  // (allocation) and a few microseconds (query), like other runtimes.
  profile.event_create = absl::Microseconds(20);
  profile.event_destroy = absl::Microseconds(15);
  profile.allocate = absl::Microseconds(50);
  profile.free = absl::Microseconds(40);
  profile.query = absl::Microseconds(2);
  profile.capture_query = profile.query;  // not measured: as a query
  // hipStreamDestroy waits for the stream's work to finish.
  profile.destroy_blocks_until_idle = true;
  profile.greatest_priority = -1;  // HIP priorities: -1 (high), 0, 1 (low).
  profile.least_priority = 1;
  profile.supports_cu_mask = true;  // hipExtStreamCreateWithCUMask.
  return profile;
}

}  // namespace gpupool
