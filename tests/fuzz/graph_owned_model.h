// Graph-owned pools (GraphPool::RetainBy): the steps that retain a pool by a
// graph, instantiate and launch it, destroy its template and executable
// graph alone (in either order), let the pool's handle go (with Release or
// dropped) and complete the launches; the pools left to their graphs; and
// the checks that no block of such a pool is leased to general work while a
// retaining graph, its executable graph or a launch of theirs is alive, and
// that once all of them are gone a Trim gives the pool back
// (graph_pools_awaiting_graphs).

#ifndef GPUPOOL_TESTS_FUZZ_GRAPH_OWNED_MODEL_H_
#define GPUPOOL_TESTS_FUZZ_GRAPH_OWNED_MODEL_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "gpupool/backend.h"
#include "tests/fuzz/capture_model.h"
#include "tests/fuzz/graph_model.h"
#include "tests/fuzz/harness.h"

namespace gpupool::fuzz {

class GraphOwnedModel {
 public:
  // `with_handle`: the pools whose handle the fuzzer still holds (owned by
  // GraphPoolModel); a pool moves from there to this model's when its
  // handle lets go while a graph retains it.
  GraphOwnedModel(Harness& harness, CaptureModel& captures,
                  std::vector<GraphModel>& with_handle)
      : harness_(harness), captures_(captures), with_handle_(with_handle) {}
  GraphOwnedModel(const GraphOwnedModel&) = delete;
  GraphOwnedModel& operator=(const GraphOwnedModel&) = delete;

  // One graph-owned pool step: RetainBy, instantiate, launch, destroy
  // template or exec alone, let a handle go, or complete launches.
  void Step();

  // The handle of a retained pool (an element of `with_handle`) lets go
  // (Release naming the replay streams, or dropped): the pool becomes the
  // graphs'. Graphs that do not retain it go first, their launches completed
  // unless Release fences them.
  void LetGo(GraphModel& model, bool with_release);

  // Completes launches, trims, and checks that the pools whose graphs and
  // launches are all gone went back (each other one may still await).
  void Collect();

  // A retained pool whose handle was released at the end of an input.
  void Adopt(GraphModel&& model) { orphans_.push_back(std::move(model)); }
  // The end of an input: the graphs of the pools left to them go.
  void DestroyGraphs();

  // Whether a pool left to its graphs captures or replays on `stream`.
  bool UsesStream(NativeStream stream) const;
  // Checks that `ptr`, leased to general work, is no block of a pool whose
  // graphs or launches are alive.
  void CheckNotAPoolBlock(void* ptr);
  // `device` was reset: its graphs, launches and streams are gone.
  void ForgetDevice(int device);

  // Retained pools whose handle let go, not yet proven back.
  size_t size() const { return orphans_.size(); }

 private:
  Harness& harness_;
  CaptureModel& captures_;
  std::vector<GraphModel>& with_handle_;
  FuzzedDataProvider& input_ = harness_.input();
  SimBackend& sim_ = harness_.sim();
  // Retained pools whose handle let go (Release or dropped), until a Trim
  // after their graphs and launches are gone proves them back.
  std::vector<GraphModel> orphans_;
};

}  // namespace gpupool::fuzz

#endif  // GPUPOOL_TESTS_FUZZ_GRAPH_OWNED_MODEL_H_
