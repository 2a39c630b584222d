// examples/pjrt_client/main.cc — builds and tears down the example client
// many times, the raw way and the pooled way, on ProcessPools() (its backend
// is chosen by GPUPOOL_BACKEND=cuda|hip|sim; CI uses sim), and prints what
// the runtime was asked to do and the pool stats.
//
// Usage: pjrt_client_example [lifecycles=20] [devices=all, at most 8]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "examples/pjrt_client/client_config.h"
#include "examples/pjrt_client/pooled_client.h"
#include "examples/pjrt_client/raw_client.h"
#include "gpupool/gpupool.h"

namespace {

// Builds a client, runs one step and drops it, `lifecycles` times.
template <typename Client, typename Source>
absl::StatusOr<absl::Duration> RunLifecycles(
    Source& source, const pjrt_example::ClientOptions& options,
    int lifecycles) {
  const absl::Time start = absl::Now();
  for (int i = 0; i < lifecycles; ++i) {
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Create(source, options);
    if (!client.ok()) return client.status();
    absl::Status step = (*client)->RunStep();
    if (!step.ok()) return step;
  }
  return absl::Now() - start;
}

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "pjrt_client_example: %s: %s\n", what,
               status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int lifecycles = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  absl::StatusOr<gpupool::Pools*> pools = gpupool::ProcessPools();
  if (!pools.ok()) return Fail("ProcessPools()", pools.status());
  gpupool::Backend& backend = (*pools)->backend();
  absl::StatusOr<int> device_count = backend.DeviceCount();
  if (!device_count.ok()) return Fail("DeviceCount()", device_count.status());

  pjrt_example::ClientOptions options;
  options.devices = std::min(*device_count, 8);
  if (argc > 2)
    options.devices = std::clamp(std::atoi(argv[2]), 1, options.devices);
  const bool simulated = backend.name() == "sim";
  std::printf(
      "backend: %s%s, %d device(s), %d client lifecycles each way\n",
      std::string(backend.name()).c_str(),
      simulated ? " (simulated: no GPU, latencies are not a GPU's)" : "",
      options.devices, lifecycles);
  std::printf(
      "per client and device: %d streams, %d events, 1 scratch buffer "
      "of %zu MiB\n",
      pjrt_example::kStreamsPerDevice, pjrt_example::kEventsPerDevice,
      options.scratch_bytes >> 20);

  absl::StatusOr<absl::Duration> raw =
      RunLifecycles<pjrt_example::RawClient>(backend, options, lifecycles);
  if (!raw.ok()) return Fail("raw client", raw.status());
  const long long per_client =
      options.devices *
      (pjrt_example::kStreamsPerDevice + pjrt_example::kEventsPerDevice + 1);
  std::printf(
      "raw:    %s for %d clients; the runtime created and destroyed "
      "%lld resources\n",
      absl::FormatDuration(*raw).c_str(), lifecycles, per_client * lifecycles);

  absl::StatusOr<absl::Duration> pooled =
      RunLifecycles<pjrt_example::PooledClient>(**pools, options, lifecycles);
  if (!pooled.ok()) return Fail("pooled client", pooled.status());
  const gpupool::StreamPoolStats streams = (*pools)->streams().GetStats();
  const gpupool::EventPoolStats events = (*pools)->events().GetStats();
  const gpupool::AllocationCacheStats memory =
      (*pools)->allocations().GetStats();
  std::printf(
      "pooled: %s for %d clients; the runtime created %lld "
      "resources, all still cached for the next client\n",
      absl::FormatDuration(*pooled).c_str(), lifecycles,
      static_cast<long long>(streams.created + events.created + memory.misses));
  if (simulated) {
    // The sim backend has no latency: the raw client's creates are free, so
    // the pooled time (validation and bookkeeping) is the larger one here.
    std::printf(
        "(sim has no runtime latency, so creating is free and pooling cannot "
        "win on time here;\n on a GPU each stream create+destroy costs "
        "microseconds (CUDA) to milliseconds (ROCm):\n compare the resources "
        "created, not the times)\n");
  }
  std::printf("streams:     %s\n", streams.ToString().c_str());
  std::printf("events:      %s\n", events.ToString().c_str());
  std::printf("allocations: %s\n", memory.ToString().c_str());
  const bool reused =
      streams.created == options.devices * pjrt_example::kStreamsPerDevice &&
      events.created == options.devices * pjrt_example::kEventsPerDevice;
  std::printf("pjrt_client_example: %s\n",
              reused ? "ok, every client after the first reused the pools"
                     : "UNEXPECTED: the pools created more than one client's "
                       "worth of resources");
  return reused ? 0 : 2;
}
