// Exit and fork handling for all pools; see process_state.h.

#include "src/lifetime/process_state.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "src/lifetime/fork_safe_mutex.h"

namespace gpupool::internal {
namespace {

using process_state_detail::exiting;
using process_state_detail::fork_epoch;

struct Drain {
  uint64_t id;
  std::function<void()> fn;
};

// The registry lock is held across fork() and released in the child
// (fork_safe_mutex.h says why it is not an absl::Mutex).

// Never destroyed: the atexit hook and late pool destructors may run after
// static destructors.
struct Registry {
  ForkSafeMutex mu;
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  std::vector<Drain> drains ABSL_GUARDED_BY(mu);
  bool ran ABSL_GUARDED_BY(mu) = false;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

void RunExitSequence() {
  // Keeps the registry lock consistent across fork and waits for a pool
  // destructor that is unregistering right now.
  Registry& registry = GetRegistry();
  ForkSafeLock lock(&registry.mu);
  if (registry.ran) return;
  registry.ran = true;
  // Newest first, like atexit: a pool created later may depend on an older.
  for (auto it = registry.drains.rbegin(); it != registry.drains.rend(); ++it) {
    it->fn();
  }
  exiting.store(true, std::memory_order_release);
}

void AtExitHook() { RunExitSequence(); }

// fork() while another thread holds the registry lock would leave it locked
// forever in the child; hold it across the fork instead.
void PrepareFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { GetRegistry().mu.Lock(); }
void ParentAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  GetRegistry().mu.Unlock();
}
void ChildAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  fork_epoch.fetch_add(1, std::memory_order_acq_rel);
  GetRegistry().mu.Unlock();
}

}  // namespace

void InstallProcessHooks() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    GetRegistry();
    pthread_atfork(&PrepareFork, &ParentAfterFork, &ChildAfterFork);
    std::atexit(&AtExitHook);
  });
}

uint64_t RegisterExitDrain(std::function<void()> drain) {
  Registry& registry = GetRegistry();
  ForkSafeLock lock(&registry.mu);
  uint64_t id = registry.next_id++;
  registry.drains.push_back({id, std::move(drain)});
  return id;
}

void UnregisterExitDrain(uint64_t id) {
  Registry& registry = GetRegistry();
  ForkSafeLock lock(&registry.mu);
  for (auto it = registry.drains.begin(); it != registry.drains.end(); ++it) {
    if (it->id == id) {
      registry.drains.erase(it);
      return;
    }
  }
}

void RunExitSequenceForTesting() { RunExitSequence(); }

}  // namespace gpupool::internal
