// The list of graph pools and the open capture routes (graph/capture_routes.h).

#include "src/allocation/graph/capture_routes.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gpupool::internal {
namespace {

std::atomic<uint64_t> next_pool_id{1};

}  // namespace

std::shared_ptr<GraphPoolState> CaptureRoutes::NewPool(int device) {
  auto pool = std::make_shared<GraphPoolState>(
      next_pool_id.fetch_add(1, std::memory_order_relaxed), device);
  MutexLock lock(&mu_);
  pools_.erase(std::remove_if(pools_.begin(), pools_.end(),
                              [](const std::weak_ptr<GraphPoolState>& weak) {
                                return weak.expired();
                              }),
               pools_.end());
  pools_.push_back(pool);
  return pool;
}

absl::StatusOr<uint64_t> CaptureRoutes::OpenRoute(
    std::shared_ptr<GraphPoolState> pool, NativeStream origin,
    uint64_t capture_id) {
  {
    MutexLock pool_lock(&pool->mu);
    if (pool->released) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GraphPool::BeginCapture: graph pool ", pool->id, " was released"));
    }
    if (pool->scope_open) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GraphPool::BeginCapture: graph pool ", pool->id,
          " already has a capture scope open (one capture at a time)"));
    }
    pool->scope_open = true;
    if (capture_id != 0) ++pool->captures;
  }
  MutexLock lock(&mu_);
  CaptureRoute route;
  route.route_id = next_route_++;
  route.device = pool->device;
  route.origin = origin;
  route.capture_id = capture_id;
  route.pool = std::move(pool);
  routes_.push_back(std::move(route));
  open_routes_.fetch_add(1, std::memory_order_release);
  return routes_.back().route_id;
}

void CaptureRoutes::CloseRoute(uint64_t route_id) {
  std::shared_ptr<GraphPoolState> pool;
  {
    MutexLock lock(&mu_);
    auto it = std::find_if(
        routes_.begin(), routes_.end(),
        [&](const CaptureRoute& route) { return route.route_id == route_id; });
    if (it == routes_.end()) return;
    pool = std::move(it->pool);
    routes_.erase(it);
    open_routes_.fetch_sub(1, std::memory_order_release);
  }
  MutexLock pool_lock(&pool->mu);
  pool->scope_open = false;
}

std::vector<CaptureRoute> CaptureRoutes::Routes(int device) const {
  std::vector<CaptureRoute> out;
  MutexLock lock(&mu_);
  for (const CaptureRoute& route : routes_) {
    if (route.device == device) out.push_back(route);
  }
  return out;
}

void CaptureRoutes::LearnCaptureId(uint64_t route_id, uint64_t capture_id) {
  std::shared_ptr<GraphPoolState> pool;
  {
    MutexLock lock(&mu_);
    for (CaptureRoute& route : routes_) {
      if (route.route_id == route_id && route.capture_id != capture_id) {
        route.capture_id = capture_id;
        pool = route.pool;
      }
    }
  }
  if (pool == nullptr) return;
  MutexLock pool_lock(&pool->mu);
  ++pool->captures;
}

std::vector<std::shared_ptr<GraphPoolState>> CaptureRoutes::Pools() const {
  std::vector<std::shared_ptr<GraphPoolState>> out;
  MutexLock lock(&mu_);
  for (const std::weak_ptr<GraphPoolState>& weak : pools_) {
    if (std::shared_ptr<GraphPoolState> pool = weak.lock()) {
      out.push_back(std::move(pool));
    }
  }
  return out;
}

}  // namespace gpupool::internal
