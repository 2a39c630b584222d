// Process-wide lifecycle state shared by every pool: the exiting flag set by
// the atexit hook, the fork epoch bumped in every child after fork(), and the
// registry of exit drains (pools destroy idle resources there while the
// runtime is still alive).

#ifndef GPUPOOL_SRC_LIFETIME_PROCESS_STATE_H_
#define GPUPOOL_SRC_LIFETIME_PROCESS_STATE_H_

#include <atomic>
#include <cstdint>
#include <functional>

namespace gpupool::internal {

// The two flags every pool operation reads: inline, so that the hot path
// reads them without a call (written only by process_state.cc).
namespace process_state_detail {
inline std::atomic<bool> exiting{false};
inline std::atomic<uint64_t> fork_epoch{0};
}  // namespace process_state_detail

// True once the atexit hook ran: from then on releases leak instead of calling
// the runtime, which may be unloading.
inline bool ProcessIsExiting() {
  return process_state_detail::exiting.load(std::memory_order_acquire);
}

// Bumped in the child after every fork(). A pool created in epoch E is
// "forked" once ForkEpoch() != E: its handles belong to the parent's context.
inline uint64_t ForkEpoch() {
  return process_state_detail::fork_epoch.load(std::memory_order_acquire);
}

// Installs (once per process) the pthread_atfork handlers and the atexit hook.
// Call after the runtime was initialised (e.g. after DeviceCount()) so that
// the hook runs before the runtime's own teardown.
void InstallProcessHooks();

// Registers `drain` to run at exit, before the exiting flag is set. Returns an
// id for UnregisterExitDrain. Drains run under the registry lock, so an
// unregister waits for a drain that is running.
uint64_t RegisterExitDrain(std::function<void()> drain);
void UnregisterExitDrain(uint64_t id);

// For tests: runs the exit sequence now (drains, then the exiting flag), as
// the atexit hook would. Idempotent.
void RunExitSequenceForTesting();

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_LIFETIME_PROCESS_STATE_H_
