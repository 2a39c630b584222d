// The sealed (device, MemoryKind) shard of the allocation cache; see
// shard.h. Stable-buffer bookkeeping is in
// shard_stable.cc.

#include "src/allocation/shard.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpupool::internal {
AllocationShard::AllocationShard(int device, MemoryKind kind,
                                 int size_class_count, size_t max_cached_bytes,
                                 std::atomic<size_t>* device_cached_bytes)
    : device_(device),
      kind_(kind),
      max_cached_bytes_(max_cached_bytes),
      device_cached_bytes_(device_cached_bytes),
      bins_(static_cast<size_t>(std::max(size_class_count, 1))) {}

// No lock: nothing else references a shard being destroyed, and in a fork()
// child the lock may be held forever by a thread that no longer exists.
AllocationShard::~AllocationShard() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  BlockVector blocks;
  TakeCachedLocked(static_cast<size_t>(-1), &blocks);
  TakeAllRetiringLocked(&blocks);
  for (AllocationBlock* block : blocks) delete block;
  // Leased blocks belong to their leases, which hold this shard alive: none
  // can be left here.
}

// --- Allocate ----------------------------------------------------------------

AllocationBlock* AllocationShard::TakeCached(
    int size_class, const LeaseRequest& request, int pending_checks,
    uint64_t generation, BlockVector* candidates, BlockVector* stale) {
  MutexLock lock(&mu_);
  TakeStaleLocked(generation, stale);
  AllocationBlock* block = nullptr;
  if (request.stream != nullptr) {
    block = TakeSameStreamLocked(size_class, request.stream);
  }
  if (block == nullptr) block = TakeReadyLocked(size_class);
  if (block != nullptr) {
    ++stats_.hits;
    LeaseLocked(block, request);
    return block;
  }
  for (int i = 0; i < pending_checks; ++i) {
    AllocationBlock* candidate = TakeOldestPendingLocked(size_class);
    if (candidate == nullptr) break;
    candidates->push_back(candidate);
  }
  return nullptr;
}

AllocationBlock* AllocationShard::SettleCandidates(
    AllocationBlock* chosen, bool waited, const BlockVector& keep,
    const BlockVector& dropped, const BlockVector& leaked,
    const LeaseRequest& request, uint64_t generation, BlockVector* garbage) {
  MutexLock lock(&mu_);
  int64_t dropped_count = static_cast<int64_t>(dropped.size());
  garbage->insert(garbage->end(), dropped.begin(), dropped.end());
  garbage->insert(garbage->end(), leaked.begin(), leaked.end());
  // Back as the oldest again, in their original order.
  for (auto it = keep.rbegin(); it != keep.rend(); ++it) {
    if ((*it)->generation != generation) {
      garbage->push_back(*it);
      ++dropped_count;
    } else if (!TryRestorePendingLocked(*it)) {
      AddRetiringLocked(*it);
    }
  }
  if (chosen != nullptr && chosen->generation != generation) {
    garbage->push_back(chosen);
    ++dropped_count;
    chosen = nullptr;
  }
  ledger_.Retire(RetireReason::kDropped, dropped_count);
  ledger_.Retire(RetireReason::kLeaked, static_cast<int64_t>(leaked.size()));
  if (chosen != nullptr) {
    ++stats_.hits;
    if (waited) ++stats_.cross_stream_waits;
    LeaseLocked(chosen, request);
  }
  return chosen;
}

void AllocationShard::LeaseNew(AllocationBlock* block,
                               const LeaseRequest& request,
                               CacheCounter tally) {
  MutexLock lock(&mu_);
  ++(tally == CacheCounter::kUncached ? stats_.uncached_allocations
                                      : stats_.misses);
  LeaseLocked(block, request);
}

void AllocationShard::LeaseLocked(AllocationBlock* block,
                                  const LeaseRequest& request) {
  block->requested = request.bytes;
  block->stream = request.stream;
  block->uses.clear();
  if (request.stream != nullptr) block->uses.push_back(request.stream);
  block->release_stream = nullptr;
  block->lease_id = lease_ids_.Next();
  block->where = request.where;
  in_use_.PushFront(block);
  ++stats_.allocations_in_use;
  stats_.bytes_in_use += static_cast<int64_t>(block->size);
  stats_.bytes_rounded += static_cast<int64_t>(block->size);
  stats_.bytes_requested += static_cast<int64_t>(block->requested);
  stats_.peak_bytes_in_use =
      std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
}

void AllocationShard::RemoveInUseLocked(AllocationBlock* block) {
  in_use_.Remove(block);
  --stats_.allocations_in_use;
  stats_.bytes_in_use -= static_cast<int64_t>(block->size);
  stats_.bytes_rounded -= static_cast<int64_t>(block->size);
  stats_.bytes_requested -= static_cast<int64_t>(block->requested);
}

// --- Kept blocks
// --------------------------------------------------------------

void AllocationShard::LeaseKept(AllocationBlock* block,
                                const LeaseRequest& request, bool hit) {
  MutexLock lock(&mu_);
  if (hit) ++stats_.hits;
  LeaseLocked(block, request);
}

void AllocationShard::Reinstate(AllocationBlock* block) {
  MutexLock lock(&mu_);
  block->requested = 0;
  block->lease_id = 0;
  in_use_.PushFront(block);
  ++stats_.allocations_in_use;
  stats_.bytes_in_use += static_cast<int64_t>(block->size);
  stats_.bytes_rounded += static_cast<int64_t>(block->size);
}

void AllocationShard::TakeOutOfUse(AllocationBlock* block) {
  MutexLock lock(&mu_);
  RemoveInUseLocked(block);
}

// --- Release -----------------------------------------------------------------

AllocationShard::AfterReturn AllocationShard::TakeBack(AllocationBlock* block,
                                                       BlockState state,
                                                       uint64_t generation) {
  AfterReturn taken;
  MutexLock lock(&mu_);
  RemoveInUseLocked(block);
  const bool keep = state == BlockState::kIdle || state == BlockState::kPending;
  if (keep && closed_) {
    state = BlockState::kLeak;  // the cache was destroyed meanwhile
  } else if (keep && block->generation != generation) {
    state = BlockState::kDrop;  // poisoned while we recorded
  }
  if (state == BlockState::kDrop || state == BlockState::kLeak) {
    ledger_.Retire(state == BlockState::kDrop ? RetireReason::kDropped
                                              : RetireReason::kLeaked);
    taken.to_delete = block;
    return taken;
  }
  taken.to_poll = TakeOldestRetiringLocked();
  const bool cached = block->size_class >= 0 && TryAddCachedLocked(block);
  if (!cached) {
    // Uncached or over the cap: free it, but never while the GPU may still
    // use it — retire it until its events complete.
    if (block->events.empty()) {
      taken.to_free = block;
    } else {
      AddRetiringLocked(block);
    }
  }
  return taken;
}

// --- Cached lists ------------------------------------------------------------

bool AllocationShard::ReserveLocked(size_t bytes) {
  // The other kind's shard of this device updates the same counter under
  // its own lock.
  size_t cached = device_cached_bytes_->load(std::memory_order_relaxed);
  do {
    if (bytes > max_cached_bytes_ || cached > max_cached_bytes_ - bytes) {
      return false;
    }
  } while (!device_cached_bytes_->compare_exchange_weak(
      cached, cached + bytes, std::memory_order_relaxed));
  return true;
}

bool AllocationShard::TryAddCachedLocked(AllocationBlock* block) {
  if (!ReserveLocked(block->size)) return false;
  Bin& bin = bins_[block->size_class];
  if (block->events.empty()) {
    block->release_stream = nullptr;
    bin.ready.PushFront(block);
  } else {
    bin.pending.PushBack(block);
    if (block->release_stream != nullptr) {
      bin.by_stream[block->release_stream].PushFront(block);
    }
  }
  ++stats_.blocks_cached;
  stats_.bytes_cached += static_cast<int64_t>(block->size);
  return true;
}

bool AllocationShard::TryRestorePendingLocked(AllocationBlock* block) {
  // It was the oldest pending block of its bin and of its stream: put it
  // back at those ends — within the cap, which other releases may have
  // filled while it was out for its check.
  if (!ReserveLocked(block->size)) return false;
  Bin& bin = bins_[block->size_class];
  bin.pending.PushFront(block);
  if (block->release_stream != nullptr) {
    bin.by_stream[block->release_stream].PushBack(block);
  }
  ++stats_.blocks_cached;
  stats_.bytes_cached += static_cast<int64_t>(block->size);
  return true;
}

void AllocationShard::UnlinkFromStreamLocked(AllocationBlock* block, Bin& bin) {
  if (block->release_stream == nullptr) return;
  auto it = bin.by_stream.find(block->release_stream);
  it->second.Remove(block);
  // Streams come and go (user-created ones too): keep the map small.
  if (it->second.empty()) bin.by_stream.erase(it);
}

void AllocationShard::RemoveCachedLocked(AllocationBlock* block, Bin& bin,
                                         bool pending) {
  if (pending) {
    bin.pending.Remove(block);
    UnlinkFromStreamLocked(block, bin);
  } else {
    bin.ready.Remove(block);
  }
  --stats_.blocks_cached;
  stats_.bytes_cached -= static_cast<int64_t>(block->size);
  device_cached_bytes_->fetch_sub(block->size, std::memory_order_relaxed);
}

AllocationBlock* AllocationShard::TakeSameStreamLocked(int size_class,
                                                       NativeStream stream) {
  Bin& bin = bins_[size_class];
  auto it = bin.by_stream.find(stream);
  if (it == bin.by_stream.end()) return nullptr;
  AllocationBlock* block = it->second.front();
  RemoveCachedLocked(block, bin, /*pending=*/true);
  return block;
}

AllocationBlock* AllocationShard::TakeReadyLocked(int size_class) {
  Bin& bin = bins_[size_class];
  AllocationBlock* block = bin.ready.front();
  if (block != nullptr) RemoveCachedLocked(block, bin, /*pending=*/false);
  return block;
}

AllocationBlock* AllocationShard::TakeOldestPendingLocked(int size_class) {
  Bin& bin = bins_[size_class];
  AllocationBlock* block = bin.pending.front();
  if (block != nullptr) RemoveCachedLocked(block, bin, /*pending=*/true);
  return block;
}

size_t AllocationShard::TakeCachedLocked(size_t bytes, BlockVector* out) {
  size_t taken = 0;
  for (size_t i = bins_.size(); i-- > 0 && taken < bytes;) {
    Bin& bin = bins_[i];
    while (taken < bytes && !bin.ready.empty()) {
      AllocationBlock* block = bin.ready.front();
      RemoveCachedLocked(block, bin, /*pending=*/false);
      taken += block->size;
      out->push_back(block);
    }
    while (taken < bytes && !bin.pending.empty()) {
      AllocationBlock* block = bin.pending.front();
      RemoveCachedLocked(block, bin, /*pending=*/true);
      taken += block->size;
      out->push_back(block);
    }
  }
  return taken;
}

// --- Retiring ----------------------------------------------------------------

void AllocationShard::AddRetiringLocked(AllocationBlock* block) {
  retiring_.PushBack(block);
  ++stats_.blocks_retiring;
  stats_.bytes_retiring += static_cast<int64_t>(block->size);
}

AllocationBlock* AllocationShard::TakeOldestRetiringLocked() {
  AllocationBlock* block = retiring_.PopFront();
  if (block != nullptr) {
    --stats_.blocks_retiring;
    stats_.bytes_retiring -= static_cast<int64_t>(block->size);
  }
  return block;
}

void AllocationShard::TakeAllRetiringLocked(BlockVector* out) {
  while (AllocationBlock* block = TakeOldestRetiringLocked()) {
    out->push_back(block);
  }
}

AllocationBlock* AllocationShard::TakeOldestRetiring() {
  MutexLock lock(&mu_);
  return TakeOldestRetiringLocked();
}

void AllocationShard::RestoreRetiring(AllocationBlock* block) {
  MutexLock lock(&mu_);
  retiring_.PushFront(block);
  ++stats_.blocks_retiring;
  stats_.bytes_retiring += static_cast<int64_t>(block->size);
}

// --- Freeing -----------------------------------------------------------------

void AllocationShard::TakeForRelease(size_t bytes, bool with_retiring,
                                     uint64_t generation, BlockVector* out,
                                     BlockVector* stale) {
  MutexLock lock(&mu_);
  TakeStaleLocked(generation, stale);
  if (bytes > 0) TakeCachedLocked(bytes, out);
  if (with_retiring) TakeAllRetiringLocked(out);
}

void AllocationShard::TakeEverything(bool close, bool leak, uint64_t generation,
                                     BlockVector* blocks,
                                     std::vector<void*>* stable,
                                     BlockVector* stale) {
  MutexLock lock(&mu_);
  if (close) closed_ = true;
  TakeStaleLocked(generation, stale);
  const size_t first_block = blocks->size();
  const size_t first_stable = stable->size();
  TakeCachedLocked(static_cast<size_t>(-1), blocks);
  TakeAllRetiringLocked(blocks);
  for (auto& [name, buffer] : stable_) {
    if (buffer->ptr == nullptr || buffer->busy) continue;
    stable->push_back(TakeStableLocked(buffer.get()));
  }
  if (leak) {
    ledger_.Retire(RetireReason::kLeaked,
                   static_cast<int64_t>(blocks->size() - first_block +
                                        stable->size() - first_stable));
  }
}

void AllocationShard::TakeStale(uint64_t generation, BlockVector* stale) {
  MutexLock lock(&mu_);
  TakeStaleLocked(generation, stale);
}

void AllocationShard::TakeStaleLocked(uint64_t generation, BlockVector* out) {
  // Generations only grow; a caller that read an older one than a
  // concurrent caller must not drop the newer generation's blocks.
  if (generation <= seen_generation_) return;
  seen_generation_ = generation;
  const size_t first = out->size();
  for (Bin& bin : bins_) {
    for (AllocationBlock* block = bin.ready.front(); block != nullptr;) {
      AllocationBlock* next = PrimaryList::Next(block);
      if (block->generation != generation) {
        RemoveCachedLocked(block, bin, /*pending=*/false);
        out->push_back(block);
      }
      block = next;
    }
    for (AllocationBlock* block = bin.pending.front(); block != nullptr;) {
      AllocationBlock* next = PrimaryList::Next(block);
      if (block->generation != generation) {
        RemoveCachedLocked(block, bin, /*pending=*/true);
        out->push_back(block);
      }
      block = next;
    }
  }
  for (AllocationBlock* block = retiring_.front(); block != nullptr;) {
    AllocationBlock* next = PrimaryList::Next(block);
    if (block->generation != generation) {
      retiring_.Remove(block);
      --stats_.blocks_retiring;
      stats_.bytes_retiring -= static_cast<int64_t>(block->size);
      out->push_back(block);
    }
    block = next;
  }
  int64_t dropped = static_cast<int64_t>(out->size() - first);
  for (auto& [name, buffer] : stable_) {
    if (buffer->ptr != nullptr && !buffer->busy &&
        buffer->generation != generation) {
      TakeStableLocked(buffer.get());
      ++dropped;
    }
  }
  ledger_.Retire(RetireReason::kDropped, dropped);
}

// --- Counting ----------------------------------------------------------------

void AllocationShard::Count(CacheCounter tally) {
  MutexLock lock(&mu_);
  switch (tally) {
    case CacheCounter::kMiss:
      ++stats_.misses;
      break;
    case CacheCounter::kUncached:
      ++stats_.uncached_allocations;
      break;
    case CacheCounter::kOomRetry:
      ++stats_.oom_retries;
      break;
    case CacheCounter::kFailedAllocation:
      ++stats_.failed_allocations;
      break;
  }
}

void AllocationShard::Admit() {
  MutexLock lock(&mu_);
  ledger_.Admit();
}

void AllocationShard::Retire(RetireReason how, int64_t count) {
  MutexLock lock(&mu_);
  ledger_.Retire(how, count);
}

AllocationCacheStats AllocationShard::Stats() const {
  MutexLock lock(&mu_);
  AllocationCacheStats stats = stats_;
  stats.runtime_allocations = ledger_.admitted();
  stats.runtime_frees = ledger_.departed(RetireReason::kDestroyed);
  stats.blocks_dropped = ledger_.departed(RetireReason::kDropped);
  stats.blocks_leaked = ledger_.departed(RetireReason::kLeaked);
  return stats;
}

void AllocationShard::AppendOutstanding(
    std::vector<OutstandingLease>* out) const {
  MutexLock lock(&mu_);
  for (const AllocationBlock* block = in_use_.front(); block != nullptr;
       block = PrimaryList::Next(block)) {
    out->push_back(OutstandingLease{
        "allocation", device_,
        absl::StrCat(MemoryKindName(kind_), " ", block->requested, " bytes"),
        block->lease_id, block->where});
  }
}

void AllocationShard::ForEachBlock(
    absl::FunctionRef<void(const AllocationBlock&, BlockUse)> visit,
    absl::FunctionRef<void(absl::string_view, const StableBuffer&)> stable)
    const {
  MutexLock lock(&mu_);
  const auto each = [&](const PrimaryList& list, BlockUse use) {
    for (const AllocationBlock* block = list.front(); block != nullptr;
         block = PrimaryList::Next(block)) {
      visit(*block, use);
    }
  };
  each(in_use_, BlockUse::kLeased);
  for (const Bin& bin : bins_) {
    each(bin.ready, BlockUse::kFree);
    each(bin.pending, BlockUse::kPending);
  }
  each(retiring_, BlockUse::kRetiring);
  for (const auto& [name, buffer] : stable_) {
    if (buffer->ptr != nullptr) stable(name, *buffer);
  }
}

}  // namespace gpupool::internal
