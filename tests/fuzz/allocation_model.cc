// The allocation leases and stable buffers pool_fuzzer holds, and what it
// does with them.

#include "tests/fuzz/allocation_model.h"

#include <algorithm>
#include <iterator>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"

namespace gpupool::fuzz {
namespace {

constexpr size_t kSizes[] = {
    1, 511, 512, 513, 4096, 5000, 65536, (1u << 20) + 1, 1u << 24, 1u << 30, 0};

}  // namespace

void AllocationModel::Allocate(ClaimDeviceLease claim) {
  const int device = harness_.PickDevice();
  size_t bytes =
      kSizes[input_.ConsumeIntegralInRange<size_t>(0, std::size(kSizes) - 1)];
  if (input_.ConsumeBool()) {
    bytes = input_.ConsumeIntegralInRange<size_t>(1, 1 << 22);
  }
  const MemoryKind kind =
      input_.ConsumeBool() ? MemoryKind::kDevice : MemoryKind::kPinnedHost;
  NativeStream stream = input_.ConsumeBool() && device < kDevices
                            ? leases_.PickUsableStream(device)
                            : nullptr;
  if (allocations_held_.size() >= kMaxLeases) return;
  const bool poisoned =
      device < kDevices && harness_.health().is_poisoned(device);
  absl::StatusOr<PooledAllocation> lease =
      harness_.cache().Allocate(device, bytes, kind, stream);
  if (device >= kDevices || poisoned) {
    FUZZ_CHECK(!lease.ok(), "an allocation on an unusable device");
    harness_.CheckRefusal(device, lease.status(), "Allocate");
    return;
  }
  if (bytes == 0) {
    FUZZ_CHECK(lease.status().code() == absl::StatusCode::kInvalidArgument,
               absl::StrCat("Allocate(0): ", lease.status().ToString()));
    return;
  }
  if (!lease.ok()) return;
  FUZZ_CHECK(lease->size() == bytes && lease->capacity() >= bytes &&
                 lease->device() == device && lease->kind() == kind,
             "allocation does not match its request");
  if (kind == MemoryKind::kDevice) claim(*lease, stream);
  std::vector<NativeStream> uses;
  if (stream != nullptr) uses.push_back(stream);
  allocation_streams_[lease->lease_id()] = std::move(uses);
  allocations_held_.push_back({*std::move(lease), false});
}

void AllocationModel::RecordUse() {
  PooledAllocation* lease = PickHeld(input_, allocations_held_);
  if (lease == nullptr || input_.remaining_bytes() == 0) return;
  if (input_.ConsumeBool()) {
    lease->RecordUse(nullptr);  // documented no-op
    return;
  }
  NativeStream stream = leases_.PickUsableStream(lease->device());
  if (stream == nullptr) return;
  lease->RecordUse(stream);
  allocation_streams_[lease->lease_id()].push_back(stream);
}

void AllocationModel::ReleaseOne() {
  PooledAllocation* lease = PickHeld(input_, allocations_held_);
  if (lease == nullptr) return;
  ReleaseLease(*lease);
}

void AllocationModel::StableBuffer() {
  const int device = harness_.PickDevice();
  const std::string name =
      absl::StrCat("buf", input_.ConsumeIntegralInRange(0, 2));
  if (input_.ConsumeBool()) {
    const size_t bytes = input_.ConsumeIntegralInRange<size_t>(0, 1 << 21);
    absl::StatusOr<void*> ptr =
        StableBuffers(harness_.cache()).Acquire(name, device, bytes);
    if (device >= kDevices || bytes == 0 ||
        (device < kDevices && harness_.health().is_poisoned(device))) {
      FUZZ_CHECK(!ptr.ok(), "StableBuffers::Acquire accepted bad input");
      return;
    }
    // A failed grow keeps the old buffer under the name (the new one is
    // allocated before the old is freed), so the model keeps it.
    if (!ptr.ok()) return;
    ModelStable(name, device, bytes, *ptr);
  } else {
    absl::Status status = StableBuffers(harness_.cache()).Release(name, device);
    const bool known = stable_.erase({name, device}) > 0;
    if (device < kDevices && !harness_.health().is_poisoned(device) && !known) {
      FUZZ_CHECK(status.code() == absl::StatusCode::kNotFound,
                 absl::StrCat("StableBuffers::Release of nothing: ",
                              status.ToString()));
    }
  }
}

void AllocationModel::ModelStable(const std::string& name, int device,
                                  size_t bytes, void* ptr) {
  auto it = stable_.find({name, device});
  if (it != stable_.end() && bytes <= it->second.capacity) {
    FUZZ_CHECK(ptr == it->second.ptr, "a stable buffer moved");
    return;
  }
  stable_[{name, device}] =
      Stable{ptr, bytes <= harness_.max_cached_block_bytes()
                      ? RoundedAllocationSize(bytes)
                      : bytes};
}

bool AllocationModel::UsedOn(NativeStream stream) const {
  for (const auto& [id, streams] : allocation_streams_) {
    if (std::find(streams.begin(), streams.end(), stream) != streams.end()) {
      return true;
    }
  }
  return false;
}

void AllocationModel::MarkDeviceReset(int device) {
  for (auto& held : allocations_held_) {
    if (held.lease && held.lease.device() == device) held.stale = true;
  }
  for (auto it = stable_.begin(); it != stable_.end();) {
    it = it->first.second == device ? stable_.erase(it) : std::next(it);
  }
}

// All ranges together: the simulator's address regions are disjoint per
// device and kind, so this is the same as checking per device and kind.
int64_t AllocationModel::CheckNoOverlap() {
  std::vector<std::pair<uintptr_t, uintptr_t>>& ranges = scratch_ranges_;
  ranges.clear();
  int64_t allocations_out = 0;
  for (const auto& held : allocations_held_) {
    if (!held.lease) continue;
    ++allocations_out;
    const auto begin = reinterpret_cast<uintptr_t>(held.lease.data());
    ranges.push_back({begin, begin + held.lease.capacity()});
  }
  for (const auto& [key, buffer] : stable_) {
    const auto begin = reinterpret_cast<uintptr_t>(buffer.ptr);
    ranges.push_back({begin, begin + buffer.capacity});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    FUZZ_CHECK(ranges[i - 1].second <= ranges[i].first,
               "two live allocations overlap");
  }
  return allocations_out;
}

void AllocationModel::ReleaseAll() {
  for (auto& held : allocations_held_) {
    if (held.lease) ReleaseLease(held.lease);
  }
}

void AllocationModel::ReleaseLease(PooledAllocation& lease) {
  if (lease.kind() == MemoryKind::kDevice) {
    harness_.sim().ReleaseClaim(lease.data());
  }
  allocation_streams_.erase(lease.lease_id());
  lease.Release();
}

}  // namespace gpupool::fuzz
