// docs/guide.md, "Writing your own Backend": a backend is a table of runtime
// primitives with a contract per primitive (include/gpupool/backend.h). This
// one forwards to another backend and counts the streams the runtime was
// asked to create: the shape of a port to a new runtime, and a way to see
// what the pools ask of yours. Runs over SimBackend.

#include <atomic>
#include <cstdio>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/gpupool.h"
#include "gpupool/sim_backend.h"

class CountingBackend final : public gpupool::Backend {
 public:
  explicit CountingBackend(std::unique_ptr<gpupool::Backend> runtime)
      : runtime_(std::move(runtime)) {}

  int streams_created() const { return streams_created_.load(); }

  // --- Required: every primitive is thread-safe, leaves the calling
  // thread's current device as it found it, and returns errors with a fault
  // class (gpupool::FaultError / gpupool::WithFault).
  std::string_view name() const override { return "counting"; }
  absl::StatusOr<int> DeviceCount() override {
    return runtime_->DeviceCount();  // an error, never 0, without a device
  }
  absl::StatusOr<int> GetCurrentDevice() override {
    return runtime_->GetCurrentDevice();
  }
  absl::Status SetCurrentDevice(int device) override {
    return runtime_->SetCurrentDevice(device);
  }
  absl::StatusOr<gpupool::NativeStream> CreateStream(
      int device, const gpupool::StreamConfig& config) override {
    ++streams_created_;  // post: idle, not capturing, default attributes
    return runtime_->CreateStream(device, config);
  }
  absl::Status DestroyStream(int device,
                             gpupool::NativeStream stream) override {
    return runtime_->DestroyStream(device, stream);
  }
  absl::Status QueryStream(int device, gpupool::NativeStream stream) override {
    // OK, kNotReady while work is pending, kResource for a bad stream; never
    // OK for a capturing stream, and never breaking another thread's capture.
    return runtime_->QueryStream(device, stream);
  }
  absl::Status SynchronizeStream(int device,
                                 gpupool::NativeStream stream) override {
    return runtime_->SynchronizeStream(device, stream);
  }
  absl::StatusOr<gpupool::NativeEvent> CreateEvent(
      int device, const gpupool::EventConfig& config) override {
    return runtime_->CreateEvent(device, config);  // post: complete
  }
  absl::Status DestroyEvent(int device, gpupool::NativeEvent event) override {
    return runtime_->DestroyEvent(device, event);
  }
  absl::Status RecordEvent(int device, gpupool::NativeEvent event,
                           gpupool::NativeStream stream) override {
    return runtime_->RecordEvent(device, event, stream);
  }
  absl::Status QueryEvent(int device, gpupool::NativeEvent event) override {
    return runtime_->QueryEvent(device, event);
  }
  absl::Status SynchronizeEvent(int device,
                                gpupool::NativeEvent event) override {
    return runtime_->SynchronizeEvent(device, event);
  }
  absl::StatusOr<void*> Allocate(int device, size_t bytes,
                                 gpupool::MemoryKind kind) override {
    // Out of memory: ResourceExhausted with fault kOutOfMemory.
    return runtime_->Allocate(device, bytes, kind);
  }
  absl::Status Free(int device, void* ptr, gpupool::MemoryKind kind) override {
    return runtime_->Free(device, ptr, kind);
  }
  absl::StatusOr<gpupool::MemoryInfo> GetMemoryInfo(int device) override {
    return runtime_->GetMemoryInfo(device);
  }

  // --- Optional: the defaults say "this runtime has no such thing".
  absl::StatusOr<gpupool::CaptureStatus> GetCaptureStatus(
      int device, gpupool::NativeStream stream) override {
    return runtime_->GetCaptureStatus(device, stream);
  }
  absl::Status EndCapture(int device, gpupool::NativeStream stream) override {
    return runtime_->EndCapture(device, stream);
  }
  absl::Status ResetStreamAttributes(int device,
                                     gpupool::NativeStream stream) override {
    return runtime_->ResetStreamAttributes(device, stream);
  }
  bool HasResettableStreamAttributes(int device) override {
    return runtime_->HasResettableStreamAttributes(device);
  }
  absl::Status StreamWaitEvent(int device, gpupool::NativeStream stream,
                               gpupool::NativeEvent event) override {
    return runtime_->StreamWaitEvent(device, stream, event);
  }

 private:
  std::unique_ptr<gpupool::Backend> runtime_;
  std::atomic<int> streams_created_{0};
};

int main() {
  auto owned = std::make_unique<CountingBackend>(
      std::make_unique<gpupool::SimBackend>());
  CountingBackend* backend = owned.get();
  absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
      gpupool::Pools::Create(std::move(owned));
  if (!pools.ok()) return 1;
  for (int step = 0; step < 10; ++step) {
    absl::StatusOr<gpupool::PooledStream> stream =
        (*pools)->streams().Acquire(0);
    if (!stream.ok()) return 1;
  }
  std::printf("custom_backend: 10 leases, %d stream(s) created\n",
              backend->streams_created());
  return backend->streams_created() == 1 ? 0 : 2;
}
