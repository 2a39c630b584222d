// SimUserObjects: the simulator's user objects (cudaUserObjectCreate,
// cudaGraphRetainUserObject, cudaUserObjectRelease). An object counts the
// caller's references and the graphs': a graph's template holds those it
// retained (they die with DestroyGraphTemplate or DestroyGraph), and its
// executable graph a copy of the template's references taken at
// InstantiateGraph (they die with DestroyGraphExec or DestroyGraph); each
// launch of an executable graph that holds the object adds the launch's work
// tickets. ResetDevice drops every object of the device, running each
// destructor once (cudaDeviceReset documents nothing about user objects;
// docs/backends.md says why the simulator chose this). Its destructor runs
// once no reference is left *and* those tickets completed, on the next
// sweep: the simulator sweeps after DestroyGraph, ReleaseUserObject,
// CompleteAllWork, CompleteWork and stream and event queries and
// synchronizes (a real runtime runs it on a thread of its own). A runtime
// call made from inside a destructor is a misuse (SimFaultInjector asks
// InUserObjectDestructor). docs/backends.md, "User objects in the
// simulator", has the model and its sources.
//
// Thread safety: all methods may be called concurrently. The mutex is taken
// alone or after a device's DeviceState::mu is released; destructors run
// with no lock held.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_USER_OBJECTS_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_USER_OBJECTS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_faults.h"
#include "src/backends/sim/sim_graphs.h"
#include "src/backends/sim/sim_misuse.h"

namespace gpupool {
namespace sim_internal {

// Whether the calling thread is running a user object's destructor.
bool InUserObjectDestructor();

class SimUserObjects {
 public:
  SimUserObjects(SimFaultInjector& faults, SimDevices& devices,
                 SimGraphModel& graphs, SimMisuseLog& misuse);
  SimUserObjects(const SimUserObjects&) = delete;
  SimUserObjects& operator=(const SimUserObjects&) = delete;

  // --- Backend primitives (backend.h documents them) ----------------------
  absl::StatusOr<NativeUserObject> Create(int device,
                                          UserObjectDestructor destroy,
                                          void* data);
  absl::Status RetainByGraph(int device, NativeGraph graph,
                             NativeUserObject object);
  absl::Status Release(int device, NativeUserObject object);

  // --- For SimBackend ----------------------------------------------------
  // Graph `graph_id` was instantiated: its executable graph holds a copy of
  // the template's references (replacing those of an earlier instance).
  void NoteInstantiated(uint64_t graph_id);
  // A launch of graph `graph_id` enqueued `tickets` on `device`.
  void NoteLaunch(uint64_t graph_id, const std::vector<uint64_t>& tickets);
  // Graph `graph_id`'s template, executable graph, or both were destroyed:
  // their references go.
  void NoteGraphDestroyed(uint64_t graph_id, bool template_gone,
                          bool exec_gone);
  // cudaDeviceReset: every object of `device` is dropped and its destructor
  // runs (with no lock held); later calls with its handle are misuse.
  void ResetDevice(int device);
  // Runs the destructors that are due, with no lock held.
  void Sweep();
  // Objects of `device` the caller still holds references to.
  void AppendLeaks(int device, LeakList* leaks) const;
  int live_user_objects() const;

 private:
  struct Object {
    int device = -1;
    UserObjectDestructor destroy = nullptr;
    void* data = nullptr;
    int64_t caller_refs = 0;
    int64_t graph_refs = 0;
    // Work tickets of launches of graphs that held the object.
    std::vector<uint64_t> tickets;
  };

  SimFaultInjector& faults_;
  SimDevices& devices_;
  SimGraphModel& graphs_;
  SimMisuseLog& misuse_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Object> objects_ ABSL_GUARDED_BY(mu_);
  using RefMap = absl::flat_hash_map<uint64_t, std::vector<uint64_t>>;
  // Drops the references `refs` holds for `graph_id`.
  void DropRefs(RefMap& refs, uint64_t graph_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `destroy(data)` for each, marked as inside a destructor.
  static void RunDestructors(
      const std::vector<std::pair<UserObjectDestructor, void*>>& run);

  // By graph id, each reference held by the graph's template, and by its
  // executable graph, one entry per reference.
  RefMap graph_refs_ ABSL_GUARDED_BY(mu_);
  RefMap exec_refs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_USER_OBJECTS_H_
