// SimMemory: the simulator's memory model. Per device and memory kind it
// keeps the live allocations (fake address ranges, never reused, so a use
// after free is always detectable) and their accounting against a limit; it
// implements the Backend's memory primitives and the IPC ones, exporting an
// allocation through the shared-memory registry (sim_ipc.h).
//
// Thread safety: all methods may be called concurrently. Each device's
// memory has its own mutex, taken after that device's DeviceState::mu and
// before the IPC registry's (the order is in sim_backend.cc).

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_MEMORY_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_MEMORY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_faults.h"
#include "src/backends/sim/sim_ipc.h"
#include "src/backends/sim/sim_misuse.h"

namespace gpupool {
namespace sim_internal {

class SimMemory {
 public:
  // `memory_per_device` limits device memory; pinned host memory is
  // unlimited until SetMemoryLimit.
  SimMemory(size_t memory_per_device, const SimProfile& profile,
            SimFaultInjector& faults, SimDevices& devices, SimMisuseLog& misuse,
            SimIpcRegistry& ipc);
  SimMemory(const SimMemory&) = delete;
  SimMemory& operator=(const SimMemory&) = delete;

  // --- Backend primitives (SimBackend documents them) ----------------------
  absl::StatusOr<void*> Allocate(int device, size_t bytes, MemoryKind kind);
  absl::Status Free(int device, void* ptr, MemoryKind kind);
  absl::StatusOr<MemoryInfo> GetMemoryInfo(int device);
  absl::StatusOr<IpcMemHandle> GetIpcHandle(int device, void* ptr);
  absl::StatusOr<void*> OpenIpcHandle(int device, const IpcMemHandle& handle);
  absl::Status CloseIpcHandle(int device, void* ptr);
  absl::StatusOr<AddressRange> GetAddressRange(int device, void* ptr);

  // --- Test controls and inspection ---------------------------------------
  void SetMemoryLimit(int device, size_t bytes, MemoryKind kind);
  int live_allocations(int device) const;
  size_t bytes_allocated(int device, MemoryKind kind) const;
  int64_t allocations_made() const;
  int64_t allocations_freed() const;

  // --- For the other models ------------------------------------------------
  // Whether `base` is a live allocation of `device` (the graph oracle).
  bool IsLive(int device, uintptr_t base) const;
  // The base of the live allocation of `device` holding [ptr, ptr + bytes).
  bool FindRange(int device, uintptr_t ptr, size_t bytes,
                 uintptr_t* base) const;
  // ResetDevice: frees every allocation of `device`; addresses carry on.
  void ResetDevice(int device);
  // Live allocations of `device`, for the leak check.
  void AppendLeaks(int device, LeakList* leaks) const;

 private:
  struct AllocationState {
    size_t bytes = 0;
    MemoryKind kind = MemoryKind::kDevice;
  };
  // Accounting of one memory kind of one device.
  struct MemoryAccount {
    size_t live_bytes = 0;
    size_t limit = std::numeric_limits<size_t>::max();
    // Bump offset into the kind's address region; never moves back, so an
    // address is never handed out twice.
    uint64_t next_offset = 0;
  };
  struct alignas(64) DeviceMemory {
    mutable absl::Mutex mu;
    absl::flat_hash_map<uintptr_t, AllocationState> allocations
        ABSL_GUARDED_BY(mu);
    // Indexed by KindIndex(kind).
    MemoryAccount accounts[2] ABSL_GUARDED_BY(mu);
    std::atomic<int64_t> made{0};
    std::atomic<int64_t> freed{0};
  };

  // Free's misuse message for `address`, which is no live allocation.
  std::string DiagnoseFree(const DeviceMemory& m, int device, uintptr_t address,
                           MemoryKind kind) const
      ABSL_SHARED_LOCKS_REQUIRED(m.mu);

  const SimProfile& profile_;
  SimFaultInjector& faults_;
  SimDevices& devices_;
  SimMisuseLog& misuse_;
  SimIpcRegistry& ipc_;
  std::vector<std::unique_ptr<DeviceMemory>> memory_;
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_MEMORY_H_
