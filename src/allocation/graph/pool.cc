// Capture-private pools of the allocation cache: the registry of pools and
// capture routes, and the AllocationCacheCore policy around them (routing an
// allocation by its stream's capture id, returns into a pool, release back
// to the general cache, blocks held for captures nobody registered). See
// graph/pool.h and gpupool/graph_pool.h.

#include "src/allocation/graph/pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/size_classes.h"
#include "src/kernel/process_state.h"

namespace gpupool::internal {
namespace {

std::atomic<uint64_t> next_pool_id{1};

// Distinct, non-null streams.
std::vector<NativeStream> Distinct(const std::vector<NativeStream>& streams) {
  std::vector<NativeStream> out;
  for (NativeStream stream : streams) {
    if (stream != nullptr &&
        std::find(out.begin(), out.end(), stream) == out.end()) {
      out.push_back(stream);
    }
  }
  return out;
}

// The stream a pool block may be reused on: its single use, else none.
NativeStream ReuseStream(const AllocationBlock& block) {
  return block.uses.size() == 1 ? block.uses[0] : nullptr;
}

}  // namespace

// --- Registry
// -------------------------------------------------------------------

std::shared_ptr<GraphPoolState> GraphPoolRegistry::NewPool(int device) {
  auto pool = std::make_shared<GraphPoolState>(
      next_pool_id.fetch_add(1, std::memory_order_relaxed), device);
  MutexLock lock(&mu_);
  pools_.erase(std::remove_if(pools_.begin(), pools_.end(),
                              [](const std::weak_ptr<GraphPoolState>& weak) {
                                return weak.expired();
                              }),
               pools_.end());
  pools_.push_back(pool);
  return pool;
}

absl::StatusOr<uint64_t> GraphPoolRegistry::OpenRoute(
    std::shared_ptr<GraphPoolState> pool, NativeStream origin,
    uint64_t capture_id) {
  {
    MutexLock pool_lock(&pool->mu);
    if (pool->released) {
      return absl::FailedPreconditionError(
          absl::StrCat("AllocationCache::BeginCaptureScope: graph pool ",
                       pool->id, " was released"));
    }
    if (pool->scope_open) {
      return absl::FailedPreconditionError(absl::StrCat(
          "AllocationCache::BeginCaptureScope: graph pool ", pool->id,
          " already has a capture scope open (one capture at a time)"));
    }
    pool->scope_open = true;
    if (capture_id != 0) ++pool->captures;
  }
  MutexLock lock(&mu_);
  CaptureRoute route;
  route.route_id = next_route_++;
  route.device = pool->device;
  route.origin = origin;
  route.capture_id = capture_id;
  route.pool = std::move(pool);
  routes_.push_back(std::move(route));
  open_routes_.fetch_add(1, std::memory_order_release);
  return routes_.back().route_id;
}

void GraphPoolRegistry::CloseRoute(uint64_t route_id) {
  std::shared_ptr<GraphPoolState> pool;
  {
    MutexLock lock(&mu_);
    auto it = std::find_if(
        routes_.begin(), routes_.end(),
        [&](const CaptureRoute& route) { return route.route_id == route_id; });
    if (it == routes_.end()) return;
    pool = std::move(it->pool);
    routes_.erase(it);
    open_routes_.fetch_sub(1, std::memory_order_release);
  }
  MutexLock pool_lock(&pool->mu);
  pool->scope_open = false;
}

std::vector<CaptureRoute> GraphPoolRegistry::Routes(int device) const {
  std::vector<CaptureRoute> out;
  MutexLock lock(&mu_);
  for (const CaptureRoute& route : routes_) {
    if (route.device == device) out.push_back(route);
  }
  return out;
}

void GraphPoolRegistry::LearnCaptureId(uint64_t route_id, uint64_t capture_id) {
  std::shared_ptr<GraphPoolState> pool;
  {
    MutexLock lock(&mu_);
    for (CaptureRoute& route : routes_) {
      if (route.route_id == route_id && route.capture_id == 0) {
        route.capture_id = capture_id;
        pool = route.pool;
      }
    }
  }
  if (pool == nullptr) return;
  MutexLock pool_lock(&pool->mu);
  ++pool->captures;
}

std::vector<std::shared_ptr<GraphPoolState>> GraphPoolRegistry::Pools() const {
  std::vector<std::shared_ptr<GraphPoolState>> out;
  MutexLock lock(&mu_);
  for (const std::weak_ptr<GraphPoolState>& weak : pools_) {
    if (std::shared_ptr<GraphPoolState> pool = weak.lock()) {
      out.push_back(std::move(pool));
    }
  }
  return out;
}

void GraphPoolRegistry::Hold(AllocationBlock* block) {
  MutexLock lock(&mu_);
  held_.push_back(block);
}

std::vector<AllocationBlock*> GraphPoolRegistry::TakeHeld() {
  MutexLock lock(&mu_);
  return std::exchange(held_, {});
}

void GraphPoolRegistry::HeldStats(int device, int64_t* blocks,
                                  int64_t* bytes) const {
  MutexLock lock(&mu_);
  for (const AllocationBlock* block : held_) {
    if (device >= 0 && block->device != device) continue;
    ++*blocks;
    *bytes += static_cast<int64_t>(block->size);
  }
}

// --- Policy
// ---------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<GraphPoolState>>
AllocationCacheCore::NewGraphPool(int device) {
  if (absl::Status usable = CheckUsable(device, "NewGraphPool"); !usable.ok()) {
    return usable;
  }
  return graph_pools_.NewPool(device);
}

absl::StatusOr<uint64_t> AllocationCacheCore::OpenCaptureRoute(
    std::shared_ptr<GraphPoolState> pool, NativeStream origin) {
  if (absl::Status usable = CheckUsable(pool->device, "BeginCaptureScope");
      !usable.ok()) {
    return usable;
  }
  // Registered before the capture begins, the route learns the capture's id
  // at the first allocation; a capture already under way is known now.
  absl::StatusOr<CaptureInfo> info =
      backend_.GetCaptureInfo(pool->device, origin);
  if (!info.ok()) {
    if (PoisonIfSticky(pool->device, info.status())) {
      return lifetime_.PoisonedError(pool->device);
    }
    return info.status();
  }
  const uint64_t id = info->status == CaptureStatus::kActive ? info->id : 0;
  return graph_pools_.OpenRoute(std::move(pool), origin, id);
}

void AllocationCacheCore::CloseCaptureRoute(uint64_t route_id) {
  graph_pools_.CloseRoute(route_id);
}

std::shared_ptr<GraphPoolState> AllocationCacheCore::MatchRoute(
    int device, NativeStream stream, const CaptureInfo& info) {
  if (info.status == CaptureStatus::kNone) return nullptr;
  if (info.status == CaptureStatus::kInvalidated) {
    // No id any more: the capture begun on a route's origin is recognised by
    // its stream (its blocks stay the pool's until the pool is released).
    for (const CaptureRoute& route : graph_pools_.Routes(device)) {
      if (route.origin == stream) return route.pool;
    }
    return nullptr;
  }
  for (const CaptureRoute& route : graph_pools_.Routes(device)) {
    uint64_t id = route.capture_id;
    if (id == 0) {
      if (route.origin == stream) {
        id = info.id;
      } else {
        absl::StatusOr<CaptureInfo> origin =
            backend_.GetCaptureInfo(device, route.origin);
        if (origin.ok() && origin->status == CaptureStatus::kActive) {
          id = origin->id;
        } else if (!origin.ok() && PoisonIfSticky(device, origin.status())) {
          return nullptr;  // no further runtime call on a dead device
        }
      }
      if (id != 0) graph_pools_.LearnCaptureId(route.route_id, id);
    }
    if (id == info.id) return route.pool;
  }
  return nullptr;
}

absl::StatusOr<PooledAllocation> AllocationCacheCore::AllocateInGraphPool(
    std::shared_ptr<GraphPoolState> pool, AllocationShard& shard,
    const LeaseRequest& request) {
  const bool cacheable = request.bytes <= options_.max_cached_block_bytes;
  const int size_class = cacheable ? SizeClassIndex(request.bytes) : -1;
  const uint64_t current = generation(shard.device());
  AllocationBlock* reused = nullptr;
  std::vector<AllocationBlock*> stale;
  {
    MutexLock lock(&pool->mu);
    std::vector<AllocationBlock*>& free = pool->free;
    for (auto it = free.begin(); it != free.end();) {
      AllocationBlock* block = *it;
      if (block->generation != current) {
        stale.push_back(block);
        pool->bytes -= static_cast<int64_t>(block->size);
        --pool->blocks;
        it = free.erase(it);
        continue;
      }
      // Newest first would be nicer for caches; any match is equally safe.
      if (reused == nullptr && size_class >= 0 &&
          block->size_class == size_class &&
          block->release_stream == request.stream) {
        reused = block;
        it = free.erase(it);
        continue;
      }
      ++it;
    }
  }
  for (AllocationBlock* block : stale) {
    shard.Retire(Departure::kDropped);
    delete block;
  }
  if (reused != nullptr) {
    shard.LeaseFromGraphPool(reused, request, /*hit=*/true);
    return MakeLease(reused);
  }
  const size_t rounded = cacheable ? SizeClassBytes(size_class) : request.bytes;
  absl::StatusOr<void*> ptr = RuntimeAllocate(shard, request.bytes, rounded);
  if (!ptr.ok()) return ptr.status();
  AllocationBlock* block = NewBlock(shard, *ptr, rounded, size_class, current);
  {
    MutexLock lock(&pool->mu);
    ++pool->blocks;
    pool->bytes += static_cast<int64_t>(rounded);
  }
  block->graph_pool = std::move(pool);
  shard.LeaseNew(block, request, cacheable ? Tally::kMiss : Tally::kUncached);
  return MakeLease(block);
}

void AllocationCacheCore::ReturnToGraphPool(AllocationShard& shard,
                                            AllocationBlock* block) {
  shard.TakeBackToGraphPool(block);
  GraphPoolState& pool = *block->graph_pool;
  const bool leak =
      closed_.load(std::memory_order_acquire) || ProcessIsExiting();
  std::vector<NativeStream> fence;
  {
    MutexLock lock(&pool.mu);
    if (!leak && !pool.released) {
      block->release_stream = ReuseStream(*block);
      pool.free.push_back(block);
      return;
    }
    pool.bytes -= static_cast<int64_t>(block->size);
    --pool.blocks;
    fence = pool.replay_streams;
  }
  if (leak) {
    shard.Retire(Departure::kLeaked);
    delete block;
    return;
  }
  GiveBackToCache(shard, block, fence);
}

void AllocationCacheCore::GiveBackToCache(
    AllocationShard& shard, AllocationBlock* block,
    const std::vector<NativeStream>& streams) {
  // The replays may still write the block: its release is fenced by ready
  // events on the replay streams, exactly as a lease used on them would be.
  // Only on those: the streams the block was used on while the pool had it
  // are capture streams (their work was captured, never run there, and the
  // user may have destroyed them since), or streams the caller names in
  // Release (graph_pool.h).
  const std::vector<NativeStream> uses = Distinct(streams);
  block->graph_pool.reset();
  shard.LeaseFromGraphPool(block, LeaseRequest{block->size, nullptr, {}},
                           /*hit=*/false);
  block->uses.assign(uses.begin(), uses.end());
  Return(block);
}

absl::Status AllocationCacheCore::ReleaseGraphPool(
    GraphPoolState& pool, const std::vector<NativeStream>& streams) {
  std::vector<AllocationBlock*> blocks;
  {
    MutexLock lock(&pool.mu);
    if (pool.scope_open) {
      return absl::FailedPreconditionError(
          absl::StrCat("GraphPool::Release: pool ", pool.id,
                       " has a capture scope open; end it first"));
    }
    if (pool.released) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GraphPool::Release: pool ", pool.id, " was already released"));
    }
    pool.released = true;
    pool.replay_streams = Distinct(streams);
    blocks = std::exchange(pool.free, {});
    for (const AllocationBlock* block : blocks) {
      pool.bytes -= static_cast<int64_t>(block->size);
      --pool.blocks;
    }
  }
  if (Forked()) return absl::OkStatus();  // leaked with the parent's memory
  for (AllocationBlock* block : blocks) {
    // Through the ordinary return path, which also handles poisoned devices
    // and a closed cache.
    GiveBackToCache(Shard(block->device, block->kind), block, streams);
  }
  return absl::OkStatus();
}

bool AllocationCacheCore::HoldIfCapturing(AllocationShard& shard,
                                          AllocationBlock* block) {
  for (NativeStream stream : block->uses) {
    absl::StatusOr<CaptureInfo> info =
        backend_.GetCaptureInfo(block->device, stream);
    if (!info.ok() &&
        info.status().code() == absl::StatusCode::kUnimplemented) {
      // A backend without capture ids (one written before GetCaptureInfo):
      // its capture status still tells whether the stream captures; a
      // backend with neither cannot capture at all.
      absl::StatusOr<CaptureStatus> status =
          backend_.GetCaptureStatus(block->device, stream);
      if (status.ok()) {
        info = CaptureInfo{*status, 0};
      } else if (status.status().code() == absl::StatusCode::kUnimplemented) {
        continue;
      } else {
        info = status.status();
      }
    }
    if (!info.ok()) {
      // A sticky error: the caller drops the block. Any other failure leaves
      // the stream's capture unknown: a ready event recorded there could be
      // captured (and its query would invalidate the capture), so the block
      // is held as for an unregistered capture, until the cache frees
      // everything.
      if (PoisonIfSticky(block->device, info.status())) return false;
      shard.TakeBackToGraphPool(block);
      graph_pools_.Hold(block);
      return true;
    }
    if (info->status == CaptureStatus::kNone) continue;
    shard.TakeBackToGraphPool(block);
    // Used inside a registered capture, and there only: the graph owns it
    // like its own. A block also used on another stream (eager work that
    // may still be pending there) is held until the cache frees everything.
    std::shared_ptr<GraphPoolState> pool =
        block->uses.size() == 1 ? MatchRoute(block->device, stream, *info)
                                : nullptr;
    // A pool keeps device memory of its own device only (its blocks are
    // reused for its device allocations): pinned host memory, or memory of
    // another device joined into the capture, is held instead.
    if (pool != nullptr &&
        (block->kind != MemoryKind::kDevice || block->device != pool->device)) {
      pool = nullptr;
    }
    if (pool != nullptr) {
      MutexLock lock(&pool->mu);
      ++pool->blocks;
      pool->bytes += static_cast<int64_t>(block->size);
      block->release_stream = ReuseStream(*block);
      pool->free.push_back(block);
      block->graph_pool = std::move(pool);
      return true;
    }
    graph_pools_.Hold(block);
    return true;
  }
  return false;
}

void AllocationCacheCore::FreeGraphPoolBlocks(bool call_runtime) {
  std::vector<AllocationBlock*> blocks = graph_pools_.TakeHeld();
  for (const std::shared_ptr<GraphPoolState>& pool : graph_pools_.Pools()) {
    MutexLock lock(&pool->mu);
    for (AllocationBlock* block : pool->free) {
      pool->bytes -= static_cast<int64_t>(block->size);
      --pool->blocks;
      blocks.push_back(block);
    }
    pool->free.clear();
  }
  for (AllocationBlock* block : blocks) {
    block->graph_pool.reset();
    AllocationShard& shard = Shard(block->device, block->kind);
    if (call_runtime) {
      FreeBlock(shard, block).IgnoreError();
    } else {
      shard.Retire(Departure::kLeaked);
      delete block;
    }
  }
}

void AllocationCacheCore::AddGraphStats(int device,
                                        AllocationCacheStats* stats) const {
  for (const std::shared_ptr<GraphPoolState>& pool : graph_pools_.Pools()) {
    if (device >= 0 && pool->device != device) continue;
    MutexLock lock(&pool->mu);
    if (!pool->released) ++stats->graph_pools;
    stats->blocks_in_graph_pools += static_cast<int64_t>(pool->free.size());
    for (const AllocationBlock* block : pool->free) {
      stats->bytes_in_graph_pools += static_cast<int64_t>(block->size);
    }
  }
  graph_pools_.HeldStats(device, &stats->blocks_held_for_captures,
                         &stats->bytes_held_for_captures);
}

std::string AllocationCacheCore::GraphPoolsDebugString() const {
  std::string out;
  for (const std::shared_ptr<GraphPoolState>& pool : graph_pools_.Pools()) {
    MutexLock lock(&pool->mu);
    int64_t free_bytes = 0;
    for (const AllocationBlock* block : pool->free) {
      free_bytes += static_cast<int64_t>(block->size);
    }
    absl::StrAppend(&out, "\n  graph pool ", pool->id, " dev", pool->device,
                    ": ", pool->blocks, " blocks (", pool->bytes, " bytes), ",
                    pool->free.size(), " free (", free_bytes, " bytes), ",
                    pool->captures, " captures",
                    pool->scope_open ? ", capturing" : "",
                    pool->released ? ", released" : "");
  }
  return out;
}

}  // namespace gpupool::internal
