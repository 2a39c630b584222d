// The blocks of one allocation shard that are out of its care for now: its
// leases, with their gauges (count, bytes, bytes asked for, the peak), and
// the parked blocks taken off their lanes to have their fence recorded
// (fencing), which sit in the list until their release but count, for
// whoever looks, as the cached blocks they still are.
//
// A lease taken again from the release slot stays where it is in the list:
// moving it to the front would write the blocks beside it and the one in
// front, other threads' leases, whose cache lines then cross between cores
// while the shard's lock is held (with several threads on one device that
// lengthened the locked section, and threads found the lock held, and
// slept, far more often than CUB's on its mutex).
// The leak report's order, newest lease first, is made when it is asked
// for, from each lease's place on the shard's lease clock (leased_at).
//
// Thread safety: none of its own; the shard's lock guards it.

#ifndef GPUPOOL_SRC_ALLOCATION_IN_USE_H_
#define GPUPOOL_SRC_ALLOCATION_IN_USE_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/base/optimization.h"
#include "gpupool/allocation_cache.h"
#include "src/allocation/block.h"

namespace gpupool::internal {

class InUseList {
 public:
  // The newest lease, or a block taken off its lane (fencing), first.
  void Add(AllocationBlock* block) {
    list_.PushFront(block);
    ++count_;
    bytes_ += static_cast<int64_t>(block->size);
    requested_ += static_cast<int64_t>(block->requested);
  }
  void Remove(AllocationBlock* block) {
    if (ABSL_PREDICT_FALSE(block->fencing)) {
      block->fencing = false;
      --fencing_.count;
      fencing_.bytes -= static_cast<int64_t>(block->size);
      fencing_.requested -= static_cast<int64_t>(block->requested);
    }
    list_.Remove(block);
    --count_;
    bytes_ -= static_cast<int64_t>(block->size);
    requested_ -= static_cast<int64_t>(block->requested);
  }
  // After a lease (Add): the peak of the leases' bytes.
  void RaisePeak() { peak_ = std::max(peak_, bytes_ - fencing_.bytes); }
  // A block still in the list leased again (the release slot's hit):
  // `requested` is what the new lease asked for. It keeps its place: only
  // the block and the gauges are written.
  void Relend(AllocationBlock* block, size_t requested) {
    requested_ += static_cast<int64_t>(requested) -
                  static_cast<int64_t>(block->requested);
    block->requested = requested;
  }
  // `block` (just added) is a parked block to be fenced, not a lease.
  void StartFencing(AllocationBlock* block) {
    block->fencing = true;
    ++fencing_.count;
    fencing_.bytes += static_cast<int64_t>(block->size);
    fencing_.requested += static_cast<int64_t>(block->requested);
  }

  // The gauges into `stats`: the leases in use, and blocks being fenced as
  // cached.
  void AddTo(AllocationCacheStats* stats) const {
    stats->allocations_in_use = count_ - fencing_.count;
    stats->bytes_in_use = bytes_ - fencing_.bytes;
    stats->bytes_rounded = bytes_ - fencing_.bytes;
    stats->bytes_requested = requested_ - fencing_.requested;
    stats->peak_bytes_in_use = peak_;
    stats->blocks_cached += fencing_.count;
    stats->bytes_cached += fencing_.bytes;
  }
  // `visit(block)` for every block, fencing ones included, in no
  // particular order.
  template <typename Visit>
  void ForEach(Visit visit) const {
    for (const AllocationBlock* block = list_.front(); block != nullptr;
         block = PrimaryList::Next(block)) {
      visit(*block);
    }
  }
  // `visit(block)` for every lease (fencing blocks left out), the newest
  // first: the latest place on the lease clock (AllocationBlock::leased_at)
  // first. Sorted here, for the leak report, so that no hit has to move its
  // block (Relend).
  template <typename Visit>
  void ForEachLeaseNewestFirst(Visit visit) const {
    std::vector<const AllocationBlock*> leases;
    leases.reserve(static_cast<size_t>(count_ - fencing_.count));
    ForEach([&leases](const AllocationBlock& block) {
      if (!block.fencing) leases.push_back(&block);
    });
    std::sort(leases.begin(), leases.end(),
              [](const AllocationBlock* a, const AllocationBlock* b) {
                return a->leased_at > b->leased_at;
              });
    for (const AllocationBlock* block : leases) visit(*block);
  }

 private:
  struct Fencing {
    int64_t count = 0;
    int64_t bytes = 0;
    int64_t requested = 0;
  };
  PrimaryList list_;
  int64_t count_ = 0;
  int64_t bytes_ = 0;  // rounded: the blocks' sizes
  int64_t requested_ = 0;
  int64_t peak_ = 0;
  Fencing fencing_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_IN_USE_H_
