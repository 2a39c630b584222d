// gpupool/event_pool.h — a process-lifetime pool of GPU events.
//
// The same engine as StreamPool, keyed by (device, EventConfig). Return
// protocol: device poisoned / stale generation / forked → dropped without a
// runtime call; query (Relaxed capture mode): complete → idle, recorded and
// still pending → draining (reused once complete), resource fault →
// destroyed, sticky fault → device poisoned; over max_idle_per_key →
// destroyed. Events are handed out complete (a query returns OK).
//
// Thread safety: every method is thread-safe; a PooledEvent is a move-only
// lease used by one thread at a time.
//
// Example:
//
//   absl::StatusOr<gpupool::PooledEvent> done = pools.events().Acquire(0);
//   backend.RecordEvent(0, done->get(), stream);

#ifndef GPUPOOL_EVENT_POOL_H_
#define GPUPOOL_EVENT_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/export.h"
#include "gpupool/internal/lease.h"
#include "gpupool/pool_options.h"
#include "gpupool/pool_stats.h"
#include "gpupool/prewarm.h"
#include "gpupool/source_location.h"

namespace gpupool {

namespace internal {
template <typename Kind>
class KeyedPool;
struct EventKind;
struct EventLeaseAccess;
}  // namespace internal

// A leased event. Move-only; returns the event to its pool when destroyed.
class GPUPOOL_EXPORT PooledEvent {
 public:
  PooledEvent() = default;
  PooledEvent(PooledEvent&&) noexcept = default;
  PooledEvent& operator=(PooledEvent&&) noexcept = default;

  NativeEvent get() const { return lease_.handle(); }
  int device() const { return lease_.device(); }
  const EventConfig& config() const;
  uint64_t lease_id() const { return lease_.lease_id(); }
  explicit operator bool() const { return static_cast<bool>(lease_); }
  void Release() { lease_.Release(); }
  void Discard() { lease_.Discard(); }

 private:
  template <typename Kind>
  friend class internal::KeyedPool;
  friend struct internal::EventLeaseAccess;
  explicit PooledEvent(internal::Lease lease) : lease_(std::move(lease)) {}
  internal::Lease lease_;
};

class GPUPOOL_EXPORT EventPool {
 public:
  explicit EventPool(Backend& backend, EventPoolOptions options = {});
  EventPool(Backend& backend, std::shared_ptr<DeviceHealth> health,
            EventPoolOptions options = {});
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // Errors as StreamPool::Acquire.
  absl::StatusOr<PooledEvent> Acquire(
      int device, const EventConfig& config = {},
      SourceLocation where = SourceLocation::Current());
  absl::StatusOr<PooledEvent> Acquire(
      int device, const EventConfig& config, absl::Duration timeout,
      SourceLocation where = SourceLocation::Current());
  absl::Status Prewarm(int device, const EventConfig& config, int count);
  PrewarmTicket PrewarmAsync(int device, const EventConfig& config, int count);
  void Trim();
  // Idle events of `device` only; no-op for an out-of-range device.
  void Trim(int device);

  EventPoolStats GetStats() const;
  EventPoolStats GetStats(int device, const EventConfig& config) const;
  // Every (device, config) key the pool has seen, with its counters.
  std::vector<PoolKeyStats> GetStatsPerKey() const;
  std::vector<OutstandingLease> GetOutstandingLeases() const;
  std::string DebugString() const;
  absl::Status RecoverDevice(int device);

  Backend& backend() const;
  const std::shared_ptr<DeviceHealth>& health() const;

 private:
  std::unique_ptr<internal::KeyedPool<internal::EventKind>> impl_;
};

}  // namespace gpupool

#endif  // GPUPOOL_EVENT_POOL_H_
