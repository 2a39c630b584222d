// Graph pools: what the fuzzer does with them and what it checks.

#include "tests/fuzz/graph_pool_model.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/graph_pool.h"
#include "gpupool/sim_backend.h"

namespace gpupool::fuzz {
namespace {

// Claims of leases that are no capture's: owners above every pool id.
constexpr uint64_t kLeaseOwnerBase = uint64_t{1} << 62;
constexpr size_t kMaxGraphPools = 3;

}  // namespace

void GraphPoolModel::PoolStep() {
  // One byte: odd makes a new pool and even releases one, as the bool the
  // corpus was written with; the upper half of the even values (once
  // releases too) drives the graph-owned pools.
  const uint8_t choice = input_.ConsumeIntegral<uint8_t>();
  if ((choice & 1) == 0 && choice >= 128) {
    owned_.Step();
    return;
  }
  if ((choice & 1) != 0) {  // a new pool
    const int device = harness_.PickDevice();
    if (graph_models_.size() >= kMaxGraphPools) return;
    const bool poisoned =
        device < kDevices && harness_.health().is_poisoned(device);
    absl::StatusOr<GraphPool> pool =
        gpupool::GraphPool::Create(harness_.cache(), device);
    if (device >= kDevices || poisoned) {
      FUZZ_CHECK(!pool.ok(), "a graph pool on an unusable device");
      harness_.CheckRefusal(device, pool.status(), "GraphPool::Create");
      return;
    }
    FUZZ_CHECK(pool.ok(),
               absl::StrCat("GraphPool::Create: ", pool.status().ToString()));
    GraphModel model{*std::move(pool)};
    model.id = model.pool.id();
    model.device = device;
    graph_models_.push_back(std::move(model));
    return;
  }
  // Release a pool: its graphs go first; the release is fenced by the
  // streams they were replayed on.
  GraphModel* model = PickGraphModel(input_, graph_models_);
  if (model == nullptr) return;
  if (model->capturing != nullptr) {
    FUZZ_CHECK(model->pool.Release(model->replay_streams).code() ==
                   absl::StatusCode::kFailedPrecondition,
               "GraphPool::Release with a capture scope open");
    return;
  }
  DestroyGraphs(sim_, model->graphs);
  ForgetGraphs(*model);
  if (model->retained()) {  // the graphs release it, once their launches end
    owned_.LetGo(*model, /*with_release=*/!input_.ConsumeBool());
    return;
  }
  // Dropping the handle unreleased never releases: the pool is held (its
  // blocks out of reuse) until the cache is destroyed.
  if (input_.ConsumeBool()) {
    ++dropped_graph_pools_;
  } else {
    const absl::Status status = model->pool.Release(model->replay_streams);
    FUZZ_CHECK(status.ok(),
               absl::StrCat("GraphPool::Release: ", status.ToString()));
    FUZZ_CHECK(
        model->pool.Release().code() == absl::StatusCode::kFailedPrecondition,
        "a graph pool released twice");
  }
  graph_models_.erase(graph_models_.begin() + (model - graph_models_.data()));
}

void GraphPoolModel::CaptureStep() {
  switch (input_.ConsumeIntegralInRange(0, 3)) {
    case 0: {  // a capture registered with a scope on a pool
      GraphModel* model = PickGraphModel(input_, graph_models_);
      if (model == nullptr || model->capturing != nullptr) return;
      const int device = model->pool.device();
      NativeStream stream = captures_.PickIdleStream(device);
      if (stream == nullptr) return;
      const bool poisoned = harness_.health().is_poisoned(device);
      absl::StatusOr<CaptureScope> scope = model->pool.BeginCapture(stream);
      if (poisoned) {
        FUZZ_CHECK(!scope.ok(), "a capture scope on a poisoned device");
        harness_.CheckRefusal(device, scope.status(),
                              "GraphPool::BeginCapture");
        return;
      }
      if (!scope.ok()) return;  // an injected fault
      if (!sim_.BeginCapture(stream, SimCaptureMode::kRelaxed, model->pool.id())
               .ok()) {
        return;  // the scope ends unused
      }
      model->scope = *std::move(scope);
      model->capturing = stream;
      ++model->capture_number;
      captures_.Began(stream);
      return;
    }
    case 1:  // a capture nobody registers (detect_unregistered_captures)
      captures_.BeginUnregistered();
      return;
    case 2: {  // end a registered capture, then its scope
      GraphModel* model = PickGraphModel(input_, graph_models_);
      if (model == nullptr || model->capturing == nullptr) return;
      EndCapture(*model);
      return;
    }
    default:  // end an unregistered capture
      captures_.EndUnregistered();
      return;
  }
}

void GraphPoolModel::ReplayStep() {
  if (input_.ConsumeBool()) {  // the unregistered captures' graphs go
    captures_.DestroyUnregisteredGraphs();
    return;
  }
  GraphModel* model = PickGraphModel(input_, graph_models_);
  if (model == nullptr || model->graphs.empty()) return;
  const size_t g =
      input_.ConsumeIntegralInRange<size_t>(0, model->graphs.size() - 1);
  const SimGraph graph = model->graphs[g];
  if (input_.ConsumeBool()) {
    if (sim_.DestroyGraph(graph).ok()) GraphGone(*model, graph);
    model->graphs.erase(model->graphs.begin() + g);
    return;
  }
  NativeStream stream = captures_.PickIdleStream(model->pool.device());
  if (stream == nullptr || !Instantiate(sim_, *model, graph)) return;
  Launch(sim_, *model, graph, stream);
}

void GraphPoolModel::ClaimDeviceLease(const PooledAllocation& lease,
                                      NativeStream stream) {
  GraphModel* capture = CaptureOf(stream);
  sim_.ClaimMemory(lease.data(), lease.capacity(),
                   capture != nullptr ? capture->pool.id()
                                      : kLeaseOwnerBase + lease.lease_id());
  if (capture != nullptr) {
    sim_.TouchMemory(stream, lease.data());
    capture->blocks.push_back(lease.data());
    capture->claimed_by[lease.data()].push_back(capture->capture_number);
  } else {
    CheckNotAPoolBlock(lease.data());
  }
}

bool GraphPoolModel::UsesStream(NativeStream stream) const {
  for (const GraphModel& model : graph_models_) {
    if (model.capturing == stream ||
        std::find(model.replay_streams.begin(), model.replay_streams.end(),
                  stream) != model.replay_streams.end()) {
      return true;
    }
  }
  return owned_.UsesStream(stream);
}

void GraphPoolModel::ForgetDevice(int device) {
  // The reset took the device's captures and graphs with it.
  for (GraphModel& model : graph_models_) {
    if (model.pool.device() != device) continue;
    if (model.capturing != nullptr) {
      captures_.Lost(model.capturing);
      model.capturing = nullptr;
      model.scope.End();
    }
    model.graphs.clear();
    model.replay_streams.clear();
    fuzz::ForgetDevice(model);
  }
  owned_.ForgetDevice(device);
}

// A dropped pool is held while it keeps a block (then it is gone); a
// retained one whose handle let go awaits its graphs.
void GraphPoolModel::CheckStats(const AllocationCacheStats& cache) const {
  FUZZ_CHECK(cache.graph_pools - cache.graph_pools_held -
                         cache.graph_pools_awaiting_graphs ==
                     static_cast<int64_t>(graph_models_.size()) &&
                 cache.graph_pools_held <= dropped_graph_pools_ &&
                 cache.graph_pools_awaiting_graphs <=
                     static_cast<int64_t>(owned_.size()),
             absl::StrCat("graph_pools ", cache.graph_pools, " (held ",
                          cache.graph_pools_held, ", awaiting graphs ",
                          cache.graph_pools_awaiting_graphs, ") but ",
                          graph_models_.size(), " pools not released, ",
                          dropped_graph_pools_, " dropped, ", owned_.size(),
                          " left to their graphs"));
  FUZZ_CHECK(
      !graph_models_.empty() || dropped_graph_pools_ != 0 ||
          owned_.size() != 0 ||
          (cache.blocks_in_graph_pools == 0 && cache.bytes_in_graph_pools == 0),
      "blocks in graph pools with every pool released");
}

void GraphPoolModel::EndCaptures() {
  for (GraphModel& model : graph_models_) {
    if (model.capturing == nullptr) continue;
    EndCapture(model);
  }
}

void GraphPoolModel::EndCapture(GraphModel& model) {
  const size_t graphs = model.graphs.size();
  captures_.EndCaptureOn(model.capturing, &model.graphs);
  if (model.graphs.size() > graphs) {
    model.graph_of_capture[model.capture_number] = model.graphs.back().id;
  }
  model.scope.End();
  model.capturing = nullptr;
}

// Pools are released fenced by their replay streams, which are still leased.
void GraphPoolModel::ReleaseAll() {
  for (GraphModel& model : graph_models_) {
    DestroyGraphs(sim_, model.graphs);
    ForgetGraphs(model);
    (void)model.pool.Release(model.replay_streams);
    model.pool = GraphPool();
    if (model.retained()) owned_.Adopt(std::move(model));
  }
  graph_models_.clear();
  // The graphs of the pools left to them go: every pool goes back.
  owned_.DestroyGraphs();
  owned_.Collect();
}

GraphModel* GraphPoolModel::CaptureOf(NativeStream stream) {
  if (stream == nullptr) return nullptr;
  for (GraphModel& model : graph_models_) {
    if (model.capturing == stream) return &model;
  }
  return nullptr;
}

// A lease of general work must not be a block a graph pool keeps.
void GraphPoolModel::CheckNotAPoolBlock(void* ptr) {
  for (GraphModel& model : graph_models_) {
    // A pool no graph retains keeps every block while its handle lives; a
    // retained recording's blocks may go back once the graphs that captured
    // them are gone.
    FUZZ_CHECK((model.retained() && !ClaimantAlive(sim_, model, ptr)) ||
                   std::find(model.blocks.begin(), model.blocks.end(), ptr) ==
                       model.blocks.end(),
               absl::StrCat("a block of graph pool ", model.id,
                            " (handle alive) leased to general work"));
  }
  owned_.CheckNotAPoolBlock(ptr);
}

}  // namespace gpupool::fuzz
