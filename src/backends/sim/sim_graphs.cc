// SimGraphModel: graphs, their launches and the graph oracle (sim_graphs.h).

#include "src/backends/sim/sim_graphs.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_support.h"

namespace gpupool {
namespace sim_internal {
namespace {

// Process-wide, never reused.
uint64_t NextGraphId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

absl::Status UnknownGraph(absl::string_view op, SimGraph graph) {
  return CallerError(absl::StatusCode::kInvalidArgument,
                     absl::StrCat(op, ": unknown or destroyed graph ", graph.id,
                                  " (device ", graph.device, ")"));
}

}  // namespace

SimGraphModel::SimGraphModel(SimDevices& devices, SimCaptureModel& captures,
                             SimMemory& memory, SimMisuseLog& misuse)
    : devices_(devices), captures_(captures), memory_(memory), misuse_(misuse) {
  graphs_.reserve(devices.device_count());
  for (int i = 0; i < devices.device_count(); ++i) {
    graphs_.push_back(std::make_unique<DeviceGraphs>());
  }
}

absl::StatusOr<SimGraph> SimGraphModel::EndCaptureToGraph(NativeStream stream) {
  int device = devices_.DeviceOfHandle(stream, "EndCaptureToGraph");
  if (device < 0) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       "EndCaptureToGraph: unknown stream");
  }
  DeviceState& d = devices_.device(device);
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  absl::StatusOr<StreamState*> found =
      d.FindStream(stream, "EndCaptureToGraph", misuse);
  if (!found.ok()) return found.status();
  absl::StatusOr<FinishedCapture> finished =
      captures_.FinishCapture(d, **found, HandleValue(stream));
  if (!finished.ok()) return finished.status();
  GraphState graph;
  graph.capture_id = finished->capture_id;
  graph.owner = finished->owner;
  graph.work = std::move(finished->work);
  const uint64_t graph_id = NextGraphId();
  DeviceGraphs& graphs = *graphs_[device];
  absl::MutexLock graph_lock(&graphs.mu);
  graphs.graphs.emplace(graph_id, std::move(graph));
  return SimGraph{device, graph_id};
}

absl::Status SimGraphModel::InstantiateGraph(SimGraph graph) {
  if (!devices_.ValidDevice(graph.device)) {
    return UnknownGraph("InstantiateGraph", graph);
  }
  DeviceState& d = devices_.device(graph.device);
  absl::ReaderMutexLock lock(&d.mu);
  if (d.poisoned) return d.sticky;
  DeviceGraphs& graphs = *graphs_[graph.device];
  absl::MutexLock graph_lock(&graphs.mu);
  auto it = graphs.graphs.find(graph.id);
  if (it == graphs.graphs.end() || !it->second.template_live) {
    return UnknownGraph("InstantiateGraph", graph);
  }
  it->second.instantiated = true;
  return absl::OkStatus();
}

void SimGraphModel::CheckLaunch(int device, const DeviceGraphs& graphs,
                                const GraphState& g, uint64_t id,
                                std::vector<std::string>* findings) const {
  // Every range the replay writes must still be allocated and must not hold
  // anyone else's data.
  const int64_t launch = g.launches + 1;
  for (const CapturedWork& work : g.work) {
    for (const TouchedRange& range : work.touched) {
      if (!memory_.IsLive(device, range.base)) {
        findings->push_back(absl::StrCat(
            "launch ", launch, " of graph ", id, " writes ", Hex(range.begin),
            " of allocation ", Hex(range.base), ", which was freed"));
        continue;
      }
      for (const MemoryClaim& claim : graphs.claims) {
        if (claim.owner != g.owner && claim.begin < range.end &&
            range.begin < claim.end) {
          findings->push_back(absl::StrCat("launch ", launch, " of graph ", id,
                                           " (owner ", g.owner, ") writes ",
                                           Hex(range.begin),
                                           ", leased to owner ", claim.owner));
        }
      }
    }
  }
}

absl::Status SimGraphModel::LaunchGraph(SimGraph graph, NativeStream stream,
                                        std::vector<uint64_t>* tickets) {
  if (!devices_.ValidDevice(graph.device)) {
    return UnknownGraph("LaunchGraph", graph);
  }
  DeviceState& d = devices_.device(graph.device);
  std::vector<std::string> findings;
  {
    SimMisuseLog::Reporter misuse(misuse_);
    absl::MutexLock lock(&d.mu);
    if (d.poisoned) return d.sticky;
    DeviceGraphs& graphs = *graphs_[graph.device];
    absl::MutexLock graph_lock(&graphs.mu);
    auto it = graphs.graphs.find(graph.id);
    if (it == graphs.graphs.end()) return UnknownGraph("LaunchGraph", graph);
    GraphState& g = it->second;
    if (!g.instantiated) {
      return CallerError(absl::StatusCode::kFailedPrecondition,
                         absl::StrCat("LaunchGraph: graph ", graph.id,
                                      " was never instantiated"));
    }
    StreamState* target = nullptr;
    if (stream != nullptr) {
      absl::StatusOr<StreamState*> found =
          d.FindStream(stream, "LaunchGraph", misuse);
      if (!found.ok()) return found.status();
      target = *found;
      if (target->capture != CaptureStatus::kNone) {
        return CallerError(absl::StatusCode::kUnimplemented,
                           "LaunchGraph: launching into a capture (a child "
                           "graph node) is not modelled");
      }
    }
    CheckLaunch(graph.device, graphs, g, graph.id, &findings);
    ++g.launches;
    g.last_launch.clear();
    const absl::Time now = absl::Now();
    for (const CapturedWork& work : g.work) {
      if (work.duration <= absl::ZeroDuration()) continue;
      const absl::Time deadline = work.duration == absl::InfiniteDuration()
                                      ? absl::InfiniteFuture()
                                      : now + work.duration;
      const uint64_t ticket = d.AddTicket(deadline);
      g.last_launch.push_back(ticket);
      if (target != nullptr) target->work.push_back(ticket);
    }
    if (tickets != nullptr) *tickets = g.last_launch;
  }
  if (!findings.empty()) {
    misuse_count_.fetch_add(static_cast<int64_t>(findings.size()),
                            std::memory_order_relaxed);
    absl::MutexLock lock(&log_mu_);
    for (std::string& finding : findings) {
      misuse_log_.push_back(std::move(finding));
    }
  }
  return absl::OkStatus();
}

absl::Status SimGraphModel::DestroyGraph(SimGraph graph) {
  if (!devices_.ValidDevice(graph.device)) {
    return UnknownGraph("DestroyGraph", graph);
  }
  DeviceGraphs& graphs = *graphs_[graph.device];
  absl::MutexLock lock(&graphs.mu);
  if (graphs.graphs.erase(graph.id) == 0) {
    return UnknownGraph("DestroyGraph", graph);
  }
  return absl::OkStatus();
}

absl::Status SimGraphModel::DestroyGraphTemplate(SimGraph graph) {
  if (!devices_.ValidDevice(graph.device)) {
    return UnknownGraph("DestroyGraphTemplate", graph);
  }
  DeviceGraphs& graphs = *graphs_[graph.device];
  absl::MutexLock lock(&graphs.mu);
  auto it = graphs.graphs.find(graph.id);
  if (it == graphs.graphs.end() || !it->second.template_live) {
    return UnknownGraph("DestroyGraphTemplate", graph);
  }
  it->second.template_live = false;
  if (!it->second.instantiated) graphs.graphs.erase(it);
  return absl::OkStatus();
}

absl::Status SimGraphModel::DestroyGraphExec(SimGraph graph) {
  if (!devices_.ValidDevice(graph.device)) {
    return UnknownGraph("DestroyGraphExec", graph);
  }
  DeviceGraphs& graphs = *graphs_[graph.device];
  absl::MutexLock lock(&graphs.mu);
  auto it = graphs.graphs.find(graph.id);
  if (it == graphs.graphs.end() || !it->second.instantiated) {
    return UnknownGraph("DestroyGraphExec", graph);
  }
  it->second.instantiated = false;
  // A launch still running finishes: its tickets live on the stream.
  if (!it->second.template_live) graphs.graphs.erase(it);
  return absl::OkStatus();
}

void SimGraphModel::ClaimMemory(const void* ptr, size_t bytes, uint64_t owner) {
  const int device = DecodeAddress(HandleValue(ptr)).device;
  if (!devices_.ValidDevice(device)) {
    misuse_.Report(
        absl::StrCat("ClaimMemory: unknown pointer ", Hex(HandleValue(ptr))));
    return;
  }
  DeviceGraphs& graphs = *graphs_[device];
  absl::MutexLock lock(&graphs.mu);
  const uintptr_t begin = HandleValue(ptr);
  graphs.claims.push_back(MemoryClaim{begin, begin + bytes, owner});
}

void SimGraphModel::ReleaseClaim(const void* ptr) {
  const int device = DecodeAddress(HandleValue(ptr)).device;
  if (!devices_.ValidDevice(device)) return;
  DeviceGraphs& graphs = *graphs_[device];
  absl::MutexLock lock(&graphs.mu);
  std::vector<MemoryClaim>& claims = graphs.claims;
  claims.erase(std::remove_if(claims.begin(), claims.end(),
                              [&](const MemoryClaim& claim) {
                                return claim.begin == HandleValue(ptr);
                              }),
               claims.end());
}

int SimGraphModel::live_graphs(int device) const {
  if (!devices_.ValidDevice(device)) return 0;
  const DeviceGraphs& graphs = *graphs_[device];
  absl::ReaderMutexLock lock(&graphs.mu);
  return static_cast<int>(graphs.graphs.size());
}

bool SimGraphModel::HasGraph(int device, uint64_t id) const {
  if (!devices_.ValidDevice(device)) return false;
  const DeviceGraphs& graphs = *graphs_[device];
  absl::ReaderMutexLock lock(&graphs.mu);
  auto it = graphs.graphs.find(id);
  return it != graphs.graphs.end() && it->second.template_live;
}

bool SimGraphModel::graph_launch_pending(SimGraph graph) const {
  if (!devices_.ValidDevice(graph.device)) return false;
  const DeviceState& d = devices_.device(graph.device);
  absl::ReaderMutexLock lock(&d.mu);
  const DeviceGraphs& graphs = *graphs_[graph.device];
  absl::ReaderMutexLock graph_lock(&graphs.mu);
  auto it = graphs.graphs.find(graph.id);
  return it != graphs.graphs.end() &&
         d.HasPendingWork(it->second.last_launch, absl::Now());
}

std::vector<std::string> SimGraphModel::graph_misuse_log() const {
  absl::MutexLock lock(&log_mu_);
  return misuse_log_;
}

void SimGraphModel::ResetDevice(DeviceState& d) {
  DeviceGraphs& graphs = *graphs_[d.device];
  absl::MutexLock lock(&graphs.mu);
  graphs.graphs.clear();
  graphs.claims.clear();
}

void SimGraphModel::AppendLeaks(const DeviceState& d, LeakList* leaks) const {
  const DeviceGraphs& graphs = *graphs_[d.device];
  absl::ReaderMutexLock lock(&graphs.mu);
  for (const auto& [id, graph] : graphs.graphs) {
    leaks->emplace_back(id, absl::StrCat("graph ", id, " on device ", d.device,
                                         " (", graph.launches, " launches)"));
  }
}

}  // namespace sim_internal
}  // namespace gpupool
