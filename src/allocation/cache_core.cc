// The allocation policy of the cache: Allocate (same stream, ready, checked
// pending blocks, then a new block from the runtime) and Return. See
// cache_core.h for the other jobs' files.

#include "src/allocation/cache_core.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/strings/str_cat.h"
#include "src/allocation/oom_chain.h"
#include "src/allocation/size_classes.h"
#include "src/lifetime/process_state.h"

namespace gpupool::internal {
namespace {

constexpr MemoryKind kKinds[] = {MemoryKind::kDevice, MemoryKind::kPinnedHost};

// Cores alive in the process (AllocationCacheCore::LiveForTesting).
std::atomic<int64_t> live_cores{0};

bool IsKnownKind(MemoryKind kind) {
  return kind == MemoryKind::kDevice || kind == MemoryKind::kPinnedHost;
}

AllocationCacheOptions Sanitize(AllocationCacheOptions options) {
  options.max_cached_block_bytes =
      std::min(options.max_cached_block_bytes, kMaxSizeClassBytes);
  options.pending_checks_per_allocate =
      std::max(options.pending_checks_per_allocate, 0);
  // A granule is a multiple of 512 bytes (block sizes are multiples of 128,
  // segments of the granule).
  options.large_granule_bytes =
      std::max<size_t>(512, (options.large_granule_bytes + 511) / 512 * 512);
  return options;
}

}  // namespace

void AllocationLeaseOwner::Return(void* handle, uint64_t /*lease_id*/,
                                  uint32_t /*site*/, uint64_t /*generation*/,
                                  ReturnAs /*how*/) {
  // Stashed, the block carries this lease's hold to its next lease: neither
  // this owner nor the core may be touched any more.
  if (core_->Return(static_cast<AllocationBlock*>(handle))) return;
  Drop();
}

AllocationCacheCore::AllocationCacheCore(Backend& backend, EventPool& events,
                                         std::shared_ptr<DeviceHealth> health,
                                         AllocationCacheOptions options)
    : backend_(backend),
      options_(Sanitize(options)),
      lifetime_(backend,
                health != nullptr ? std::move(health) : events.health()),
      fence_(backend, events, lifetime_.device_health(), options_.event_config),
      cross_stream_(fence_, lifetime_.device_health(), options_.cross_stream) {
  live_cores.fetch_add(1, std::memory_order_relaxed);
  const int devices = lifetime_.device_count();
  const int classes = SizeClassCount(options_.max_cached_block_bytes);
  device_cached_bytes_ = std::make_unique<DeviceBytes[]>(std::max(devices, 1));
  if (options_.trace_capacity > 0) {
    trace_ = std::make_unique<TraceRing>(options_.trace_capacity, devices);
  }
  record_lease_times_ =
      options_.record_lease_times || options_.trace_capacity > 0;
  rounding_ = {options_.large_rounding_from_bytes,
               options_.large_granule_bytes};
  for (int device = 0; device < devices; ++device) {
    for (MemoryKind kind : kKinds) {
      shards_.push_back(std::make_unique<AllocationShard>(
          device, kind, classes, options_.max_split_ratio,
          options_.max_cached_bytes, &device_cached_bytes_[device].value));
    }
  }
}

int64_t AllocationCacheCore::LiveForTesting() {
  return live_cores.load(std::memory_order_relaxed);
}

AllocationCacheCore::~AllocationCacheCore() {
  live_cores.fetch_sub(1, std::memory_order_relaxed);
  // A parent thread may have held a shard lock at fork() time and its lists
  // may be half-updated: touch nothing in a child (the lifetime leaks the
  // health the same way).
  if (Forked()) {
    for (auto& shard : shards_) shard.release();  // NOLINT: deliberate leak
  }
}

absl::Status AllocationCacheCore::CheckEntry(int device,
                                             absl::string_view what) {
  return lifetime_.CheckEntry(what, "cache", device, [this](int d) {
    DropStale(d);
    if (FreeGate* gate = free_gate_.load(std::memory_order_acquire)) {
      gate->DropDevice(d);
    }
  });
}

bool AllocationCacheCore::Leaking() const {
  return closed_.load(std::memory_order_acquire) || ProcessIsExiting();
}

CaptureRouter& AllocationCacheCore::InstallCaptureRouter(
    absl::FunctionRef<std::unique_ptr<CaptureRouter>()> make) {
  if (CaptureRouter* router = capture_router_.load(std::memory_order_acquire)) {
    return *router;
  }
  MutexLock lock(&hooks_mu_);
  if (capture_router_owner_ == nullptr) {
    capture_router_owner_ = make();
    capture_router_.store(capture_router_owner_.get(),
                          std::memory_order_release);
  }
  return *capture_router_owner_;
}

FreeGate& AllocationCacheCore::InstallFreeGate(
    absl::FunctionRef<std::unique_ptr<FreeGate>()> make) {
  if (FreeGate* gate = free_gate_.load(std::memory_order_acquire)) {
    return *gate;
  }
  MutexLock lock(&hooks_mu_);
  if (free_gate_owner_ == nullptr) {
    free_gate_owner_ = make();
    free_gate_.store(free_gate_owner_.get(), std::memory_order_release);
  }
  return *free_gate_owner_;
}

void AllocationCacheCore::DropStale(int device) {
  for (MemoryKind kind : kKinds) {
    BlockVector stale;
    Shard(device, kind).TakeStale(generation(device), &stale);
    DeleteBlocks(stale);
  }
}

AllocationBlock* AllocationCacheCore::NewBlock(const AllocationShard& shard,
                                               void* ptr, size_t size,
                                               int size_class,
                                               uint64_t generation) {
  auto* block = new AllocationBlock();
  block->ptr = ptr;
  block->size = size;
  block->size_class = size_class;
  block->device = shard.device();
  block->kind = shard.kind();
  block->generation = generation;
  return block;
}

void AllocationCacheCore::MakeLeaseAnchors() {
  std::shared_ptr<AllocationCacheCore> self = shared_from_this();
  lease_anchors_.reserve(shards_.size());
  for (const auto& shard : shards_) {
    lease_anchors_.push_back(new AllocationLeaseOwner(self, shard.get()));
    shard->set_lease_holds(lease_anchors_.back()->holders());
  }
}

void AllocationCacheCore::DropLeaseAnchors() {
  // Owners with leases still out live on (and keep the core) until the last
  // of them returns.
  for (AllocationLeaseOwner* owner : lease_anchors_) owner->Drop();
  lease_anchors_.clear();
}

PooledAllocation AllocationCacheCore::MakeLease(AllocationBlock* block) {
  if (ABSL_PREDICT_FALSE(trace_ != nullptr)) {
    trace_->Allocated(block->device, block->kind, block->size, block->ptr,
                      block->lease_id, block->where,
                      /*reused=*/!TakeRuntimeMallocMark());
  }
  AllocationLeaseOwner* owner =
      lease_anchors_[ShardIndex(block->device, block->kind)];
  // A block from the release slot brings its last lease's hold along.
  LeaseOwner* held = block->slot_hold ? owner : owner->Hold();
  block->slot_hold = false;
  return PooledAllocation(
      Lease(held, block, block->lease_id, /*site=*/0, block->generation),
      *block);
}

absl::StatusOr<PooledAllocation> AllocationCacheCore::Allocate(
    int device, size_t bytes, MemoryKind kind, NativeStream stream,
    SourceLocation where) {
  if (absl::Status usable = CheckUsable(device, "AllocationCache::Allocate");
      !usable.ok()) {
    return usable;
  }
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        "AllocationCache::Allocate: bytes must be > 0");
  }
  if (!IsKnownKind(kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllocationCache::Allocate: unknown MemoryKind ",
                     static_cast<int>(kind)));
  }
  AllocationShard& shard = Shard(device, kind);
  LeaseRequest request;
  request.bytes = bytes;
  request.stream = stream;
  request.where = where;
  if (ABSL_PREDICT_FALSE(record_lease_times_)) {
    request.leased_unix_ns = absl::GetCurrentTimeNanos();
  }
  // 0. A capture the capture router claims (hooks.h). With none installed,
  //    or no capture registered, this is one or two loads and no runtime
  //    call.
  CaptureRouter* router = capture_router_.load(std::memory_order_acquire);
  if (ABSL_PREDICT_FALSE(router != nullptr && router->HasCollectable())) {
    router->Collect();
  }
  if (ABSL_PREDICT_FALSE(router != nullptr && router->Routing()) &&
      stream != nullptr) {
    absl::StatusOr<CaptureInfo> info = backend_.GetCaptureInfo(device, stream);
    if (info.ok()) {
      if (std::optional<absl::StatusOr<PooledAllocation>> routed =
              router->Allocate(shard, request, *info)) {
        return *std::move(routed);
      }
      if (poisoned(device)) {  // a capture query of the router's
        return AllocationFailed(shard, lifetime_.PoisonedError(device));
      }
    } else {
      // Whether the stream captures for a scope is unknown: a block of the
      // general cache could be captured into work that replays after its lease,
      // so the allocation fails (a sticky error poisons the device).
      return AllocationFailed(shard, info.status());
    }
  }
  if (bytes > options_.max_cached_block_bytes) {
    return AllocateUncached(shard, request);
  }
  const size_t rounded = LeaseBytes(bytes, rounding_);
  request.lease_bytes = rounded;

  // The release slot's block wanted by another stream (one buffer passed
  // between two streams) is leased at once, its events queried (or, with
  // CrossStreamPolicy::kWaitOnStream, waited on by the request's stream)
  // after the lock (step 3), the lease undone if that fails; with no checks
  // at all, it is left to the steps below as any cached block.
  UncheckedLease unchecked;
  unchecked.waits = cross_stream_.WaitsOn(stream);
  UncheckedLease* const lease_unchecked =
      options_.pending_checks_per_allocate > 0 ? &unchecked : nullptr;

  // 1. Deferred fences (defer_same_stream_fences): the block parked on this
  //    stream for this size, with no runtime call. Else every parked block
  //    whose fence is deferred is fenced first, so that what follows sees
  //    them all (a lane block fenced at its release stays in its lane).
  if (options_.defer_same_stream_fences && shard.MayHaveParked()) {
    bool deferred_left = true;
    if (stream != nullptr) {
      BlockVector stale_parked;
      AllocationBlock* parked =
          shard.TakeParked(request, generation(device), &stale_parked,
                           &deferred_left, lease_unchecked);
      DeleteBlocks(stale_parked);
      if (parked != nullptr) return MakeLease(parked);
    }
    if (deferred_left) {
      FenceParked(shard, std::nullopt, /*stream_goes=*/false,
                  /*deferred_only=*/true);
    }
  }

  // 2. The block parked on this stream for this size with its event recorded
  //    (parked.h), else same stream (safe at once in stream order), else a
  //    ready block, else a few of the oldest pending blocks to check outside
  //    the lock.
  BlockVector candidates;
  AllocationBlock* block = nullptr;
  if (unchecked.block == nullptr) {
    BlockVector stale;
    block = shard.TakeCached(request, options_.pending_checks_per_allocate,
                             generation(device), &candidates, &stale,
                             lease_unchecked);
    DeleteBlocks(stale);
  }
  if (block != nullptr) {
    // A same-stream hit keeps its ready events (already consumed: the new
    // work is ordered after them) as spares that the next release
    // re-records, instead of a round trip through the EventPool per cycle.
    // A ready block has none.
    return MakeLease(block);
  }

  // 3. Blocks released on other streams: usable once their events
  //    completed, or at once when the new stream waits on them. They are
  //    checked first when they fit better than a block usable at once,
  //    which is taken when none of them is done yet.
  if (unchecked.block != nullptr) {
    block = cross_stream_.CheckUncheckedLease(shard, unchecked);
  } else if (!candidates.empty()) {
    block = cross_stream_.TakeFromCandidates(shard, candidates, request);
  }
  if (block != nullptr) return MakeLease(block);
  if (unchecked.block != nullptr || !candidates.empty()) {
    if (poisoned(device)) return lifetime_.PoisonedError(device);
    BlockVector none;
    BlockVector stale_now;
    block = shard.TakeCached(request, /*pending_checks=*/0, generation(device),
                             &none, &stale_now);
    DeleteBlocks(stale_now);
    if (block != nullptr) return MakeLease(block);
  }

  // 4. A new block from the runtime.
  if (absl::Status room = MakeRoomToGrow(shard, rounded); !room.ok()) {
    return room;
  }
  const uint64_t block_generation = generation(device);
  absl::StatusOr<void*> ptr = RuntimeAllocate(*this, shard, bytes, rounded);
  if (!ptr.ok()) return ptr.status();
  // Filed under the class its size falls in (the free index's).
  block =
      NewBlock(shard, *ptr, rounded, FloorSizeClass(rounded), block_generation);
  shard.LeaseNew(block, request, CacheCounter::kMiss);
  return MakeLease(block);
}

absl::StatusOr<PooledAllocation> AllocationCacheCore::AllocateUncached(
    AllocationShard& shard, const LeaseRequest& request) {
  // It grows the memory held as a miss does: the same exchange first.
  if (absl::Status room = MakeRoomToGrow(shard, request.bytes); !room.ok()) {
    return room;
  }
  const uint64_t block_generation = generation(shard.device());
  absl::StatusOr<void*> ptr =
      RuntimeAllocate(*this, shard, request.bytes, request.bytes);
  if (!ptr.ok()) return ptr.status();
  AllocationBlock* block = NewBlock(shard, *ptr, request.bytes,
                                    /*size_class=*/-1, block_generation);
  shard.LeaseNew(block, request, CacheCounter::kUncached);
  return MakeLease(block);
}

bool AllocationCacheCore::Return(AllocationBlock* block) {
  // A fork() child takes no lock and makes no runtime call: the memory
  // belongs to the parent's context. The record is leaked with it.
  if (Forked()) return false;
  AllocationShard& shard = Shard(block->device, block->kind);
  const int device = block->device;
  if (ABSL_PREDICT_FALSE(trace_ != nullptr)) {
    trace_->Released(device, block->kind, block->size, block->ptr,
                     block->lease_id);
  }
  CaptureRouter* router = capture_router_.load(std::memory_order_acquire);
  if (block->owner != nullptr) {  // only a router sets it
    router->Return(shard, block);
    return false;
  }

  BlockState state = BlockState::kIdle;
  if (closed_.load(std::memory_order_acquire) || ProcessIsExiting()) {
    state = BlockState::kLeak;
  } else if (poisoned(device) || block->generation != generation(device)) {
    state = BlockState::kDrop;
  } else if (ABSL_PREDICT_FALSE(options_.detect_unregistered_captures ||
                                (router != nullptr && router->Routing()))) {
    // Used on a capturing stream: the captured work may replay it.
    if (HoldIfCapturing(shard, block)) return false;
    // The capture query may have met a sticky error.
    if (poisoned(device)) {
      state = BlockState::kDrop;
    } else if (Parked parked = ParkDeferred(shard, block);
               parked != Parked::kNo) {
      return parked == Parked::kStashed;
    } else {
      state = fence_.RecordReadyEvents(block);
      if (Parked fenced = ParkFenced(shard, block, state);
          fenced != Parked::kNo) {
        return fenced == Parked::kStashed;
      }
    }
  } else if (Parked parked = ParkDeferred(shard, block);
             parked != Parked::kNo) {
    // No runtime call: fenced before anything else may have it.
    return parked == Parked::kStashed;
  } else {
    state = fence_.RecordReadyEvents(block);
    // Its stream's next request of its size takes it back from its lane.
    if (Parked fenced = ParkFenced(shard, block, state);
        fenced != Parked::kNo) {
      return fenced == Parked::kStashed;
    }
  }

  Settle(shard, block, state);
  return false;
}

AllocationCacheCore::Parked AllocationCacheCore::ParkIn(
    AllocationShard& shard, AllocationBlock* block) {
  // A part of a segment goes to the free index, to merge with its free
  // neighbours: neither the slot nor a lane takes it. Known without the
  // lock (AllocationBlock::whole_in_use, as Stash reads it), so that its
  // release takes the shard's lock once (TakeBack), not once more to be
  // refused by Park.
  if (!block->whole_in_use) return Parked::kNo;
  const uint64_t block_generation = generation(block->device);
  // The release slot first: the lock is taken by whoever comes next.
  if (shard.Stash(block, block_generation)) return Parked::kStashed;
  AllocationBlock* to_poll = nullptr;
  if (!shard.Park(block, block_generation, &to_poll)) return Parked::kNo;
  if (to_poll != nullptr) CheckRetiring(shard, to_poll);
  return Parked::kParked;
}

void AllocationCacheCore::Settle(AllocationShard& shard, AllocationBlock* block,
                                 BlockState state) {
  const AllocationShard::AfterReturn taken =
      shard.TakeBack(block, state, generation(shard.device()));
  delete taken.to_delete;
  if (taken.to_free != nullptr) FreeBlock(shard, taken.to_free).IgnoreError();
  if (taken.to_poll != nullptr) CheckRetiring(shard, taken.to_poll);
}

BlockState AllocationCacheCore::ReleaseState(
    const AllocationBlock* block) const {
  if (closed_.load(std::memory_order_acquire) || ProcessIsExiting()) {
    return BlockState::kLeak;
  }
  if (poisoned(block->device) ||
      block->generation != generation(block->device)) {
    return BlockState::kDrop;
  }
  return BlockState::kIdle;
}

bool AllocationCacheCore::HoldIfCapturing(AllocationShard& shard,
                                          AllocationBlock* block) {
  for (NativeStream stream : block->uses) {
    absl::StatusOr<CaptureInfo> info = fence_.CaptureOf(block->device, stream);
    if (!info.ok()) {
      // A sticky error: the caller drops the block. Any other failure leaves
      // the stream's capture unknown: a ready event recorded there could be
      // captured (and its query would invalidate the capture), so the block
      // is held as for an unregistered capture, until the cache frees
      // everything.
      if (PoisonIfSticky(block->device, info.status())) return false;
    } else if (info->status == CaptureStatus::kNone) {
      continue;
    } else if (block->uses.size() == 1) {
      // Used inside a capture, and there only: a pool registered for it
      // owns it like its own. A block also used on another stream (eager
      // work that may still be pending there) is held.
      CaptureRouter* router = capture_router_.load(std::memory_order_acquire);
      if (router != nullptr && router->Adopt(shard, block, stream, *info)) {
        return true;
      }
    }
    shard.TakeOutOfUse(block);
    MutexLock lock(&held_mu_);
    held_for_captures_.push_back(block);
    return true;
  }
  return false;
}

absl::Status AllocationCacheCore::AllocationFailed(AllocationShard& shard,
                                                   absl::Status status) {
  if (FaultOf(status) == Fault::kDevice) {
    device_health().Poison(shard.device(), status);
    status = lifetime_.PoisonedError(shard.device());
  }
  shard.Count(CacheCounter::kFailedAllocation);
  return status;
}

}  // namespace gpupool::internal
