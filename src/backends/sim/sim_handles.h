// Encoding of SimBackend handles and fake allocation addresses.
//
// Handles and addresses are plain integers dressed as pointers. They carry the
// device (and, for handles, the owning backend instance) in their high bits,
// so that a handle passed with the wrong device or to the wrong SimBackend is
// recognised without a lookup in another device's state, and so that a
// destroyed handle is told apart from a foreign one. The high bits also make
// every value a non-canonical x86-64 address: dereferencing one faults at
// once instead of reading someone else's memory.
//
// Thread safety: pure functions.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_HANDLES_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_HANDLES_H_

#include <cstddef>
#include <cstdint>

#include "gpupool/backend.h"

namespace gpupool {
namespace sim_internal {

// --- Handles ----------------------------------------------------------------
// Layout: bits 63..48 device + 1, bits 47..36 instance tag, bits 35..4 a
// per-device sequence number (never reused), bits 3..0 the handle kind.

enum class HandleKind : uint64_t { kStream = 0x5, kEvent = 0x9 };

inline constexpr int kMaxHandleDevices = 0xFFFE;
inline constexpr uint64_t kInstanceTagMask = 0xFFF;
inline constexpr uint64_t kMaxHandleId = 0xFFFFFFFF;

struct DecodedHandle {
  int device = -1;
  uint64_t instance_tag = 0;
  uint64_t id = 0;
  uint64_t kind_bits = 0;
};

inline uintptr_t EncodeHandle(int device, uint64_t instance_tag, uint64_t id,
                              HandleKind kind) {
  return (static_cast<uint64_t>(device + 1) << 48) |
         ((instance_tag & kInstanceTagMask) << 36) | (id << 4) |
         static_cast<uint64_t>(kind);
}

inline DecodedHandle DecodeHandle(uintptr_t handle) {
  uint64_t value = handle;
  DecodedHandle out;
  out.device = static_cast<int>(value >> 48) - 1;
  out.instance_tag = (value >> 36) & kInstanceTagMask;
  out.id = (value >> 4) & kMaxHandleId;
  out.kind_bits = value & 0xF;
  return out;
}

inline uintptr_t HandleValue(const void* handle) {
  return reinterpret_cast<uintptr_t>(handle);
}

// --- Allocation addresses ---------------------------------------------------
// Layout: bits 63..56 the region 1 + 2 * device + kind, bits 55..0 a bump
// offset. 2^56 bytes per region keeps "never reused" true for any realistic
// benchmark (64 Mi allocations of 1 GiB each) while 127 devices still fit.

inline constexpr int kMaxAddressDevices = 127;
inline constexpr size_t kAllocationAlignment = 256;
inline constexpr uint64_t kRegionBytes = uint64_t{1} << 56;

inline int KindIndex(MemoryKind kind) {
  return kind == MemoryKind::kDevice ? 0 : 1;
}

inline uintptr_t RegionBase(int device, MemoryKind kind) {
  return static_cast<uint64_t>(1 + 2 * device + KindIndex(kind)) << 56;
}

struct DecodedAddress {
  int device = -1;  // -1: not an address of any simulated region.
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t offset = 0;
};

inline DecodedAddress DecodeAddress(uintptr_t address) {
  DecodedAddress out;
  uint64_t region = static_cast<uint64_t>(address) >> 56;
  if (region == 0) return out;
  out.device = static_cast<int>((region - 1) / 2);
  out.kind =
      (region - 1) % 2 == 0 ? MemoryKind::kDevice : MemoryKind::kPinnedHost;
  out.offset = static_cast<uint64_t>(address) & (kRegionBytes - 1);
  return out;
}

inline size_t RoundUpToAlignment(size_t bytes) {
  return (bytes + kAllocationAlignment - 1) / kAllocationAlignment *
         kAllocationAlignment;
}

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_HANDLES_H_
