// SimUserObjects: user objects and their deferred destructors
// (sim_user_objects.h).

#include "src/backends/sim/sim_user_objects.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_support.h"

namespace gpupool {
namespace sim_internal {
namespace {

thread_local int destructors_running = 0;

uint64_t IdOf(const void* handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}

}  // namespace

bool InUserObjectDestructor() { return destructors_running > 0; }

SimUserObjects::SimUserObjects(SimFaultInjector& faults, SimDevices& devices,
                               SimGraphModel& graphs, SimMisuseLog& misuse)
    : faults_(faults), devices_(devices), graphs_(graphs), misuse_(misuse) {}

absl::StatusOr<NativeUserObject> SimUserObjects::Create(
    int device, UserObjectDestructor destroy, void* data) {
  if (absl::Status entered = faults_.Enter(SimOp::kUserObjectCreate, device);
      !entered.ok()) {
    return entered;
  }
  if (absl::Status poison = devices_.device(device).PoisonStatus();
      !poison.ok()) {
    return poison;
  }
  if (destroy == nullptr) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       "CreateUserObject: null destructor");
  }
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  Object object;
  object.device = device;
  object.destroy = destroy;
  object.data = data;
  object.caller_refs = 1;
  objects_.emplace(id, std::move(object));
  return reinterpret_cast<NativeUserObject>(static_cast<uintptr_t>(id));
}

absl::Status SimUserObjects::RetainByGraph(int device, NativeGraph graph,
                                           NativeUserObject object) {
  if (absl::Status entered = faults_.Enter(SimOp::kUserObjectRetain, device);
      !entered.ok()) {
    return entered;
  }
  if (absl::Status poison = devices_.device(device).PoisonStatus();
      !poison.ok()) {
    return poison;
  }
  const uint64_t graph_id = IdOf(graph);
  if (!graphs_.HasGraph(device, graph_id)) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("RetainUserObjectByGraph: unknown or "
                                    "destroyed graph ",
                                    graph_id, " (device ", device, ")"));
  }
  SimMisuseLog::Reporter misuse(misuse_);
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(IdOf(object));
  if (it == objects_.end() || it->second.device != device ||
      it->second.caller_refs == 0) {
    return misuse.Flag(absl::StrCat(
        "RetainUserObjectByGraph: user object ", IdOf(object),
        " is unknown, of another device, or has no reference to move"));
  }
  --it->second.caller_refs;
  ++it->second.graph_refs;
  graph_refs_[graph_id].push_back(it->first);
  return absl::OkStatus();
}

absl::Status SimUserObjects::Release(int device, NativeUserObject object) {
  if (absl::Status entered = faults_.Enter(SimOp::kUserObjectRelease, device);
      !entered.ok()) {
    return entered;
  }
  if (absl::Status poison = devices_.device(device).PoisonStatus();
      !poison.ok()) {
    return poison;
  }
  {
    SimMisuseLog::Reporter misuse(misuse_);
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(IdOf(object));
    if (it == objects_.end() || it->second.device != device ||
        it->second.caller_refs == 0) {
      return misuse.Flag(absl::StrCat(
          "ReleaseUserObject: user object ", IdOf(object),
          " is unknown, of another device, or has no reference to release"));
    }
    --it->second.caller_refs;
  }
  Sweep();
  return absl::OkStatus();
}

void SimUserObjects::NoteInstantiated(uint64_t graph_id) {
  absl::MutexLock lock(&mu_);
  DropRefs(exec_refs_, graph_id);
  auto held = graph_refs_.find(graph_id);
  if (held == graph_refs_.end()) return;
  for (uint64_t id : held->second) {
    auto it = objects_.find(id);
    if (it != objects_.end()) ++it->second.graph_refs;
  }
  exec_refs_[graph_id] = held->second;
}

void SimUserObjects::NoteLaunch(uint64_t graph_id,
                                const std::vector<uint64_t>& tickets) {
  if (tickets.empty()) return;
  absl::MutexLock lock(&mu_);
  // What the executable graph holds: a reference the template took after
  // instantiation does not keep this launch's objects alive.
  auto held = exec_refs_.find(graph_id);
  if (held == exec_refs_.end()) return;
  for (uint64_t id : held->second) {
    auto it = objects_.find(id);
    if (it == objects_.end()) continue;
    std::vector<uint64_t>& pending = it->second.tickets;
    pending.insert(pending.end(), tickets.begin(), tickets.end());
  }
}

void SimUserObjects::DropRefs(RefMap& refs, uint64_t graph_id) {
  auto held = refs.find(graph_id);
  if (held == refs.end()) return;
  for (uint64_t id : held->second) {
    auto it = objects_.find(id);
    if (it != objects_.end()) --it->second.graph_refs;
  }
  refs.erase(held);
}

void SimUserObjects::NoteGraphDestroyed(uint64_t graph_id, bool template_gone,
                                        bool exec_gone) {
  {
    absl::MutexLock lock(&mu_);
    if (template_gone) DropRefs(graph_refs_, graph_id);
    if (exec_gone) DropRefs(exec_refs_, graph_id);
  }
  Sweep();
}

void SimUserObjects::ResetDevice(int device) {
  std::vector<std::pair<UserObjectDestructor, void*>> run;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = objects_.begin(); it != objects_.end();) {
      if (it->second.device != device) {
        ++it;
        continue;
      }
      run.emplace_back(it->second.destroy, it->second.data);
      objects_.erase(it++);
    }
    // The device's graphs are gone (SimGraphModel::ResetDevice); so are the
    // references they held, whichever object they name.
    for (RefMap* refs : {&graph_refs_, &exec_refs_}) {
      for (auto held = refs->begin(); held != refs->end();) {
        std::vector<uint64_t> kept;
        for (uint64_t id : held->second) {
          if (objects_.contains(id)) kept.push_back(id);
        }
        held->second = std::move(kept);
        if (held->second.empty()) {
          refs->erase(held++);
        } else {
          ++held;
        }
      }
    }
  }
  RunDestructors(run);
}

void SimUserObjects::RunDestructors(
    const std::vector<std::pair<UserObjectDestructor, void*>>& run) {
  for (const auto& [destroy, data] : run) {
    ++destructors_running;
    destroy(data);
    --destructors_running;
  }
}

void SimUserObjects::Sweep() {
  // Candidates first (no reference left), then their launches' state under
  // each device's lock alone, then the destructors under no lock at all.
  struct Candidate {
    uint64_t id;
    int device;
    std::vector<uint64_t> tickets;
  };
  std::vector<Candidate> candidates;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, object] : objects_) {
      if (object.caller_refs == 0 && object.graph_refs == 0) {
        candidates.push_back(Candidate{id, object.device, object.tickets});
      }
    }
  }
  if (candidates.empty()) return;
  std::vector<uint64_t> due;
  const absl::Time now = absl::Now();
  for (const Candidate& candidate : candidates) {
    const DeviceState& d = devices_.device(candidate.device);
    absl::ReaderMutexLock lock(&d.mu);
    if (!d.HasPendingWork(candidate.tickets, now)) due.push_back(candidate.id);
  }
  std::vector<std::pair<UserObjectDestructor, void*>> run;
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t id : due) {
      auto it = objects_.find(id);
      // Another sweep may have taken it meanwhile.
      if (it == objects_.end() || it->second.caller_refs != 0 ||
          it->second.graph_refs != 0) {
        continue;
      }
      run.emplace_back(it->second.destroy, it->second.data);
      objects_.erase(it);
    }
  }
  RunDestructors(run);
}

void SimUserObjects::AppendLeaks(int device, LeakList* leaks) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, object] : objects_) {
    if (object.device == device && object.caller_refs > 0) {
      leaks->emplace_back(
          id, absl::StrCat("user object ", id, " on device ", device, " (",
                           object.caller_refs, " references held)"));
    }
  }
}

int SimUserObjects::live_user_objects() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(objects_.size());
}

}  // namespace sim_internal
}  // namespace gpupool
