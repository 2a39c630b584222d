// SimGraphModel: graphs made from the simulator's captures
// (cudaStreamEndCapture ... cudaGraphLaunch) and the graph oracle. A graph
// replays its captured work on every launch; the oracle checks each range a
// launch touches: freed, or claimed (ClaimMemory) by an owner other than the
// graph's, counts as a graph misuse, logged apart from misuse (tests assert
// on it directly, and a deliberate violation must not fail through
// SimOptions::on_misuse). docs/backends.md, "Graph capture in the
// simulator", has the model and its sources.
//
// Thread safety: all methods may be called concurrently. Each device's
// graphs and claims have their own mutex, taken after the device's
// DeviceState::mu and before its memory's; the oracle's log has its own,
// taken alone.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_GRAPHS_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_GRAPHS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_capture.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_memory.h"
#include "src/backends/sim/sim_misuse.h"

namespace gpupool {
namespace sim_internal {

class SimGraphModel {
 public:
  SimGraphModel(SimDevices& devices, SimCaptureModel& captures,
                SimMemory& memory, SimMisuseLog& misuse);
  SimGraphModel(const SimGraphModel&) = delete;
  SimGraphModel& operator=(const SimGraphModel&) = delete;

  // --- Test controls (SimBackend documents them) ---------------------------
  absl::StatusOr<SimGraph> EndCaptureToGraph(NativeStream stream);
  absl::Status InstantiateGraph(SimGraph graph);
  // `tickets`, when given, receives the launch's work tickets.
  absl::Status LaunchGraph(SimGraph graph, NativeStream stream,
                           std::vector<uint64_t>* tickets = nullptr);
  absl::Status DestroyGraph(SimGraph graph);
  // The template alone (cudaGraphDestroy) / the executable graph alone
  // (cudaGraphExecDestroy); the record goes when both are gone.
  absl::Status DestroyGraphTemplate(SimGraph graph);
  absl::Status DestroyGraphExec(SimGraph graph);
  void ClaimMemory(const void* ptr, size_t bytes, uint64_t owner);
  void ReleaseClaim(const void* ptr);

  // --- Inspection --------------------------------------------------------
  int live_graphs(int device) const;
  // Whether the graph's template (not only its executable graph) is live.
  bool HasGraph(int device, uint64_t id) const;
  bool graph_launch_pending(SimGraph graph) const;
  int64_t graph_misuses() const {
    return misuse_count_.load(std::memory_order_relaxed);
  }
  std::vector<std::string> graph_misuse_log() const;

  // --- For SimBackend ----------------------------------------------------
  // ResetDevice: forgets every graph and claim of the device.
  void ResetDevice(DeviceState& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);
  // Live graphs of the device, for the leak check.
  void AppendLeaks(const DeviceState& d, LeakList* leaks) const
      ABSL_SHARED_LOCKS_REQUIRED(d.mu);

 private:
  struct GraphState {
    uint64_t capture_id = 0;
    uint64_t owner = 0;
    std::vector<CapturedWork> work;
    bool template_live = true;  // until DestroyGraphTemplate
    bool instantiated = false;  // the executable graph is live
    int64_t launches = 0;
    // Tickets of the latest launch: pending while its replay runs.
    std::vector<uint64_t> last_launch;
  };
  // "This range holds `owner`'s data" (ClaimMemory), until released.
  struct MemoryClaim {
    uintptr_t begin = 0;
    uintptr_t end = 0;
    uint64_t owner = 0;
  };
  struct DeviceGraphs {
    mutable absl::Mutex mu;
    absl::flat_hash_map<uint64_t, GraphState> graphs
        ABSL_GUARDED_BY(mu);  // by graph id
    std::vector<MemoryClaim> claims ABSL_GUARDED_BY(mu);
  };

  // The oracle's findings for the next launch of `g` on device `device`.
  void CheckLaunch(int device, const DeviceGraphs& graphs, const GraphState& g,
                   uint64_t id, std::vector<std::string>* findings) const
      ABSL_SHARED_LOCKS_REQUIRED(graphs.mu);

  SimDevices& devices_;
  SimCaptureModel& captures_;
  SimMemory& memory_;
  SimMisuseLog& misuse_;
  std::vector<std::unique_ptr<DeviceGraphs>> graphs_;

  std::atomic<int64_t> misuse_count_{0};
  mutable absl::Mutex log_mu_;
  std::vector<std::string> misuse_log_ ABSL_GUARDED_BY(log_mu_);
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_GRAPHS_H_
