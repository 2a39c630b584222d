// SimMemory: allocate, free, memory info and the IPC primitives, in the
// same order of checks as every primitive (sim_backend.cc says which).

#include "src/backends/sim/sim_memory.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_support.h"

namespace gpupool {
namespace sim_internal {

SimMemory::SimMemory(size_t memory_per_device, const SimProfile& profile,
                     SimFaultInjector& faults, SimDevices& devices,
                     SimMisuseLog& misuse, SimIpcRegistry& ipc)
    : profile_(profile),
      faults_(faults),
      devices_(devices),
      misuse_(misuse),
      ipc_(ipc) {
  memory_.reserve(devices.device_count());
  for (int i = 0; i < devices.device_count(); ++i) {
    auto memory = std::make_unique<DeviceMemory>();
    absl::MutexLock lock(&memory->mu);
    memory->accounts[KindIndex(MemoryKind::kDevice)].limit = memory_per_device;
    memory_.push_back(std::move(memory));
  }
}

// --- Backend primitives ------------------------------------------------------

absl::StatusOr<void*> SimMemory::Allocate(int device, size_t bytes,
                                          MemoryKind kind) {
  absl::Status status = faults_.Enter(SimOp::kAllocate, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  status = d.PoisonStatus();
  if (!status.ok()) return status;
  if (bytes == 0) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       "Allocate: 0 bytes requested");
  }
  ChargeLatency(profile_.allocate);
  absl::ReaderMutexLock device_lock(&d.mu);
  if (d.poisoned) return d.sticky;
  DeviceMemory& m = *memory_[device];
  absl::MutexLock lock(&m.mu);
  MemoryAccount& account = m.accounts[KindIndex(kind)];
  if (bytes > account.limit || account.live_bytes > account.limit - bytes) {
    return FaultError(
        Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted,
        absl::StrCat("sim: out of ", MemoryKindName(kind), " memory on device ",
                     device, ": requested ", bytes, " bytes, ",
                     account.live_bytes, " in use, limit ", account.limit));
  }
  // Addresses are never reused, so the region can run out before the limit.
  if (bytes > kRegionBytes - account.next_offset ||
      RoundUpToAlignment(bytes) > kRegionBytes - account.next_offset) {
    return FaultError(
        Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted,
        absl::StrCat("sim: simulated ", MemoryKindName(kind),
                     " address space of device ", device, " exhausted"));
  }
  uintptr_t address = RegionBase(device, kind) + account.next_offset;
  account.next_offset += RoundUpToAlignment(bytes);
  account.live_bytes += bytes;
  m.allocations.emplace(address, AllocationState{bytes, kind});
  m.made.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<void*>(address);
}

std::string SimMemory::DiagnoseFree(const DeviceMemory& m, int device,
                                    uintptr_t address, MemoryKind kind) const {
  DecodedAddress decoded = DecodeAddress(address);
  if (!devices_.ValidDevice(decoded.device)) {
    return absl::StrCat("Free: unknown pointer ", Hex(address));
  }
  if (decoded.device != device) {
    return absl::StrCat("Free: wrong device: pointer ", Hex(address),
                        " belongs to device ", decoded.device,
                        " but was passed with device ", device);
  }
  if (decoded.kind != kind) {
    return absl::StrCat("Free: wrong memory kind: pointer ", Hex(address),
                        " is ", MemoryKindName(decoded.kind),
                        " memory but was freed as ", MemoryKindName(kind));
  }
  if (decoded.offset < m.accounts[KindIndex(kind)].next_offset) {
    return absl::StrCat("Free: double free (or interior ", "pointer) ",
                        Hex(address), " on device ", device);
  }
  return absl::StrCat("Free: unknown pointer ", Hex(address),
                      " (never allocated on device ", device, ")");
}

absl::Status SimMemory::Free(int device, void* ptr, MemoryKind kind) {
  absl::Status status = faults_.Enter(SimOp::kFree, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  {
    SimMisuseLog::Reporter misuse(misuse_);
    absl::ReaderMutexLock device_lock(&d.mu);
    if (d.poisoned) return d.sticky;
    // Like cudaFree(nullptr): a no-op.
    if (ptr == nullptr) return absl::OkStatus();
    DeviceMemory& m = *memory_[device];
    absl::MutexLock lock(&m.mu);
    uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
    auto it = m.allocations.find(address);
    if (it == m.allocations.end()) {
      return misuse.Flag(DiagnoseFree(m, device, address, kind));
    }
    if (it->second.kind != kind) {
      return misuse.Flag(
          absl::StrCat("Free: wrong memory kind: pointer ", Hex(address),
                       " is ", MemoryKindName(it->second.kind),
                       " memory but was freed as ", MemoryKindName(kind)));
    }
    m.accounts[KindIndex(kind)].live_bytes -= it->second.bytes;
    m.allocations.erase(it);
    // Freeing an exported allocation that another process still has mapped
    // is undefined behaviour on the runtimes: the free happens, loudly.
    if (const int importers = ipc_.OnFree(address); importers > 0) {
      (void)misuse.Flag(absl::StrCat(
          "Free: exported allocation ", Hex(address), " on device ", device,
          " is still mapped by ", importers,
          " other process(es) (undefined behaviour on CUDA and HIP)"));
    }
    m.freed.fetch_add(1, std::memory_order_relaxed);
  }
  ChargeLatency(profile_.free);
  return absl::OkStatus();
}

absl::StatusOr<MemoryInfo> SimMemory::GetMemoryInfo(int device) {
  absl::Status status = faults_.Enter(SimOp::kMemoryInfo, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  absl::ReaderMutexLock device_lock(&d.mu);
  if (d.poisoned) return d.sticky;
  const DeviceMemory& m = *memory_[device];
  absl::ReaderMutexLock lock(&m.mu);
  const MemoryAccount& account = m.accounts[KindIndex(MemoryKind::kDevice)];
  MemoryInfo info;
  info.total_bytes = account.limit;
  info.free_bytes = account.limit - std::min(account.limit, account.live_bytes);
  return info;
}

absl::StatusOr<IpcMemHandle> SimMemory::GetIpcHandle(int device, void* ptr) {
  absl::Status status = faults_.Enter(SimOp::kIpcGetHandle, device);
  if (!status.ok()) return status;
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::ReaderMutexLock device_lock(&d.mu);
  if (d.poisoned) return d.sticky;
  DeviceMemory& m = *memory_[device];
  absl::MutexLock lock(&m.mu);
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  auto it = m.allocations.find(address);
  if (it == m.allocations.end()) {
    return misuse.Flag(absl::StrCat("GetIpcHandle: ", Hex(address),
                                    " is not the base of a live allocation on "
                                    "device ",
                                    device));
  }
  if (it->second.kind != MemoryKind::kDevice) {
    return CallerError(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("GetIpcHandle: ", Hex(address),
                     " is pinned host memory; only device memory exports"));
  }
  // Under the memory lock, so that a concurrent Free sees the export.
  return ipc_.Export(device, address, it->second.bytes);
}

absl::StatusOr<void*> SimMemory::OpenIpcHandle(int device,
                                               const IpcMemHandle& handle) {
  absl::Status status = faults_.Enter(SimOp::kIpcOpenHandle, device);
  if (!status.ok()) return status;
  status = devices_.device(device).PoisonStatus();
  if (!status.ok()) return status;
  return ipc_.Open(device, handle);
}

absl::Status SimMemory::CloseIpcHandle(int device, void* ptr) {
  absl::Status status = faults_.Enter(SimOp::kIpcCloseHandle, device);
  if (!status.ok()) return status;
  status = devices_.device(device).PoisonStatus();
  if (!status.ok()) return status;
  SimMisuseLog::Reporter misuse(misuse_);
  status = ipc_.Close(device, ptr);
  if (status.code() == absl::StatusCode::kNotFound) {
    return misuse.Flag(std::string(MessageWithoutFault(status)));
  }
  return status;
}

absl::StatusOr<AddressRange> SimMemory::GetAddressRange(int device, void* ptr) {
  if (!devices_.ValidDevice(device)) {
    return CallerError(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("GetAddressRange: device ", device, " out of range"));
  }
  absl::Status status = devices_.device(device).PoisonStatus();
  if (!status.ok()) return status;
  if (std::optional<AddressRange> mapped = ipc_.RangeOf(device, ptr)) {
    return *mapped;
  }
  const DeviceMemory& m = *memory_[device];
  absl::ReaderMutexLock lock(&m.mu);
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  for (const auto& [base, allocation] : m.allocations) {
    if (address >= base && address - base < allocation.bytes) {
      return AddressRange{reinterpret_cast<void*>(base), allocation.bytes};
    }
  }
  return CallerError(
      absl::StatusCode::kNotFound,
      absl::StrCat("GetAddressRange: ", Hex(address),
                   " is in no allocation or mapping on device ", device));
}

// --- Test controls and inspection --------------------------------------------

void SimMemory::SetMemoryLimit(int device, size_t bytes, MemoryKind kind) {
  if (!devices_.ValidDevice(device)) {
    misuse_.Report(
        absl::StrCat("SetMemoryLimit: device ", device, " out of range"));
    return;
  }
  DeviceMemory& m = *memory_[device];
  absl::MutexLock lock(&m.mu);
  m.accounts[KindIndex(kind)].limit = bytes;
}

int SimMemory::live_allocations(int device) const {
  if (!devices_.ValidDevice(device)) return 0;
  const DeviceMemory& m = *memory_[device];
  absl::ReaderMutexLock lock(&m.mu);
  return static_cast<int>(m.allocations.size());
}

size_t SimMemory::bytes_allocated(int device, MemoryKind kind) const {
  if (!devices_.ValidDevice(device)) return 0;
  const DeviceMemory& m = *memory_[device];
  absl::ReaderMutexLock lock(&m.mu);
  return m.accounts[KindIndex(kind)].live_bytes;
}

int64_t SimMemory::allocations_made() const {
  int64_t sum = 0;
  for (const auto& m : memory_) sum += m->made.load(std::memory_order_relaxed);
  return sum;
}

int64_t SimMemory::allocations_freed() const {
  int64_t sum = 0;
  for (const auto& m : memory_) sum += m->freed.load(std::memory_order_relaxed);
  return sum;
}

// --- For the other models ----------------------------------------------------

bool SimMemory::IsLive(int device, uintptr_t base) const {
  const DeviceMemory& m = *memory_[device];
  absl::ReaderMutexLock lock(&m.mu);
  return m.allocations.contains(base);
}

bool SimMemory::FindRange(int device, uintptr_t ptr, size_t bytes,
                          uintptr_t* base) const {
  const DeviceMemory& m = *memory_[device];
  absl::ReaderMutexLock lock(&m.mu);
  for (const auto& [address, allocation] : m.allocations) {
    if (ptr >= address && ptr - address < allocation.bytes &&
        bytes <= allocation.bytes - (ptr - address)) {
      *base = address;
      return true;
    }
  }
  return false;
}

void SimMemory::ResetDevice(int device) {
  DeviceMemory& m = *memory_[device];
  absl::MutexLock lock(&m.mu);
  m.freed.fetch_add(static_cast<int64_t>(m.allocations.size()),
                    std::memory_order_relaxed);
  m.allocations.clear();
  for (MemoryAccount& account : m.accounts) account.live_bytes = 0;
}

void SimMemory::AppendLeaks(int device, LeakList* leaks) const {
  const DeviceMemory& m = *memory_[device];
  absl::ReaderMutexLock lock(&m.mu);
  for (const auto& [address, allocation] : m.allocations) {
    leaks->emplace_back(
        address,
        absl::StrCat("allocation ", Hex(address), " of ", allocation.bytes,
                     " bytes of ", MemoryKindName(allocation.kind),
                     " memory on device ", device));
  }
}

}  // namespace sim_internal
}  // namespace gpupool
