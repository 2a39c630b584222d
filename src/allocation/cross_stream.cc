// The check of blocks released on other streams before another stream leases
// them (cross_stream.h).

#include "src/allocation/cross_stream.h"

#include <cstdint>

namespace gpupool::internal {

AllocationBlock* CrossStreamCheck::CheckUncheckedLease(
    AllocationShard& shard, const UncheckedLease& unchecked) {
  AllocationBlock* block = unchecked.block;
  // As TakeFromCandidates checks a candidate: one query (or one wait of the
  // lease's stream, block->stream) per event, kept as spares for the lease's
  // release; a query after a plain failure of the wait (the lease keeps the
  // wait it was counted as).
  constexpr auto kKeep = StreamOrderFence::Consumed::kKeepAsSpares;
  BlockState state = BlockState::kDrop;
  if (!health_.is_poisoned(block->device)) {
    state = unchecked.waits ? fence_.MakeStreamWait(block, block->stream, kKeep)
                            : BlockState::kPending;
    if (state == BlockState::kPending && !health_.is_poisoned(block->device)) {
      state = fence_.QueryEvents(block, kKeep);
    }
  }
  const uint64_t now = health_.generation(block->device);
  if (state == BlockState::kIdle && block->generation == now) return block;
  BlockVector garbage;
  shard.UndoUncheckedLease(unchecked, state, now, &garbage);
  DeleteBlocks(garbage);
  return nullptr;
}

AllocationBlock* CrossStreamCheck::TakeFromCandidates(
    AllocationShard& shard, const BlockVector& candidates,
    const LeaseRequest& request) {
  const bool wait_on_stream = WaitsOn(request.stream);
  AllocationBlock* chosen = nullptr;
  bool waited = false;
  BlockVector keep;
  BlockVector dropped;
  BlockVector leaked;
  for (AllocationBlock* candidate : candidates) {
    if (chosen != nullptr) {
      keep.push_back(candidate);
      continue;
    }
    // An earlier candidate's sticky fault poisoned the device: the others
    // are dropped without another runtime call.
    if (health_.is_poisoned(candidate->device)) {
      dropped.push_back(candidate);
      continue;
    }
    // The chosen block keeps its events as spares for its next release: a
    // cross-stream reuse makes one query (or one wait) per event and no
    // EventPool round trip, whose return would query each event again.
    constexpr auto kKeep = StreamOrderFence::Consumed::kKeepAsSpares;
    BlockState state = BlockState::kPending;
    if (wait_on_stream) {
      state = fence_.MakeStreamWait(candidate, request.stream, kKeep);
      waited = state == BlockState::kIdle;
    }
    // Fall back to a query only after a plain failure of the wait
    // (kPending): a sticky fault (kDrop) or an unloading runtime (kLeak)
    // must not be followed by another runtime call.
    if (!waited && state == BlockState::kPending) {
      state = fence_.QueryEvents(candidate, kKeep);
    }
    switch (state) {
      case BlockState::kIdle:
        chosen = candidate;
        break;
      case BlockState::kPending:
        keep.push_back(candidate);
        break;
      case BlockState::kDrop:
        dropped.push_back(candidate);
        break;
      case BlockState::kLeak:
        leaked.push_back(candidate);
        break;
    }
  }
  BlockVector garbage;
  chosen =
      shard.SettleCandidates(chosen, waited, keep, dropped, leaked, request,
                             health_.generation(shard.device()), &garbage);
  DeleteBlocks(garbage);
  return chosen;
}

}  // namespace gpupool::internal
