// The one table from a fault class (gpupool/backend.h, FaultOf) to what a
// pool does with the handle or block a failed runtime call was about. Every
// pool reads it here so that the same error never means two things.

#ifndef GPUPOOL_SRC_LIFETIME_FAULT_REACTION_H_
#define GPUPOOL_SRC_LIFETIME_FAULT_REACTION_H_

#include "absl/status/status.h"
#include "gpupool/backend.h"

namespace gpupool::internal {

enum class Reaction {
  kProceed,  // no fault: carry on
  kDestroy,  // this handle is bad (or the call failed plainly): the caller
             // decides — a handle pool destroys it through the runtime, the
             // allocation cache falls back to a slower proof of idleness
  kPoison,   // sticky device error: poison the device, then drop what it
             // holds without another runtime call
  kLeak,     // the runtime is unloading: forget the handle without a call
};

inline Reaction ReactionTo(const absl::Status& status) {
  switch (FaultOf(status)) {
    case Fault::kNone:
      return Reaction::kProceed;
    case Fault::kDevice:
      return Reaction::kPoison;
    case Fault::kShutdown:
      return Reaction::kLeak;
    default:
      return Reaction::kDestroy;
  }
}

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_LIFETIME_FAULT_REACTION_H_
