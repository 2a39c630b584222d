// The allocation cache's model: the allocation leases pool_fuzzer holds
// (allocate, record use, release) with the streams each was used on, and the
// stable buffers it keeps (StableBuffers::Acquire and Release here,
// StableBuffers::Export in ipc_model.cc); and the check that no two live
// allocations overlap.

#ifndef GPUPOOL_TESTS_FUZZ_ALLOCATION_MODEL_H_
#define GPUPOOL_TESTS_FUZZ_ALLOCATION_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "tests/fuzz/harness.h"
#include "tests/fuzz/held_lease.h"
#include "tests/fuzz/stream_event_model.h"

namespace gpupool::fuzz {

// Claims a new device lease, allocated on the stream (or nullptr), for its
// owner in the simulator's graph oracle.
using ClaimDeviceLease =
    absl::FunctionRef<void(const PooledAllocation&, NativeStream)>;

class AllocationModel {
 public:
  AllocationModel(Harness& harness, StreamEventModel& leases)
      : harness_(harness), leases_(leases) {}
  AllocationModel(const AllocationModel&) = delete;
  AllocationModel& operator=(const AllocationModel&) = delete;

  // Forgets released leases (before every step).
  void Compact() { fuzz::Compact(allocations_held_); }

  // The operations (pool_fuzzer.cc's Step names their codes).
  void Allocate(ClaimDeviceLease claim);
  void RecordUse();
  void ReleaseOne();
  void StableBuffer();

  // The model of the stable buffer `name` after StableBuffers::Acquire (or
  // StableBuffers::Export) returned `ptr` for `bytes`.
  void ModelStable(const std::string& name, int device, size_t bytes,
                   void* ptr);

  // Whether a live allocation was used on `stream`: the cache records its
  // ready events there at release, so the stream must stay leased.
  bool UsedOn(NativeStream stream) const;

  // `device` was reset: its leases are dead and its stable buffers gone.
  void MarkDeviceReset(int device);

  // Checks that no two live allocations (leases and stable buffers)
  // overlap; returns the allocation leases out.
  int64_t CheckNoOverlap();

  // Releases every allocation lease (the end of an input).
  void ReleaseAll();

 private:
  struct Stable {
    void* ptr = nullptr;
    size_t capacity = 0;
  };

  void ReleaseLease(PooledAllocation& lease);

  Harness& harness_;
  StreamEventModel& leases_;
  FuzzedDataProvider& input_ = harness_.input();
  // Released before the pools go (a late release would leak).
  std::vector<Held<PooledAllocation>> allocations_held_;
  std::map<uint64_t, std::vector<NativeStream>> allocation_streams_;
  std::map<std::pair<std::string, int>, Stable> stable_;
  // A member, so that a check allocates nothing once warm.
  std::vector<std::pair<uintptr_t, uintptr_t>> scratch_ranges_;
};

}  // namespace gpupool::fuzz

#endif  // GPUPOOL_TESTS_FUZZ_ALLOCATION_MODEL_H_
