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
#include "src/allocation/cache_core.h"

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
    if (pool->released || pool->handle_let_go) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GraphPool::BeginCapture: graph pool ", pool->id, " was released"));
    }
    if (pool->scope_open) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GraphPool::BeginCapture: graph pool ", pool->id,
          " already has a capture scope open (one capture at a time)"));
    }
    pool->scope_open = true;
    if (capture_id != 0) {
      ++pool->captures;
      pool->recordings.CaptureBegins();
    }
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
  pool->recordings.CaptureBegins();
}

std::shared_ptr<GraphPoolState> CaptureRoutes::Match(AllocationCacheCore& core,
                                                     int device,
                                                     NativeStream stream,
                                                     const CaptureInfo& info) {
  if (info.status == CaptureStatus::kNone) return nullptr;
  if (info.status == CaptureStatus::kInvalidated) {
    // No id any more: the capture begun on a route's origin is recognised by
    // its stream (its blocks stay the pool's until the pool is released).
    const std::vector<CaptureRoute> routes = Routes(device);
    for (const CaptureRoute& route : routes) {
      if (route.origin == stream) return route.pool;
    }
    // A side stream joined into an invalidated capture: the one route whose
    // origin's capture is invalidated too is its (with several, which one is
    // unknown: the core holds the block).
    std::shared_ptr<GraphPoolState> match;
    int matches = 0;
    for (const CaptureRoute& route : routes) {
      absl::StatusOr<CaptureInfo> origin =
          core.backend().GetCaptureInfo(device, route.origin);
      if (origin.ok() && origin->status == CaptureStatus::kInvalidated) {
        match = route.pool;
        ++matches;
      } else if (!origin.ok() && core.PoisonIfSticky(device, origin.status())) {
        return nullptr;
      }
    }
    return matches == 1 ? match : nullptr;
  }
  {
    // The common case, every allocation of a capture after its first: the
    // route already knows the id (no copy of the routes, no runtime call).
    MutexLock lock(&mu_);
    for (const CaptureRoute& route : routes_) {
      if (route.device == device && route.capture_id == info.id) {
        return route.pool;
      }
    }
  }
  for (const CaptureRoute& route : Routes(device)) {
    if (route.capture_id == info.id) return route.pool;
    // Not learned yet, or a later capture on the origin: a scope kept open
    // across captures routes each of them (one at a time on its origin).
    uint64_t id = 0;
    if (route.origin == stream) {
      id = info.id;
    } else {
      absl::StatusOr<CaptureInfo> origin =
          core.backend().GetCaptureInfo(device, route.origin);
      if (origin.ok() && origin->status == CaptureStatus::kActive) {
        id = origin->id;
      } else if (!origin.ok() && core.PoisonIfSticky(device, origin.status())) {
        return nullptr;  // no further runtime call on a dead device
      }
    }
    if (id != 0 && id != route.capture_id) {
      LearnCaptureId(route.route_id, id);
    }
    if (id == info.id) return route.pool;
  }
  return nullptr;
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
