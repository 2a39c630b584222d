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
// This file is the driver: the Session decodes each operation code and hands
// it to the model that owns it, runs the operations on the whole runtime
// (poison, reset and recover a device, fail-next, trim, memory limits),
// checks the invariants after every step and tears down at the end. The
// other files, one job each:
//   harness.{h,cc}             the runtime under test, its options, Fail
//   held_lease.h               leases held, picked and forgotten
//   stream_event_model.{h,cc}  stream and event leases, work on streams
//   allocation_model.{h,cc}    allocation leases and stable buffers
//   capture_model.{h,cc}       which streams capture, and for whom
//   graph_model.{h,cc}         one graph pool and its graphs' facts
//   graph_pool_model.{h,cc}    graph pools, scoped captures, replays
//   graph_owned_model.{h,cc}   graph-owned pools (GraphPool::RetainBy)
//   ipc_model.{h,cc}           IPC export, import and forged handles
//
// Single-threaded on purpose: the simulator's work model runs on real time
// only for finite durations, which this target never uses, so an input
// always replays the same way.

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "tests/fuzz/allocation_model.h"
#include "tests/fuzz/capture_model.h"
#include "tests/fuzz/graph_pool_model.h"
#include "tests/fuzz/harness.h"
#include "tests/fuzz/ipc_model.h"
#include "tests/fuzz/stream_event_model.h"

namespace gpupool::fuzz {
namespace {

constexpr int kMaxOps = 200;
constexpr int kStatsCheckEvery = 4;

// clang-format off
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
// clang-format on
constexpr Fault kFaultClasses[] = {Fault::kResource, Fault::kDevice,
                                   Fault::kOutOfMemory, Fault::kShutdown,
                                   Fault::kCaller};

// Operation codes past the first 22 (0..21, see Step).
constexpr int kGraphPoolOp = 22;  // new graph pool, release one, or a
                                  // graph-owned pool step
                                  // (GraphOwnedModel::Step)
constexpr int kCaptureOp = 23;    // begin a capture (scoped or not), or end
constexpr int kReplayOp = 24;     // launch or destroy a captured graph
constexpr int kIpcOp = 25;        // export + self-import, import, release
constexpr int kLastOp = kIpcOp;

class Session {
 public:
  explicit Session(FuzzedDataProvider& input) : harness_(input) {}

  void Run() {
    // GPUPOOL_FUZZ_TRACE=1: one line per step, to replay a crash by hand.
    static const bool trace = std::getenv("GPUPOOL_FUZZ_TRACE") != nullptr;
    for (int op = 0; op < kMaxOps && input_.remaining_bytes() > 0; ++op) {
      const int code = input_.ConsumeIntegralInRange(0, kLastOp);
      Step(code);
      if (trace) {
        const AllocationCacheStats cache = harness_.cache().GetStats();
        std::fprintf(
            stderr,
            "step %d: op %d | streams in_use %lld | cache in_use %lld "
            "cached %lld retiring %lld stable %lld | sim allocations "
            "%d/%d/%d leaked %lld dropped %lld\n",
            op, code,
            static_cast<long long>(harness_.streams().GetStats().in_use),
            static_cast<long long>(cache.allocations_in_use),
            static_cast<long long>(cache.blocks_cached),
            static_cast<long long>(cache.blocks_retiring),
            static_cast<long long>(cache.stable_allocations),
            sim_.live_allocations(0), sim_.live_allocations(1),
            sim_.live_allocations(2),
            static_cast<long long>(cache.blocks_leaked),
            static_cast<long long>(cache.blocks_dropped));
      }
      CheckInvariants(/*with_stats=*/op % kStatsCheckEvery == 0);
    }
    Finish();
  }

 private:
  // Streams referenced by a live allocation must stay leased: the cache
  // records its ready events on them at release (as with cudaMallocAsync,
  // the stream must outlive the use). So must a stream that captures for a
  // graph pool or replayed one of its graphs (its Release fences on it).
  bool StreamInUse(NativeStream stream) const {
    return allocations_.UsedOn(stream) || graph_pools_.UsesStream(stream) ||
           captures_.IsCapturing(stream);
  }

  void Step(int op) {
    leases_.Compact();
    allocations_.Compact();
    const auto busy = [this](NativeStream stream) {
      return StreamInUse(stream);
    };
    switch (op) {
      case 0:  // acquire stream
        leases_.AcquireStream();
        return;
      case 1:  // release stream
      case 2:  // discard stream
        leases_.ReleaseStream(/*discard=*/op == 2, busy);
        return;
      case 3:  // acquire event
        leases_.AcquireEvent();
        return;
      case 4:  // release event
      case 5:  // discard event
        leases_.ReleaseEvent(/*discard=*/op == 5);
        return;
      case 6:  // allocate
        allocations_.Allocate(
            [this](const PooledAllocation& lease, NativeStream stream) {
              graph_pools_.ClaimDeviceLease(lease, stream);
            });
        return;
      case 7:  // record use
        allocations_.RecordUse();
        return;
      case 8:  // release allocation
        allocations_.ReleaseOne();
        return;
      case 9:  // submit work that completes only when told to
        leases_.SubmitWork();
        return;
      case 10:  // complete work
        leases_.CompleteWork();
        return;
      case 11: {  // sticky device error
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        sim_.PoisonDevice(device,
                          absl::InternalError("cudaErrorIllegalAddress"));
        harness_.NoteFault();
        return;
      }
      case 12:  // the user resets a device the pools found poisoned
        ResetDevice();
        return;
      case 13:  // fail-next
        FailNext();
        return;
      case 14:  // prewarm
        leases_.Prewarm();
        return;
      case 15:  // trim
        Trim();
        return;
      case 16:  // the user starts a capture or sets an attribute
        captures_.UserCaptureOrAttribute(busy);
        return;
      case 17:  // the user records an event lease on a stream lease
        leases_.RecordEvent();
        return;
      case 18:  // a stream faults (its work failed)
        leases_.FaultStream();
        return;
      case 19:  // stable buffer
        allocations_.StableBuffer();
        return;
      case 20: {  // a tight memory limit makes the OOM chain run
        const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
        const size_t limit = input_.ConsumeIntegralInRange<size_t>(0, 1 << 22);
        sim_.SetMemoryLimit(device, limit,
                            input_.ConsumeBool() ? MemoryKind::kDevice
                                                 : MemoryKind::kPinnedHost);
        return;
      }
      case kGraphPoolOp:
        graph_pools_.PoolStep();
        return;
      case kCaptureOp:
        graph_pools_.CaptureStep();
        return;
      case kReplayOp:
        graph_pools_.ReplayStep();
        return;
      case kIpcOp:
        ipc_.Step();
        return;
      default:  // 21: moved-from and empty leases are inert
        leases_.MoveStreamLease(busy);
        return;
    }
  }

  void ResetDevice() {
    const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
    if (!harness_.health().is_poisoned(device)) {
      FUZZ_CHECK(harness_.streams().RecoverDevice(device).code() ==
                     absl::StatusCode::kFailedPrecondition,
                 "RecoverDevice of a healthy device");
      return;
    }
    sim_.ResetDevice(device);  // every handle of the device is gone
    // Its leases, stable buffers, captures and graphs went with it.
    leases_.MarkDeviceReset(device);
    allocations_.MarkDeviceReset(device);
    graph_pools_.ForgetDevice(device);
    captures_.ForgetDevice(device);
    FUZZ_CHECK(harness_.streams().RecoverDevice(device).ok(), "RecoverDevice");
    FUZZ_CHECK(!harness_.health().is_poisoned(device), "still poisoned");
  }

  void FailNext() {
    const SimOp fail_op = kFailOps[input_.ConsumeIntegralInRange<size_t>(
        0, std::size(kFailOps) - 1)];
    const Fault fault = kFaultClasses[input_.ConsumeIntegralInRange<size_t>(
        0, std::size(kFaultClasses) - 1)];
    const int device = input_.ConsumeIntegralInRange(-1, kDevices - 1);
    const absl::StatusCode codes[] = {
        absl::StatusCode::kAborted, absl::StatusCode::kInternal,
        absl::StatusCode::kResourceExhausted, absl::StatusCode::kUnavailable,
        absl::StatusCode::kInvalidArgument};
    sim_.FailNext(fail_op,
                  FaultError(fault, codes[static_cast<int>(fault) - 2],
                             "injected by pool_fuzzer"),
                  device);
    harness_.NoteFault();
  }

  void Trim() {
    switch (input_.ConsumeIntegralInRange(0, 3)) {
      case 0:
        harness_.streams().Trim();
        return;
      case 1:
        harness_.events().Trim(input_.ConsumeIntegralInRange(-1, kDevices));
        return;
      case 2:
        harness_.cache()
            .Trim(input_.ConsumeIntegralInRange(0, kDevices),
                  input_.ConsumeIntegralInRange<size_t>(0, 1 << 20))
            .IgnoreError();
        return;
      default:
        harness_.cache().Trim().IgnoreError();
        return;
    }
  }

  void CheckInvariants(bool with_stats) {
    FUZZ_CHECK(sim_.misuse_count() == 0, "misuse");
    FUZZ_CHECK(sim_.graph_misuses() == 0,
               absl::StrCat("graph oracle: ",
                            absl::StrJoin(sim_.graph_misuse_log(), "; ")));
    FUZZ_CHECK(
        harness_.backend().violation_count() == 0,
        absl::StrCat("runtime call after poisoning: ",
                     absl::StrJoin(harness_.backend().violations(), "; ")));
    const int64_t streams_out = leases_.CheckHandles();
    const int64_t allocations_out = allocations_.CheckNoOverlap();
    if (with_stats) CheckStats(streams_out, allocations_out);
  }

  // Stats agree with what we hold. GetStats merges every shard's counters
  // and latency histograms, the costliest check by far, so Run makes it
  // every kStatsCheckEvery steps and at the end; a counter that drifts stays
  // wrong, so the next check still sees it.
  void CheckStats(int64_t streams_out, int64_t allocations_out) {
    FUZZ_CHECK(
        harness_.streams().GetStats().in_use == streams_out,
        absl::StrCat("stream in_use ", harness_.streams().GetStats().in_use,
                     " but ", streams_out, " leases out"));
    FUZZ_CHECK(
        harness_.cache().GetStats().allocations_in_use == allocations_out,
        absl::StrCat("allocations_in_use ",
                     harness_.cache().GetStats().allocations_in_use, " but ",
                     allocations_out, " leases out"));
    const AllocationCacheStats cache = harness_.cache().GetStats();
    graph_pools_.CheckStats(cache);
    ipc_.CheckStats();
    FUZZ_CHECK(harness_.events().GetStats().in_use >= leases_.events_out(),
               "event in_use below the leases out");
  }

  void Finish() {
    // Captures end, graphs go, pools are released (fenced by their replay
    // streams, which are still leased), imports are given back.
    graph_pools_.EndCaptures();
    captures_.EndUnregisteredCaptures();
    sim_.CompleteAllWork();
    graph_pools_.ReleaseAll();
    captures_.DestroyUnregisteredGraphs();
    ipc_.ReleaseImports();
    allocations_.ReleaseAll();
    leases_.ReleaseAll();
    CheckInvariants(/*with_stats=*/true);
    harness_.DestroyPools();
    FUZZ_CHECK(sim_.misuse_count() == 0, "misuse at teardown");
    FUZZ_CHECK(harness_.backend().violation_count() == 0,
               "call after poison at teardown");
    if (!harness_.faults_injected() && !harness_.captured()) {
      absl::Status leaks = sim_.CheckNoLeaks();
      FUZZ_CHECK(leaks.ok(),
                 absl::StrCat("leak without any fault: ", leaks.ToString()));
    } else if (!harness_.faults_injected()) {
      // A capturing stream cannot be synchronized: a block released on one
      // without a ready event (the event pool at max_live_per_key) is
      // leaked, never reused (documented). Streams and events never leak.
      for (int d = 0; d < kDevices; ++d) {
        FUZZ_CHECK(sim_.live_streams(d) == 0 && sim_.live_events(d) == 0,
                   absl::StrCat("stream or event leaked on device ", d,
                                " without any fault"));
      }
    }
    // What faults legitimately leaked (kShutdown, unprovable memory) is ours
    // to clean up before the simulator's own leak report.
    for (int d = 0; d < kDevices; ++d) sim_.ResetDevice(d);
  }

  // Declared first: the models refer to it, and it goes last.
  Harness harness_;
  FuzzedDataProvider& input_ = harness_.input();
  SimBackend& sim_ = harness_.sim();
  StreamEventModel leases_{harness_};
  AllocationModel allocations_{harness_, leases_};
  CaptureModel captures_{harness_, leases_};
  GraphPoolModel graph_pools_{harness_, captures_};
  IpcModel ipc_{harness_, allocations_};
};

}  // namespace
}  // namespace gpupool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  gpupool::fuzz::Session session(input);
  session.Run();
  return 0;
}
