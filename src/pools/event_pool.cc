// EventPool: the keyed-pool engine instantiated for events.

#include "gpupool/event_pool.h"

#include <memory>
#include <utility>

#include "src/pools/keyed_pool.h"
#include "src/pools/resource_kinds.h"

namespace gpupool {

const EventConfig& PooledEvent::config() const {
  static const EventConfig* const kEmpty = new EventConfig();
  const void* config = lease_.config();
  return config == nullptr ? *kEmpty : *static_cast<const EventConfig*>(config);
}

EventPool::EventPool(Backend& backend, EventPoolOptions options)
    : EventPool(backend, nullptr, options) {}

EventPool::EventPool(Backend& backend, std::shared_ptr<DeviceHealth> health,
                     EventPoolOptions options)
    : impl_(std::make_unique<internal::KeyedPool<internal::EventKind>>(
          backend, std::move(health), options)) {}

EventPool::~EventPool() = default;

absl::StatusOr<PooledEvent> EventPool::Acquire(int device,
                                               const EventConfig& config,
                                               SourceLocation where) {
  return impl_->Acquire(device, config, impl_->options().acquire_timeout,
                        where);
}

absl::StatusOr<PooledEvent> EventPool::Acquire(int device,
                                               const EventConfig& config,
                                               absl::Duration timeout,
                                               SourceLocation where) {
  return impl_->Acquire(device, config, timeout, where);
}

absl::Status EventPool::Prewarm(int device, const EventConfig& config,
                                int count) {
  return impl_->Prewarm(device, config, count);
}

PrewarmTicket EventPool::PrewarmAsync(int device, const EventConfig& config,
                                      int count) {
  return impl_->PrewarmAsync(device, config, count);
}

void EventPool::Trim() { impl_->Trim(-1); }
void EventPool::Trim(int device) {
  // The engine reads a negative device as "every device"; from a caller it
  // is out of range, and trimming an out-of-range device is a no-op.
  if (device < 0) return;
  impl_->Trim(device);
}
EventPoolStats EventPool::GetStats() const { return impl_->GetStats(); }
std::vector<PoolKeyStats> EventPool::GetStatsPerKey() const {
  return impl_->GetStatsPerKey();
}
EventPoolStats EventPool::GetStats(int device,
                                   const EventConfig& config) const {
  return impl_->GetStats(device, config);
}
std::vector<OutstandingLease> EventPool::GetOutstandingLeases() const {
  return impl_->GetOutstandingLeases();
}
std::string EventPool::DebugString() const { return impl_->DebugString(); }
absl::Status EventPool::RecoverDevice(int device) {
  return impl_->RecoverDevice(device);
}
Backend& EventPool::backend() const { return impl_->backend(); }
const std::shared_ptr<DeviceHealth>& EventPool::health() const {
  return impl_->health();
}

}  // namespace gpupool
