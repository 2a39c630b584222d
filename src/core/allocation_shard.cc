// Free lists and counters of one (device, MemoryKind); see allocation_shard.h.

#include "src/core/allocation_shard.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpupool::internal {

AllocationShard::AllocationShard(int device, MemoryKind kind,
                                 int size_class_count,
                                 std::atomic<size_t>* device_cached_bytes)
    : device_(device),
      kind_(kind),
      device_cached_bytes_(device_cached_bytes),
      bins_(static_cast<size_t>(std::max(size_class_count, 1))) {}

// No lock: nothing else references a shard being destroyed, and in a fork()
// child the lock may be held forever by a thread that no longer exists.
AllocationShard::~AllocationShard() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::vector<AllocationBlock*> blocks;
  TakeCachedLocked(static_cast<size_t>(-1), &blocks);
  TakeAllRetiringLocked(&blocks);
  for (AllocationBlock* block : blocks) delete block;
  // Leased blocks belong to their leases, which hold this shard alive: none
  // can be left here.
}

bool AllocationShard::TryAddCachedLocked(AllocationBlock* block,
                                         size_t max_cached_bytes) {
  // Reserve against the per-device cap first: the other kind's shard of this
  // device updates the same counter under its own lock.
  size_t cached = device_cached_bytes_->load(std::memory_order_relaxed);
  do {
    if (block->size > max_cached_bytes ||
        cached > max_cached_bytes - block->size) {
      return false;
    }
  } while (!device_cached_bytes_->compare_exchange_weak(
      cached, cached + block->size, std::memory_order_relaxed));

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
  ++stats.blocks_cached;
  stats.bytes_cached += static_cast<int64_t>(block->size);
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
  --stats.blocks_cached;
  stats.bytes_cached -= static_cast<int64_t>(block->size);
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

void AllocationShard::RestorePendingLocked(AllocationBlock* block) {
  // It was the oldest pending block of its bin and of its stream: put it
  // back at those ends, past any cap check (it was counted before).
  Bin& bin = bins_[block->size_class];
  bin.pending.PushFront(block);
  if (block->release_stream != nullptr) {
    bin.by_stream[block->release_stream].PushBack(block);
  }
  ++stats.blocks_cached;
  stats.bytes_cached += static_cast<int64_t>(block->size);
  device_cached_bytes_->fetch_add(block->size, std::memory_order_relaxed);
}

size_t AllocationShard::TakeCachedLocked(size_t bytes,
                                         std::vector<AllocationBlock*>* out) {
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

void AllocationShard::AddRetiringLocked(AllocationBlock* block) {
  retiring_.PushBack(block);
  ++stats.blocks_retiring;
  stats.bytes_retiring += static_cast<int64_t>(block->size);
}

AllocationBlock* AllocationShard::TakeOldestRetiringLocked() {
  AllocationBlock* block = retiring_.PopFront();
  if (block != nullptr) {
    --stats.blocks_retiring;
    stats.bytes_retiring -= static_cast<int64_t>(block->size);
  }
  return block;
}

void AllocationShard::RestoreRetiringLocked(AllocationBlock* block) {
  retiring_.PushFront(block);
  ++stats.blocks_retiring;
  stats.bytes_retiring += static_cast<int64_t>(block->size);
}

void AllocationShard::TakeAllRetiringLocked(
    std::vector<AllocationBlock*>* out) {
  while (AllocationBlock* block = TakeOldestRetiringLocked()) {
    out->push_back(block);
  }
}

void AllocationShard::AddInUseLocked(AllocationBlock* block) {
  in_use_.PushFront(block);
  ++stats.allocations_in_use;
  stats.bytes_in_use += static_cast<int64_t>(block->size);
  stats.bytes_rounded += static_cast<int64_t>(block->size);
  stats.bytes_requested += static_cast<int64_t>(block->requested);
  stats.peak_bytes_in_use =
      std::max(stats.peak_bytes_in_use, stats.bytes_in_use);
}

void AllocationShard::RemoveInUseLocked(AllocationBlock* block) {
  in_use_.Remove(block);
  --stats.allocations_in_use;
  stats.bytes_in_use -= static_cast<int64_t>(block->size);
  stats.bytes_rounded -= static_cast<int64_t>(block->size);
  stats.bytes_requested -= static_cast<int64_t>(block->requested);
}

void AllocationShard::AppendOutstandingLocked(
    std::vector<OutstandingLease>* out) const {
  for (const AllocationBlock* block = in_use_.front(); block != nullptr;
       block = PrimaryList::Next(block)) {
    out->push_back(OutstandingLease{
        "allocation", device_,
        absl::StrCat(MemoryKindName(kind_), " ", block->requested, " bytes"),
        block->lease_id, block->where});
  }
}

void AllocationShard::TakeStaleLocked(uint64_t generation,
                                      std::vector<AllocationBlock*>* out) {
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
      --stats.blocks_retiring;
      stats.bytes_retiring -= static_cast<int64_t>(block->size);
      out->push_back(block);
    }
    block = next;
  }
  stats.blocks_dropped += static_cast<int64_t>(out->size() - first);
  for (auto& [name, buffer] : stable) {
    if (buffer->ptr != nullptr && !buffer->busy &&
        buffer->generation != generation) {
      TakeStableLocked(buffer.get());
      ++stats.blocks_dropped;
    }
  }
}

void* AllocationShard::TakeStableLocked(StableBuffer* buffer) {
  void* ptr = buffer->ptr;
  if (ptr != nullptr) {
    --stats.stable_allocations;
    stats.bytes_stable -= static_cast<int64_t>(buffer->capacity);
  }
  buffer->ptr = nullptr;
  buffer->capacity = 0;
  return ptr;
}

}  // namespace gpupool::internal
