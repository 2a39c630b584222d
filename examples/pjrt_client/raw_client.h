// examples/pjrt_client/raw_client.h — BEFORE gpupool: a PJRT-style client
// that creates its streams, events and scratch memory with raw runtime calls
// in its constructor and destroys them in its destructor. On ROCm each
// stream create or destroy costs ~3.4 ms, so every client costs ~100 ms per
// device. Compare with pooled_client.h (`diff raw_client.h pooled_client.h`).
//
// Thread-compatible: one thread uses a client at a time.

#ifndef GPUPOOL_EXAMPLES_PJRT_CLIENT_RAW_CLIENT_H_
#define GPUPOOL_EXAMPLES_PJRT_CLIENT_RAW_CLIENT_H_

#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "examples/pjrt_client/client_config.h"
#include "gpupool/gpupool.h"

namespace pjrt_example {

class RawClient {
 public:
  // Creates every resource of `options.devices` devices on `backend`, which
  // must outlive the client. On error, what was created is destroyed.
  static absl::StatusOr<std::unique_ptr<RawClient>> Create(
      gpupool::Backend& backend, const ClientOptions& options) {
    std::unique_ptr<RawClient> client(new RawClient(backend));
    for (int device = 0; device < options.devices; ++device) {
      PJRT_RETURN_IF_ERROR(client->AddDevice(device, options));
    }
    return client;
  }

  ~RawClient() {
    for (DeviceResources& r : devices_) {
      if (r.scratch != nullptr) {
        backend_.Free(r.device, r.scratch, gpupool::MemoryKind::kDevice)
            .IgnoreError();
      }
      for (gpupool::NativeEvent event : r.events) {
        if (event != nullptr) {
          backend_.DestroyEvent(r.device, event).IgnoreError();
        }
      }
      for (gpupool::NativeStream stream : r.streams()) {
        if (stream != nullptr) {
          backend_.DestroyStream(r.device, stream).IgnoreError();
        }
      }
    }
  }

  // One step of work per device: the host-to-device stream waits for the
  // compute stream, then the host waits for both.
  absl::Status RunStep() {
    for (DeviceResources& r : devices_) {
      PJRT_RETURN_IF_ERROR(
          backend_.RecordEvent(r.device, r.events[0], r.compute));
      PJRT_RETURN_IF_ERROR(
          backend_.StreamWaitEvent(r.device, r.host_to_device, r.events[0]));
      PJRT_RETURN_IF_ERROR(
          backend_.SynchronizeStream(r.device, r.host_to_device));
    }
    return absl::OkStatus();
  }

 private:
  struct DeviceResources {
    int device = 0;
    gpupool::NativeStream compute = nullptr;
    gpupool::NativeStream host_to_device = nullptr;
    std::array<gpupool::NativeStream, 4> device_to_host{};
    std::array<gpupool::NativeStream, 4> device_to_device{};
    std::array<gpupool::NativeStream, 4> extra{};
    std::array<gpupool::NativeEvent, kEventsPerDevice> events{};
    void* scratch = nullptr;

    std::vector<gpupool::NativeStream> streams() const {
      std::vector<gpupool::NativeStream> all = {compute, host_to_device};
      for (const auto* group : {&device_to_host, &device_to_device, &extra}) {
        all.insert(all.end(), group->begin(), group->end());
      }
      return all;
    }
  };

  explicit RawClient(gpupool::Backend& backend) : backend_(backend) {}

  absl::Status AddDevice(int device, const ClientOptions& options) {
    DeviceResources& r = devices_.emplace_back();
    r.device = device;
    PJRT_ASSIGN_OR_RETURN(r.compute,
                          backend_.CreateStream(device, ComputeStreamConfig()));
    PJRT_ASSIGN_OR_RETURN(r.host_to_device,
                          backend_.CreateStream(device, CopyStreamConfig()));
    for (auto* group : {&r.device_to_host, &r.device_to_device, &r.extra}) {
      for (gpupool::NativeStream& stream : *group) {
        PJRT_ASSIGN_OR_RETURN(
            stream, backend_.CreateStream(device, CopyStreamConfig()));
      }
    }
    for (gpupool::NativeEvent& event : r.events) {
      PJRT_ASSIGN_OR_RETURN(event,
                            backend_.CreateEvent(device, ClientEventConfig()));
    }
    PJRT_ASSIGN_OR_RETURN(r.scratch,
                          backend_.Allocate(device, options.scratch_bytes,
                                            gpupool::MemoryKind::kDevice));
    return absl::OkStatus();
  }

  gpupool::Backend& backend_;
  std::vector<DeviceResources> devices_;
};

}  // namespace pjrt_example

#endif  // GPUPOOL_EXAMPLES_PJRT_CLIENT_RAW_CLIENT_H_
