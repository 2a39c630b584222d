// SimBackend's memory primitives: allocate, free and memory info, in the same
// order of checks as every primitive (sim_backend.cc says which).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_state.h"

namespace gpupool {
// --- Memory ------------------------------------------------------------------

absl::StatusOr<void*> SimBackend::Allocate(int device, size_t bytes,
                                           MemoryKind kind) {
  absl::Status status = state_->Enter(SimOp::kAllocate, device);
  if (!status.ok()) return status;
  sim_internal::DeviceState& d = state_->device_state(device);
  status = State::CheckPoison(d);
  if (!status.ok()) return status;
  if (bytes == 0) {
    return sim_internal::CallerError(absl::StatusCode::kInvalidArgument,
                                     "Allocate: 0 bytes requested");
  }
  sim_internal::ChargeLatency(state_->options.profile.allocate);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  sim_internal::MemoryAccount& account =
      d.memory[sim_internal::KindIndex(kind)];
  if (bytes > account.limit || account.live_bytes > account.limit - bytes) {
    return FaultError(
        Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted,
        absl::StrCat("sim: out of ", MemoryKindName(kind), " memory on device ",
                     device, ": requested ", bytes, " bytes, ",
                     account.live_bytes, " in use, limit ", account.limit));
  }
  // Addresses are never reused, so the region can run out before the limit.
  if (bytes > sim_internal::kRegionBytes - account.next_offset ||
      sim_internal::RoundUpToAlignment(bytes) >
          sim_internal::kRegionBytes - account.next_offset) {
    return FaultError(
        Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted,
        absl::StrCat("sim: simulated ", MemoryKindName(kind),
                     " address space of device ", device, " exhausted"));
  }
  uintptr_t address =
      sim_internal::RegionBase(device, kind) + account.next_offset;
  account.next_offset += sim_internal::RoundUpToAlignment(bytes);
  account.live_bytes += bytes;
  d.allocations.emplace(address, sim_internal::AllocationState{bytes, kind});
  d.allocations_made.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<void*>(address);
}

absl::Status SimBackend::Free(int device, void* ptr, MemoryKind kind) {
  absl::Status status = state_->Enter(SimOp::kFree, device);
  if (!status.ok()) return status;
  sim_internal::DeviceState& d = state_->device_state(device);
  {
    State::MisuseReporter misuse(state_.get());
    absl::MutexLock lock(&d.mu);
    if (d.poisoned) return d.sticky;
    // Like cudaFree(nullptr): a no-op.
    if (ptr == nullptr) return absl::OkStatus();
    uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
    auto it = d.allocations.find(address);
    if (it == d.allocations.end()) {
      sim_internal::DecodedAddress decoded =
          sim_internal::DecodeAddress(address);
      if (!state_->ValidDevice(decoded.device)) {
        return misuse.Flag(
            absl::StrCat("Free: unknown pointer ", sim_internal::Hex(address)));
      }
      if (decoded.device != device) {
        return misuse.Flag(absl::StrCat(
            "Free: wrong device: pointer ", sim_internal::Hex(address),
            " belongs to device ", decoded.device,
            " but was passed with device ", device));
      }
      if (decoded.kind != kind) {
        return misuse.Flag(absl::StrCat(
            "Free: wrong memory kind: pointer ", sim_internal::Hex(address),
            " is ", MemoryKindName(decoded.kind), " memory but was freed as ",
            MemoryKindName(kind)));
      }
      if (decoded.offset <
          d.memory[sim_internal::KindIndex(kind)].next_offset) {
        return misuse.Flag(absl::StrCat("Free: double free (or interior ",
                                        "pointer) ", sim_internal::Hex(address),
                                        " on device ", device));
      }
      return misuse.Flag(
          absl::StrCat("Free: unknown pointer ", sim_internal::Hex(address),
                       " (never allocated on device ", device, ")"));
    }
    if (it->second.kind != kind) {
      return misuse.Flag(absl::StrCat(
          "Free: wrong memory kind: pointer ", sim_internal::Hex(address),
          " is ", MemoryKindName(it->second.kind), " memory but was freed as ",
          MemoryKindName(kind)));
    }
    d.memory[sim_internal::KindIndex(kind)].live_bytes -= it->second.bytes;
    d.allocations.erase(it);
    d.allocations_freed.fetch_add(1, std::memory_order_relaxed);
  }
  sim_internal::ChargeLatency(state_->options.profile.free);
  return absl::OkStatus();
}

absl::StatusOr<MemoryInfo> SimBackend::GetMemoryInfo(int device) {
  absl::Status status = state_->Enter(SimOp::kMemoryInfo, device);
  if (!status.ok()) return status;
  sim_internal::DeviceState& d = state_->device_state(device);
  absl::ReaderMutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  const sim_internal::MemoryAccount& account =
      d.memory[sim_internal::KindIndex(MemoryKind::kDevice)];
  MemoryInfo info;
  info.total_bytes = account.limit;
  info.free_bytes = account.limit - std::min(account.limit, account.live_bytes);
  return info;
}

}  // namespace gpupool
