// StreamPool: the keyed-pool engine instantiated for streams.

#include "gpupool/stream_pool.h"

#include <memory>
#include <utility>

#include "src/pools/keyed_pool.h"
#include "src/pools/resource_kinds.h"

namespace gpupool {

const StreamConfig& PooledStream::config() const {
  static const StreamConfig* const kEmpty = new StreamConfig();
  const void* config = lease_.config();
  return config == nullptr ? *kEmpty
                           : *static_cast<const StreamConfig*>(config);
}

StreamPool::StreamPool(Backend& backend, StreamPoolOptions options)
    : StreamPool(backend, nullptr, options) {}

StreamPool::StreamPool(Backend& backend, std::shared_ptr<DeviceHealth> health,
                       StreamPoolOptions options)
    : impl_(std::make_unique<internal::KeyedPool<internal::StreamKind>>(
          backend, std::move(health), options)) {}

StreamPool::~StreamPool() = default;

absl::StatusOr<PooledStream> StreamPool::Acquire(int device,
                                                 const StreamConfig& config,
                                                 SourceLocation where) {
  return impl_->Acquire(device, config, impl_->options().acquire_timeout,
                        where);
}

absl::StatusOr<PooledStream> StreamPool::Acquire(int device,
                                                 const StreamConfig& config,
                                                 absl::Duration timeout,
                                                 SourceLocation where) {
  return impl_->Acquire(device, config, timeout, where);
}

absl::Status StreamPool::Prewarm(int device, const StreamConfig& config,
                                 int count) {
  return impl_->Prewarm(device, config, count);
}

PrewarmTicket StreamPool::PrewarmAsync(int device, const StreamConfig& config,
                                       int count) {
  return impl_->PrewarmAsync(device, config, count);
}

void StreamPool::Trim() { impl_->Trim(-1); }
void StreamPool::Trim(int device) {
  // The engine reads a negative device as "every device"; from a caller it
  // is out of range, and trimming an out-of-range device is a no-op.
  if (device < 0) return;
  impl_->Trim(device);
}
StreamPoolStats StreamPool::GetStats() const { return impl_->GetStats(); }
std::vector<PoolKeyStats> StreamPool::GetStatsPerKey() const {
  return impl_->GetStatsPerKey();
}
StreamPoolStats StreamPool::GetStats(int device,
                                     const StreamConfig& config) const {
  return impl_->GetStats(device, config);
}
std::vector<OutstandingLease> StreamPool::GetOutstandingLeases() const {
  return impl_->GetOutstandingLeases();
}
std::string StreamPool::DebugString() const { return impl_->DebugString(); }
absl::Status StreamPool::RecoverDevice(int device) {
  return impl_->RecoverDevice(device);
}
Backend& StreamPool::backend() const { return impl_->backend(); }
const std::shared_ptr<DeviceHealth>& StreamPool::health() const {
  return impl_->health();
}

}  // namespace gpupool
