// An allocation shard's release slot: one block released onto its lane
// whose bookkeeping (AllocationShard::Park's) is still to be done, handed
// from a release, which takes no lock, to the next holder of the shard's
// lock. The protocol, lock-free on the releasing side:
//   * Offer (no lock): fills the slot only when it is empty.
//   * Take, PutBack (the shard's lock held): only a lock holder empties the
//     slot, or refills it with the block it took.
//   * Close (before the closing lock): an Offer that comes after it (its
//     store ordered after the close's mark) takes its block back and fails,
//     so that no block is left in a slot nobody settles; an Offer before it
//     is settled by the closing lock.
// Holds blocks, never owns them.

#ifndef GPUPOOL_SRC_ALLOCATION_RELEASE_SLOT_H_
#define GPUPOOL_SRC_ALLOCATION_RELEASE_SLOT_H_

#include <atomic>

#include "src/allocation/block.h"

namespace gpupool::internal {

class ReleaseSlot {
 public:
  ReleaseSlot() = default;
  ReleaseSlot(const ReleaseSlot&) = delete;
  ReleaseSlot& operator=(const ReleaseSlot&) = delete;

  // Whether a block waits: a hint without the lock, exact with it.
  bool occupied() const {
    return slot_.load(std::memory_order_relaxed) != nullptr;
  }

  // Leaves `block` in the slot: false, nothing changed, when it holds one
  // or the slot closed meanwhile.
  bool Offer(AllocationBlock* block) {
    AllocationBlock* empty = nullptr;
    if (!slot_.compare_exchange_strong(empty, block)) return false;
    // Sequentially consistent with Close: either the closing lock settles
    // this block, or this load sees the mark and takes it back.
    if (closed_.load()) {
      AllocationBlock* mine = block;
      if (slot_.compare_exchange_strong(mine, nullptr)) return false;
    }
    return true;
  }

  // The block waiting, taken out, or nullptr. The caller holds the shard's
  // lock.
  AllocationBlock* Take() {
    if (!occupied()) return nullptr;  // no atomic exchange for nothing
    return slot_.exchange(nullptr, std::memory_order_acquire);
  }

  // Puts back the block the caller took (the shard's lock held throughout):
  // false when a release filled the slot meanwhile.
  bool PutBack(AllocationBlock* block) {
    AllocationBlock* empty = nullptr;
    return slot_.compare_exchange_strong(empty, block);
  }

  // The block waiting, left in place (the shard's lock held: only a holder
  // takes it, so its fields may be read).
  AllocationBlock* Peek() const {
    return slot_.load(std::memory_order_acquire);
  }

  // Marks the slot closed; the caller then takes the lock and settles it.
  void Close() { closed_.store(true); }

 private:
  std::atomic<AllocationBlock*> slot_{nullptr};
  std::atomic<bool> closed_{false};
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_RELEASE_SLOT_H_
