// docs/guide.md, "When the device dies": what a client does with a sticky
// (Fault::kDevice) error and with FailedPrecondition from a poisoned device.
// Runs on a private SimBackend bundle that poisons the device mid-step.

#include <cstdio>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"

// Runs one step on a leased stream; `launch` stands in for the user's work.
// A kDevice fault needs nothing from the caller beyond dropping its leases:
// when they come back, the pools see the sticky error and poison the device
// (no handle of it is ever reused). Any other failure condemns this stream
// only.
absl::Status RunOnStream(
    gpupool::Pools& pools, int device,
    const std::function<void(gpupool::NativeStream)>& launch) {
  absl::StatusOr<gpupool::PooledStream> stream =
      pools.streams().Acquire(device);
  if (!stream.ok()) return stream.status();  // FailedPrecondition if poisoned
  launch(stream->get());
  absl::Status status =
      pools.backend().SynchronizeStream(device, stream->get());
  if (gpupool::FaultOf(status) == gpupool::Fault::kDevice) {
    return status;  // sticky: the context is dead; ~PooledStream drops it
  }
  if (!status.ok()) stream->Discard();  // kResource: destroy this one
  return status;
}

// A poisoned device fails every acquire with FailedPrecondition (naming the
// original error) until the device was reset and RecoverDevice() started a
// new generation. `reset_device` is the runtime's reset (cudaDeviceReset on
// that device, hipDeviceReset) or a restart of the worker.
absl::Status RecoverIfPoisoned(
    gpupool::Pools& pools, int device,
    const std::function<absl::Status()>& reset_device) {
  if (!pools.health()->is_poisoned(device)) return absl::OkStatus();
  std::fprintf(stderr, "device %d poisoned by: %s\n", device,
               pools.health()->poison_cause(device).ToString().c_str());
  absl::Status reset = reset_device();
  if (!reset.ok()) return reset;
  return pools.RecoverDevice(device);
}

int main() {
  auto owned = std::make_unique<gpupool::SimBackend>();
  gpupool::SimBackend* sim = owned.get();
  absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
      gpupool::Pools::Create(std::move(owned));
  if (!pools.ok()) return 1;
  gpupool::Pools& bundle = **pools;

  auto healthy = [](gpupool::NativeStream) {};
  auto faulty = [sim](gpupool::NativeStream) {
    sim->PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  };
  if (!RunOnStream(bundle, 0, healthy).ok()) return 2;
  absl::Status failed = RunOnStream(bundle, 0, faulty);
  absl::Status refused = RunOnStream(bundle, 0, healthy);
  std::printf("step on dead device: %s\nnext step: %s\n",
              failed.ToString().c_str(), refused.ToString().c_str());
  if (gpupool::FaultOf(failed) != gpupool::Fault::kDevice ||
      !absl::IsFailedPrecondition(refused) ||
      !bundle.health()->is_poisoned(0)) {
    return 3;
  }
  absl::Status recovered = RecoverIfPoisoned(bundle, 0, [sim] {
    sim->ResetDevice(0);
    return absl::OkStatus();
  });
  if (!recovered.ok() || !RunOnStream(bundle, 0, healthy).ok()) return 4;
  std::printf("device_errors: recovered, steps run again\n");
  return 0;
}
