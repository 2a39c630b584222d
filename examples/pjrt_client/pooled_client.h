// examples/pjrt_client/pooled_client.h — AFTER gpupool: the client of
// raw_client.h with every create replaced by a lease from a `gpupool::Pools`
// bundle. The destructor is gone: each lease returns its stream, event or
// block to the pools, which check it (idle, not capturing, device healthy)
// before handing it to the next client. `diff raw_client.h pooled_client.h`
// shows the whole change.
//
// Thread-compatible: one thread uses a client at a time; many clients may
// share one bundle from any threads.

#ifndef GPUPOOL_EXAMPLES_PJRT_CLIENT_POOLED_CLIENT_H_
#define GPUPOOL_EXAMPLES_PJRT_CLIENT_POOLED_CLIENT_H_

#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "examples/pjrt_client/client_config.h"
#include "gpupool/gpupool.h"

namespace pjrt_example {

class PooledClient {
 public:
  // Leases every resource of `options.devices` devices from `pools`, which
  // must outlive the client. On error, what was leased goes back. A poisoned
  // device (an earlier sticky error) fails with FailedPrecondition.
  static absl::StatusOr<std::unique_ptr<PooledClient>> Create(
      gpupool::Pools& pools, const ClientOptions& options) {
    std::unique_ptr<PooledClient> client(new PooledClient(pools));
    for (int device = 0; device < options.devices; ++device) {
      PJRT_RETURN_IF_ERROR(client->AddDevice(device, options));
    }
    return client;
  }

  // Nothing to write: the leases return everything to the pools.
  ~PooledClient() = default;

  // One step of work per device: the host-to-device stream waits for the
  // compute stream, then the host waits for both.
  absl::Status RunStep() {
    for (DeviceResources& r : devices_) {
      PJRT_RETURN_IF_ERROR(
          backend_.RecordEvent(r.device, r.events[0].get(), r.compute.get()));
      PJRT_RETURN_IF_ERROR(backend_.StreamWaitEvent(
          r.device, r.host_to_device.get(), r.events[0].get()));
      PJRT_RETURN_IF_ERROR(
          backend_.SynchronizeStream(r.device, r.host_to_device.get()));
    }
    return absl::OkStatus();
  }

 private:
  struct DeviceResources {
    int device = 0;
    gpupool::PooledStream compute;
    gpupool::PooledStream host_to_device;
    std::array<gpupool::PooledStream, 4> device_to_host;
    std::array<gpupool::PooledStream, 4> device_to_device;
    std::array<gpupool::PooledStream, 4> extra;
    std::array<gpupool::PooledEvent, kEventsPerDevice> events;
    gpupool::PooledAllocation scratch;
  };

  explicit PooledClient(gpupool::Pools& pools)
      : pools_(pools), backend_(pools.backend()) {}

  absl::Status AddDevice(int device, const ClientOptions& options) {
    DeviceResources& r = devices_.emplace_back();
    r.device = device;
    PJRT_ASSIGN_OR_RETURN(
        r.compute, pools_.streams().Acquire(device, ComputeStreamConfig()));
    PJRT_ASSIGN_OR_RETURN(r.host_to_device,
                          pools_.streams().Acquire(device, CopyStreamConfig()));
    for (auto* group : {&r.device_to_host, &r.device_to_device, &r.extra}) {
      for (gpupool::PooledStream& stream : *group) {
        PJRT_ASSIGN_OR_RETURN(
            stream, pools_.streams().Acquire(device, CopyStreamConfig()));
      }
    }
    for (gpupool::PooledEvent& event : r.events) {
      PJRT_ASSIGN_OR_RETURN(
          event, pools_.events().Acquire(device, ClientEventConfig()));
    }
    PJRT_ASSIGN_OR_RETURN(
        r.scratch, pools_.allocations().Allocate(device, options.scratch_bytes,
                                                 gpupool::MemoryKind::kDevice));
    return absl::OkStatus();
  }

  gpupool::Pools& pools_;
  gpupool::Backend& backend_;
  std::vector<DeviceResources> devices_;
};

}  // namespace pjrt_example

#endif  // GPUPOOL_EXAMPLES_PJRT_CLIENT_POOLED_CLIENT_H_
