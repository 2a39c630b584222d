// AllocationCache, PooledAllocation and AllocationCacheStats: the public face
// of the cache (gpupool/allocation_cache.h). The cache itself is
// AllocationCacheCore (src/allocation/cache_core.h).

#include "gpupool/allocation_cache.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "src/allocation/block.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/cache_report.h"
#include "src/allocation/size_classes.h"
#include "src/base/readable_bytes.h"
#include "src/lifetime/process_state.h"

namespace gpupool {

// ---------------------------------------------------------------------------
// PooledAllocation
// ---------------------------------------------------------------------------

PooledAllocation::PooledAllocation(internal::Lease&& lease,
                                   const internal::AllocationBlock& block)
    : lease_(std::move(lease)),
      data_(block.ptr),
      size_(block.requested),
      capacity_(block.size),
      device_(block.device),
      kind_(block.kind),
      stream_(block.stream) {}

// Member by member: nothing to release first (a lease changes hands twice
// per allocation, through the StatusOr).
PooledAllocation::PooledAllocation(PooledAllocation&& other) noexcept
    : lease_(std::move(other.lease_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)),
      device_(std::exchange(other.device_, -1)),
      kind_(std::exchange(other.kind_, MemoryKind::kDevice)),
      stream_(std::exchange(other.stream_, nullptr)) {}

PooledAllocation& PooledAllocation::operator=(
    PooledAllocation&& other) noexcept {
  if (this != &other) {
    Release();
    lease_ = std::move(other.lease_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    device_ = std::exchange(other.device_, -1);
    kind_ = std::exchange(other.kind_, MemoryKind::kDevice);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void PooledAllocation::RecordUse(NativeStream stream) {
  if (!lease_ || stream == nullptr) return;
  auto& uses = static_cast<internal::AllocationBlock*>(lease_.handle())->uses;
  if (std::find(uses.begin(), uses.end(), stream) == uses.end()) {
    uses.push_back(stream);
  }
}

void PooledAllocation::Release() {
  if (!lease_) return;
  internal::Lease lease = std::move(lease_);
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
  device_ = -1;
  kind_ = MemoryKind::kDevice;
  stream_ = nullptr;
  lease.Release();
}

// ---------------------------------------------------------------------------
// AllocationCache
// ---------------------------------------------------------------------------

AllocationCache::AllocationCache(Backend& backend, EventPool& events,
                                 AllocationCacheOptions options)
    : AllocationCache(backend, events, nullptr, options) {}

AllocationCache::AllocationCache(Backend& backend, EventPool& events,
                                 std::shared_ptr<DeviceHealth> health,
                                 AllocationCacheOptions options)
    : core_(std::make_shared<internal::AllocationCacheCore>(
          backend, events, std::move(health), options)) {
  core_->MakeLeaseAnchors();
  // After DeviceCount() initialised the runtime (in the core), so that our
  // exit drain runs before the runtime's own atexit teardown.
  internal::InstallProcessHooks();
  internal::AllocationCacheCore* core = core_.get();
  exit_registration_ =
      internal::RegisterExitDrain([core] { core->DrainForExit(); });
}

AllocationCache::~AllocationCache() {
  internal::UnregisterExitDrain(exit_registration_);
  if (core_->Forked()) {
    // Leases may still hold the core; a child must neither free nor lock.
    new std::shared_ptr<internal::AllocationCacheCore>(  // NOLINT: leak
        std::move(core_));
    return;
  }
  core_->FreeEverything(/*close=*/true,
                        /*call_runtime=*/!internal::ProcessIsExiting());
  core_->DropLeaseAnchors();
}

absl::StatusOr<PooledAllocation> AllocationCache::Allocate(
    int device, size_t bytes, MemoryKind kind, NativeStream stream,
    SourceLocation where) {
  absl::StatusOr<PooledAllocation> allocation =
      core_->Allocate(device, bytes, kind, stream, where);
  if (ABSL_PREDICT_FALSE(!allocation.ok()) &&
      allocation.status().code() == absl::StatusCode::kResourceExhausted &&
      core_->options().on_out_of_memory) {
    core_->options().on_out_of_memory(allocation.status());
  }
  return allocation;
}

absl::Status AllocationCache::Trim(int device, size_t keep_bytes) {
  return core_->Trim(device, keep_bytes);
}

absl::Status AllocationCache::Trim() { return core_->TrimAll(); }

absl::Status AllocationCache::FenceStream(int device, NativeStream stream) {
  return core_->FenceStream(device, stream);
}

AllocationCacheStats AllocationCache::GetStats() const {
  return CacheStats(*core_);
}

AllocationCacheStats AllocationCache::GetStats(int device) const {
  return CacheStats(*core_, device);
}

AllocationCacheStats AllocationCache::GetStats(int device,
                                               MemoryKind kind) const {
  return CacheStats(*core_, device, kind);
}

std::vector<OutstandingLease> AllocationCache::GetOutstandingLeases() const {
  return CacheOutstandingLeases(*core_);
}

std::string AllocationCache::DebugString() const {
  return CacheDebugString(*core_);
}

Backend& AllocationCache::backend() const { return core_->backend(); }

const std::shared_ptr<DeviceHealth>& AllocationCache::health() const {
  return core_->health();
}

const AllocationCacheOptions& AllocationCache::options() const {
  return core_->options();
}

size_t RoundedAllocationSize(size_t bytes) {
  if (bytes > internal::kMaxSizeClassBytes) return bytes;
  return internal::RoundUpToSizeClass(bytes == 0 ? 1 : bytes);
}

// ---------------------------------------------------------------------------
// AllocationCacheStats
// ---------------------------------------------------------------------------
namespace {

using internal::ReadableBytes;

}  // namespace

AllocationCacheStats& AllocationCacheStats::operator+=(
    const AllocationCacheStats& other) {
  allocations_in_use += other.allocations_in_use;
  bytes_in_use += other.bytes_in_use;
  bytes_requested += other.bytes_requested;
  bytes_rounded += other.bytes_rounded;
  peak_bytes_in_use += other.peak_bytes_in_use;
  blocks_cached += other.blocks_cached;
  bytes_cached += other.bytes_cached;
  blocks_retiring += other.blocks_retiring;
  bytes_retiring += other.bytes_retiring;
  stable_allocations += other.stable_allocations;
  bytes_stable += other.bytes_stable;
  hits += other.hits;
  misses += other.misses;
  uncached_allocations += other.uncached_allocations;
  cross_stream_waits += other.cross_stream_waits;
  oom_retries += other.oom_retries;
  failed_allocations += other.failed_allocations;
  runtime_allocations += other.runtime_allocations;
  runtime_frees += other.runtime_frees;
  stable_reallocations += other.stable_reallocations;
  blocks_dropped += other.blocks_dropped;
  blocks_leaked += other.blocks_leaked;
  graph_pools += other.graph_pools;
  graph_pools_held += other.graph_pools_held;
  graph_pools_awaiting_graphs += other.graph_pools_awaiting_graphs;
  blocks_in_graph_pools += other.blocks_in_graph_pools;
  bytes_in_graph_pools += other.bytes_in_graph_pools;
  blocks_held_for_captures += other.blocks_held_for_captures;
  bytes_held_for_captures += other.bytes_held_for_captures;
  return *this;
}

double AllocationCacheStats::hit_rate() const {
  const int64_t cacheable = hits + misses;
  return cacheable == 0
             ? 0.0
             : static_cast<double>(hits) / static_cast<double>(cacheable);
}

int64_t AllocationCacheStats::bytes_reserved() const {
  return bytes_in_use + bytes_cached + bytes_retiring + bytes_stable +
         bytes_in_graph_pools + bytes_held_for_captures;
}

std::string AllocationCacheStats::ToString() const {
  std::string out = absl::StrFormat(
      "in_use=%d (%s, requested %s) peak=%s cached=%d (%s) hits=%d "
      "misses=%d hit_rate=%.1f%% uncached=%d runtime_alloc=%d "
      "runtime_free=%d",
      allocations_in_use, ReadableBytes(bytes_in_use),
      ReadableBytes(bytes_requested), ReadableBytes(peak_bytes_in_use),
      blocks_cached, ReadableBytes(bytes_cached), hits, misses,
      100.0 * hit_rate(), uncached_allocations, runtime_allocations,
      runtime_frees);
  // Rare events only when they happened, to keep the common line short.
  if (blocks_retiring != 0) {
    absl::StrAppend(&out, " retiring=", blocks_retiring, " (",
                    ReadableBytes(bytes_retiring), ")");
  }
  if (stable_allocations != 0 || stable_reallocations != 0) {
    absl::StrAppend(&out, " stable=", stable_allocations, " (",
                    ReadableBytes(bytes_stable),
                    ", reallocations=", stable_reallocations, ")");
  }
  if (cross_stream_waits != 0) {
    absl::StrAppend(&out, " cross_stream_waits=", cross_stream_waits);
  }
  if (oom_retries != 0) absl::StrAppend(&out, " oom_retries=", oom_retries);
  if (failed_allocations != 0) {
    absl::StrAppend(&out, " failed=", failed_allocations);
  }
  if (blocks_dropped != 0) absl::StrAppend(&out, " dropped=", blocks_dropped);
  if (blocks_leaked != 0) absl::StrAppend(&out, " leaked=", blocks_leaked);
  if (graph_pools != 0 || blocks_in_graph_pools != 0) {
    absl::StrAppend(&out, " graph_pools=", graph_pools, " (",
                    blocks_in_graph_pools, " blocks, ",
                    ReadableBytes(bytes_in_graph_pools), ")");
    if (graph_pools_held != 0) {
      absl::StrAppend(&out, " graph_pools_held=", graph_pools_held);
    }
    if (graph_pools_awaiting_graphs != 0) {
      absl::StrAppend(
          &out, " graph_pools_awaiting_graphs=", graph_pools_awaiting_graphs);
    }
  }
  if (blocks_held_for_captures != 0) {
    absl::StrAppend(&out, " held_for_captures=", blocks_held_for_captures, " (",
                    ReadableBytes(bytes_held_for_captures), ")");
  }
  return out;
}

}  // namespace gpupool
