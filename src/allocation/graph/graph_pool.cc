// The public handles of capture-private pools (gpupool/graph_pool.h); the
// policy is in graph/pool.cc.

#include "gpupool/graph_pool.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/allocation_cache.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/graph/graph_pools.h"

namespace gpupool {

absl::StatusOr<GraphPool> GraphPool::Create(AllocationCache& cache,
                                            int device) {
  const std::shared_ptr<internal::AllocationCacheCore>& core =
      internal::AllocationCacheAccess::Core(cache);
  absl::StatusOr<std::shared_ptr<internal::GraphPoolState>> state =
      internal::GraphPools::Of(*core).NewPool(device);
  if (!state.ok()) return state.status();
  return GraphPool(core, *std::move(state));
}

GraphPool::GraphPool(std::shared_ptr<internal::AllocationCacheCore> core,
                     std::shared_ptr<internal::GraphPoolState> state)
    : core_(std::move(core)), state_(std::move(state)) {}

GraphPool& GraphPool::operator=(GraphPool&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) internal::GraphPools::Of(*core_).Hold(*state_);
    core_ = std::move(other.core_);
    state_ = std::move(other.state_);
  }
  return *this;
}

GraphPool::~GraphPool() {
  // Never a release with no fence: the graphs may still replay on streams
  // the handle does not know.
  if (state_ != nullptr) internal::GraphPools::Of(*core_).Hold(*state_);
}

uint64_t GraphPool::id() const { return state_ == nullptr ? 0 : state_->id; }

int GraphPool::device() const {
  return state_ == nullptr ? -1 : state_->device;
}

absl::Status GraphPool::Release(const std::vector<NativeStream>& streams) {
  if (state_ == nullptr) {
    return absl::FailedPreconditionError("GraphPool::Release: empty handle");
  }
  return internal::GraphPools::Of(*core_).Release(*state_, streams);
}

absl::Status GraphPool::RetainBy(NativeGraph graph) {
  if (state_ == nullptr) {
    return absl::InvalidArgumentError("GraphPool::RetainBy: empty pool");
  }
  return internal::GraphPools::Of(*core_).RetainBy(*state_, graph);
}

absl::StatusOr<CaptureScope> GraphPool::BeginCapture(
    NativeStream origin) const {
  if (state_ == nullptr) {
    return absl::InvalidArgumentError("GraphPool::BeginCapture: empty pool");
  }
  if (origin == nullptr) {
    return absl::InvalidArgumentError(
        "GraphPool::BeginCapture: the null stream cannot capture");
  }
  absl::StatusOr<uint64_t> route =
      internal::GraphPools::Of(*core_).OpenRoute(state_, origin);
  if (!route.ok()) return route.status();
  return CaptureScope(core_, *route);
}

CaptureScope::CaptureScope(CaptureScope&& other) noexcept
    : core_(std::move(other.core_)),
      route_id_(std::exchange(other.route_id_, 0)) {}

CaptureScope& CaptureScope::operator=(CaptureScope&& other) noexcept {
  if (this != &other) {
    End();
    core_ = std::move(other.core_);
    route_id_ = std::exchange(other.route_id_, 0);
  }
  return *this;
}

CaptureScope::~CaptureScope() { End(); }

void CaptureScope::End() {
  if (route_id_ == 0) return;
  internal::GraphPools::Of(*core_).CloseRoute(std::exchange(route_id_, 0));
  core_.reset();
}

}  // namespace gpupool
