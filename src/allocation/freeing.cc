// Freeing and retiring in the allocation cache: Trim, the exit drain and
// close, and the one path by which a block leaves the cache — freed through
// the runtime once provably idle (those taken together as a batch), or
// retired (dropped / leaked) without a call. Memory the GPU may still touch
// is never freed. Also the exchange before the cache grows (MakeRoomToGrow),
// and the fence and give-back of blocks a capture router kept (FenceKept,
// GiveBack), and of blocks parked in the same-stream lanes (FenceParked,
// FenceStream); what is held for captures, listed (AddCaptureStats,
// ForEachHeld).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/container/inlined_vector.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/size_classes.h"
#include "src/lifetime/process_state.h"

namespace gpupool::internal {

absl::Status AllocationCacheCore::Trim(int device, size_t keep_bytes) {
  if (ABSL_PREDICT_FALSE(trace_ != nullptr) && lifetime_.InRange(device)) {
    trace_->Note(TraceOp::kTrim, device, MemoryKind::kDevice, keep_bytes);
  }
  if (absl::Status usable = CheckUsable(device, "AllocationCache::Trim");
      !usable.ok()) {
    // A poisoned device has nothing left to trim: its blocks were dropped.
    return OnlyPoisoned(device) ? absl::OkStatus() : usable;
  }
  if (CaptureRouter* router = capture_router_.load(std::memory_order_acquire);
      router != nullptr && router->HasCollectable()) {
    router->Collect();
  }
  // The device's cached bytes count what the release slots hold.
  for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
    Shard(device, kind).SettleSlot();
  }
  absl::Status first;
  for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
    const size_t cached = device_cached_bytes_[device].value.load();
    const size_t excess = cached > keep_bytes ? cached - keep_bytes : 0;
    first.Update(
        ReleaseCached(Shard(device, kind), excess, /*with_retiring=*/true)
            .status);
  }
  if (FreeGate* gate = free_gate_.load(std::memory_order_acquire)) {
    gate->Trim(device);
    FreeReleasedByGate();
  }
  return first;
}

absl::Status AllocationCacheCore::TrimAll() {
  absl::Status first;
  for (int device = 0; device < lifetime_.device_count(); ++device) {
    first.Update(Trim(device, 0));
  }
  if (lifetime_.device_count() == 0 && !lifetime_.device_count_status().ok()) {
    return lifetime_.device_count_status();
  }
  return first;
}

size_t AllocationCacheCore::FenceParked(AllocationShard& shard,
                                        std::optional<NativeStream> stream,
                                        bool stream_goes, bool deferred_only) {
  BlockVector blocks;
  shard.Unpark(stream, deferred_only, &blocks);
  size_t fenced = 0;
  // Blocks come grouped by stream: one capture check per stream.
  NativeStream checked = nullptr;
  absl::StatusOr<CaptureStatus> capture = CaptureStatus::kNone;
  for (AllocationBlock* block : blocks) {
    const int device = block->device;
    const bool live =
        !poisoned(device) && block->generation == generation(device);
    BlockState state = BlockState::kDrop;  // a dead context: no call
    if (live && block->release_stream != nullptr) {
      state = BlockState::kPending;  // fenced at its release (ParkFenced)
    } else if (live) {
      // The work queued on the stream since the block's release is fenced by
      // an event recorded there now, unless the stream captures: an event
      // recorded into a capture fences nothing. It stays parked until then.
      const NativeStream used_on = block->uses.front();
      if (used_on != checked) {
        capture = backend_.GetCaptureStatus(device, used_on);
        checked = used_on;
      }
      if (capture.ok() && *capture != CaptureStatus::kNone) {
        // Parked again, unless the stream goes (or the cache closed
        // meanwhile): then the block can never be fenced, and is leaked.
        if (!stream_goes && shard.Park(block, generation(device))) continue;
        state = BlockState::kLeak;
      } else if (!capture.ok() &&
                 capture.status().code() != absl::StatusCode::kUnimplemented) {
        // Unknown (a backend without capture status never captures): never
        // reused or freed unfenced.
        state = PoisonIfSticky(device, capture.status()) ? BlockState::kDrop
                                                         : BlockState::kLeak;
      } else {
        state = fence_.RecordReadyEvents(block);
      }
    }
    ++fenced;
    Settle(shard, block, state);
  }
  return fenced;
}

absl::Status AllocationCacheCore::FenceStream(int device, NativeStream stream) {
  if (absl::Status usable = CheckUsable(device, "AllocationCache::FenceStream");
      !usable.ok()) {
    // A poisoned device's parked blocks were dropped: nothing to fence.
    return OnlyPoisoned(device) ? absl::OkStatus() : usable;
  }
  for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
    AllocationShard& shard = Shard(device, kind);
    if (shard.MayHaveParked()) {
      FenceParked(shard, stream, /*stream_goes=*/true);
    }
  }
  return absl::OkStatus();
}

void AllocationCacheCore::FreeEverything(bool close, bool call_runtime) {
  // Parked blocks whose fence is deferred first, fenced while releases still
  // settle (else leaked by TakeEverything: never freed unfenced). Those
  // fenced at their release go with the free index's (TakeEverything).
  if (call_runtime) {
    for (const auto& shard : shards_) {
      if (shard->MayHaveParked()) {
        FenceParked(*shard, std::nullopt, /*stream_goes=*/false,
                    /*deferred_only=*/true);
      }
    }
  }
  if (close) closed_.store(true, std::memory_order_release);
  // Blocks kept for captures too: the cache (or the process) ends, and with
  // it any captured work the user could still replay over them.
  FreeCaptureBlocks(call_runtime);
  for (const auto& shard_ptr : shards_) {
    AllocationShard& shard = *shard_ptr;
    BlockVector blocks;
    BlockVector stale;
    std::vector<void*> stable;
    SpareEvents spares;  // back to the EventPool as they go out of scope
    shard.TakeEverything(close, /*leak=*/!call_runtime,
                         generation(shard.device()), &blocks, &stable, &spares,
                         &stale);
    DeleteBlocks(stale);
    if (!call_runtime) {
      DeleteBlocks(blocks);
      continue;
    }
    ReleaseBlocks(shard, std::move(blocks));
    // Memory the free gate keeps (still in use outside this cache) is left to
    // the OS.
    for (void* ptr : stable) FreeStableMemory(shard, ptr).IgnoreError();
  }
  FreeGate* gate = free_gate_.load(std::memory_order_acquire);
  if (gate == nullptr) return;
  if (call_runtime) {
    gate->Trim(/*device=*/-1);
    FreeReleasedByGate();
  }
  if (close) gate->Close();
}

absl::Status AllocationCacheCore::FreeStableMemory(AllocationShard& shard,
                                                   void* ptr) {
  FreeGate* gate = free_gate_.load(std::memory_order_acquire);
  if (gate != nullptr && !gate->MayFree(shard.device(), ptr)) {
    return absl::OkStatus();
  }
  return FreeRaw(shard, ptr);
}

void AllocationCacheCore::FreeReleasedByGate() {
  FreeGate* gate = free_gate_.load(std::memory_order_acquire);
  if (gate == nullptr) return;
  for (const auto& [device, ptr] : gate->TakeFreeable()) {
    FreeRaw(Shard(device, MemoryKind::kDevice), ptr).IgnoreError();
  }
}

void AllocationCacheCore::FreeCaptureBlocks(bool call_runtime) {
  std::vector<AllocationBlock*> blocks;
  {
    MutexLock lock(&held_mu_);
    blocks.swap(held_for_captures_);
  }
  if (CaptureRouter* router = capture_router_.load(std::memory_order_acquire)) {
    std::vector<AllocationBlock*> pooled = router->TakeAllUnleased();
    blocks.insert(blocks.end(), pooled.begin(), pooled.end());
  }
  for (AllocationBlock* block : blocks) {
    AllocationShard& shard = Shard(block->device, block->kind);
    if (poisoned(block->device) ||
        block->generation != generation(block->device)) {
      // A dead context (or one the user reset since): its events and memory
      // are gone with it; no call may touch them.
      block->events.clear();
      shard.Forget(block, RetireReason::kDropped);
      delete block;
      continue;
    }
    // A pool block returned after its capture holds ready events on the
    // streams that used it eagerly: wait for them before freeing.
    const BlockState state = call_runtime && !block->events.empty()
                                 ? fence_.SynchronizeEvents(block)
                                 : BlockState::kIdle;
    if (call_runtime && state == BlockState::kIdle) {
      FreeBlock(shard, block).IgnoreError();
    } else {
      block->events.clear();
      shard.Forget(block, RetireReason::kLeaked);
      delete block;
    }
  }
}

void AllocationCacheCore::DrainForExit() {
  if (Forked()) return;
  FreeEverything(/*close=*/false, /*call_runtime=*/true);
}

size_t AllocationCacheCore::ReleaseAllCached(AllocationShard& shard) {
  return ReleaseCached(shard, static_cast<size_t>(-1), /*with_retiring=*/true)
      .bytes;
}

size_t AllocationCacheCore::ReleaseCachedFor(AllocationShard& shard,
                                             size_t bytes) {
  return ReleaseCached(shard, bytes, /*with_retiring=*/true,
                       /*best_match=*/true)
      .bytes;
}

absl::Status AllocationCacheCore::MakeRoomToGrow(AllocationShard& shard,
                                                 size_t bytes) {
  // Polling (or freeing) a retired block can meet a sticky fault: no runtime
  // allocation on a device that just died.
  PollRetiring(shard);
  const int percent = options_.give_back_above_percent;
  // Nothing cached on the device, in the index, a lane or the release slot:
  // nothing to give back (the excess below is at most 0), and no need for
  // the shard's lock to read its gauges. A miss while a workload grows, or
  // on a fresh cache, is this case.
  const bool nothing_cached = device_cached_bytes_[shard.device()].value.load(
                                  std::memory_order_relaxed) == 0 &&
                              !shard.MayHaveParked();
  if (percent >= 0 && !nothing_cached && !poisoned(shard.device())) {
    // The budget is the shard's high-water mark of bytes in use (or what it
    // will have in use, if more): a workload below its peak reuses what its
    // peak needed, and the memory held stays within `percent` of that peak
    // wherever wholly free segments can be exchanged. A request beyond every
    // class (an uncached one may be) counts as the largest class, and the
    // headroom saturates: no overflow, and such a budget exceeds what is
    // held.
    const AllocationCacheStats stats = shard.Stats();
    const int64_t request =
        static_cast<int64_t>(std::min(bytes, kMaxSizeClassBytes));
    const int64_t peak =
        std::max(stats.peak_bytes_in_use, stats.bytes_in_use + request);
    const int64_t headroom =
        peak / 100 > (std::numeric_limits<int64_t>::max() - peak) /
                         std::max(percent, 1)
            ? std::numeric_limits<int64_t>::max() - peak
            : peak / 100 * percent;
    const int64_t excess =
        stats.bytes_in_use + stats.bytes_cached + request - (peak + headroom);
    if (excess > 0) {
      ReleaseCached(shard, std::min(bytes, static_cast<size_t>(excess)),
                    /*with_retiring=*/false, /*best_match=*/false,
                    /*smaller_than=*/bytes);
    }
  }
  if (poisoned(shard.device())) {
    return AllocationFailed(shard, lifetime_.PoisonedError(shard.device()));
  }
  return absl::OkStatus();
}

AllocationCacheCore::Released AllocationCacheCore::ReleaseCached(
    AllocationShard& shard, size_t bytes, bool with_retiring, bool best_match,
    size_t smaller_than) {
  // Parked blocks are fenced first: then they are freed (or waited for) as
  // any other.
  if (shard.MayHaveParked()) FenceParked(shard);
  BlockVector blocks;
  BlockVector stale;
  shard.TakeForRelease(bytes, with_retiring, best_match, smaller_than,
                       generation(shard.device()), &blocks, &stale);
  DeleteBlocks(stale);
  return ReleaseBlocks(shard, std::move(blocks));
}

AllocationCacheCore::Released AllocationCacheCore::ReleaseBlocks(
    AllocationShard& shard, BlockVector blocks) {
  Released released;
  // An idle block joins `batch`, freed with the others under one lock; any
  // other state retires it without a call.
  auto settle = [&](AllocationBlock* block, BlockState state,
                    BlockVector& batch) {
    if (state == BlockState::kIdle) {
      batch.push_back(block);
    } else {
      released.status.Update(Dispose(shard, block, state));
    }
  };
  BlockVector pending;
  BlockVector idle;
  for (AllocationBlock* block : blocks) {
    if (poisoned(block->device)) {
      // A dead context: no query, no free, ever.
      released.status.Update(Dispose(shard, block, BlockState::kDrop));
      continue;
    }
    const BlockState state = fence_.QueryEvents(block);
    if (state == BlockState::kPending) {
      pending.push_back(block);
      continue;
    }
    released.bytes += block->size;
    settle(block, state, idle);
  }
  released.status.Update(FreeBlocks(shard, std::move(idle)));
  BlockVector waited;
  for (AllocationBlock* block : pending) {
    released.bytes += block->size;
    // An earlier block's sticky fault may have poisoned the device since the
    // loop above: never wait on (or free) a dead context.
    settle(block,
           poisoned(block->device) ? BlockState::kDrop
                                   : fence_.SynchronizeEvents(block),
           waited);
  }
  released.status.Update(FreeBlocks(shard, std::move(waited)));
  return released;
}

absl::Status AllocationCacheCore::Dispose(AllocationShard& shard,
                                          AllocationBlock* block,
                                          BlockState state) {
  if (state == BlockState::kIdle) return FreeBlock(shard, block);
  shard.Forget(block, state == BlockState::kDrop ? RetireReason::kDropped
                                                 : RetireReason::kLeaked);
  delete block;
  return absl::OkStatus();
}

bool AllocationCacheCore::DropIfDead(AllocationShard& shard,
                                     AllocationBlock* block) {
  if (!poisoned(block->device) &&
      block->generation == generation(block->device)) {
    return false;
  }
  shard.Forget(block, RetireReason::kDropped);
  delete block;
  return true;
}

absl::Status AllocationCacheCore::FreeBlock(AllocationShard& shard,
                                            AllocationBlock* block) {
  return FreeBlocks(shard, BlockVector{block});
}

absl::Status AllocationCacheCore::FreeBlocks(AllocationShard& shard,
                                             BlockVector blocks) {
  if (blocks.empty()) return absl::OkStatus();
  size_t kept = 0;
  for (AllocationBlock* block : blocks) {
    if (DropIfDead(shard, block)) continue;
    block->owner.reset();
    blocks[kept++] = block;
  }
  blocks.resize(kept);
  // Parts of segments go back to the free index (merged with the free blocks
  // beside them); only whole segments go back to the runtime.
  shard.KeepIfParts(&blocks);
  absl::Status status;
  int64_t destroyed = 0;
  int64_t dropped = 0;
  for (AllocationBlock* whole : blocks) {
    // A sticky fault met by an earlier free leaves a dead context.
    ++(ReturnToRuntime(shard, whole->ptr, &status) == RetireReason::kDestroyed
           ? destroyed
           : dropped);
    delete whole;
  }
  if (destroyed != 0) shard.Retire(RetireReason::kDestroyed, destroyed);
  if (dropped != 0) shard.Retire(RetireReason::kDropped, dropped);
  return status;
}

absl::Status AllocationCacheCore::FreeRaw(AllocationShard& shard, void* ptr) {
  absl::Status status;
  shard.Retire(ReturnToRuntime(shard, ptr, &status));
  return status;
}

RetireReason AllocationCacheCore::ReturnToRuntime(AllocationShard& shard,
                                                  void* ptr,
                                                  absl::Status* status) {
  if (poisoned(shard.device())) return RetireReason::kDropped;
  absl::Status freed = backend_.Free(shard.device(), ptr, shard.kind());
  if (ABSL_PREDICT_FALSE(trace_ != nullptr)) {
    trace_->RuntimeFree(shard.device(), shard.kind(), ptr);
  }
  if (FaultOf(freed) == Fault::kDevice) {
    device_health().Poison(shard.device(), freed);
  }
  status->Update(freed);
  return RetireReason::kDestroyed;
}

void AllocationCacheCore::PollRetiring(AllocationShard& shard) {
  AllocationBlock* block = shard.TakeOldestRetiring();
  if (block != nullptr) CheckRetiring(shard, block);
}

void AllocationCacheCore::CheckRetiring(AllocationShard& shard,
                                        AllocationBlock* block) {
  // A sticky fault since the block retired (e.g. the free Return made just
  // before polling it) leaves a dead context: drop it without a call.
  if (poisoned(block->device) ||
      block->generation != generation(block->device)) {
    Dispose(shard, block, BlockState::kDrop).IgnoreError();
    return;
  }
  const BlockState state = fence_.QueryEvents(block);
  if (state == BlockState::kPending) {
    shard.RestoreRetiring(block);
    return;
  }
  Dispose(shard, block, state).IgnoreError();
}

std::optional<BlockState> AllocationCacheCore::FenceKept(
    AllocationShard& shard, AllocationBlock* block) {
  BlockState state = ReleaseState(block);
  if (state != BlockState::kIdle) return state;
  CaptureRouter* router = capture_router_.load(std::memory_order_acquire);
  if (ABSL_PREDICT_FALSE(options_.detect_unregistered_captures ||
                         (router != nullptr && router->Routing()))) {
    shard.Reinstate(block);  // HoldIfCapturing takes it out of use
    std::shared_ptr<void> owner = std::move(block->owner);
    block->owner.reset();
    if (HoldIfCapturing(shard, block)) return std::nullopt;
    block->owner = std::move(owner);
    shard.TakeOutOfUse(block);
    if (poisoned(block->device)) return BlockState::kDrop;
  }
  state = fence_.RecordReadyEvents(block);
  block->release_stream = nullptr;  // fenced on its own streams: no hit
  return state;
}

void AllocationCacheCore::GiveBack(AllocationBlock* block,
                                   const std::vector<NativeStream>& streams,
                                   BlockEvents recorded, bool hold) {
  AllocationShard& shard = Shard(block->device, block->kind);
  block->owner.reset();
  block->uses.assign(streams.begin(), streams.end());
  for (PooledEvent& event : recorded) block->events.push_back(std::move(event));
  shard.Reinstate(block);
  BlockState state = ReleaseState(block);
  CaptureRouter* router = capture_router_.load(std::memory_order_acquire);
  if (state == BlockState::kIdle &&
      ABSL_PREDICT_FALSE(options_.detect_unregistered_captures ||
                         (router != nullptr && router->Routing()))) {
    // A ready event recorded on a capturing stream would be captured: held
    // (or adopted) as any release there, with the events it holds.
    if (HoldIfCapturing(shard, block)) return;
    if (poisoned(block->device)) state = BlockState::kDrop;
  }
  if (state == BlockState::kIdle) {
    // RecordReadyEvents re-records a block's events: keep the FenceKept ones
    // aside so that the new ones add to them.
    BlockEvents kept = std::move(block->events);
    block->events.clear();
    state = fence_.RecordReadyEvents(block);
    if ((state == BlockState::kIdle || state == BlockState::kPending) &&
        !kept.empty()) {
      for (PooledEvent& event : kept) block->events.push_back(std::move(event));
      block->release_stream = nullptr;  // pending on more than one stream
      state = BlockState::kPending;
    }
  }
  if (hold && (state == BlockState::kIdle || state == BlockState::kPending)) {
    shard.TakeOutOfUse(block);
    MutexLock lock(&held_mu_);
    held_for_captures_.push_back(block);
    return;
  }
  Settle(shard, block, state);
}

std::optional<BlockState> AllocationCacheCore::RecordFences(
    int device, const std::vector<NativeStream>& streams, int64_t count,
    std::vector<BlockEvents>* sets) {
  sets->clear();
  if (poisoned(device)) return BlockState::kDrop;
  CaptureRouter* router = capture_router_.load(std::memory_order_acquire);
  if (options_.detect_unregistered_captures ||
      (router != nullptr && router->Routing())) {
    for (NativeStream stream : streams) {
      absl::StatusOr<CaptureInfo> info = fence_.CaptureOf(device, stream);
      if (info.ok() && info->status == CaptureStatus::kNone) continue;
      if (!info.ok() && PoisonIfSticky(device, info.status())) {
        return BlockState::kDrop;
      }
      return std::nullopt;  // captures, or its capture is unknown
    }
  }
  BlockState fenced = BlockState::kIdle;
  for (int64_t i = 0; i < count; ++i) {
    // Each set's carrier: the ordinary release fence records its events.
    AllocationBlock carrier;
    carrier.device = device;
    carrier.uses.assign(streams.begin(), streams.end());
    const BlockState state = fence_.RecordReadyEvents(&carrier);
    if (state == BlockState::kDrop || state == BlockState::kLeak) {
      sets->clear();
      return state;
    }
    if (state == BlockState::kPending) fenced = BlockState::kPending;
    sets->push_back(std::move(carrier.events));
  }
  return fenced;
}

void AllocationCacheCore::AddCaptureStats(int device,
                                          AllocationCacheStats* stats) const {
  if (const CaptureRouter* router =
          capture_router_.load(std::memory_order_acquire)) {
    router->AddStats(device, stats);
  }
  MutexLock lock(&held_mu_);
  for (const AllocationBlock* block : held_for_captures_) {
    if (device >= 0 && block->device != device) continue;
    ++stats->blocks_held_for_captures;
    stats->bytes_held_for_captures += static_cast<int64_t>(block->size);
  }
}

void AllocationCacheCore::ForEachHeld(
    absl::FunctionRef<void(const AllocationBlock&)> visit) const {
  MutexLock lock(&held_mu_);
  for (const AllocationBlock* block : held_for_captures_) visit(*block);
}

}  // namespace gpupool::internal
