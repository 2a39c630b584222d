// The policy of capture-private pools (graph/graph_pools.h): the cache's
// capture router.

#include "src/allocation/graph/graph_pools.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/graph/graph_retain.h"
#include "src/allocation/oom_chain.h"
#include "src/allocation/size_classes.h"

namespace gpupool::internal {
namespace {

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

// Forgets a block the pool no longer counts.
void ForgetBlock(AllocationShard& shard, AllocationBlock* block,
                 RetireReason how) {
  block->events.clear();
  block->owner.reset();
  shard.Forget(block, how);
  delete block;
}

// Gives a block that left its released pool back behind its share of the
// release's fence (and ready events on `streams`), or forgets it when that
// share cannot prove it idle.
void GiveBackBehind(AllocationCacheCore& core, AllocationBlock* block,
                    const std::vector<NativeStream>& streams,
                    ReleaseFence::Share share) {
  if (share.kind == ReleaseFence::Share::Kind::kLeak) {
    ForgetBlock(core.Shard(block->device, block->kind), block,
                RetireReason::kLeaked);
    return;
  }
  core.GiveBack(block, streams, std::move(share.events),
                share.kind == ReleaseFence::Share::Kind::kHold);
}

std::shared_ptr<GraphPoolState> PoolOf(const AllocationBlock& block) {
  return std::static_pointer_cast<GraphPoolState>(block.owner);
}

}  // namespace

GraphPools& GraphPools::Of(AllocationCacheCore& core) {
  // Only GraphPools is ever installed as a cache's capture router.
  return static_cast<GraphPools&>(core.InstallCaptureRouter(
      [&core] { return std::make_unique<GraphPools>(core); }));
}

absl::StatusOr<std::shared_ptr<GraphPoolState>> GraphPools::NewPool(
    int device) {
  if (absl::Status usable = core_.CheckUsable(device, "GraphPool::Create");
      !usable.ok()) {
    return usable;
  }
  std::shared_ptr<GraphPoolState> pool = routes_.NewPool(device);
  pool->retain->collect = collect_;  // before any thread can see the pool
  return pool;
}

absl::StatusOr<uint64_t> GraphPools::OpenRoute(
    std::shared_ptr<GraphPoolState> pool, NativeStream origin) {
  if (absl::Status usable =
          core_.CheckUsable(pool->device, "GraphPool::BeginCapture");
      !usable.ok()) {
    return usable;
  }
  // Registered before the capture begins, the route learns the capture's id
  // at the first allocation; a capture already under way is known now.
  absl::StatusOr<CaptureInfo> info =
      core_.backend().GetCaptureInfo(pool->device, origin);
  if (!info.ok()) {
    if (core_.PoisonIfSticky(pool->device, info.status())) {
      return core_.PoisonedError(pool->device);
    }
    return info.status();
  }
  const uint64_t id = info->status == CaptureStatus::kActive ? info->id : 0;
  return routes_.OpenRoute(std::move(pool), origin, id);
}

std::optional<absl::StatusOr<PooledAllocation>> GraphPools::Allocate(
    AllocationShard& shard, const LeaseRequest& request,
    const CaptureInfo& info) {
  std::shared_ptr<GraphPoolState> pool =
      routes_.Match(core_, shard.device(), request.stream, info);
  if (pool == nullptr) return std::nullopt;
  // The match may have begun a recording and set apart one whose graphs
  // are already gone: its blocks serve this capture at once.
  if (HasCollectable()) Collect();
  return AllocateInPool(std::move(pool), shard, request);
}

absl::StatusOr<PooledAllocation> GraphPools::AllocateInPool(
    std::shared_ptr<GraphPoolState> pool, AllocationShard& shard,
    const LeaseRequest& request) {
  const bool cacheable =
      request.bytes <= core_.options().max_cached_block_bytes;
  const int size_class = cacheable ? SizeClassIndex(request.bytes) : -1;
  const uint64_t current = core_.generation(shard.device());
  AllocationBlock* reused = nullptr;
  std::vector<AllocationBlock*> stale;
  uint64_t recording = 0;
  {
    MutexLock lock(&pool->mu);
    recording = pool->recordings.current();
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
      // Reusable in stream order: released during a capture on this stream
      // (no events: never used outside the pool's captures), by this
      // recording or by one whose graphs are gone.
      const bool usable = block->kind == shard.kind() &&
                          block->release_stream == request.stream &&
                          block->events.empty() &&
                          (block->owner_tag == recording ||
                           block->owner_tag == PoolRecordings::kIdle);
      if (usable && size_class >= 0 && block->size_class == size_class) {
        if (reused == nullptr) {
          reused = block;
          it = free.erase(it);
          continue;
        }
      } else if (usable && size_class < 0 && block->size_class < 0 &&
                 block->size >= request.bytes &&
                 (reused == nullptr || block->size < reused->size)) {
        // An uncached block (above max_cached_block_bytes): the best fit,
        // as the capture cannot give memory back to the runtime meanwhile.
        reused = block;
      }
      ++it;
    }
    if (reused != nullptr && size_class < 0) {
      free.erase(std::find(free.begin(), free.end(), reused));
    }
  }
  for (AllocationBlock* block : stale) {
    shard.Forget(block, RetireReason::kDropped);
    delete block;
  }
  if (reused != nullptr) {
    reused->owner_tag = recording;
    shard.LeaseKept(reused, request, /*hit=*/true);
    return core_.MakeLease(reused);
  }
  const size_t rounded = cacheable ? SizeClassBytes(size_class) : request.bytes;
  absl::StatusOr<void*> ptr =
      RuntimeAllocate(core_, shard, request.bytes, rounded);
  if (!ptr.ok()) return ptr.status();
  AllocationBlock* block =
      core_.NewBlock(shard, *ptr, rounded, size_class, current);
  {
    MutexLock lock(&pool->mu);
    ++pool->blocks;
    pool->bytes += static_cast<int64_t>(rounded);
  }
  block->owner = std::move(pool);
  block->owner_tag = recording;
  shard.LeaseNew(block, request,
                 cacheable ? CacheCounter::kMiss : CacheCounter::kUncached);
  return core_.MakeLease(block);
}

void GraphPools::Return(AllocationShard& shard, AllocationBlock* block) {
  shard.TakeOutOfUse(block);
  // The block's owner keeps the pool alive until Forget or GiveBack.
  GraphPoolState& pool = *static_cast<GraphPoolState*>(block->owner.get());
  if (core_.Leaking()) {
    Forget(pool, shard, block, RetireReason::kLeaked);
    return;
  }
  bool released = false;
  {
    MutexLock lock(&pool.mu);
    released = pool.released;
    if (!released && pool.scope_open && block->uses.size() == 1) {
      // Released during a capture into the pool: the graph replays the
      // stream order, so a later allocation of a capture into the pool on
      // this stream may reuse it. Its recording keeps it while that
      // recording's graphs may run; one that is over passes it on.
      if (pool.recordings.Over(block->owner_tag)) {
        block->owner_tag = pool.recordings.current();
      }
      block->release_stream = block->uses[0];
      pool.free.push_back(block);
      return;
    }
  }
  if (!released) {
    // The lease outlived its capture: its streams may have used it eagerly
    // since. Fenced on them now, while they surely live (the lease was held
    // until now); held by the pool until its release, never reused inside.
    const std::shared_ptr<GraphPoolState> keep = PoolOf(*block);
    const std::optional<BlockState> state = core_.FenceKept(shard, block);
    if (!state.has_value()) {
      // Used on a stream that captures now: the core took it (held, or
      // adopted by that capture's pool, which counted it anew).
      MutexLock lock(&pool.mu);
      pool.bytes -= static_cast<int64_t>(block->size);
      --pool.blocks;
      return;
    }
    if (*state == BlockState::kDrop || *state == BlockState::kLeak) {
      Forget(pool, shard, block,
             *state == BlockState::kDrop ? RetireReason::kDropped
                                         : RetireReason::kLeaked);
      return;
    }
    bool over = false;
    {
      MutexLock lock(&pool.mu);
      if (!pool.released && !pool.recordings.Over(block->owner_tag)) {
        pool.free.push_back(block);
        return;
      }
      over = !pool.released;
      if (over) {
        // Its recording is over: no graph that used it is left, and its
        // events fence every stream it was used on since.
        pool.bytes -= static_cast<int64_t>(block->size);
        --pool.blocks;
      }
    }
    if (over) {
      core_.GiveBack(block, {});
      return;
    }
    // Released meanwhile (after Release took the free list): given back
    // below with the events it holds.
  }
  ReleaseFence::Share replays;
  ReleaseFence spent;  // the last block's leftovers, dropped with no lock
  {
    MutexLock lock(&pool.mu);
    replays = pool.release_fence.Take();
    pool.bytes -= static_cast<int64_t>(block->size);
    --pool.blocks;
    if (pool.blocks == 0) spent = std::move(pool.release_fence);
  }
  // The replays (the events the release recorded), and every stream the
  // lease was used on.
  GiveBackBehind(
      core_, block,
      std::vector<NativeStream>(block->uses.begin(), block->uses.end()),
      std::move(replays));
}

void GraphPools::Forget(GraphPoolState& pool, AllocationShard& shard,
                        AllocationBlock* block, RetireReason how) {
  {
    MutexLock lock(&pool.mu);
    pool.bytes -= static_cast<int64_t>(block->size);
    --pool.blocks;
  }
  ForgetBlock(shard, block, how);
}

std::vector<AllocationBlock*> GraphPools::TakeForRelease(GraphPoolState& pool) {
  pool.released = true;
  std::vector<AllocationBlock*> blocks = std::exchange(pool.free, {});
  for (const AllocationBlock* block : blocks) {
    pool.bytes -= static_cast<int64_t>(block->size);
    --pool.blocks;
  }
  return blocks;
}

namespace {

absl::Status CheckReleasable(const GraphPoolState& pool)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool.mu) {
  if (pool.scope_open) {
    return absl::FailedPreconditionError(
        absl::StrCat("GraphPool::Release: pool ", pool.id,
                     " has a capture scope open; end it first"));
  }
  if (pool.released || pool.handle_let_go) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GraphPool::Release: pool ", pool.id, " was already released"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GraphPools::Release(GraphPoolState& pool,
                                 const std::vector<NativeStream>& streams) {
  const std::vector<NativeStream> replays = Distinct(streams);
  // The blocks that cannot go back now get their fence now, while the
  // replay streams surely live: leases still out (every block of a pool
  // its graphs release later). No block joins the pool without a scope
  // open, which the release refuses.
  int64_t later = 0;
  {
    MutexLock lock(&pool.mu);
    if (absl::Status releasable = CheckReleasable(pool); !releasable.ok()) {
      return releasable;
    }
    later = pool.graph_owned
                ? pool.blocks
                : pool.blocks - static_cast<int64_t>(pool.free.size());
  }
  ReleaseFence fence;
  if (later > 0 && !core_.Forked()) {
    fence = ReleaseFence::Record(core_, pool.device, replays, later);
  }
  std::vector<AllocationBlock*> blocks;
  bool graph_owned = false;
  {
    MutexLock lock(&pool.mu);
    if (absl::Status releasable = CheckReleasable(pool); !releasable.ok()) {
      return releasable;  // another release, or a scope, came meanwhile
    }
    pool.release_fence = std::move(fence);
    graph_owned = pool.graph_owned;
    if (graph_owned) {
      // Graphs retain the pool: the handle lets go, and the release waits
      // for them (Collect), fenced on `streams` too.
      pool.handle_let_go = true;
      blocks = {};
    } else {
      blocks = TakeForRelease(pool);
    }
  }
  if (graph_owned) {
    Trace(pool, "awaits_graphs", {});
    pool.retain->Drop();
    return absl::OkStatus();
  }
  if (core_.Forked())
    return absl::OkStatus();  // leaked with the parent's memory
  Trace(pool, "released", blocks);
  for (AllocationBlock* block : blocks) {
    // The replays may still write the block: its give-back is fenced by
    // ready events on the replay streams (and those it holds from uses after
    // its capture). The capture streams are never touched again (the user
    // may have destroyed them since). GiveBack also handles poisoned
    // devices and a closed cache.
    core_.GiveBack(block, replays);
  }
  return absl::OkStatus();
}

void GraphPools::Hold(GraphPoolState& pool) {
  bool graph_owned = false;
  {
    MutexLock lock(&pool.mu);
    if (pool.released || pool.handle_let_go) return;
    graph_owned = pool.graph_owned;
    if (graph_owned) {
      pool.handle_let_go = true;
    } else {
      pool.held = true;
    }
  }
  if (!graph_owned) {
    Trace(pool, "held", {});
    return;
  }
  // The graphs know when they are done: the pool waits for them.
  Trace(pool, "awaits_graphs", {});
  pool.retain->Drop();
}

absl::Status GraphPools::RetainBy(GraphPoolState& pool, NativeGraph graph) {
  return RetainPoolByGraph(core_, pool, graph, collect_);
}

void GraphPools::Collect() {
  if (!collect_->exchange(false, std::memory_order_acq_rel)) return;
  for (const std::shared_ptr<GraphPoolState>& pool : routes_.Pools()) {
    std::vector<AllocationBlock*> blocks;
    std::vector<ReleaseFence::Share> shares;
    {
      MutexLock lock(&pool->mu);
      if (!pool->released && pool->recordings.ForgetOver()) {
        // Recordings whose graphs are gone: their blocks used outside a
        // capture go back (fenced by their own events), the rest serve
        // later captures.
        blocks = pool->recordings.SettleOver(pool->free);
        for (const AllocationBlock* block : blocks) {
          pool->bytes -= static_cast<int64_t>(block->size);
          --pool->blocks;
        }
      }
    }
    if (!blocks.empty() && !core_.Forked()) {
      Trace(*pool, "released_by_graphs", blocks);
      for (AllocationBlock* block : blocks) core_.GiveBack(block, {});
    }
    blocks.clear();
    {
      MutexLock lock(&pool->mu);
      // A scope still open waits for its end (CloseRoute raises the flag).
      if (!pool->graph_owned || pool->released || pool->scope_open ||
          pool->retain->refs.load(std::memory_order_acquire) != 0) {
        continue;
      }
      blocks = TakeForRelease(*pool);
      // Every graph that retained the pool is gone and its launches
      // completed (the user objects prove it); the replays a Release named
      // are fenced by the events it recorded then.
      for (size_t i = 0; i < blocks.size(); ++i) {
        shares.push_back(pool->release_fence.Take());
      }
    }
    if (core_.Forked()) continue;  // leaked with the parent's memory
    Trace(*pool, "released_by_graphs", blocks);
    // Fenced too on the streams the blocks hold events for, as any
    // give-back.
    for (size_t i = 0; i < blocks.size(); ++i) {
      GiveBackBehind(core_, blocks[i], {}, std::move(shares[i]));
    }
  }
}

bool GraphPools::Adopt(AllocationShard& shard, AllocationBlock* block,
                       NativeStream stream, const CaptureInfo& info) {
  // Used inside a registered capture, and there only: the graph owns it like
  // its own. A pool keeps device memory of its own device only (its blocks
  // are reused for its device allocations): pinned host memory, or memory of
  // another device joined into the capture, is left to the core to hold.
  std::shared_ptr<GraphPoolState> pool =
      routes_.Match(core_, block->device, stream, info);
  if (pool == nullptr || block->kind != MemoryKind::kDevice ||
      block->device != pool->device) {
    return false;
  }
  shard.TakeOutOfUse(block);
  MutexLock lock(&pool->mu);
  ++pool->blocks;
  pool->bytes += static_cast<int64_t>(block->size);
  block->release_stream = ReuseStream(*block);
  pool->free.push_back(block);
  block->owner = std::move(pool);
  return true;
}

std::vector<AllocationBlock*> GraphPools::TakeAllUnleased() {
  std::vector<AllocationBlock*> blocks;
  for (const std::shared_ptr<GraphPoolState>& pool : routes_.Pools()) {
    MutexLock lock(&pool->mu);
    for (AllocationBlock* block : pool->free) {
      pool->bytes -= static_cast<int64_t>(block->size);
      --pool->blocks;
      blocks.push_back(block);
    }
    pool->free.clear();
  }
  for (AllocationBlock* block : blocks) block->owner.reset();
  return blocks;
}

}  // namespace gpupool::internal
