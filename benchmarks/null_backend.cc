// NullBackend: every primitive succeeds at once (see null_backend.h).

#include "benchmarks/null_backend.h"

namespace gpupool::bench {

absl::Status NullBackend::SetCurrentDevice(int device) {
  return absl::OkStatus();
}

void* NullBackend::NextHandle() {
  return reinterpret_cast<void*>(
      next_handle_.fetch_add(0x100, std::memory_order_relaxed));
}

absl::StatusOr<NativeStream> NullBackend::CreateStream(
    int device, const StreamConfig& config) {
  return NextHandle();
}

absl::Status NullBackend::DestroyStream(int device, NativeStream stream) {
  return absl::OkStatus();
}

absl::Status NullBackend::QueryStream(int device, NativeStream stream) {
  return absl::OkStatus();
}

absl::Status NullBackend::SynchronizeStream(int device, NativeStream stream) {
  return absl::OkStatus();
}

absl::StatusOr<CaptureStatus> NullBackend::GetCaptureStatus(
    int device, NativeStream stream) {
  return CaptureStatus::kNone;
}

absl::StatusOr<NativeEvent> NullBackend::CreateEvent(
    int device, const EventConfig& config) {
  return NextHandle();
}

absl::Status NullBackend::DestroyEvent(int device, NativeEvent event) {
  return absl::OkStatus();
}

absl::Status NullBackend::RecordEvent(int device, NativeEvent event,
                                      NativeStream stream) {
  return absl::OkStatus();
}

absl::Status NullBackend::QueryEvent(int device, NativeEvent event) {
  return absl::OkStatus();
}

absl::Status NullBackend::SynchronizeEvent(int device, NativeEvent event) {
  return absl::OkStatus();
}

absl::StatusOr<void*> NullBackend::Allocate(int device, size_t bytes,
                                            MemoryKind kind) {
  // Fake ranges never overlap, in case a caller checks.
  uintptr_t span = (static_cast<uintptr_t>(bytes) + 0xff) & ~uintptr_t{0xff};
  return reinterpret_cast<void*>(
      next_handle_.fetch_add(span, std::memory_order_relaxed));
}

absl::Status NullBackend::Free(int device, void* ptr, MemoryKind kind) {
  return absl::OkStatus();
}

absl::StatusOr<MemoryInfo> NullBackend::GetMemoryInfo(int device) {
  return MemoryInfo{size_t{80} << 30, size_t{80} << 30};
}

}  // namespace gpupool::bench
