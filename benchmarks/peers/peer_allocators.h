// benchmarks/peers/peer_allocators.h — the allocators allocator_peers_bench
// compares, each behind the same three calls (Allocate on a stream, Data,
// Free), so that one timed loop drives them all without a virtual call:
// gpupool's AllocationCache, CUB's cub::CachingDeviceAllocator (its defaults,
// or matched to gpupool's limits) and raw cudaMalloc/cudaFree. CUB is
// header-only host code; this header compiles it as C++.
//
// Thread safety: each peer is as thread-safe as the allocator it wraps (all
// three are).

#ifndef GPUPOOL_BENCHMARKS_PEERS_PEER_ALLOCATORS_H_
#define GPUPOOL_BENCHMARKS_PEERS_PEER_ALLOCATORS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cub/util_allocator.cuh>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"

namespace gpupool::bench {

inline absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " failed: ", cudaGetErrorName(error)));
}

class GpupoolPeer {
 public:
  using Lease = PooledAllocation;
  explicit GpupoolPeer(Backend& backend, AllocationCacheOptions options = {})
      : events_(backend), cache_(backend, events_, options) {}
  absl::StatusOr<Lease> Allocate(size_t bytes, cudaStream_t stream) {
    return cache_.Allocate(0, bytes, MemoryKind::kDevice, stream);
  }
  static void* Data(const Lease& lease) { return lease.data(); }
  absl::Status Free(Lease& lease) {
    lease.Release();
    return absl::OkStatus();
  }
  AllocationCache& cache() { return cache_; }

 private:
  EventPool events_;
  AllocationCache cache_;
};

class CubPeer {
 public:
  using Lease = void*;
  // The defaults, or the configuration matched to gpupool's limits.
  explicit CubPeer(bool fair)
      : allocator_(
            fair ? std::make_unique<cub::CachingDeviceAllocator>(
                       2u, 9u, 30u, cub::CachingDeviceAllocator::INVALID_SIZE)
                 : std::make_unique<cub::CachingDeviceAllocator>()) {}
  absl::StatusOr<Lease> Allocate(size_t bytes, cudaStream_t stream) {
    void* ptr = nullptr;
    cudaError_t error = allocator_->DeviceAllocate(&ptr, bytes, stream);
    if (error != cudaSuccess) return CudaStatus(error, "DeviceAllocate");
    return ptr;
  }
  static void* Data(const Lease& lease) { return lease; }
  absl::Status Free(Lease& lease) {
    return CudaStatus(allocator_->DeviceFree(lease), "DeviceFree");
  }

 private:
  std::unique_ptr<cub::CachingDeviceAllocator> allocator_;
};

class RawPeer {
 public:
  using Lease = void*;
  absl::StatusOr<Lease> Allocate(size_t bytes, cudaStream_t) {
    void* ptr = nullptr;
    cudaError_t error = cudaMalloc(&ptr, bytes);
    if (error != cudaSuccess) return CudaStatus(error, "cudaMalloc");
    return ptr;
  }
  static void* Data(const Lease& lease) { return lease; }
  absl::Status Free(Lease& lease) {
    return CudaStatus(cudaFree(lease), "cudaFree");
  }
};

// kGpupoolDeferred: gpupool with defer_same_stream_fences (no runtime call
// per same-stream cycle). kGpupoolWait: gpupool with
// CrossStreamPolicy::kWaitOnStream (another stream's request waits on the
// block's events on the GPU instead of querying them).
enum class PeerKind {
  kGpupool,
  kGpupoolDeferred,
  kGpupoolWait,
  kCubDefault,
  kCubFair,
  kRaw,
};

inline AllocationCacheOptions DeferredFences() {
  AllocationCacheOptions options;
  options.defer_same_stream_fences = true;
  return options;
}

inline AllocationCacheOptions WaitOnStream() {
  AllocationCacheOptions options;
  options.cross_stream = CrossStreamPolicy::kWaitOnStream;
  return options;
}

inline const char* PeerName(PeerKind kind) {
  switch (kind) {
    case PeerKind::kGpupool:
      return "gpupool";
    case PeerKind::kGpupoolDeferred:
      return "gpupool_deferred";
    case PeerKind::kGpupoolWait:
      return "gpupool_wait";
    case PeerKind::kCubDefault:
      return "cub_default";
    case PeerKind::kCubFair:
      return "cub_fair";
    case PeerKind::kRaw:
      return "raw";
  }
  return "?";
}

// Calls `body(peer)` with a fresh peer of `kind`.
template <typename Body>
void WithPeer(PeerKind kind, Backend& backend, Body body) {
  switch (kind) {
    case PeerKind::kGpupool: {
      GpupoolPeer peer(backend);
      body(peer);
      return;
    }
    case PeerKind::kGpupoolDeferred: {
      GpupoolPeer peer(backend, DeferredFences());
      body(peer);
      return;
    }
    case PeerKind::kGpupoolWait: {
      GpupoolPeer peer(backend, WaitOnStream());
      body(peer);
      return;
    }
    case PeerKind::kCubDefault:
    case PeerKind::kCubFair: {
      CubPeer peer(kind == PeerKind::kCubFair);
      body(peer);
      return;
    }
    case PeerKind::kRaw: {
      RawPeer peer;
      body(peer);
      return;
    }
  }
}

}  // namespace gpupool::bench

#endif  // GPUPOOL_BENCHMARKS_PEERS_PEER_ALLOCATORS_H_
