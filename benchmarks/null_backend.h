// benchmarks/null_backend.h — a Backend whose primitives do nothing.
//
// Measuring a pool over it leaves only the pool's own work (locks, lists,
// counters, lease bookkeeping, virtual calls), which is what the "pool
// overhead vs floor" figure needs: every real or simulated runtime adds its
// own query cost on top. Handles are distinct fake values that are never
// dereferenced. Thread-safe.

#ifndef GPUPOOL_BENCHMARKS_NULL_BACKEND_H_
#define GPUPOOL_BENCHMARKS_NULL_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"

namespace gpupool::bench {

class NullBackend : public Backend {
 public:
  explicit NullBackend(int device_count) : device_count_(device_count) {}

  std::string_view name() const override { return "null"; }
  absl::StatusOr<int> DeviceCount() override { return device_count_; }
  absl::StatusOr<int> GetCurrentDevice() override { return 0; }
  absl::Status SetCurrentDevice(int device) override;
  absl::StatusOr<NativeStream> CreateStream(
      int device, const StreamConfig& config) override;
  absl::Status DestroyStream(int device, NativeStream stream) override;
  absl::Status QueryStream(int device, NativeStream stream) override;
  absl::Status SynchronizeStream(int device, NativeStream stream) override;
  absl::StatusOr<CaptureStatus> GetCaptureStatus(int device,
                                                 NativeStream stream) override;
  absl::StatusOr<NativeEvent> CreateEvent(int device,
                                          const EventConfig& config) override;
  bool HasResettableStreamAttributes(int) override { return false; }
  absl::Status DestroyEvent(int device, NativeEvent event) override;
  absl::Status RecordEvent(int device, NativeEvent event,
                           NativeStream stream) override;
  absl::Status QueryEvent(int device, NativeEvent event) override;
  absl::Status SynchronizeEvent(int device, NativeEvent event) override;
  absl::StatusOr<void*> Allocate(int device, size_t bytes,
                                 MemoryKind kind) override;
  absl::Status Free(int device, void* ptr, MemoryKind kind) override;
  absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) override;

 private:
  void* NextHandle();

  const int device_count_;
  // Fake handle values: distinct, never dereferenced, never reused.
  std::atomic<uintptr_t> next_handle_{0x1000};
};

}  // namespace gpupool::bench

#endif  // GPUPOOL_BENCHMARKS_NULL_BACKEND_H_
