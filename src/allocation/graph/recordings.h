// The recordings of one graph pool (gpupool/graph_pool.h, RetainBy): the
// captures into a pool since a graph last retained it form one recording;
// the first capture after a RetainBy starts the next. A recording whose
// retaining graphs may still run keeps its blocks to itself: a capture of
// another recording never reuses them (a command buffer re-recorded while
// its old graph is still queued). Once every graph that retained it, with
// its launches, is gone the recording is over: its blocks that only its
// captures used serve later captures again, and those used outside a
// capture go back to the general cache behind their own ready events.
//
// Thread safety: none of its own; the pool's mutex guards it (a member of
// GraphPoolState). The graphs' references are lock-free counts dropped on
// runtime threads (GraphRetain).

#ifndef GPUPOOL_SRC_ALLOCATION_GRAPH_RECORDINGS_H_
#define GPUPOOL_SRC_ALLOCATION_GRAPH_RECORDINGS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/allocation/block.h"

namespace gpupool::internal {

// The references to a graph-owned pool or to one of its recordings: one per
// graph that retains it, dropped by a user object's destructor on a runtime
// thread (and, for the pool, the handle's, dropped when the handle lets go).
// Lock-free: a destructor may take no lock a runtime thread could wait on.
// The last drop raises `collect` (the router's HasCollectable).
struct GraphRetain {
  std::atomic<int64_t> refs{0};
  std::shared_ptr<std::atomic<bool>> collect;
  // Whether a RetainBy succeeded (the pool's mutex guards it): a reference
  // taken by a RetainBy that then failed is no graph's. A recording set
  // apart that no graph ever held is never over: the pool keeps its blocks
  // while its handle lives (Over, ForgetOver), as it keeps a recording's
  // that nothing retained.
  bool held_by_graph = false;

  void Drop() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      collect->store(true, std::memory_order_release);
    }
  }
};

class PoolRecordings {
 public:
  // The tag of a block whose recording is over and that only captures used:
  // any later recording's capture may reuse it (on its release stream).
  static constexpr uint64_t kIdle = 0;

  // The recording new blocks of the pool join.
  uint64_t current() const { return current_; }

  // A capture into the pool begins: a current recording that a graph
  // retained is set apart, and the next one begins. One already over (its
  // graphs gone before this capture) raises `collect` so that its blocks are
  // settled at the next collection.
  void CaptureBegins() {
    if (current_retain_ == nullptr) return;  // not retained: captures share
    if (current_retain_->refs.load(std::memory_order_acquire) == 0) {
      current_retain_->collect->store(true, std::memory_order_release);
    }
    apart_.push_back(Apart{current_, std::move(current_retain_)});
    current_retain_.reset();
    ++current_;
  }

  // RetainBy: one more reference to the current recording, for one graph;
  // the graph's user object drops it.
  std::shared_ptr<GraphRetain> RetainCurrent(
      const std::shared_ptr<std::atomic<bool>>& collect) {
    if (current_retain_ == nullptr) {
      current_retain_ = std::make_shared<GraphRetain>();
      current_retain_->collect = collect;
    }
    current_retain_->refs.fetch_add(1, std::memory_order_acq_rel);
    return current_retain_;
  }

  // Whether a block tagged `recording` belongs to a recording that is over:
  // set apart, and every graph that retained it gone (SettleOver retags or
  // gives back such blocks).
  bool Over(uint64_t recording) const {
    return recording != kIdle && recording != current_ &&
           std::none_of(apart_.begin(), apart_.end(), [&](const Apart& apart) {
             return apart.number == recording && !Done(apart);
           });
  }

  // Forgets the recordings set apart whose graphs are all gone (they are
  // Over from here on); whether there was one.
  bool ForgetOver() {
    const size_t before = apart_.size();
    apart_.erase(std::remove_if(apart_.begin(), apart_.end(),
                                [](const Apart& apart) { return Done(apart); }),
                 apart_.end());
    return apart_.size() != before;
  }

  // Settles the blocks of recordings that are over, taken from `free`: a
  // block no stream outside a capture used (no events) is retagged kIdle
  // and stays; the others are removed and returned, for the general cache.
  std::vector<AllocationBlock*> SettleOver(std::vector<AllocationBlock*>& free);

  // Recordings set apart whose graphs may still run (for stats).
  int64_t apart() const { return static_cast<int64_t>(apart_.size()); }

 private:
  struct Apart {
    uint64_t number;
    std::shared_ptr<GraphRetain> retain;
  };
  // Every graph that held the recording is gone (and one did).
  static bool Done(const Apart& apart) {
    return apart.retain->held_by_graph &&
           apart.retain->refs.load(std::memory_order_acquire) == 0;
  }

  uint64_t current_ = 1;
  // The current recording's graph references; null until RetainBy.
  std::shared_ptr<GraphRetain> current_retain_;
  std::vector<Apart> apart_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_GRAPH_RECORDINGS_H_
