// How a lease's return and its shard's Close agree, without a
// read-modify-write on the return's path, that the return may still call
// the runtime (so Close must wait for it) or saw the shard closed (so it
// calls nothing).
//
// A returning thread announces the shard in its own slot (a plain store),
// then reads the shard's closed flag. Close publishes the flag, makes one
// asymmetric fence — membarrier(MEMBARRIER_CMD_GLOBAL): every thread of the
// system passes a full memory barrier — and reads every thread's slot.
// Either Close sees the announcement and waits until it ends, or the return
// sees the flag. The expensive side is Close, and only a Close with leases
// still out (a shard with none skips it: no return can be in flight).
//
// Where the fence is missing (not Linux, or membarrier refused), or a return
// runs inside another on the same thread, Begin says no and the return
// counts itself with one sequentially consistent read-modify-write instead
// (the shard's returns_started_), which Close waits on as well.
//
// Nothing process-wide is configured: MEMBARRIER_CMD_GLOBAL needs no
// registration.

#ifndef GPUPOOL_SRC_LIFETIME_RETURN_ANNOUNCEMENTS_H_
#define GPUPOOL_SRC_LIFETIME_RETURN_ANNOUNCEMENTS_H_

#include <atomic>

#include "absl/base/optimization.h"
#include "src/lifetime/cache_line_allocator.h"

namespace gpupool::internal {

// One thread's announcement: the shard it is returning to, or null.
struct alignas(kCacheLine) AnnouncementSlot {
  std::atomic<const void*> owner{nullptr};
};

namespace return_announcements_detail {
// This thread's slot; null until its first return registers one. A
// trivially destructible thread_local, readable at thread exit too.
inline thread_local AnnouncementSlot* slot = nullptr;
// Registers this thread's slot; a slot that always reads as busy when
// announcements cannot be used (so Begin says no without asking again).
AnnouncementSlot* RegisterThisThread();
}  // namespace return_announcements_detail

// Announces that this thread is returning to `owner`; false when it cannot
// (see the file comment): the caller then counts itself instead.
inline bool BeginAnnouncedReturn(const void* owner) {
  AnnouncementSlot* slot = return_announcements_detail::slot;
  if (ABSL_PREDICT_FALSE(slot == nullptr)) {
    slot = return_announcements_detail::RegisterThisThread();
  }
  if (slot->owner.load(std::memory_order_relaxed) != nullptr) return false;
  slot->owner.store(owner, std::memory_order_relaxed);
  // Keeps the compiler from moving the caller's closed-flag read above the
  // store; the hardware's side of the fence is Close's membarrier.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return true;
}

// Ends the announcement (release: Close's wait then sees everything the
// return did, its runtime calls included).
inline void EndAnnouncedReturn() {
  return_announcements_detail::slot->owner.store(nullptr,
                                                 std::memory_order_release);
}

// Whether returns announce themselves in this process (the fence exists).
bool ReturnAnnouncementsAvailable();

// Slots made so far (in use or kept for reuse), for tests.
int AnnouncementSlotsForTesting();

// Close's side, after it published that `owner` is closed (a sequentially
// consistent store): fences, then waits until no thread announces a return
// to `owner`. Returns at once where announcements are not in use.
void AwaitAnnouncedReturns(const void* owner);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_LIFETIME_RETURN_ANNOUNCEMENTS_H_
