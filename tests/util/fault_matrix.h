// The fault-injection matrix's harness (tests/conformance/fault_matrix_test.cc
// runs it; the scenarios live there, in fault_matrix_graph_ipc_test.cc,
// fault_matrix_segments_test.cc and fault_matrix_deferred_test.cc):
// the fault classes and what each injected fault looks like, the
// expectations a cell states (caller's status code, handles allowed to leak),
// the pool paths, and the Harness, one cell's world: a simulator behind the
// checking wrapper, the three pools sharing one DeviceHealth, and the leases
// the scenario holds (checked fresh as they are handed out).

#ifndef GPUPOOL_TESTS_UTIL_FAULT_MATRIX_H_
#define GPUPOOL_TESTS_UTIL_FAULT_MATRIX_H_

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/graph_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/pool_options.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "tests/util/checking_backend.h"
#include "tests/util/test_util.h"

namespace gpupool::fault_matrix {

using ::gpupool::testing::CheckingBackend;
using ::gpupool::testing::StrictSimOptions;

constexpr int kDevices = 3;
constexpr int kTarget = 0;  // the device every fault is injected on
constexpr int kOther = 1;   // must keep working whatever happens to kTarget

constexpr Fault kFaults[] = {Fault::kResource, Fault::kDevice,
                             Fault::kOutOfMemory, Fault::kShutdown,
                             Fault::kCaller};

// The code each injected fault carries: what a runtime error of that class
// typically maps to, so that "the caller sees the runtime's status" is
// distinguishable from the pools' own FailedPrecondition/ResourceExhausted.
inline absl::StatusCode InjectedCode(Fault fault) {
  switch (fault) {
    case Fault::kResource:
      return absl::StatusCode::kAborted;
    case Fault::kDevice:
      return absl::StatusCode::kInternal;
    case Fault::kOutOfMemory:
      return absl::StatusCode::kResourceExhausted;
    case Fault::kShutdown:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInvalidArgument;
  }
}

// Injected statuses carry a marker so the wrapper can tell which call
// consumed them: the cell's own fault, or one a scenario queued as setup.
constexpr absl::string_view kCellMarker = "fault-matrix cell fault";
constexpr absl::string_view kSetupMarker = "fault-matrix setup fault";

// ---------------------------------------------------------------------------
// Expectations
// ---------------------------------------------------------------------------

// Handles the simulator may still hold after every pool was destroyed.
struct Leaks {
  int streams = 0;
  int events = 0;
  int allocations = 0;
  // IPC mappings of another process's memory still open on the target.
  int mappings = 0;
  // User objects whose destructor has not run (a release the runtime
  // refused keeps its reference).
  int user_objects = 0;
  friend bool operator==(const Leaks& a, const Leaks& b) {
    return a.streams == b.streams && a.events == b.events &&
           a.allocations == b.allocations && a.mappings == b.mappings &&
           a.user_objects == b.user_objects;
  }
  std::string ToString() const {
    return absl::StrCat("{streams=", streams, ", events=", events,
                        ", allocations=", allocations, ", mappings=", mappings,
                        ", user_objects=", user_objects, "}");
  }
};
constexpr Leaks kOneStream{1, 0, 0};
constexpr Leaks kOneEvent{0, 1, 0};
constexpr Leaks kOneAllocation{0, 0, 1};
constexpr Leaks kOneMapping{0, 0, 0, 1};
constexpr Leaks kOneUserObject{0, 0, 0, 0, 1};

struct Expectation {
  // What the caller of the path sees; nullopt when the path has no caller
  // (a release, Trim() of a handle pool, a destructor, the exit drain).
  std::optional<absl::StatusCode> code;
  Leaks leaks;
};
using ExpectFn = std::function<Expectation(Fault)>;

// kShutdown leaks `shutdown` (the runtime is unloading: leak quietly);
// kResource, kOutOfMemory and kCaller leak `other` (e.g. memory whose last
// use can no longer be observed); kDevice leaks nothing that counts: the
// device's handles are exempt, its context is dead.
inline Leaks LeaksFor(Fault fault, Leaks shutdown, Leaks other) {
  if (fault == Fault::kShutdown) return shutdown;
  if (fault == Fault::kDevice) return {};
  return other;
}

// The caller sees the runtime's status as it is.
inline ExpectFn Passthrough(Leaks shutdown = {}, Leaks other = {}) {
  return [=](Fault f) {
    return Expectation{InjectedCode(f), LeaksFor(f, shutdown, other)};
  };
}
// The pool absorbs the fault and serves the request anyway, unless the
// device died: then FailedPrecondition naming the sticky error.
inline ExpectFn Recovers(Leaks shutdown = {}, Leaks other = {}) {
  return [=](Fault f) {
    return Expectation{f == Fault::kDevice
                           ? absl::StatusCode::kFailedPrecondition
                           : absl::StatusCode::kOk,
                       LeaksFor(f, shutdown, other)};
  };
}
// OK whatever happened (AllocationCache::Trim reports only failed frees).
inline ExpectFn AlwaysOk(Leaks shutdown = {}, Leaks other = {}) {
  return [=](Fault f) {
    return Expectation{absl::StatusCode::kOk, LeaksFor(f, shutdown, other)};
  };
}
// No caller to report to.
inline ExpectFn Silent(Leaks shutdown = {}, Leaks other = {}) {
  return [=](Fault f) {
    return Expectation{std::nullopt, LeaksFor(f, shutdown, other)};
  };
}
// A runtime allocation of the cache: out-of-memory runs the OOM chain
// (trim, retry once: the retry succeeds), a sticky error poisons
// (FailedPrecondition), anything else is the runtime's status.
inline ExpectFn CacheAllocation() {
  return [](Fault f) {
    switch (f) {
      case Fault::kDevice:
        return Expectation{absl::StatusCode::kFailedPrecondition, {}};
      case Fault::kOutOfMemory:
        return Expectation{absl::StatusCode::kOk, {}};
      default:
        return Expectation{InjectedCode(f), {}};
    }
  };
}
// The OOM chain's retry: a second out-of-memory is ResourceExhausted with
// the numbers, a sticky error FailedPrecondition, anything else as is.
inline ExpectFn OomRetry() {
  return [](Fault f) {
    switch (f) {
      case Fault::kDevice:
        return Expectation{absl::StatusCode::kFailedPrecondition, {}};
      case Fault::kOutOfMemory:
        return Expectation{absl::StatusCode::kResourceExhausted, {}};
      default:
        return Expectation{InjectedCode(f), {}};
    }
  };
}

// The pool paths the matrix drives (a cell is path x op x fault).
enum class Path {
  kStreamConstruct,
  kStreamAcquire,
  kStreamPrewarm,
  kStreamPrewarmAsync,
  kStreamValidate,
  kStreamDrain,
  kStreamReturn,
  kStreamTrim,
  kStreamClose,
  kStreamExitDrain,
  kEventAcquire,
  kEventPrewarm,
  kEventPrewarmAsync,
  kEventValidate,
  kEventDrain,
  kEventReturn,
  kEventTrim,
  kEventClose,
  kEventExitDrain,
  kCacheAllocate,
  kCacheRelease,
  kCacheTrim,
  kCacheOomChain,
  kCacheStable,
  kCacheClose,
  kCacheExitDrain,
  // The cache's segments (split, merge, give-back before growth):
  // fault_matrix_segments_test.cc.
  kCacheSplit,
  kCacheMerge,
  kCacheMergedReuse,
  kCacheGiveBack,
  // Blocks parked with their fence deferred (defer_same_stream_fences),
  // fenced when another request or FenceStream wants them:
  // fault_matrix_deferred_test.cc.
  kCacheDeferredFence,
  // Graph pools (gpupool/graph_pool.h) and IPC (gpupool/ipc_handle.h):
  // fault_matrix_graph_ipc_test.cc.
  kGraphScopeOpen,
  kGraphAllocate,
  kGraphUnregisteredRelease,
  kGraphPoolRelease,
  kGraphLateReturn,
  kGraphFree,
  kGraphRetain,
  kIpcExport,
  kIpcImport,
  kIpcClose,
};

class Harness;

// The instant profile plus a resettable stream attribute, so that the return
// path's attribute reset exists to inject into.
inline SimProfile AttributeProfile() {
  SimProfile profile = SimProfile::Instant();
  profile.stream_attributes = true;
  return profile;
}

inline AllocationCacheOptions NoGiveBack() {
  AllocationCacheOptions options;
  options.give_back_above_percent = -1;
  return options;
}

struct Scenario {
  Path path;
  SimOp op;
  std::string what;  // how the path is driven into the op
  std::function<void(Harness&)> setup;
  std::function<absl::Status(Harness&)> step;
  ExpectFn expect;
  PoolOptions pool_options = {};
  // No give-back before a miss: the cells pin the OOM chain's and the
  // release paths' reactions with the blocks the setup left cached.
  AllocationCacheOptions cache_options = NoGiveBack();
  // Inject before the pools exist (DeviceCount runs in their constructors).
  bool inject_before_pools = false;
};

// One cell's world: a simulator behind the checking wrapper, the three pools
// sharing one DeviceHealth, and the leases the scenario holds.
// Strict misuse checks; an IPC namespace of this test process, shared with
// the peer that exports the buffers the IPC cells import.
inline std::string IpcNamespace() {
  return absl::StrCat("fault-matrix-", getpid());
}
inline SimOptions MatrixSimOptions() {
  SimOptions options = StrictSimOptions(kDevices, AttributeProfile());
  options.ipc_namespace = IpcNamespace();
  return options;
}

class Harness {
 public:
  Harness()
      : sim(MatrixSimOptions()),
        backend(sim, {std::string(kCellMarker), std::string(kSetupMarker)}) {}

  int cell_faults() const { return backend.marker_count(0); }
  int setup_faults() const { return backend.marker_count(1); }

  void BuildPools(const Scenario& scenario) {
    health = std::make_shared<DeviceHealth>(kDevices);
    streams =
        std::make_unique<StreamPool>(backend, health, scenario.pool_options);
    events =
        std::make_unique<EventPool>(backend, health, scenario.pool_options);
    cache = std::make_unique<AllocationCache>(backend, *events, health,
                                              scenario.cache_options);
  }

  void Error(std::string message) { errors.push_back(std::move(message)); }

  // Queues a fault the scenario needs to reach its path (e.g. the first
  // out-of-memory that starts the OOM chain).
  void InjectSetupFault(SimOp op, Fault fault) {
    sim.FailNext(op, FaultError(fault, InjectedCode(fault), kSetupMarker),
                 kTarget);
    ++setup_injections;
  }

  // Acquires and holds a lease, checking it is fresh: live in the runtime,
  // on the right device, not held by another live lease.
  absl::Status AcquireStream(int device, StreamConfig config = {}) {
    absl::StatusOr<PooledStream> lease = streams->Acquire(device, config);
    if (!lease.ok()) return lease.status();
    if (!sim.is_live_stream(lease->get())) Error("a dead stream handed out");
    if (lease->device() != device) Error("stream of the wrong device");
    for (const PooledStream& held : held_streams) {
      if (held && held.get() == lease->get()) {
        Error("a stream handed out twice");
      }
    }
    held_streams.push_back(*std::move(lease));
    return absl::OkStatus();
  }
  absl::Status AcquireEvent(int device, EventConfig config = {}) {
    absl::StatusOr<PooledEvent> lease = events->Acquire(device, config);
    if (!lease.ok()) return lease.status();
    if (!sim.is_live_event(lease->get())) Error("a dead event handed out");
    if (lease->device() != device) Error("event of the wrong device");
    for (const PooledEvent& held : held_events) {
      if (held && held.get() == lease->get()) {
        Error("an event handed out twice");
      }
    }
    held_events.push_back(*std::move(lease));
    return absl::OkStatus();
  }
  absl::Status Allocate(int device, size_t bytes,
                        MemoryKind kind = MemoryKind::kDevice,
                        NativeStream stream = nullptr) {
    absl::StatusOr<PooledAllocation> lease =
        cache->Allocate(device, bytes, kind, stream);
    if (!lease.ok()) return lease.status();
    if (lease->device() != device || lease->capacity() < bytes) {
      Error("allocation of the wrong device or size");
    }
    const auto begin = reinterpret_cast<uintptr_t>(lease->data());
    for (const PooledAllocation& held : held_allocations) {
      if (!held || held.device() != device || held.kind() != kind) continue;
      const auto other = reinterpret_cast<uintptr_t>(held.data());
      if (begin < other + held.capacity() &&
          other < begin + lease->capacity()) {
        Error("two live allocations overlap");
      }
    }
    held_allocations.push_back(*std::move(lease));
    return absl::OkStatus();
  }

  NativeStream stream(int i) const { return held_streams[i].get(); }
  NativeEvent event(int i) const { return held_events[i].get(); }

  void ReleaseHeld() {
    for (PooledAllocation& a : held_allocations) a.Release();
    for (CaptureScope& scope : scopes) scope.End();
    // Graphs of a poisoned device died with its context.
    for (SimGraph graph : graphs) {
      if (!sim.is_poisoned(graph.device)) (void)sim.DestroyGraph(graph);
    }
    graphs.clear();
    graph_pools.clear();  // releases each pool still held
    for (ImportedBuffer& buffer : imports) buffer.Release();
    for (PooledEvent& e : held_events) e.Release();
    for (PooledStream& s : held_streams) s.Release();
  }

  int live_streams_held() const {
    return static_cast<int>(std::count_if(
        held_streams.begin(), held_streams.end(),
        [](const PooledStream& s) { return static_cast<bool>(s); }));
  }
  int live_allocations_held() const {
    return static_cast<int>(std::count_if(
        held_allocations.begin(), held_allocations.end(),
        [](const PooledAllocation& a) { return static_cast<bool>(a); }));
  }

  // Handles still live in the simulator on devices that are not poisoned.
  Leaks LiveHandles() const {
    Leaks live;
    for (int d = 0; d < kDevices; ++d) {
      if (sim.is_poisoned(d)) continue;
      live.streams += sim.live_streams(d);
      live.events += sim.live_events(d);
      live.allocations += sim.live_allocations(d);
    }
    // Every mapping and user object of a cell is on the target device.
    if (!sim.is_poisoned(kTarget)) {
      live.mappings = sim.ipc_mappings_live();
      live.user_objects = sim.live_user_objects();
    }
    return live;
  }

  SimBackend sim;
  CheckingBackend backend;
  std::shared_ptr<DeviceHealth> health;
  std::unique_ptr<StreamPool> streams;
  std::unique_ptr<EventPool> events;
  std::unique_ptr<AllocationCache> cache;
  std::vector<PooledStream> held_streams;
  std::vector<PooledEvent> held_events;
  std::vector<PooledAllocation> held_allocations;
  std::vector<CaptureScope> scopes;
  std::vector<GraphPool> graph_pools;
  std::vector<ImportedBuffer> imports;
  std::vector<SimGraph> graphs;  // made by the scenario's captures
  std::vector<IpcHandle> peer_handles;
  int setup_injections = 0;
  std::vector<std::string> errors;
};

// Long enough that a query right after it sees the work pending, short
// enough that a synchronize the fault did not cut short costs little.
constexpr absl::Duration kShortWork = absl::Milliseconds(100);
constexpr size_t kSmall = 4096;
constexpr size_t kMedium = 16384;
constexpr size_t kLarge = 32768;

// The scenarios of the graph-pool and IPC paths
// (fault_matrix_graph_ipc_test.cc).
std::vector<Scenario> GraphIpcScenarios();
// The scenarios of the cache's split, merge and give-back paths
// (fault_matrix_segments_test.cc).
std::vector<Scenario> SegmentScenarios();
// The scenarios of the fence of blocks parked with it deferred
// (fault_matrix_deferred_test.cc).
std::vector<Scenario> DeferredFenceScenarios();

}  // namespace gpupool::fault_matrix

#endif  // GPUPOOL_TESTS_UTIL_FAULT_MATRIX_H_
