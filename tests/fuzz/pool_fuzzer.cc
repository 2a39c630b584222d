// libFuzzer target: decodes the input into a sequence of pool operations on
// SimBackend (acquire, release, discard, poison, recover, fail-next,
// submit-work, complete, prewarm, trim, allocate, record-use, stable buffers,
// captures, memory limits, graph pools and their captures and replays, IPC
// export and self-import, across devices, configs and sizes) and checks the
// pools' invariants after every step:
//
//   * no handle is held by two live leases, and every lease of a device that
//     was not reset holds a handle the runtime knows;
//   * no two live allocations (leases and stable buffers) overlap;
//   * stats agree with the leases the fuzzer holds (streams in_use,
//     allocations_in_use);
//   * out-of-range devices get InvalidArgument, poisoned devices
//     FailedPrecondition, never a lease;
//   * the simulator saw no misuse (use after destroy, double free, wrong
//     device, ...) and no runtime call named a device after the pools had
//     marked it poisoned (tests/util/checking_backend.h);
//   * graphs captured into a graph pool replay only memory the pool keeps for
//     them: every device lease is claimed for its owner (the pool for a
//     capture's allocations, else the lease itself) and the simulator's graph
//     oracle counts no misuse (a replay writing freed or foreign memory);
//   * graph-pool and IPC stats agree with the model (pools not released;
//     local imports, leases out, no mapping in one process);
//   * graph-owned pools (GraphPool::RetainBy, then instantiate, launch,
//     destroy template and exec in either order, drop the handle with or
//     without Release): no block of a pool is handed to general work while
//     its handle lives, or while a retaining graph, its executable graph or
//     a launch of theirs is known to be alive; once all of them are gone, a
//     Trim gives the pool back (graph_pools_awaiting_graphs);
//   * an input that injected no fault leaks nothing.
//
// A violated invariant prints the reason and traps, so libFuzzer keeps the
// input. Build: -DGPUPOOL_BUILD_FUZZERS=ON with clang (the `fuzz` preset);
// run: build/fuzz/tests/fuzz/pool_fuzzer tests/fuzz/corpus -max_total_time=60
//
// Single-threaded on purpose: the simulator's work model runs on real time
// only for finite durations, which this target never uses, so an input
// always replays the same way.

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
#include "gpupool/stable_buffers.h"
#include "gpupool/stream_pool.h"
#include "tests/util/checking_backend.h"

namespace gpupool {
namespace {

constexpr int kDevices = 3;
constexpr int kMaxOps = 200;
constexpr int kStatsCheckEvery = 4;
constexpr size_t kMaxLeases = 12;

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "pool_fuzzer invariant violated: %s\n", why.c_str());
  __builtin_trap();
}

#define FUZZ_CHECK(condition, why) \
  do {                             \
    if (!(condition)) Fail(why);   \
  } while (0)

const StreamConfig kStreamConfigs[] = {
    {}, {.priority = -1}, {.priority = 0, .non_blocking = false}};
const EventConfig kEventConfigs[] = {
    {}, {.disable_timing = false}, {.blocking_sync = true}};
constexpr size_t kSizes[] = {
    1, 511, 512, 513, 4096, 5000, 65536, (1u << 20) + 1, 1u << 24, 1u << 30, 0};
const SimOp kFailOps[] = {
    SimOp::kStreamCreate,      SimOp::kStreamDestroy,
    SimOp::kStreamQuery,       SimOp::kStreamSynchronize,
    SimOp::kCaptureStatus,     SimOp::kEndCapture,
    SimOp::kResetAttributes,   SimOp::kStreamWaitEvent,
    SimOp::kEventCreate,       SimOp::kEventDestroy,
    SimOp::kEventRecord,       SimOp::kEventQuery,
    SimOp::kEventSynchronize,  SimOp::kAllocate,
    SimOp::kFree,              SimOp::kMemoryInfo,
    SimOp::kIpcGetHandle,      SimOp::kUserObjectCreate,
    SimOp::kUserObjectRetain,  SimOp::kUserObjectRelease};
constexpr Fault kFaultClasses[] = {Fault::kResource, Fault::kDevice,
                                   Fault::kOutOfMemory, Fault::kShutdown,
                                   Fault::kCaller};

// A lease plus what the fuzzer knows about it.
template <typename Lease>
struct Held {
  Lease lease;
  bool stale = false;  // its device was reset: the handle is dead
};

struct Stable {
  void* ptr = nullptr;
  size_t capacity = 0;
};

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
  bool retained() const {
    for (const auto& [graph, f] : facts) {
      if (f.retains) return true;
    }
    return false;
  }
};

// Claims of leases that are no capture's: owners above every pool id.
constexpr uint64_t kLeaseOwnerBase = uint64_t{1} << 62;
// Operation codes past the first 22 (0..21, see Step).
constexpr int kGraphPoolOp = 22;  // new graph pool, release one, or a
                                  // graph-owned pool step (RetainedStep)
constexpr int kCaptureOp = 23;    // begin a capture (scoped or not), or end
constexpr int kReplayOp = 24;     // launch or destroy a captured graph
constexpr int kIpcOp = 25;        // export + self-import, import, release
constexpr int kLastOp = kIpcOp;
constexpr size_t kMaxGraphPools = 3;
constexpr size_t kMaxImports = 4;
// The most bytes a fuzzed stable buffer asks for (exports, so every extent
// an import may reach, stay within it).
constexpr size_t kMaxStableBytes = size_t{1} << 21;

class Session {
 public:
  explicit Session(FuzzedDataProvider& input) : input_(input) {
    SimOptions sim_options;
    sim_options.device_count = kDevices;
    // The fuzzer sets stream attributes: pools must reset them.
    sim_options.profile.stream_attributes = true;
    sim_options.on_misuse = [](absl::string_view message) {
      Fail(absl::StrCat("SimBackend misuse: ", message));
    };
    sim_ = std::make_unique<SimBackend>(std::move(sim_options));
    backend_ = std::make_unique<testing::CheckingBackend>(*sim_);
    health_ = std::make_shared<DeviceHealth>(kDevices);
    backend_->WatchHealth(health_);
    backend_->OnViolation([](absl::string_view violation) {
      Fail(absl::StrCat("runtime call after poisoning: ", violation));
    });
    // Work completes only when told to; a synchronize (Trim, the OOM chain)
    // would wait forever, so it completes all work first: one legal
    // schedule, and inputs replay deterministically.
    backend_->CompleteWorkOnSynchronize(true);

    PoolOptions pool_options;
    pool_options.max_idle_per_key = input_.ConsumeIntegralInRange(0, 4);
    pool_options.max_live_per_key = input_.ConsumeIntegralInRange(0, 4);
    pool_options.acquire_timeout = absl::ZeroDuration();  // never block
    pool_options.validate_on_acquire = input_.ConsumeBool();
    pool_options.drain_checks_per_acquire = input_.ConsumeIntegralInRange(0, 2);
    AllocationCacheOptions cache_options;
    const size_t caps[] = {0, 64 << 10, size_t{1} << 62};
    cache_options.max_cached_bytes =
        caps[input_.ConsumeIntegralInRange<size_t>(0, 2)];
    cache_options.max_cached_block_bytes =
        input_.ConsumeBool() ? size_t{1} << 30 : size_t{64} << 10;
    cache_options.cross_stream = input_.ConsumeBool()
                                     ? CrossStreamPolicy::kWaitOnStream
                                     : CrossStreamPolicy::kWaitForCompletion;
    cache_options.pending_checks_per_allocate =
        input_.ConsumeIntegralInRange(0, 2);
    // The fuzzed user begins captures without telling the cache (case 16).
    // Detection keeps a block released during one out of reuse (held until
    // the cache goes) instead of recording its ready event into the capture,
    // an event the simulator, like the runtimes, refuses to query. Fixed, not
    // fuzzed: the corpus' byte layout stays as it was.
    cache_options.detect_unregistered_captures = true;
    max_cached_block_bytes_ = cache_options.max_cached_block_bytes;

    streams_ = std::make_unique<StreamPool>(*backend_, health_, pool_options);
    events_ = std::make_unique<EventPool>(*backend_, health_, pool_options);
    cache_ = std::make_unique<AllocationCache>(*backend_, *events_, health_,
                                               cache_options);
  }

  void Run() {
    // GPUPOOL_FUZZ_TRACE=1: one line per step, to replay a crash by hand.
    static const bool trace = std::getenv("GPUPOOL_FUZZ_TRACE") != nullptr;
    for (int op = 0; op < kMaxOps && input_.remaining_bytes() > 0; ++op) {
      const int code = input_.ConsumeIntegralInRange(0, kLastOp);
      Step(code);
      if (trace) {
        const AllocationCacheStats cache = cache_->GetStats();
        std::fprintf(stderr,
                     "step %d: op %d | streams in_use %lld | cache in_use %lld "
                     "cached %lld retiring %lld stable %lld | sim allocations "
                     "%d/%d/%d leaked %lld dropped %lld\n",
                     op, code,
                     static_cast<long long>(streams_->GetStats().in_use),
                     static_cast<long long>(cache.allocations_in_use),
                     static_cast<long long>(cache.blocks_cached),
                     static_cast<long long>(cache.blocks_retiring),
                     static_cast<long long>(cache.stable_allocations),
                     sim_->live_allocations(0), sim_->live_allocations(1),
                     sim_->live_allocations(2),
                     static_cast<long long>(cache.blocks_leaked),
                     static_cast<long long>(cache.blocks_dropped));
      }
      CheckInvariants(/*with_stats=*/op % kStatsCheckEvery == 0);
    }
    Finish();
  }

 private:
  // Device 3 is out of range on purpose.
  int PickDevice() { return input_.ConsumeIntegralInRange(0, kDevices); }

  template <typename T>
  T* PickHeld(std::vector<Held<T>>& held) {
    if (held.empty()) return nullptr;
    auto& entry =
        held[input_.ConsumeIntegralInRange<size_t>(0, held.size() - 1)];
    return entry.lease ? &entry.lease : nullptr;
  }
  template <typename T>
  Held<T>* PickHeldEntry(std::vector<Held<T>>& held) {
    if (held.empty()) return nullptr;
    return &held[input_.ConsumeIntegralInRange<size_t>(0, held.size() - 1)];
  }

  // A live (not reset) stream lease of `device`, or nullptr.
  NativeStream PickUsableStream(int device) {
    std::vector<NativeStream> usable;
    for (const auto& held : streams_held_) {
      if (held.lease && !held.stale && held.lease.device() == device) {
        usable.push_back(held.lease.get());
      }
    }
    if (usable.empty()) return nullptr;
    return usable[input_.ConsumeIntegralInRange<size_t>(0, usable.size() - 1)];
  }

  // Streams referenced by a live allocation must stay leased: the cache
  // records its ready events on them at release (as with cudaMallocAsync,
  // the stream must outlive the use). So must a stream that captures for a
  // graph pool or replayed one of its graphs (its Release fences on it).
  bool StreamInUseByAllocation(NativeStream stream) const {
    for (const auto& [id, streams] : allocation_streams_) {
      if (std::find(streams.begin(), streams.end(), stream) != streams.end()) {
        return true;
      }
    }
    for (const std::vector<GraphModel>* models : {&graph_models_, &orphans_}) {
      for (const GraphModel& model : *models) {
        if (model.capturing == stream ||
            std::find(model.replay_streams.begin(), model.replay_streams.end(),
                      stream) != model.replay_streams.end()) {
          return true;
        }
      }
    }
    return IsCapturing(stream);
  }
  bool IsCapturing(NativeStream stream) const {
    return std::find(capturing_.begin(), capturing_.end(), stream) !=
           capturing_.end();
  }
  // The graph model whose scope's capture runs on `stream`, or nullptr.
  GraphModel* CaptureOf(NativeStream stream) {
    if (stream == nullptr) return nullptr;
    for (GraphModel& model : graph_models_) {
      if (model.capturing == stream) return &model;
    }
    return nullptr;
  }

  // The model of the stable buffer `name` after StableBuffers::Acquire (or
  // StableBuffers::Export) returned `ptr` for `bytes`.
  void ModelStable(const std::string& name, int device, size_t bytes,
                   void* ptr) {
    auto it = stable_.find({name, device});
    if (it != stable_.end() && bytes <= it->second.capacity) {
      FUZZ_CHECK(ptr == it->second.ptr, "a stable buffer moved");
      return;
    }
    stable_[{name, device}] = Stable{ptr, bytes <= max_cached_block_bytes_
                                              ? RoundedAllocationSize(bytes)
                                              : bytes};
  }

  void ReleaseLease(PooledAllocation& lease) {
    if (lease.kind() == MemoryKind::kDevice) sim_->ReleaseClaim(lease.data());
    allocation_streams_.erase(lease.lease_id());
    lease.Release();
  }

  // Ends the capture on `stream` (registered or not); keeps its graph.
  void EndCaptureOn(NativeStream stream, std::vector<SimGraph>* graphs) {
    capturing_.erase(std::find(capturing_.begin(), capturing_.end(), stream));
    absl::StatusOr<SimGraph> graph = sim_->EndCaptureToGraph(stream);
    if (graph.ok()) graphs->push_back(*graph);
  }

  // Destroys the graphs (before their pool is released: a replay after the
  // release would write memory the general cache may hand out).
  void DestroyGraphs(std::vector<SimGraph>& graphs) {
    for (SimGraph graph : graphs) (void)sim_->DestroyGraph(graph);
    graphs.clear();
  }

  // The status every entry point must give for an unusable device.
  void CheckRefusal(int device, const absl::Status& status,
                    absl::string_view what) {
    if (device >= kDevices) {
      FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument,
                 absl::StrCat(what, " on a bad device: ", status.ToString()));
    } else if (health_->is_poisoned(device)) {
      FUZZ_CHECK(
          status.code() == absl::StatusCode::kFailedPrecondition,
          absl::StrCat(what, " on a poisoned device: ", status.ToString()));
    }
  }

  // Forgets released leases so that kMaxLeases bounds the live ones.
  template <typename T>
  static void Compact(std::vector<Held<T>>& held) {
    held.erase(std::remove_if(held.begin(), held.end(),
                              [](const Held<T>& h) { return !h.lease; }),
               held.end());
  }

  void Step(int op) {
    Compact(streams_held_);
    Compact(events_held_);
    Compact(allocations_held_);
    switch (op) {
      case 0: {  // acquire stream
        const int device = PickDevice();
        const auto& config =
            kStreamConfigs[input_.ConsumeIntegralInRange(0, 2)];
        if (streams_held_.size() >= kMaxLeases) return;
        const bool poisoned = device < kDevices && health_->is_poisoned(device);
        absl::StatusOr<PooledStream> lease =
            streams_->Acquire(device, config, absl::ZeroDuration());
        if (device >= kDevices || poisoned) {
          FUZZ_CHECK(!lease.ok(), "a lease on an unusable device");
          CheckRefusal(device, lease.status(), "stream Acquire");
          return;
        }
        if (!lease.ok()) return;  // injected fault, bound reached, ...
        FUZZ_CHECK(sim_->is_live_stream(lease->get()),
                   "a dead stream was handed out");
        FUZZ_CHECK(lease->config() == config, "stream of another config");
        streams_held_.push_back({*std::move(lease), false});
        return;
      }
      case 1:    // release stream
      case 2: {  // discard stream
        Held<PooledStream>* held = PickHeldEntry(streams_held_);
        if (held == nullptr || !held->lease ||
            StreamInUseByAllocation(held->lease.get())) {
          return;
        }
        op == 1 ? held->lease.Release() : held->lease.Discard();
        return;
      }
      case 3: {  // acquire event
        const int device = PickDevice();
        const auto& config = kEventConfigs[input_.ConsumeIntegralInRange(0, 2)];
        if (events_held_.size() >= kMaxLeases) return;
        const bool poisoned = device < kDevices && health_->is_poisoned(device);
        absl::StatusOr<PooledEvent> lease =
            events_->Acquire(device, config, absl::ZeroDuration());
        if (device >= kDevices || poisoned) {
          FUZZ_CHECK(!lease.ok(), "a lease on an unusable device");
          CheckRefusal(device, lease.status(), "event Acquire");
          return;
        }
        if (!lease.ok()) return;
        FUZZ_CHECK(sim_->is_live_event(lease->get()),
                   "a dead event was handed out");
        events_held_.push_back({*std::move(lease), false});
        return;
      }
      case 4:    // release event
      case 5: {  // discard event
        PooledEvent* lease = PickHeld(events_held_);
        if (lease == nullptr) return;
        op == 4 ? lease->Release() : lease->Discard();
        return;
      }
      case 6: {  // allocate
        const int device = PickDevice();
        size_t bytes = kSizes[input_.ConsumeIntegralInRange<size_t>(
            0, std::size(kSizes) - 1)];
        if (input_.ConsumeBool()) {
          bytes = input_.ConsumeIntegralInRange<size_t>(1, 1 << 22);
        }
        const MemoryKind kind = input_.ConsumeBool() ? MemoryKind::kDevice
                                                     : MemoryKind::kPinnedHost;
        NativeStream stream = input_.ConsumeBool() && device < kDevices
                                  ? PickUsableStream(device)
                                  : nullptr;
        if (allocations_held_.size() >= kMaxLeases) return;
        const bool poisoned = device < kDevices && health_->is_poisoned(device);
        absl::StatusOr<PooledAllocation> lease =
            cache_->Allocate(device, bytes, kind, stream);
        if (device >= kDevices || poisoned) {
          FUZZ_CHECK(!lease.ok(), "an allocation on an unusable device");
          CheckRefusal(device, lease.status(), "Allocate");
          return;
        }
        if (bytes == 0) {
          FUZZ_CHECK(
              lease.status().code() == absl::StatusCode::kInvalidArgument,
              absl::StrCat("Allocate(0): ", lease.status().ToString()));
          return;
        }
        if (!lease.ok()) return;
        FUZZ_CHECK(lease->size() == bytes && lease->capacity() >= bytes &&
                       lease->device() == device && lease->kind() == kind,
                   "allocation does not match its request");
        if (kind == MemoryKind::kDevice) {
          // Inside a registered capture the block is the pool's and the
          // graph writes it; any other lease is its own owner's.
          GraphModel* capture = CaptureOf(stream);
          sim_->ClaimMemory(lease->data(), lease->capacity(),
                            capture != nullptr
                                ? capture->pool.id()
                                : kLeaseOwnerBase + lease->lease_id());
          if (capture != nullptr) {
            sim_->TouchMemory(stream, lease->data());
            capture->blocks.push_back(lease->data());
          } else {
            CheckNotAPoolBlock(lease->data());
          }
        }
        std::vector<NativeStream> uses;
        if (stream != nullptr) uses.push_back(stream);
        allocation_streams_[lease->lease_id()] = std::move(uses);
        allocations_held_.push_back({*std::move(lease), false});
        return;
      }
      case 7: {  // record use
        PooledAllocation* lease = PickHeld(allocations_held_);
        if (lease == nullptr || input_.remaining_bytes() == 0) return;
        if (input_.ConsumeBool()) {
          lease->RecordUse(nullptr);  // documented no-op
          return;
        }
        NativeStream stream = PickUsableStream(lease->device());
        if (stream == nullptr) return;
        lease->RecordUse(stream);
        allocation_streams_[lease->lease_id()].push_back(stream);
        return;
      }
      case 8: {  // release allocation
        PooledAllocation* lease = PickHeld(allocations_held_);
        if (lease == nullptr) return;
        ReleaseLease(*lease);
        return;
      }
      case 9: {  // submit work that completes only when told to
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        NativeStream stream = PickUsableStream(device);
        if (stream != nullptr) {
          sim_->SubmitWork(stream, absl::InfiniteDuration());
        }
        return;
      }
      case 10: {  // complete work
        if (input_.ConsumeBool()) {
          sim_->CompleteAllWork();
          return;
        }
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        NativeStream stream = PickUsableStream(device);
        if (stream != nullptr) sim_->CompleteWork(stream);
        return;
      }
      case 11: {  // sticky device error
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        sim_->PoisonDevice(device,
                           absl::InternalError("cudaErrorIllegalAddress"));
        faults_injected_ = true;
        return;
      }
      case 12: {  // the user resets a device the pools found poisoned
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        if (!health_->is_poisoned(device)) {
          FUZZ_CHECK(streams_->RecoverDevice(device).code() ==
                         absl::StatusCode::kFailedPrecondition,
                     "RecoverDevice of a healthy device");
          return;
        }
        sim_->ResetDevice(device);  // every handle of the device is gone
        for (auto& held : streams_held_) {
          if (held.lease && held.lease.device() == device) held.stale = true;
        }
        for (auto& held : events_held_) {
          if (held.lease && held.lease.device() == device) held.stale = true;
        }
        for (auto& held : allocations_held_) {
          if (held.lease && held.lease.device() == device) held.stale = true;
        }
        for (auto it = stable_.begin(); it != stable_.end();) {
          it = it->first.second == device ? stable_.erase(it) : std::next(it);
        }
        // The reset took the device's captures and graphs with it.
        for (GraphModel& model : graph_models_) {
          if (model.pool.device() != device) continue;
          if (model.capturing != nullptr) {
            capturing_.erase(std::find(capturing_.begin(), capturing_.end(),
                                       model.capturing));
            model.capturing = nullptr;
            model.scope.End();
          }
          model.graphs.clear();
          model.replay_streams.clear();
          ForgetDevice(model);
        }
        // Their graphs went with the reset (and their user objects ran).
        for (GraphModel& orphan : orphans_) {
          if (orphan.device != device) continue;
          orphan.graphs.clear();
          orphan.replay_streams.clear();
          ForgetDevice(orphan);
        }
        for (auto it = unregistered_.begin(); it != unregistered_.end();) {
          if (it->second == device) {
            capturing_.erase(
                std::find(capturing_.begin(), capturing_.end(), it->first));
            it = unregistered_.erase(it);
            continue;
          } else {
          }
          ++it;
        }
        FUZZ_CHECK(streams_->RecoverDevice(device).ok(), "RecoverDevice");
        FUZZ_CHECK(!health_->is_poisoned(device), "still poisoned");
        return;
      }
      case 13: {  // fail-next
        const SimOp fail_op = kFailOps[input_.ConsumeIntegralInRange<size_t>(
            0, std::size(kFailOps) - 1)];
        const Fault fault = kFaultClasses[input_.ConsumeIntegralInRange<size_t>(
            0, std::size(kFaultClasses) - 1)];
        const int device = input_.ConsumeIntegralInRange(-1, kDevices - 1);
        const absl::StatusCode codes[] = {
            absl::StatusCode::kAborted, absl::StatusCode::kInternal,
            absl::StatusCode::kResourceExhausted,
            absl::StatusCode::kUnavailable, absl::StatusCode::kInvalidArgument};
        sim_->FailNext(fail_op,
                       FaultError(fault, codes[static_cast<int>(fault) - 2],
                                  "injected by pool_fuzzer"),
                       device);
        faults_injected_ = true;
        return;
      }
      case 14: {  // prewarm
        const int device = PickDevice();
        const int count = input_.ConsumeIntegralInRange(-1, 3);
        const bool async = input_.ConsumeBool();
        absl::Status status;
        if (input_.ConsumeBool()) {
          const auto& config =
              kStreamConfigs[input_.ConsumeIntegralInRange(0, 2)];
          status = async ? streams_->PrewarmAsync(device, config, count).Wait()
                         : streams_->Prewarm(device, config, count);
        } else {
          const auto& config =
              kEventConfigs[input_.ConsumeIntegralInRange(0, 2)];
          status = async ? events_->PrewarmAsync(device, config, count).Wait()
                         : events_->Prewarm(device, config, count);
        }
        if (count < 0 || device >= kDevices) {
          FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument,
                     absl::StrCat("Prewarm(", device, ", ", count,
                                  "): ", status.ToString()));
        }
        return;
      }
      case 15: {  // trim
        switch (input_.ConsumeIntegralInRange(0, 3)) {
          case 0:
            streams_->Trim();
            return;
          case 1:
            events_->Trim(input_.ConsumeIntegralInRange(-1, kDevices));
            return;
          case 2:
            cache_
                ->Trim(input_.ConsumeIntegralInRange(0, kDevices),
                       input_.ConsumeIntegralInRange<size_t>(0, 1 << 20))
                .IgnoreError();
            return;
          default:
            cache_->Trim().IgnoreError();
            return;
        }
      }
      case 16: {  // the user starts a capture or sets an attribute
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        NativeStream stream = PickUsableStream(device);
        if (stream == nullptr || StreamInUseByAllocation(stream)) return;
        if (input_.ConsumeBool()) {
          // Refused on a device with a sticky error, as the runtimes do.
          if (!sim_->BeginCapture(stream, SimCaptureMode::kGlobal).ok()) {
            return;
          }
          user_captures_.push_back(stream);  // never ended: the pool ends it
          captured_ = true;
        } else {
          sim_->SetStreamAttribute(stream);
        }
        return;
      }
      case 17: {  // the user records an event lease on a stream lease
        Held<PooledEvent>* event = PickHeldEntry(events_held_);
        if (event == nullptr || !event->lease || event->stale) return;
        NativeStream stream = PickUsableStream(event->lease.device());
        if (stream == nullptr) return;
        (void)sim_->RecordEvent(event->lease.device(), event->lease.get(),
                                stream);
        return;
      }
      case 18: {  // a stream faults (its work failed)
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        NativeStream stream = PickUsableStream(device);
        if (stream == nullptr) return;
        sim_->FaultStream(stream, absl::AbortedError("cudaErrorLaunchFailure"));
        faults_injected_ = true;
        return;
      }
      case 19: {  // stable buffer
        const int device = PickDevice();
        const std::string name =
            absl::StrCat("buf", input_.ConsumeIntegralInRange(0, 2));
        if (input_.ConsumeBool()) {
          const size_t bytes =
              input_.ConsumeIntegralInRange<size_t>(0, 1 << 21);
          absl::StatusOr<void*> ptr =
              gpupool::StableBuffers(*cache_).Acquire(name, device, bytes);
          if (device >= kDevices || bytes == 0 ||
              (device < kDevices && health_->is_poisoned(device))) {
            FUZZ_CHECK(!ptr.ok(), "StableBuffers::Acquire accepted bad input");
            return;
          }
          // A failed grow keeps the old buffer under the name (the new one
          // is allocated before the old is freed), so the model keeps it.
          if (!ptr.ok()) return;
          ModelStable(name, device, bytes, *ptr);
        } else {
          absl::Status status =
              gpupool::StableBuffers(*cache_).Release(name, device);
          const bool known = stable_.erase({name, device}) > 0;
          if (device < kDevices && !health_->is_poisoned(device) && !known) {
            FUZZ_CHECK(status.code() == absl::StatusCode::kNotFound,
                       absl::StrCat("StableBuffers::Release of nothing: ",
                                    status.ToString()));
          }
        }
        return;
      }
      case 20: {  // a tight memory limit makes the OOM chain run
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        const size_t limit = input_.ConsumeIntegralInRange<size_t>(0, 1 << 22);
        sim_->SetMemoryLimit(device, limit,
                             input_.ConsumeBool() ? MemoryKind::kDevice
                                                  : MemoryKind::kPinnedHost);
        return;
      }
      case kGraphPoolOp:
        GraphPoolStep();
        return;
      case kCaptureOp:
        CaptureStep();
        return;
      case kReplayOp:
        ReplayStep();
        return;
      case kIpcOp:
        IpcStep();
        return;
      default: {  // moved-from and empty leases are inert
        Held<PooledStream>* held = PickHeldEntry(streams_held_);
        if (held == nullptr || StreamInUseByAllocation(held->lease.get())) {
          return;
        }
        PooledStream moved = std::move(held->lease);
        FUZZ_CHECK(!held->lease && held->lease.get() == nullptr &&
                       held->lease.device() == -1,
                   "a moved-from lease is not empty");
        held->lease.Release();  // no-op
        held->lease.Discard();  // no-op
        held->lease = std::move(moved);
        return;
      }
    }
  }

  // Changes one field of `handle` (or none). True when the field changed
  // is one that names what to map (runtime bytes, slot, buffer id, device,
  // version): an import must then be refused.
  bool ForgeHandleField(IpcHandle* handle) {
    const IpcHandle before = *handle;
    switch (input_.ConsumeIntegralInRange(0, 7)) {
      case 1:
        handle->bytes = input_.ConsumeIntegral<uint64_t>();
        return false;
      case 2:
        handle->offset = input_.ConsumeIntegral<uint64_t>();
        return false;
      case 3:
        handle->slot = input_.ConsumeIntegral<uint32_t>();
        return handle->slot != before.slot;
      case 4:
        handle->version = input_.ConsumeIntegral<uint64_t>();
        return handle->version != before.version;
      case 5: {
        const size_t at =
            input_.ConsumeIntegralInRange<size_t>(0, kIpcMemHandleBytes - 1);
        handle->runtime.bytes[at] ^= input_.ConsumeIntegralInRange(1, 255);
        return true;
      }
      case 6:
        handle->buffer_id = input_.ConsumeIntegral<uint64_t>();
        return handle->buffer_id != before.buffer_id;
      case 7:
        handle->device = input_.ConsumeIntegralInRange(-1, kDevices);
        return handle->device != before.device;
      default:
        return false;
    }
  }

  // A stream of `device` the fuzzer may begin a capture on or launch into.
  NativeStream PickIdleStream(int device) {
    NativeStream stream = PickUsableStream(device);
    if (stream == nullptr || IsCapturing(stream) ||
        std::find(user_captures_.begin(), user_captures_.end(), stream) !=
            user_captures_.end()) {
      return nullptr;
    }
    return stream;
  }
  GraphModel* PickGraphModel() {
    if (graph_models_.empty()) return nullptr;
    return &graph_models_[input_.ConsumeIntegralInRange<size_t>(
        0, graph_models_.size() - 1)];
  }

  void GraphPoolStep() {
    // One byte: odd makes a new pool and even releases one, as the bool the
    // corpus was written with; the upper half of the even values (once
    // releases too) drives the graph-owned pools.
    const uint8_t choice = input_.ConsumeIntegral<uint8_t>();
    if ((choice & 1) == 0 && choice >= 128) {
      RetainedStep();
      return;
    }
    if ((choice & 1) != 0) {  // a new pool
      const int device = PickDevice();
      if (graph_models_.size() >= kMaxGraphPools) return;
      const bool poisoned = device < kDevices && health_->is_poisoned(device);
      absl::StatusOr<GraphPool> pool =
          gpupool::GraphPool::Create(*cache_, device);
      if (device >= kDevices || poisoned) {
        FUZZ_CHECK(!pool.ok(), "a graph pool on an unusable device");
        CheckRefusal(device, pool.status(), "GraphPool::Create");
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
    GraphModel* model = PickGraphModel();
    if (model == nullptr) return;
    if (model->capturing != nullptr) {
      FUZZ_CHECK(model->pool.Release(model->replay_streams).code() ==
                     absl::StatusCode::kFailedPrecondition,
                 "GraphPool::Release with a capture scope open");
      return;
    }
    DestroyGraphs(model->graphs);
    ForgetGraphs(*model);
    if (model->retained()) {  // the graphs release it, once their launches end
      LetGoRetained(*model, /*with_release=*/!input_.ConsumeBool());
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

  void CaptureStep() {
    switch (input_.ConsumeIntegralInRange(0, 3)) {
      case 0: {  // a capture registered with a scope on a pool
        GraphModel* model = PickGraphModel();
        if (model == nullptr || model->capturing != nullptr) return;
        const int device = model->pool.device();
        NativeStream stream = PickIdleStream(device);
        if (stream == nullptr) return;
        const bool poisoned = health_->is_poisoned(device);
        absl::StatusOr<CaptureScope> scope = model->pool.BeginCapture(stream);
        if (poisoned) {
          FUZZ_CHECK(!scope.ok(), "a capture scope on a poisoned device");
          CheckRefusal(device, scope.status(), "GraphPool::BeginCapture");
          return;
        }
        if (!scope.ok()) return;  // an injected fault
        if (!sim_->BeginCapture(stream, SimCaptureMode::kRelaxed,
                                model->pool.id())
                 .ok()) {
          return;  // the scope ends unused
        }
        model->scope = *std::move(scope);
        model->capturing = stream;
        capturing_.push_back(stream);
        return;
      }
      case 1: {  // a capture nobody registers (detect_unregistered_captures)
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        NativeStream stream = PickIdleStream(device);
        if (stream == nullptr ||
            !sim_->BeginCapture(stream, SimCaptureMode::kRelaxed).ok()) {
          return;
        }
        unregistered_[stream] = device;
        capturing_.push_back(stream);
        captured_ = true;
        return;
      }
      case 2: {  // end a registered capture, then its scope
        GraphModel* model = PickGraphModel();
        if (model == nullptr || model->capturing == nullptr) return;
        EndCaptureOn(model->capturing, &model->graphs);
        model->scope.End();
        model->capturing = nullptr;
        return;
      }
      default: {  // end an unregistered capture
        if (unregistered_.empty()) return;
        EndCaptureOn(unregistered_.begin()->first, &unregistered_graphs_);
        unregistered_.erase(unregistered_.begin());
        return;
      }
    }
  }

  void ReplayStep() {
    if (input_.ConsumeBool()) {  // the unregistered captures' graphs go
      DestroyGraphs(unregistered_graphs_);
      return;
    }
    GraphModel* model = PickGraphModel();
    if (model == nullptr || model->graphs.empty()) return;
    const size_t g =
        input_.ConsumeIntegralInRange<size_t>(0, model->graphs.size() - 1);
    const SimGraph graph = model->graphs[g];
    if (input_.ConsumeBool()) {
      if (sim_->DestroyGraph(graph).ok()) GraphGone(*model, graph);
      model->graphs.erase(model->graphs.begin() + g);
      return;
    }
    NativeStream stream = PickIdleStream(model->pool.device());
    if (stream == nullptr || !Instantiate(*model, graph)) return;
    Launch(*model, graph, stream);
  }

  // InstantiateGraph, and what it means for the pool: an executable graph
  // made after RetainBy holds the pool.
  bool Instantiate(GraphModel& model, SimGraph graph) {
    if (!sim_->InstantiateGraph(graph).ok()) return false;
    GraphFacts& facts = model.facts[graph.id];
    facts.instantiated = true;
    facts.exec_live = true;
    facts.exec_holds = facts.retains;
    return true;
  }
  // LaunchGraph on `stream` (kept leased: a release fences on it).
  void Launch(GraphModel& model, SimGraph graph, NativeStream stream) {
    if (!sim_->LaunchGraph(graph, stream).ok()) return;
    std::vector<NativeStream>& replays = model.replay_streams;
    if (std::find(replays.begin(), replays.end(), stream) == replays.end()) {
      replays.push_back(stream);
    }
    GraphFacts& facts = model.facts[graph.id];
    facts.launch_streams.push_back(stream);
    // Captured work that completes only when told keeps the launch running
    // (and the pool, when the executable graph holds it).
    if (facts.exec_holds && sim_->graph_launch_pending(graph)) {
      model.pending_launches.push_back(stream);
    }
  }
  void GraphGone(GraphModel& model, SimGraph graph) {
    GraphFacts& facts = model.facts[graph.id];
    facts.template_live = false;
    facts.exec_live = false;
    facts.exec_holds = false;
  }
  // Every graph of the model is gone (destroyed, or the device was reset).
  void ForgetGraphs(GraphModel& model) {
    for (auto& [id, facts] : model.facts) {
      facts.template_live = false;
      facts.exec_live = false;
      facts.exec_holds = false;
    }
  }

  // The device was reset: graphs, launches and streams are gone.
  void ForgetDevice(GraphModel& model) {
    ForgetGraphs(model);
    model.pending_launches.clear();
    for (auto& [id, facts] : model.facts) facts.launch_streams.clear();
  }

  // A launch of a retaining graph is running while its stream has work:
  // its work completes only when told (CompleteWork, CompleteAllWork, a
  // synchronize), which completes the stream's work all at once.
  void RefreshLaunches(GraphModel& model) {
    std::vector<NativeStream>& pending = model.pending_launches;
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&](NativeStream stream) {
                                   return !sim_->has_pending_work(stream);
                                 }),
                  pending.end());
  }
  // Whether a retaining graph, its executable graph or a launch of theirs
  // is alive (exact: nothing the pool waits for is missed, nothing extra).
  bool GraphsAlive(GraphModel& model) {
    RefreshLaunches(model);
    if (!model.pending_launches.empty()) return true;
    for (const auto& [id, facts] : model.facts) {
      if (facts.retains && (facts.template_live || facts.exec_holds)) {
        return true;
      }
    }
    return false;
  }

  // A lease of general work must not be a block a graph pool keeps.
  void CheckNotAPoolBlock(void* ptr) {
    for (const GraphModel& model : graph_models_) {
      FUZZ_CHECK(std::find(model.blocks.begin(), model.blocks.end(), ptr) ==
                     model.blocks.end(),
                 absl::StrCat("a block of graph pool ", model.id,
                              " (handle alive) leased to general work"));
    }
    for (GraphModel& orphan : orphans_) {
      if (!GraphsAlive(orphan)) continue;
      FUZZ_CHECK(std::find(orphan.blocks.begin(), orphan.blocks.end(), ptr) ==
                     orphan.blocks.end(),
                 absl::StrCat("a block of graph pool ", orphan.id,
                              " leased to general work while its graphs or "
                              "launches are alive"));
    }
  }

  // The handle of a retained pool lets go (Release naming the replay
  // streams, or dropped): the pool becomes the graphs'. Graphs that do not
  // retain it go first, their launches completed unless Release fences them.
  void LetGoRetained(GraphModel& model, bool with_release) {
    for (size_t i = 0; i < model.graphs.size();) {
      const SimGraph graph = model.graphs[i];
      if (model.facts[graph.id].retains) {
        ++i;
        continue;
      }
      (void)sim_->DestroyGraph(graph);
      GraphGone(model, graph);
      model.graphs.erase(model.graphs.begin() + i);
    }
    if (!with_release) {
      for (const auto& [id, facts] : model.facts) {
        if (facts.retains) continue;
        for (NativeStream stream : facts.launch_streams) {
          if (sim_->is_live_stream(stream)) sim_->CompleteWork(stream);
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
    }
    model.pool = GraphPool();  // the handle lets go
    orphans_.push_back(std::move(model));
    graph_models_.erase(graph_models_.begin() + (&model - graph_models_.data()));
  }

  // Completes launches, trims, and checks that the pools whose graphs and
  // launches are all gone went back (each other one may still await).
  void CollectRetained() {
    FUZZ_CHECK(cache_->Trim().ok() || faults_injected_,
               "Trim failed without a fault");
    const int64_t awaiting = cache_->GetStats().graph_pools_awaiting_graphs;
    int64_t may_await = 0;
    for (GraphModel& orphan : orphans_) {
      if (GraphsAlive(orphan) || health_->is_poisoned(orphan.device) ||
          sim_->is_poisoned(orphan.device)) {
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
    orphans_.erase(
        std::remove_if(orphans_.begin(), orphans_.end(),
                       [&](GraphModel& orphan) { return !GraphsAlive(orphan); }),
        orphans_.end());
  }

  // Graph-owned pools: RetainBy, instantiate, launch, destroy template and
  // exec alone, let the handle go, complete the launches.
  void RetainedStep() {
    const int sub = input_.ConsumeIntegralInRange(0, 6);
    if (sub == 6) {  // complete launches, then the pools must go back
      if (input_.ConsumeBool()) {
        sim_->CompleteAllWork();
      } else if (!orphans_.empty()) {
        GraphModel& orphan = orphans_[input_.ConsumeIntegralInRange<size_t>(
            0, orphans_.size() - 1)];
        RefreshLaunches(orphan);
        for (NativeStream stream : orphan.pending_launches) {
          if (sim_->is_live_stream(stream)) sim_->CompleteWork(stream);
        }
      }
      CollectRetained();
      return;
    }
    if (sub == 5) {  // the handle lets go, with Release or dropped
      GraphModel* model = PickGraphModel();
      if (model == nullptr) return;
      const bool with_release = input_.ConsumeBool();
      if (model->capturing != nullptr || !model->retained()) return;
      LetGoRetained(*model, with_release);
      return;
    }
    // A pool with a handle, or one left to its graphs.
    const size_t models = graph_models_.size() + orphans_.size();
    if (models == 0) return;
    const size_t m = input_.ConsumeIntegralInRange<size_t>(0, models - 1);
    GraphModel* model = m < graph_models_.size()
                            ? &graph_models_[m]
                            : &orphans_[m - graph_models_.size()];
    if (model->graphs.empty()) return;
    const SimGraph graph = model->graphs[input_.ConsumeIntegralInRange<size_t>(
        0, model->graphs.size() - 1)];
    GraphFacts& facts = model->facts[graph.id];
    switch (sub) {
      case 0: {  // RetainBy, before the graph is ever instantiated
        if (!model->pool || facts.instantiated || !facts.template_live) {
          return;
        }
        const bool poisoned = health_->is_poisoned(model->device);
        const absl::Status status =
            model->pool.RetainBy(NativeGraphOf(graph));
        if (poisoned) {
          FUZZ_CHECK(!status.ok(), "RetainBy on a poisoned device");
          CheckRefusal(model->device, status, "GraphPool::RetainBy");
          return;
        }
        FUZZ_CHECK(status.ok() || faults_injected_,
                   absl::StrCat("GraphPool::RetainBy without a fault: ",
                                status.ToString()));
        if (status.ok()) facts.retains = true;
        return;
      }
      case 1:  // instantiate (again: the new exec replaces the old)
        if (facts.template_live) Instantiate(*model, graph);
        return;
      case 2: {  // launch
        if (!facts.exec_live) return;
        NativeStream stream = PickIdleStream(model->device);
        if (stream != nullptr) Launch(*model, graph, stream);
        return;
      }
      case 3:  // destroy the template alone
        if (!facts.template_live || !sim_->DestroyGraphTemplate(graph).ok()) {
          return;
        }
        facts.template_live = false;
        break;
      default:  // destroy the executable graph alone
        if (!facts.exec_live || !sim_->DestroyGraphExec(graph).ok()) return;
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

  void IpcStep() {
    switch (input_.ConsumeIntegralInRange(0, 2)) {
      case 0: {  // export a stable buffer and import it here (local)
        const int device = PickDevice();
        const std::string name =
            absl::StrCat("buf", input_.ConsumeIntegralInRange(0, 2));
        const size_t bytes =
            input_.ConsumeIntegralInRange<size_t>(0, kMaxStableBytes);
        const bool poisoned = device < kDevices && health_->is_poisoned(device);
        absl::StatusOr<IpcHandle> handle =
            gpupool::StableBuffers(*cache_).Export(name, device, bytes);
        if (device >= kDevices || bytes == 0 || poisoned) {
          FUZZ_CHECK(!handle.ok(), "StableBuffers::Export accepted bad input");
          CheckRefusal(device, handle.status(), "StableBuffers::Export");
          return;
        }
        // The buffer may have moved even when the export failed.
        absl::StatusOr<void*> ptr =
            gpupool::StableBuffers(*cache_).Acquire(name, device, bytes);
        if (ptr.ok()) ModelStable(name, device, bytes, *ptr);
        if (!handle.ok() || !ptr.ok()) return;  // injected faults
        FUZZ_CHECK(handle->device == device && handle->bytes == bytes,
                   "an IPC handle of another buffer");
        if (handles_.size() >= kMaxImports) handles_.erase(handles_.begin());
        handles_.push_back(*handle);
        if (imports_.size() >= kMaxImports) return;
        absl::StatusOr<ImportedBuffer> imported =
            gpupool::StableBuffers(*cache_).Import(*handle, device);
        FUZZ_CHECK(imported.ok() && imported->local() &&
                       imported->data() == *ptr && imported->size() == bytes,
                   absl::StrCat("Import of our own export: ",
                                imported.status().ToString()));
        ++local_imports_;
        imports_.push_back(*std::move(imported));
        return;
      }
      case 1: {  // import an earlier handle (perhaps forged): local, or not
        if (handles_.empty() || imports_.size() >= kMaxImports) return;
        const IpcHandle& original =
            handles_[input_.ConsumeIntegralInRange<size_t>(
                0, handles_.size() - 1)];
        // A forged field that keeps the checksum valid (Serialize
        // recomputes it), so Parse accepts it and only the semantic checks
        // stand between it and memory.
        IpcHandle forged = original;
        const bool identity_forged = ForgeHandleField(&forged);
        absl::StatusOr<IpcHandle> handle = IpcHandle::Parse(forged.Serialize());
        FUZZ_CHECK(handle.ok() && *handle == forged,
                   "a serialized handle did not parse back");
        absl::StatusOr<ImportedBuffer> imported =
            gpupool::StableBuffers(*cache_).Import(*handle, original.device);
        if (!imported.ok()) {
          const absl::StatusCode code = imported.status().code();
          FUZZ_CHECK(code == absl::StatusCode::kNotFound ||
                         code == absl::StatusCode::kFailedPrecondition ||
                         (code == absl::StatusCode::kInvalidArgument &&
                          forged != original),
                     absl::StrCat("Import: ", imported.status().ToString()));
          return;
        }
        FUZZ_CHECK(!identity_forged,
                   "an import of a handle with a forged runtime, slot, "
                   "buffer id, device or version field succeeded");
        FUZZ_CHECK(imported->local() && imported->data() != nullptr,
                   "an import of our own handle was not local");
        // Inside what was exported for that version (the extent grows only
        // with larger requests the buffer holds).
        FUZZ_CHECK(handle->offset <= kMaxStableBytes &&
                       imported->size() <= kMaxStableBytes - handle->offset,
                   "an import reached past its buffer");
        ++local_imports_;
        imports_.push_back(*std::move(imported));
        return;
      }
      default: {  // release an import lease
        if (imports_.empty()) return;
        const size_t i =
            input_.ConsumeIntegralInRange<size_t>(0, imports_.size() - 1);
        imports_[i].Release();
        imports_.erase(imports_.begin() + i);
        return;
      }
    }
  }

  void CheckInvariants(bool with_stats) {
    FUZZ_CHECK(sim_->misuse_count() == 0, "misuse");
    FUZZ_CHECK(sim_->graph_misuses() == 0,
               absl::StrCat("graph oracle: ",
                            absl::StrJoin(sim_->graph_misuse_log(), "; ")));
    FUZZ_CHECK(backend_->violation_count() == 0,
               absl::StrCat("runtime call after poisoning: ",
                            absl::StrJoin(backend_->violations(), "; ")));
    // No handle in two live leases; live leases of a device that was not
    // reset hold handles the runtime knows. (Scratch vectors are members, so
    // a check allocates nothing once warm.)
    std::vector<void*>& handles = scratch_handles_;
    handles.clear();
    int64_t streams_out = 0;
    for (const auto& held : streams_held_) {
      if (!held.lease) continue;
      ++streams_out;
      handles.push_back(held.lease.get());
      FUZZ_CHECK(held.stale || sim_->is_live_stream(held.lease.get()),
                 "a leased stream was destroyed");
    }
    for (const auto& held : events_held_) {
      if (!held.lease) continue;
      handles.push_back(held.lease.get());
      FUZZ_CHECK(held.stale || sim_->is_live_event(held.lease.get()),
                 "a leased event was destroyed");
    }
    std::sort(handles.begin(), handles.end());
    FUZZ_CHECK(
        std::adjacent_find(handles.begin(), handles.end()) == handles.end(),
        "a stream or event in two leases");
    // No two live allocations overlap (per device and kind: the simulator's
    // address regions are disjoint per device and kind anyway).
    std::vector<std::pair<uintptr_t, uintptr_t>>& ranges = scratch_ranges_;
    ranges.clear();
    int64_t allocations_out = 0;
    for (const auto& held : allocations_held_) {
      if (!held.lease) continue;
      ++allocations_out;
      const auto begin = reinterpret_cast<uintptr_t>(held.lease.data());
      ranges.push_back({begin, begin + held.lease.capacity()});
    }
    for (const auto& [key, buffer] : stable_) {
      const auto begin = reinterpret_cast<uintptr_t>(buffer.ptr);
      ranges.push_back({begin, begin + buffer.capacity});
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i) {
      FUZZ_CHECK(ranges[i - 1].second <= ranges[i].first,
                 "two live allocations overlap");
    }
    if (with_stats) CheckStats(streams_out, allocations_out);
  }

  // Stats agree with what we hold. GetStats merges every shard's counters
  // and latency histograms, the costliest check by far, so Run makes it
  // every kStatsCheckEvery steps and at the end; a counter that drifts stays
  // wrong, so the next check still sees it.
  void CheckStats(int64_t streams_out, int64_t allocations_out) {
    FUZZ_CHECK(streams_->GetStats().in_use == streams_out,
               absl::StrCat("stream in_use ", streams_->GetStats().in_use,
                            " but ", streams_out, " leases out"));
    FUZZ_CHECK(cache_->GetStats().allocations_in_use == allocations_out,
               absl::StrCat("allocations_in_use ",
                            cache_->GetStats().allocations_in_use, " but ",
                            allocations_out, " leases out"));
    const AllocationCacheStats cache = cache_->GetStats();
    // A dropped pool is held while it keeps a block (then it is gone); a
    // retained one whose handle let go awaits its graphs.
    FUZZ_CHECK(cache.graph_pools - cache.graph_pools_held -
                           cache.graph_pools_awaiting_graphs ==
                       static_cast<int64_t>(graph_models_.size()) &&
                   cache.graph_pools_held <= dropped_graph_pools_ &&
                   cache.graph_pools_awaiting_graphs <=
                       static_cast<int64_t>(orphans_.size()),
               absl::StrCat("graph_pools ", cache.graph_pools, " (held ",
                            cache.graph_pools_held, ", awaiting graphs ",
                            cache.graph_pools_awaiting_graphs, ") but ",
                            graph_models_.size(), " pools not released, ",
                            dropped_graph_pools_, " dropped, ",
                            orphans_.size(), " left to their graphs"));
    FUZZ_CHECK(!graph_models_.empty() || dropped_graph_pools_ != 0 ||
                   !orphans_.empty() ||
                   (cache.blocks_in_graph_pools == 0 &&
                    cache.bytes_in_graph_pools == 0),
               "blocks in graph pools with every pool released");
    const IpcStats ipc = gpupool::StableBuffers(*cache_).GetIpcStats();
    FUZZ_CHECK(ipc.opens == 0 && ipc.closes == 0 && ipc.mappings_live == 0,
               absl::StrCat("a mapping in one process: ", ipc.ToString()));
    FUZZ_CHECK(
        ipc.local_imports == local_imports_ &&
            ipc.import_leases == static_cast<int64_t>(imports_.size()),
        absl::StrCat("IPC stats ", ipc.ToString(), " but ", local_imports_,
                     " imports, ", imports_.size(), " leases out"));
    FUZZ_CHECK(
        events_->GetStats().in_use >=
            static_cast<int64_t>(std::count_if(
                events_held_.begin(), events_held_.end(),
                [](const auto& h) { return static_cast<bool>(h.lease); })),
        "event in_use below the leases out");
  }

  void Finish() {
    // Captures end, graphs go, pools are released (fenced by their replay
    // streams, which are still leased), imports are given back.
    for (GraphModel& model : graph_models_) {
      if (model.capturing == nullptr) continue;
      EndCaptureOn(model.capturing, &model.graphs);
      model.scope.End();
      model.capturing = nullptr;
    }
    for (const auto& [stream, device] : unregistered_) {
      EndCaptureOn(stream, &unregistered_graphs_);
    }
    unregistered_.clear();
    sim_->CompleteAllWork();
    for (GraphModel& model : graph_models_) {
      DestroyGraphs(model.graphs);
      ForgetGraphs(model);
      (void)model.pool.Release(model.replay_streams);
      model.pool = GraphPool();
      if (model.retained()) orphans_.push_back(std::move(model));
    }
    graph_models_.clear();
    // The graphs of the pools left to them go: every pool goes back.
    for (GraphModel& orphan : orphans_) {
      DestroyGraphs(orphan.graphs);
      ForgetGraphs(orphan);
    }
    CollectRetained();
    DestroyGraphs(unregistered_graphs_);
    imports_.clear();
    for (auto& held : allocations_held_) {
      if (held.lease) ReleaseLease(held.lease);
    }
    for (auto& held : events_held_) held.lease.Release();
    for (auto& held : streams_held_) held.lease.Release();
    CheckInvariants(/*with_stats=*/true);
    cache_.reset();
    events_.reset();
    streams_.reset();
    FUZZ_CHECK(sim_->misuse_count() == 0, "misuse at teardown");
    FUZZ_CHECK(backend_->violation_count() == 0,
               "call after poison at teardown");
    if (!faults_injected_ && !captured_) {
      absl::Status leaks = sim_->CheckNoLeaks();
      FUZZ_CHECK(leaks.ok(),
                 absl::StrCat("leak without any fault: ", leaks.ToString()));
    } else if (!faults_injected_) {
      // A capturing stream cannot be synchronized: a block released on one
      // without a ready event (the event pool at max_live_per_key) is
      // leaked, never reused (documented). Streams and events never leak.
      for (int d = 0; d < kDevices; ++d) {
        FUZZ_CHECK(sim_->live_streams(d) == 0 && sim_->live_events(d) == 0,
                   absl::StrCat("stream or event leaked on device ", d,
                                " without any fault"));
      }
    }
    // What faults legitimately leaked (kShutdown, unprovable memory) is ours
    // to clean up before the simulator's own leak report.
    for (int d = 0; d < kDevices; ++d) sim_->ResetDevice(d);
  }

  FuzzedDataProvider& input_;
  std::unique_ptr<SimBackend> sim_;
  std::unique_ptr<testing::CheckingBackend> backend_;
  std::shared_ptr<DeviceHealth> health_;
  std::unique_ptr<StreamPool> streams_;
  std::unique_ptr<EventPool> events_;
  std::unique_ptr<AllocationCache> cache_;
  size_t max_cached_block_bytes_ = 0;
  // Released in Finish before the pools go (a late release would leak).
  std::vector<Held<PooledStream>> streams_held_;
  std::vector<Held<PooledEvent>> events_held_;
  std::vector<Held<PooledAllocation>> allocations_held_;
  std::map<uint64_t, std::vector<NativeStream>> allocation_streams_;
  std::map<std::pair<std::string, int>, Stable> stable_;
  std::vector<GraphModel> graph_models_;
  // Retained pools whose handle let go (Release or dropped), until a Trim
  // after their graphs and launches are gone proves them back.
  std::vector<GraphModel> orphans_;
  // Pool handles dropped unreleased (held by the cache while they keep a
  // block).
  int64_t dropped_graph_pools_ = 0;
  // Streams capturing for a scope or for nobody (CaptureStep), and the
  // unregistered ones' devices; streams case 16 began capturing.
  std::vector<NativeStream> capturing_;
  std::map<NativeStream, int> unregistered_;
  std::vector<NativeStream> user_captures_;
  std::vector<SimGraph> unregistered_graphs_;
  std::vector<IpcHandle> handles_;
  std::vector<ImportedBuffer> imports_;
  int64_t local_imports_ = 0;
  bool faults_injected_ = false;
  bool captured_ = false;
  std::vector<void*> scratch_handles_;
  std::vector<std::pair<uintptr_t, uintptr_t>> scratch_ranges_;
};

}  // namespace
}  // namespace gpupool

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  gpupool::Session session(input);
  session.Run();
  return 0;
}
