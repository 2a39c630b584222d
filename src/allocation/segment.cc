// Blocks of a segment; see segment.h.

#include "src/allocation/segment.h"

#include <utility>

#include "src/allocation/size_classes.h"

namespace gpupool::internal {

void DeleteEachBlock(const BlockVector& blocks) {
  for (AllocationBlock* block : blocks) delete block;
}

AllocationBlock* SplitBlock(AllocationBlock* block, size_t bytes,
                            bool rest_takes_events, BlockRecords* records) {
  if (block->size < bytes || block->size - bytes < kMinSplitRemainder) {
    return nullptr;
  }
  AllocationBlock* rest = records->New();
  rest->ptr = static_cast<char*>(block->ptr) + bytes;
  rest->size = block->size - bytes;
  rest->device = block->device;
  rest->kind = block->kind;
  rest->generation = block->generation;
  rest->prev_in_segment = block;
  rest->next_in_segment = block->next_in_segment;
  if (rest->next_in_segment != nullptr) {
    rest->next_in_segment->prev_in_segment = rest;
  }
  block->next_in_segment = rest;
  block->size = bytes;
  block->size_class = FloorSizeClass(bytes);
  rest->size_class = FloorSizeClass(rest->size);
  if (rest_takes_events && !block->events.empty()) {
    MoveEvents(block->events, rest->events);
    rest->release_stream = block->release_stream;
  }
  return rest;
}

namespace {

// `block`'s events, covered by a later one, become spares: the stash's
// while it has room (they would reach it at the block's next release
// otherwise, after a trip through its lease), else the block's own.
void SpareCovered(AllocationBlock* block, SpareEvents* stash) {
  for (PooledEvent& event : block->events) {
    if (stash != nullptr && stash->size() < kMaxStashedSpares) {
      stash->push_back(std::move(event));
    } else {
      block->spare_events.push_back(std::move(event));
    }
  }
  block->events.clear();
}

}  // namespace

void AbsorbAbove(AllocationBlock* low, AllocationBlock* high,
                 const AllocationBlock* released, BlockRecords* records,
                 SpareEvents* stash) {
  // Covered events are spares: the released block's later event fences them.
  if (Covers(released, low)) SpareCovered(low, stash);
  if (Covers(released, high)) SpareCovered(high, stash);
  NativeStream stream = nullptr;
  if (low->events.empty()) {
    stream = high->release_stream;
  } else if (high->events.empty() ||
             low->release_stream == high->release_stream) {
    stream = low->release_stream;
  }
  MoveEvents(high->events, low->events);
  MoveEvents(high->spare_events, low->spare_events);
  low->release_stream = low->events.empty() ? nullptr : stream;
  low->size += high->size;
  low->size_class = FloorSizeClass(low->size);
  low->next_in_segment = high->next_in_segment;
  if (low->next_in_segment != nullptr) {
    low->next_in_segment->prev_in_segment = low;
  }
  records->Recycle(high);  // no events, no owner: nothing to release
}

AllocationBlock* MergeFreeNeighbours(
    AllocationBlock* block, bool released, BlockRecords* records,
    absl::FunctionRef<void(AllocationBlock*)> unlist, SpareEvents* stash) {
  // The just-released block whose single event may cover its neighbours';
  // after a merge the survivor carries that event alone, or not.
  const AllocationBlock* fresh = released ? block : nullptr;
  for (;;) {
    AllocationBlock* prev = block->prev_in_segment;
    if (prev != nullptr && prev->free_listed && CanMerge(prev, block, fresh)) {
      unlist(prev);
      // The survivor's fence is still the released event alone when the
      // neighbour's was covered or it had none.
      const bool keeps = Covers(fresh, prev) || prev->events.empty();
      const uint64_t leased_at = block->leased_at;
      AbsorbAbove(prev, block, fresh, records, stash);
      block = prev;
      if (fresh != nullptr && keeps) {
        block->leased_at = leased_at;  // a free block's own is not used
        fresh = block;
      } else {
        fresh = nullptr;
      }
      continue;
    }
    AllocationBlock* next = block->next_in_segment;
    if (next != nullptr && next->free_listed && CanMerge(block, next, fresh)) {
      unlist(next);
      const bool keeps = Covers(fresh, next) || next->events.empty();
      AbsorbAbove(block, next, fresh, records, stash);
      if (!keeps) fresh = nullptr;
      continue;
    }
    return block;
  }
}

bool IsRunHead(const AllocationBlock* block) {
  const AllocationBlock* prev = block->prev_in_segment;
  const AllocationBlock* next = block->next_in_segment;
  return (prev == nullptr || !prev->free_listed) && next != nullptr &&
         next->free_listed;
}

void MergeRun(AllocationBlock* head, BlockRecords* records,
              absl::FunctionRef<void(AllocationBlock*)> unlist) {
  while (head->next_in_segment != nullptr &&
         head->next_in_segment->free_listed) {
    AllocationBlock* next = head->next_in_segment;
    unlist(next);
    AbsorbAbove(head, next, /*released=*/nullptr, records);
  }
}

void StashSparesSlow(AllocationBlock* block, SpareEvents* stash) {
  while (block->spare_events.size() > 1 && stash->size() < kMaxStashedSpares) {
    stash->push_back(std::move(block->spare_events.back()));
    block->spare_events.pop_back();
  }
}

void LendSpareSlow(AllocationBlock* block, SpareEvents* stash) {
  block->spare_events.push_back(std::move(stash->back()));
  stash->pop_back();
}

AllocationBlock* CarryOut(SpareEvents* stash, BlockRecords* records) {
  if (stash->empty()) return nullptr;
  AllocationBlock* carrier = records->New();
  for (PooledEvent& event : *stash) carrier->events.push_back(std::move(event));
  stash->clear();
  return carrier;
}

bool DetachFromSegment(AllocationBlock* block) {
  AllocationBlock* prev = block->prev_in_segment;
  AllocationBlock* next = block->next_in_segment;
  if (prev != nullptr) prev->next_in_segment = next;
  if (next != nullptr) next->prev_in_segment = prev;
  block->prev_in_segment = nullptr;
  block->next_in_segment = nullptr;
  return prev == nullptr && next == nullptr;
}

}  // namespace gpupool::internal

namespace gpupool::internal {

bool LeaveSegment(AllocationBlock* block, bool leaked, BlockRecords* records,
                  BlockList<&AllocationBlock::links>* pins) {
  if (!leaked || IsWholeSegment(block)) return DetachFromSegment(block);
  AllocationBlock* pin = records->New();
  pins->PushBack(pin);
  const AllocationBlock* head = block;
  while (head->prev_in_segment != nullptr) head = head->prev_in_segment;
  bool first = true;  // the segment's first leaked part
  for (const AllocationBlock* b = head; b != nullptr; b = b->next_in_segment) {
    first = first && !b->leaked_part;
  }
  pin->ptr = block->ptr;
  pin->size = block->size;
  pin->size_class = block->size_class;
  pin->device = block->device;
  pin->kind = block->kind;
  pin->generation = block->generation;
  pin->leaked_part = true;
  pin->prev_in_segment = block->prev_in_segment;
  pin->next_in_segment = block->next_in_segment;
  if (pin->prev_in_segment != nullptr)
    pin->prev_in_segment->next_in_segment = pin;
  if (pin->next_in_segment != nullptr)
    pin->next_in_segment->prev_in_segment = pin;
  block->prev_in_segment = nullptr;
  block->next_in_segment = nullptr;
  return first;
}

int64_t DetachAll(absl::Span<AllocationBlock* const> blocks) {
  int64_t last = 0;
  for (AllocationBlock* block : blocks) last += DetachFromSegment(block);
  return last;
}

}  // namespace gpupool::internal
