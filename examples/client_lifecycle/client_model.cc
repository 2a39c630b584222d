// A PJRT-style client's resources, raw and pooled (see client_model.h).

#include "examples/client_lifecycle/client_model.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/stream_pool.h"

namespace gpupool::examples {
namespace {

// What a raw client owns on one device. Destroy() releases it in reverse
// creation order and keeps the first error.
struct RawDeviceResources {
  int device = 0;
  std::vector<NativeStream> streams;
  std::vector<NativeEvent> events;
  void* scratch = nullptr;

  absl::Status Destroy(Backend& backend) {
    absl::Status first;
    if (scratch != nullptr) {
      first.Update(backend.Free(device, scratch, MemoryKind::kDevice));
      scratch = nullptr;
    }
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      first.Update(backend.DestroyEvent(device, *it));
    }
    events.clear();
    for (auto it = streams.rbegin(); it != streams.rend(); ++it) {
      first.Update(backend.DestroyStream(device, *it));
    }
    streams.clear();
    return first;
  }
};

absl::Status BuildRaw(Backend& backend, const ClientShape& shape,
                      RawDeviceResources& out, LifecycleCounts& counts) {
  for (int i = 0; i < shape.streams_per_device(); ++i) {
    absl::StatusOr<NativeStream> stream =
        backend.CreateStream(out.device, StreamConfig{});
    if (!stream.ok()) return stream.status();
    out.streams.push_back(*stream);
    ++counts.streams_created;
  }
  for (int i = 0; i < shape.events; ++i) {
    absl::StatusOr<NativeEvent> event =
        backend.CreateEvent(out.device, EventConfig{});
    if (!event.ok()) return event.status();
    out.events.push_back(*event);
    ++counts.events_created;
  }
  if (shape.scratch_bytes > 0) {
    absl::StatusOr<void*> scratch =
        backend.Allocate(out.device, shape.scratch_bytes, MemoryKind::kDevice);
    if (!scratch.ok()) return scratch.status();
    out.scratch = *scratch;
    ++counts.allocations_made;
  }
  return absl::OkStatus();
}

// What a pooled client holds on one device: leases, returned by their
// destructors (allocation first, then events, then streams, mirroring the raw
// client's order).
struct PooledDeviceResources {
  std::vector<PooledStream> streams;
  std::vector<PooledEvent> events;
  PooledAllocation scratch;
};

absl::Status BuildPooled(const ClientPools& pools, int device,
                         const ClientShape& shape, PooledDeviceResources& out) {
  out.streams.reserve(shape.streams_per_device());
  for (int i = 0; i < shape.streams_per_device(); ++i) {
    absl::StatusOr<PooledStream> stream = pools.streams->Acquire(device);
    if (!stream.ok()) return stream.status();
    out.streams.push_back(*std::move(stream));
  }
  out.events.reserve(shape.events);
  for (int i = 0; i < shape.events; ++i) {
    absl::StatusOr<PooledEvent> event = pools.events->Acquire(device);
    if (!event.ok()) return event.status();
    out.events.push_back(*std::move(event));
  }
  if (shape.scratch_bytes > 0 && pools.allocations != nullptr) {
    // Ordered on the compute stream, as a client's scratch buffer is.
    absl::StatusOr<PooledAllocation> scratch = pools.allocations->Allocate(
        device, shape.scratch_bytes, MemoryKind::kDevice,
        out.streams.front().get());
    if (!scratch.ok()) return scratch.status();
    out.scratch = *std::move(scratch);
  }
  return absl::OkStatus();
}

}  // namespace

LifecycleCounts& LifecycleCounts::operator+=(const LifecycleCounts& other) {
  streams_created += other.streams_created;
  events_created += other.events_created;
  allocations_made += other.allocations_made;
  return *this;
}

absl::Status RunRawLifecycle(Backend& backend, int devices,
                             const ClientShape& shape,
                             LifecycleCounts* counts) {
  LifecycleCounts made;
  std::vector<RawDeviceResources> client(devices);
  absl::Status status;
  for (int device = 0; device < devices && status.ok(); ++device) {
    client[device].device = device;
    status = BuildRaw(backend, shape, client[device], made);
  }
  // Teardown runs even after a failed build, so nothing leaks.
  for (auto it = client.rbegin(); it != client.rend(); ++it) {
    status.Update(it->Destroy(backend));
  }
  if (counts != nullptr) *counts += made;
  return status;
}

absl::Status RunPooledLifecycle(const ClientPools& pools, int devices,
                                const ClientShape& shape) {
  if (pools.streams == nullptr || pools.events == nullptr) {
    return absl::InvalidArgumentError("ClientPools needs streams and events");
  }
  std::vector<PooledDeviceResources> client(devices);
  for (int device = 0; device < devices; ++device) {
    absl::Status status = BuildPooled(pools, device, shape, client[device]);
    if (!status.ok()) return status;  // leases return themselves
  }
  // Teardown: the leases go back in reverse device order.
  while (!client.empty()) client.pop_back();
  return absl::OkStatus();
}

}  // namespace gpupool::examples
