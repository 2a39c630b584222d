// Graph-owned pools: what the fuzzer does with them and what it checks.

#include "tests/fuzz/graph_owned_model.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/graph_pool.h"

namespace gpupool::fuzz {

void GraphOwnedModel::Step() {
  const int sub = input_.ConsumeIntegralInRange(0, 6);
  if (sub == 6) {  // complete launches, then the pools must go back
    if (input_.ConsumeBool()) {
      sim_.CompleteAllWork();
    } else if (!orphans_.empty()) {
      GraphModel& orphan = orphans_[input_.ConsumeIntegralInRange<size_t>(
          0, orphans_.size() - 1)];
      RefreshLaunches(sim_, orphan);
      for (NativeStream stream : orphan.pending_launches) {
        if (sim_.is_live_stream(stream)) sim_.CompleteWork(stream);
      }
    }
    Collect();
    return;
  }
  if (sub == 5) {  // the handle lets go, with Release or dropped
    GraphModel* model = PickGraphModel(input_, with_handle_);
    if (model == nullptr) return;
    const bool with_release = input_.ConsumeBool();
    if (model->capturing != nullptr || !model->retained()) return;
    LetGo(*model, with_release);
    return;
  }
  // A pool with a handle, or one left to its graphs.
  const size_t models = with_handle_.size() + orphans_.size();
  if (models == 0) return;
  const size_t m = input_.ConsumeIntegralInRange<size_t>(0, models - 1);
  GraphModel* model = m < with_handle_.size()
                          ? &with_handle_[m]
                          : &orphans_[m - with_handle_.size()];
  if (model->graphs.empty()) return;
  const SimGraph graph = model->graphs[input_.ConsumeIntegralInRange<size_t>(
      0, model->graphs.size() - 1)];
  GraphFacts& facts = model->facts[graph.id];
  switch (sub) {
    case 0: {  // RetainBy, before the graph is ever instantiated
      if (!model->pool || facts.instantiated || !facts.template_live) {
        return;
      }
      const bool poisoned = harness_.health().is_poisoned(model->device);
      const absl::Status status = model->pool.RetainBy(NativeGraphOf(graph));
      if (poisoned) {
        FUZZ_CHECK(!status.ok(), "RetainBy on a poisoned device");
        harness_.CheckRefusal(model->device, status, "GraphPool::RetainBy");
        return;
      }
      FUZZ_CHECK(status.ok() || harness_.faults_injected(),
                 absl::StrCat("GraphPool::RetainBy without a fault: ",
                              status.ToString()));
      if (status.ok()) facts.retains = true;
      return;
    }
    case 1:  // instantiate (again: the new exec replaces the old)
      if (facts.template_live) Instantiate(sim_, *model, graph);
      return;
    case 2: {  // launch
      if (!facts.exec_live) return;
      NativeStream stream = captures_.PickIdleStream(model->device);
      if (stream != nullptr) Launch(sim_, *model, graph, stream);
      return;
    }
    case 3:  // destroy the template alone
      if (!facts.template_live || !sim_.DestroyGraphTemplate(graph).ok()) {
        return;
      }
      facts.template_live = false;
      break;
    default:  // destroy the executable graph alone
      if (!facts.exec_live || !sim_.DestroyGraphExec(graph).ok()) return;
      facts.exec_live = false;
      facts.exec_holds = false;
      break;
  }
  if (!facts.template_live && !facts.exec_live) {
    model->graphs.erase(std::find_if(
        model->graphs.begin(), model->graphs.end(),
        [&](const SimGraph& other) { return other.id == graph.id; }));
  }
}

void GraphOwnedModel::LetGo(GraphModel& model, bool with_release) {
  for (size_t i = 0; i < model.graphs.size();) {
    const SimGraph graph = model.graphs[i];
    if (model.facts[graph.id].retains) {
      ++i;
      continue;
    }
    (void)sim_.DestroyGraph(graph);
    GraphGone(model, graph);
    model.graphs.erase(model.graphs.begin() + i);
  }
  if (!with_release) {
    for (const auto& [id, facts] : model.facts) {
      if (facts.retains) continue;
      for (NativeStream stream : facts.launch_streams) {
        if (sim_.is_live_stream(stream)) sim_.CompleteWork(stream);
      }
    }
  }
  if (with_release) {
    const absl::Status status = model.pool.Release(model.replay_streams);
    FUZZ_CHECK(status.ok(), absl::StrCat("GraphPool::Release of a retained "
                                         "pool: ",
                                         status.ToString()));
    FUZZ_CHECK(
        model.pool.Release().code() == absl::StatusCode::kFailedPrecondition,
        "a retained graph pool released twice");
    FUZZ_CHECK(model.pool.RetainBy(reinterpret_cast<NativeGraph>(1)).code() ==
                   absl::StatusCode::kFailedPrecondition,
               "RetainBy after Release");
    // The release recorded its fence: the user may destroy the replay
    // streams now, with the graphs' launches still queued there.
    model.replay_streams.clear();
  }
  model.pool = GraphPool();  // the handle lets go
  orphans_.push_back(std::move(model));
  with_handle_.erase(with_handle_.begin() + (&model - with_handle_.data()));
}

void GraphOwnedModel::Collect() {
  FUZZ_CHECK(harness_.cache().Trim().ok() || harness_.faults_injected(),
             "Trim failed without a fault");
  const int64_t awaiting =
      harness_.cache().GetStats().graph_pools_awaiting_graphs;
  int64_t may_await = 0;
  for (GraphModel& orphan : orphans_) {
    if (GraphsAlive(sim_, orphan) ||
        harness_.health().is_poisoned(orphan.device) ||
        sim_.is_poisoned(orphan.device)) {
      ++may_await;
    }
  }
  FUZZ_CHECK(awaiting <= may_await,
             absl::StrCat(awaiting, " graph pools await graphs, but only ",
                          may_await, " of ", orphans_.size(),
                          " retained pools may have graphs or launches "
                          "alive"));
  if (awaiting != 0) return;
  // Every pool went back: their blocks are the general cache's now.
  orphans_.erase(std::remove_if(orphans_.begin(), orphans_.end(),
                                [&](GraphModel& orphan) {
                                  return !GraphsAlive(sim_, orphan);
                                }),
                 orphans_.end());
}

void GraphOwnedModel::DestroyGraphs() {
  for (GraphModel& orphan : orphans_) {
    fuzz::DestroyGraphs(sim_, orphan.graphs);
    ForgetGraphs(orphan);
  }
}

bool GraphOwnedModel::UsesStream(NativeStream stream) const {
  for (const GraphModel& orphan : orphans_) {
    if (orphan.capturing == stream ||
        std::find(orphan.replay_streams.begin(), orphan.replay_streams.end(),
                  stream) != orphan.replay_streams.end()) {
      return true;
    }
  }
  return false;
}

void GraphOwnedModel::CheckNotAPoolBlock(void* ptr) {
  for (GraphModel& orphan : orphans_) {
    // The pool's graphs may live while those of the recording that held
    // `ptr` are gone (it went back at the recording's end).
    if (!GraphsAlive(sim_, orphan) || !ClaimantAlive(sim_, orphan, ptr)) {
      continue;
    }
    FUZZ_CHECK(std::find(orphan.blocks.begin(), orphan.blocks.end(), ptr) ==
                   orphan.blocks.end(),
               absl::StrCat("a block of graph pool ", orphan.id,
                            " leased to general work while its graphs or "
                            "launches are alive"));
  }
}

void GraphOwnedModel::ForgetDevice(int device) {
  // Their graphs went with the reset (and their user objects ran).
  for (GraphModel& orphan : orphans_) {
    if (orphan.device != device) continue;
    orphan.graphs.clear();
    orphan.replay_streams.clear();
    fuzz::ForgetDevice(orphan);
  }
}

}  // namespace gpupool::fuzz
