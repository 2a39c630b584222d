// An allocation shard's release slot: one block released onto its lane
// whose bookkeeping (AllocationShard::Park's) is still to be done, handed
// from a release, which takes no lock, to the next holder of the shard's
// lock. The protocol:
//   * Offer (no lock): fills the slot only when it is empty, with one
//     compare-and-swap, the releasing thread's last access to the shard
//     (the block carries its lease's hold on the shard from then on:
//     AllocationBlock::slot_hold).
//   * Take, PutBack, Close (the shard's lock held): only a lock holder
//     empties a full slot, so Take empties it with a load and a store (no
//     read-modify-write). Close swaps in a mark that no Offer can replace
//     (an Offer fills only an empty slot), taking the block that was there:
//     after it every Offer fails, and no block is left in a slot nobody
//     settles.
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
    AllocationBlock* block = slot_.load(std::memory_order_relaxed);
    return block != nullptr && block != Closed();
  }

  // Leaves `block` in the slot: false, nothing changed, when it holds one
  // or is closed. On true the block is no longer the caller's: it may be
  // taken (and the shard closed) before this returns.
  bool Offer(AllocationBlock* block) {
    AllocationBlock* empty = nullptr;
    return slot_.compare_exchange_strong(
        empty, block, std::memory_order_release, std::memory_order_relaxed);
  }

  // The block waiting, taken out, or nullptr. The caller holds the shard's
  // lock: no other thread empties the slot while it holds a block.
  AllocationBlock* Take() {
    AllocationBlock* block = slot_.load(std::memory_order_acquire);
    if (block == nullptr || block == Closed()) return nullptr;
    slot_.store(nullptr, std::memory_order_relaxed);
    return block;
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
    AllocationBlock* block = slot_.load(std::memory_order_acquire);
    return block == Closed() ? nullptr : block;
  }

  // Closes the slot for good (the shard's lock held) and returns the block
  // that waited there, if any.
  AllocationBlock* Close() {
    AllocationBlock* block =
        slot_.exchange(Closed(), std::memory_order_acq_rel);
    return block == Closed() ? nullptr : block;
  }

 private:
  // The closed mark: an address no block has, never dereferenced.
  static AllocationBlock* Closed() {
    return reinterpret_cast<AllocationBlock*>(alignof(AllocationBlock));
  }

  std::atomic<AllocationBlock*> slot_{nullptr};
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_RELEASE_SLOT_H_
