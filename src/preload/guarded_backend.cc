// GuardedBackend; see guarded_backend.h.

#include "src/preload/guarded_backend.h"

#include <memory>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "src/preload/runtime_call_guard.h"

namespace gpupool::preload_internal {
namespace {

class GuardedBackend final : public Backend {
 public:
  explicit GuardedBackend(std::unique_ptr<Backend> backend)
      : backend_(std::move(backend)) {}

  std::string_view name() const override { return backend_->name(); }

  absl::StatusOr<int> DeviceCount() override {
    ScopedRuntimeCall guard;
    return backend_->DeviceCount();
  }
  absl::StatusOr<int> GetCurrentDevice() override {
    ScopedRuntimeCall guard;
    return backend_->GetCurrentDevice();
  }
  absl::Status SetCurrentDevice(int device) override {
    ScopedRuntimeCall guard;
    return backend_->SetCurrentDevice(device);
  }
  absl::StatusOr<NativeStream> CreateStream(
      int device, const StreamConfig& config) override {
    ScopedRuntimeCall guard;
    return backend_->CreateStream(device, config);
  }
  absl::Status DestroyStream(int device, NativeStream stream) override {
    ScopedRuntimeCall guard;
    return backend_->DestroyStream(device, stream);
  }
  absl::Status QueryStream(int device, NativeStream stream) override {
    ScopedRuntimeCall guard;
    return backend_->QueryStream(device, stream);
  }
  absl::Status SynchronizeStream(int device, NativeStream stream) override {
    ScopedRuntimeCall guard;
    return backend_->SynchronizeStream(device, stream);
  }
  absl::StatusOr<CaptureStatus> GetCaptureStatus(int device,
                                                 NativeStream stream) override {
    ScopedRuntimeCall guard;
    return backend_->GetCaptureStatus(device, stream);
  }
  absl::Status EndCapture(int device, NativeStream stream) override {
    ScopedRuntimeCall guard;
    return backend_->EndCapture(device, stream);
  }
  absl::Status ResetStreamAttributes(int device, NativeStream stream) override {
    ScopedRuntimeCall guard;
    return backend_->ResetStreamAttributes(device, stream);
  }
  absl::Status StreamWaitEvent(int device, NativeStream stream,
                               NativeEvent event) override {
    ScopedRuntimeCall guard;
    return backend_->StreamWaitEvent(device, stream, event);
  }
  absl::StatusOr<NativeEvent> CreateEvent(int device,
                                          const EventConfig& config) override {
    ScopedRuntimeCall guard;
    return backend_->CreateEvent(device, config);
  }
  absl::Status DestroyEvent(int device, NativeEvent event) override {
    ScopedRuntimeCall guard;
    return backend_->DestroyEvent(device, event);
  }
  absl::Status RecordEvent(int device, NativeEvent event,
                           NativeStream stream) override {
    ScopedRuntimeCall guard;
    return backend_->RecordEvent(device, event, stream);
  }
  absl::Status QueryEvent(int device, NativeEvent event) override {
    ScopedRuntimeCall guard;
    return backend_->QueryEvent(device, event);
  }
  absl::Status SynchronizeEvent(int device, NativeEvent event) override {
    ScopedRuntimeCall guard;
    return backend_->SynchronizeEvent(device, event);
  }
  absl::StatusOr<void*> Allocate(int device, size_t bytes,
                                 MemoryKind kind) override {
    ScopedRuntimeCall guard;
    return backend_->Allocate(device, bytes, kind);
  }
  absl::Status Free(int device, void* ptr, MemoryKind kind) override {
    ScopedRuntimeCall guard;
    return backend_->Free(device, ptr, kind);
  }
  absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) override {
    ScopedRuntimeCall guard;
    return backend_->GetMemoryInfo(device);
  }

 private:
  const std::unique_ptr<Backend> backend_;
};

}  // namespace

std::unique_ptr<Backend> MakeGuardedBackend(std::unique_ptr<Backend> backend) {
  return std::make_unique<GuardedBackend>(std::move(backend));
}

}  // namespace gpupool::preload_internal
