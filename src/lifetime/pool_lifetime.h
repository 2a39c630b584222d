// The resource-lifetime layer every pool stands on: what a pool learns at
// construction (devices, shared DeviceHealth), the process lifetime it lives
// through (fork: the child touches nothing and leaks; exit: idle handles are
// drained while the runtime is alive, later releases leak), and the checks
// each entry point makes before touching a shard, with one set of messages.
// Together with fault_reaction.h (one fault -> reaction table), handle_ledger.h
// (one count of handles in a shard's care, one retire path) and
// gpupool/internal/lease.h (one lease type) it is the plumbing a pool does
// not rebuild.
//
// Both engines stand on it: the allocation cache (src/allocation/cache_core.h)
// and the keyed pool under the stream and event pools (keyed_pool.h,
// keyed_shard.h).

#ifndef GPUPOOL_SRC_LIFETIME_POOL_LIFETIME_H_
#define GPUPOOL_SRC_LIFETIME_POOL_LIFETIME_H_

#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "src/lifetime/process_state.h"

namespace gpupool::internal {

// FailedPrecondition for a call made in a fork() child on a pool its parent
// created. `caller` prefixes the message ("AllocationCache::Allocate");
// `owner` names what was inherited ("cache", "stream pool").
absl::Status ForkedChildError(absl::string_view caller,
                              absl::string_view owner);
// FailedPrecondition for a call made once the process began exiting.
absl::Status ProcessExitingError(absl::string_view caller,
                                 absl::string_view owner);
// InvalidArgument for a device outside [0, device_count).
absl::Status DeviceOutOfRangeError(absl::string_view caller, int device,
                                   int device_count);

class PoolLifetime {
 public:
  // Asks `backend` for its devices (a failure is kept and returned by every
  // entry check) and shares `health`, or makes one when null. Devices beyond
  // what `health` tracks are out of range.
  PoolLifetime(Backend& backend, std::shared_ptr<DeviceHealth> health);
  // In a fork() child the health is leaked, not destroyed: ~absl::Mutex
  // takes Abseil's process-wide deadlock-detection lock, which a parent
  // thread may have held at fork time.
  ~PoolLifetime();
  PoolLifetime(const PoolLifetime&) = delete;
  PoolLifetime& operator=(const PoolLifetime&) = delete;

  // True in a fork() child of the process that built the pool: its handles
  // belong to the parent's context and its locks may be held forever.
  bool Forked() const { return ForkEpoch() != fork_epoch_; }
  int device_count() const { return device_count_; }
  const absl::Status& device_count_status() const {
    return device_count_status_;
  }
  bool InRange(int device) const {
    return device >= 0 && device < device_count_;
  }
  const std::shared_ptr<DeviceHealth>& health() const { return health_; }
  DeviceHealth& device_health() const { return *health_; }

  // The checks every entry point makes, in order: fork, exit, device count,
  // device range, poison. On a poisoned device `purge` runs first (the pool
  // forgets that device's handles without runtime calls), then the poison's
  // FailedPrecondition is returned.
  absl::Status CheckEntry(absl::string_view caller, absl::string_view owner,
                          int device,
                          absl::FunctionRef<void(int device)> purge) const;

  // Whether CheckEntry would pass, read inline without building a status:
  // the hot path's test (a false answer sends the caller to CheckEntry for
  // the reason and the purge).
  bool EntryIsClear(int device) const {
    return !Forked() && !ProcessIsExiting() && InRange(device) &&
           !health_->is_poisoned(device);
  }

  // The poison's FailedPrecondition for `device`; when it recovered
  // meanwhile, still a FailedPrecondition saying so (the caller met the
  // fault).
  absl::Status PoisonedError(int device) const;

 private:
  const uint64_t fork_epoch_;
  std::shared_ptr<DeviceHealth> health_;
  int device_count_ = 0;
  absl::Status device_count_status_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_LIFETIME_POOL_LIFETIME_H_
