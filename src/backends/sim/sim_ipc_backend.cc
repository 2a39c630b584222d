// SimBackend's IPC primitives and their inspection, over the shared-memory
// registry of sim_ipc.h, in the same order of checks as every primitive
// (sim_backend.cc says which).

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_ipc.h"
#include "src/backends/sim/sim_state.h"

namespace gpupool {

absl::StatusOr<IpcMemHandle> SimBackend::GetIpcHandle(int device, void* ptr) {
  absl::Status status = state_->Enter(SimOp::kIpcGetHandle, device);
  if (!status.ok()) return status;
  sim_internal::DeviceState& d = state_->device_state(device);
  State::MisuseReporter misuse(state_.get());
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  auto it = d.allocations.find(address);
  if (it == d.allocations.end()) {
    return misuse.Flag(
        absl::StrCat("GetIpcHandle: ", sim_internal::Hex(address),
                     " is not the base of a live allocation on "
                     "device ",
                     device));
  }
  if (it->second.kind != MemoryKind::kDevice) {
    return sim_internal::CallerError(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("GetIpcHandle: ", sim_internal::Hex(address),
                     " is pinned host memory; only device memory exports"));
  }
  // Lock order: the device's mutex, then the registry's.
  return state_->ipc.Export(device, address, it->second.bytes);
}

absl::StatusOr<void*> SimBackend::OpenIpcHandle(int device,
                                                const IpcMemHandle& handle) {
  absl::Status status = state_->Enter(SimOp::kIpcOpenHandle, device);
  if (!status.ok()) return status;
  status = State::CheckPoison(state_->device_state(device));
  if (!status.ok()) return status;
  return state_->ipc.Open(device, handle);
}

absl::Status SimBackend::CloseIpcHandle(int device, void* ptr) {
  absl::Status status = state_->Enter(SimOp::kIpcCloseHandle, device);
  if (!status.ok()) return status;
  status = State::CheckPoison(state_->device_state(device));
  if (!status.ok()) return status;
  State::MisuseReporter misuse(state_.get());
  status = state_->ipc.Close(device, ptr);
  if (status.code() == absl::StatusCode::kNotFound) {
    return misuse.Flag(std::string(status.message()));
  }
  return status;
}

absl::StatusOr<AddressRange> SimBackend::GetAddressRange(int device,
                                                         void* ptr) {
  if (!state_->ValidDevice(device)) {
    return sim_internal::CallerError(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("GetAddressRange: device ", device, " out of range"));
  }
  absl::Status status = State::CheckPoison(state_->device_state(device));
  if (!status.ok()) return status;
  if (std::optional<AddressRange> mapped = state_->ipc.RangeOf(device, ptr)) {
    return *mapped;
  }
  sim_internal::DeviceState& d = state_->device_state(device);
  absl::ReaderMutexLock lock(&d.mu);
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  for (const auto& [base, allocation] : d.allocations) {
    if (address >= base && address - base < allocation.bytes) {
      return AddressRange{reinterpret_cast<void*>(base), allocation.bytes};
    }
  }
  return sim_internal::CallerError(
      absl::StatusCode::kNotFound,
      absl::StrCat("GetAddressRange: ", sim_internal::Hex(address),
                   " is in no allocation or mapping on device ", device));
}

void* SimBackend::ExportedBytes(void* ptr) const {
  return state_->ipc.ExportedBytes(reinterpret_cast<uintptr_t>(ptr));
}
int SimBackend::ipc_importers(void* ptr) const {
  return state_->ipc.ImportersOf(reinterpret_cast<uintptr_t>(ptr));
}
int64_t SimBackend::ipc_exports() const { return state_->ipc.exports(); }
int64_t SimBackend::ipc_maps() const { return state_->ipc.maps(); }
int64_t SimBackend::ipc_unmaps() const { return state_->ipc.unmaps(); }
int SimBackend::ipc_mappings_live() const {
  return state_->ipc.mappings_live();
}

}  // namespace gpupool
