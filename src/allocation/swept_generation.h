// What one allocation shard knows of its device's generations (DeviceHealth):
// the newest it has swept its dead blocks for, and whether a block of an
// older one came in since.
//
// A caller reads the device's generation before it takes the shard's lock,
// so another thread may poison the device, recover it and sweep the shard
// in between: the caller's block, and the caller's generation, may be older
// than the newest swept. Generations only grow, so "older than the newest
// swept" is dead whatever the caller read.
//
// Thread safety: none of its own; the shard's lock guards it.

#ifndef GPUPOOL_SRC_ALLOCATION_SWEPT_GENERATION_H_
#define GPUPOOL_SRC_ALLOCATION_SWEPT_GENERATION_H_

#include <cstdint>

#include "absl/base/optimization.h"
#include "src/allocation/block.h"

namespace gpupool::internal {

class SweptGeneration {
 public:
  // Whether a caller that read `generation` must sweep first: a generation
  // newer than the newest swept, or a stale block came in (NoteStale).
  bool SweepDue(uint64_t generation) const {
    return ABSL_PREDICT_FALSE(generation > newest_ || stale_left_);
  }
  // Starts the sweep SweepDue asked for; sets `*new_generation` when
  // `generation` is newer than any swept before. Returns the generation
  // the sweep keeps: what is older than it is dead.
  uint64_t BeginSweep(uint64_t generation, bool* new_generation) {
    stale_left_ = false;
    *new_generation = generation > newest_;
    if (*new_generation) newest_ = generation;
    return newest_;
  }

  // Whether `block`, brought back by a caller that read `generation`, is of
  // a dead generation: poisoned since the read, or poisoned, recovered and
  // swept since.
  bool Dead(const AllocationBlock& block, uint64_t generation) const {
    return block.generation != generation || block.generation < newest_;
  }
  // Something of `generation` (a block, a stable buffer) came into the
  // shard's care without a choice (settled from the release slot, a kept
  // candidate, a buffer claimed before the poison): when its generation
  // was swept already, the next sweep takes it, before anything may be
  // taken.
  void NoteStale(uint64_t generation) {
    if (ABSL_PREDICT_FALSE(generation < newest_)) stale_left_ = true;
  }

 private:
  uint64_t newest_ = 0;
  bool stale_left_ = false;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_SWEPT_GENERATION_H_
