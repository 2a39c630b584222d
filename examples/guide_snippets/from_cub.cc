// docs/allocation_cache.md ("Coming from CUB"): code written against
// cub::CachingDeviceAllocator moved to an AllocationCache — CUB's default
// limits as options, and the leases kept by pointer for code that frees a
// raw pointer somewhere else, as DeviceFree(ptr) does. Runs on SimBackend and
// checks it: 100 steps allocate once, a block above the largest cached size
// is allocated and freed each time, a pointer freed twice is refused.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/gpupool.h"
#include "gpupool/sim_backend.h"

// The limits of CachingDeviceAllocator(): blocks up to its largest bin
// (8^7 bytes, 2 MiB) cached, at most 6 MiB - 1 of them per device.
// gpupool's defaults cache blocks up to 1 GiB with no cap.
gpupool::AllocationCacheOptions CubDefaultLimits() {
  gpupool::AllocationCacheOptions options;
  options.max_cached_block_bytes = size_t{2} << 20;
  options.max_cached_bytes = (size_t{6} << 20) - 1;
  return options;
}

// DeviceAllocate(device, &ptr, bytes, stream) and DeviceFree(ptr) over an
// AllocationCache: each lease kept under its pointer until it is freed.
class PointerLeases {
 public:
  explicit PointerLeases(gpupool::AllocationCache& cache) : cache_(cache) {}

  absl::StatusOr<void*> Allocate(int device, size_t bytes,
                                 gpupool::NativeStream stream) {
    absl::StatusOr<gpupool::PooledAllocation> lease =
        cache_.Allocate(device, bytes, gpupool::MemoryKind::kDevice, stream);
    if (!lease.ok()) return lease.status();
    void* ptr = lease->data();
    absl::MutexLock lock(&mu_);
    leases_.emplace(ptr, *std::move(lease));
    return ptr;
  }

  // The block is fenced on the stream it was allocated on (and any stream
  // given to RecordUse), as every release is.
  absl::Status Free(void* ptr) {
    gpupool::PooledAllocation lease;
    {
      absl::MutexLock lock(&mu_);
      auto it = leases_.find(ptr);
      if (it == leases_.end()) {
        return absl::NotFoundError("not a live allocation of this cache");
      }
      lease = std::move(it->second);
      leases_.erase(it);
    }
    lease.Release();  // outside our lock: it may call the runtime
    return absl::OkStatus();
  }

 private:
  gpupool::AllocationCache& cache_;
  absl::Mutex mu_;
  absl::flat_hash_map<void*, gpupool::PooledAllocation> leases_
      ABSL_GUARDED_BY(mu_);
};

int main() {
  gpupool::SimBackend backend;
  gpupool::EventPool events(backend);
  absl::StatusOr<gpupool::NativeStream> stream = backend.CreateStream(0, {});
  if (!stream.ok()) return 1;
  int64_t refused = 0;
  {
    gpupool::AllocationCache cache(backend, events, CubDefaultLimits());
    PointerLeases leases(cache);
    for (int step = 0; step < 100; ++step) {
      absl::StatusOr<void*> scratch = leases.Allocate(0, 300 << 10, *stream);
      absl::StatusOr<void*> large = leases.Allocate(0, 4 << 20, *stream);
      if (!scratch.ok() || !large.ok()) return 1;
      // ... launch work on `stream` that uses *scratch and *large ...
      if (!leases.Free(*large).ok() || !leases.Free(*scratch).ok()) return 1;
      refused += leases.Free(*scratch).code() == absl::StatusCode::kNotFound;
    }
    const gpupool::AllocationCacheStats stats = cache.GetStats();
    std::printf(
        "from_cub: 100 steps, %lld runtime allocations (%lld above the largest "
        "cached size), %lld second frees refused\n",
        static_cast<long long>(stats.runtime_allocations),
        static_cast<long long>(stats.uncached_allocations),
        static_cast<long long>(refused));
    if (stats.runtime_allocations != 101 || stats.uncached_allocations != 100 ||
        refused != 100) {
      return 2;
    }
  }
  backend.CompleteAllWork();
  return backend.DestroyStream(0, *stream).ok() ? 0 : 1;
}
