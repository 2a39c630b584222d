// The threads' return announcements and Close's fence; see
// return_announcements.h.

#include "src/lifetime/return_announcements.h"

#include <pthread.h>

#include <algorithm>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/lifetime/fork_safe_mutex.h"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace gpupool::internal {
namespace {

// The slots of the threads that returned a lease, and the slots of exited
// threads, kept for reuse. Never destroyed: threads may exit after static
// destructors ran. Its lock is held across fork() (see fork_safe_mutex.h).
struct Registry {
  ForkSafeMutex mu;
  std::vector<AnnouncementSlot*> live ABSL_GUARDED_BY(mu);
  std::vector<AnnouncementSlot*> spare ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

void PrepareFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { GetRegistry().mu.Lock(); }
void AfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { GetRegistry().mu.Unlock(); }

// Always busy: what a thread announces with when it cannot.
AnnouncementSlot* Unusable() {
  static AnnouncementSlot* slot = [] {
    auto* s = new AnnouncementSlot();
    s->owner.store(s, std::memory_order_relaxed);
    return s;
  }();
  return slot;
}

bool MakeFence() {
#if defined(__linux__) && defined(__NR_membarrier)
  return syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0;
#else
  return false;
#endif
}

// Whether the fence exists here (asked once; no registration needed).
bool FenceAvailable() {
  static const bool available = [] {
#if defined(__linux__) && defined(__NR_membarrier)
    const long commands = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return commands > 0 && (commands & MEMBARRIER_CMD_GLOBAL) != 0;
#else
    return false;
#endif
  }();
  return available;
}

// Gives the thread's slot back when the thread exits.
struct SlotReturner {
  ~SlotReturner() {
    AnnouncementSlot* slot = return_announcements_detail::slot;
    // From here on the thread (its later thread_local destructors included)
    // counts its returns instead.
    return_announcements_detail::slot = Unusable();
    if (slot == nullptr || slot == Unusable()) return;
    Registry& registry = GetRegistry();
    ForkSafeLock lock(&registry.mu);
    auto it = std::find(registry.live.begin(), registry.live.end(), slot);
    if (it == registry.live.end()) return;  // not ours to give back
    registry.live.erase(it);
    registry.spare.push_back(slot);
  }
};

bool AnyAnnounces(const void* owner) {
  Registry& registry = GetRegistry();
  ForkSafeLock lock(&registry.mu);
  for (const AnnouncementSlot* slot : registry.live) {
    if (slot->owner.load(std::memory_order_acquire) == owner) return true;
  }
  return false;
}

}  // namespace

namespace return_announcements_detail {

AnnouncementSlot* RegisterThisThread() {
  if (!FenceAvailable()) return slot = Unusable();
  static absl::once_flag once;
  absl::call_once(once,
                  [] { pthread_atfork(&PrepareFork, &AfterFork, &AfterFork); });
  // Constructed here, on the thread's first registration: gives the slot
  // back at thread exit.
  thread_local SlotReturner returner;
  Registry& registry = GetRegistry();
  ForkSafeLock lock(&registry.mu);
  AnnouncementSlot* mine;
  if (registry.spare.empty()) {
    mine = new AnnouncementSlot();
  } else {
    mine = registry.spare.back();
    registry.spare.pop_back();
  }
  registry.live.push_back(mine);
  return slot = mine;
}

}  // namespace return_announcements_detail

bool ReturnAnnouncementsAvailable() { return FenceAvailable(); }

int AnnouncementSlotsForTesting() {
  Registry& registry = GetRegistry();
  ForkSafeLock lock(&registry.mu);
  return static_cast<int>(registry.live.size() + registry.spare.size());
}

void AwaitAnnouncedReturns(const void* owner) {
  if (!FenceAvailable()) return;
  if (!MakeFence()) {
    // Refused after the query said it exists (a seccomp filter added since,
    // say): no barrier can be forced, but a store reaches memory within
    // microseconds of being made; wait that out before reading the slots.
    absl::SleepFor(absl::Milliseconds(1));
  }
  while (AnyAnnounces(owner)) absl::SleepFor(absl::Microseconds(20));
}

}  // namespace gpupool::internal
