// What happens to one graph pool's facts when its graphs are instantiated,
// launched, destroyed or lost with their device.

#include "tests/fuzz/graph_model.h"

#include <algorithm>

namespace gpupool::fuzz {

GraphModel* PickGraphModel(FuzzedDataProvider& input,
                           std::vector<GraphModel>& models) {
  if (models.empty()) return nullptr;
  return &models[input.ConsumeIntegralInRange<size_t>(0, models.size() - 1)];
}

void DestroyGraphs(SimBackend& sim, std::vector<SimGraph>& graphs) {
  for (SimGraph graph : graphs) (void)sim.DestroyGraph(graph);
  graphs.clear();
}

bool Instantiate(SimBackend& sim, GraphModel& model, SimGraph graph) {
  if (!sim.InstantiateGraph(graph).ok()) return false;
  GraphFacts& facts = model.facts[graph.id];
  facts.instantiated = true;
  facts.exec_live = true;
  facts.exec_holds = facts.retains;
  return true;
}

void Launch(SimBackend& sim, GraphModel& model, SimGraph graph,
            NativeStream stream) {
  if (!sim.LaunchGraph(graph, stream).ok()) return;
  std::vector<NativeStream>& replays = model.replay_streams;
  if (std::find(replays.begin(), replays.end(), stream) == replays.end()) {
    replays.push_back(stream);
  }
  GraphFacts& facts = model.facts[graph.id];
  facts.launch_streams.push_back(stream);
  // Captured work that completes only when told keeps the launch running
  // (and the pool, when the executable graph holds it).
  if (facts.exec_holds && sim.graph_launch_pending(graph)) {
    model.pending_launches.push_back(stream);
  }
}

void GraphGone(GraphModel& model, SimGraph graph) {
  GraphFacts& facts = model.facts[graph.id];
  facts.template_live = false;
  facts.exec_live = false;
  facts.exec_holds = false;
}

void ForgetGraphs(GraphModel& model) {
  for (auto& [id, facts] : model.facts) {
    facts.template_live = false;
    facts.exec_live = false;
    facts.exec_holds = false;
  }
}

void ForgetDevice(GraphModel& model) {
  ForgetGraphs(model);
  model.pending_launches.clear();
  for (auto& [id, facts] : model.facts) facts.launch_streams.clear();
}

void RefreshLaunches(SimBackend& sim, GraphModel& model) {
  std::vector<NativeStream>& pending = model.pending_launches;
  pending.erase(std::remove_if(pending.begin(), pending.end(),
                               [&](NativeStream stream) {
                                 return !sim.has_pending_work(stream);
                               }),
                pending.end());
}

bool GraphsAlive(SimBackend& sim, GraphModel& model) {
  RefreshLaunches(sim, model);
  if (!model.pending_launches.empty()) return true;
  for (const auto& [id, facts] : model.facts) {
    if (facts.retains && (facts.template_live || facts.exec_holds)) {
      return true;
    }
  }
  return false;
}

bool ClaimantAlive(SimBackend& sim, GraphModel& model, void* ptr) {
  auto claims = model.claimed_by.find(ptr);
  if (claims == model.claimed_by.end()) return false;
  for (int capture : claims->second) {
    auto graph = model.graph_of_capture.find(capture);
    if (graph == model.graph_of_capture.end()) {
      // The capture is still open (or made no graph: nothing replays it).
      if (capture == model.capture_number && model.capturing != nullptr) {
        return true;
      }
      continue;
    }
    const GraphFacts& facts = model.facts[graph->second];
    const SimGraph sim_graph{model.device, graph->second};
    if (facts.template_live || facts.exec_holds ||
        (facts.exec_live && sim.graph_launch_pending(sim_graph))) {
      return true;
    }
  }
  return false;
}

}  // namespace gpupool::fuzz
