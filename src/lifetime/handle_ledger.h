// The count of handles (streams, events, memory blocks) in one pool shard's
// care — leased out, idle, or in one of its threads' hands between two lists —
// and how each one left it. Every way out goes through Retire, so a handle
// can neither leave uncounted nor be counted twice.

#ifndef GPUPOOL_SRC_LIFETIME_HANDLE_LEDGER_H_
#define GPUPOOL_SRC_LIFETIME_HANDLE_LEDGER_H_

#include <array>
#include <cstdint>

namespace gpupool::internal {

// How a handle leaves a pool's care.
enum class RetireReason {
  kDestroyed,  // given back through the runtime (destroy / free call made)
  kDropped,    // forgotten without a call: its device was poisoned or it
               // belongs to an older device generation
  kLeaked,     // left to the OS: exit, fork, a closed pool, or its safety
               // could not be proven
};

// Not synchronised: the owning shard guards it with its own lock.
class HandleLedger {
 public:
  // A handle the runtime just created enters the pool's care.
  void Admit(int64_t count = 1) { in_care_ += count; }
  // The single retire path.
  void Retire(RetireReason how, int64_t count = 1) {
    in_care_ -= count;
    departed_[static_cast<int>(how)] += count;
  }

  int64_t in_care() const { return in_care_; }
  int64_t admitted() const {
    return in_care_ + departed(RetireReason::kDestroyed) +
           departed(RetireReason::kDropped) + departed(RetireReason::kLeaked);
  }
  int64_t departed(RetireReason how) const {
    return departed_[static_cast<int>(how)];
  }

 private:
  int64_t in_care_ = 0;
  std::array<int64_t, 3> departed_{};
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_LIFETIME_HANDLE_LEDGER_H_
