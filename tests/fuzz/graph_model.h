// One graph pool's model: the pool, its capture scope, the graphs its
// captures left and what the fuzzer did with each (retained by the pool,
// instantiated, template and executable graph alive, launches), and the
// operations on those facts that every graph-pool step shares.

#ifndef GPUPOOL_TESTS_FUZZ_GRAPH_MODEL_H_
#define GPUPOOL_TESTS_FUZZ_GRAPH_MODEL_H_

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "gpupool/backend.h"
#include "gpupool/graph_pool.h"
#include "gpupool/sim_backend.h"

namespace gpupool::fuzz {

// What the fuzzer did with one graph of a pool (absent: template live,
// never instantiated).
struct GraphFacts {
  bool retains = false;       // GraphPool::RetainBy(graph) succeeded
  bool instantiated = false;  // ever (RetainBy comes before, never after)
  bool template_live = true;
  bool exec_live = false;
  bool exec_holds = false;  // instantiated after a RetainBy: holds the pool
  std::vector<NativeStream> launch_streams;
};

// A graph pool and what the fuzzer did with it.
struct GraphModel {
  GraphPool pool;
  CaptureScope scope;
  NativeStream capturing = nullptr;  // the open capture's stream, if any
  std::vector<SimGraph> graphs;      // something of each still lives
  std::vector<NativeStream> replay_streams;  // graphs launched there
  // Graph-owned pools: the pool's id and device (the handle may be gone),
  // per-graph facts, device blocks its captures allocated, and the streams
  // of launches of retaining graphs that ran when last seen.
  uint64_t id = 0;
  int device = -1;
  std::map<uint64_t, GraphFacts> facts;
  std::vector<void*> blocks;
  std::vector<NativeStream> pending_launches;
  // Which captures claimed each block (a block reused inside the pool is
  // claimed by several), the open capture's number, and the graph each
  // ended capture made.
  int capture_number = 0;
  std::map<void*, std::vector<int>> claimed_by;
  std::map<int, uint64_t> graph_of_capture;
  bool retained() const {
    for (const auto& [graph, f] : facts) {
      if (f.retains) return true;
    }
    return false;
  }
};

// The model the input picks among `models`, or nullptr when there is none.
GraphModel* PickGraphModel(FuzzedDataProvider& input,
                           std::vector<GraphModel>& models);

// Destroys the graphs (before their pool is released: a replay after the
// release would write memory the general cache may hand out).
void DestroyGraphs(SimBackend& sim, std::vector<SimGraph>& graphs);

// InstantiateGraph, and what it means for the pool: an executable graph
// made after RetainBy holds the pool.
bool Instantiate(SimBackend& sim, GraphModel& model, SimGraph graph);
// LaunchGraph on `stream` (kept leased: a release fences on it).
void Launch(SimBackend& sim, GraphModel& model, SimGraph graph,
            NativeStream stream);
// The graph's template and executable graph are gone.
void GraphGone(GraphModel& model, SimGraph graph);
// Every graph of the model is gone (destroyed, or the device was reset).
void ForgetGraphs(GraphModel& model);
// The device was reset: graphs, launches and streams are gone.
void ForgetDevice(GraphModel& model);

// A launch of a retaining graph is running while its stream has work: its
// work completes only when told (CompleteWork, CompleteAllWork, a
// synchronize), which completes the stream's work all at once.
void RefreshLaunches(SimBackend& sim, GraphModel& model);
// Whether a graph that captured `ptr` surely still uses it: its template
// lives, an executable graph made after RetainBy lives, or its latest
// launch is running. A block given to general work must have none.
bool ClaimantAlive(SimBackend& sim, GraphModel& model, void* ptr);
// Whether a retaining graph, its executable graph or a launch of theirs is
// alive (exact: nothing the pool waits for is missed, nothing extra).
bool GraphsAlive(SimBackend& sim, GraphModel& model);

}  // namespace gpupool::fuzz

#endif  // GPUPOOL_TESTS_FUZZ_GRAPH_MODEL_H_
