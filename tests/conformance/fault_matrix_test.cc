// The fault-injection matrix (issue 5): for every SimBackend primitive, every
// pool path that calls it and every fault class, inject the fault into exactly
// that call (`SimBackend::FailNext`) and check the invariants:
//
//   * the caller gets the documented status code (or, on paths without a
//     caller, the pool reacts without one);
//   * a sticky fault (kDevice) poisons the device, and every other class does
//     not;
//   * no handle is handed out twice, and every handle handed out is live;
//   * no runtime call names a device after its sticky fault (CheckingBackend,
//     tests/util/checking_backend.h, sees every call) and no handle is used
//     after its destroy (SimBackend's misuse detection, fatal via
//     StrictSimOptions);
//   * nothing leaks: after the pools are destroyed the simulator holds exactly
//     the handles the fault class allows to leak (kShutdown: leak quietly;
//     memory whose safety can no longer be proven), nothing on other devices;
//   * the pools keep serving other keys and devices.
//
// A cell is (path, op, fault) for a path that calls op. The table of
// scenarios below (and, for graph pools and IPC, the one in
// fault_matrix_graph_ipc_test.cc; for the cache's split, merge and give-back,
// the one in fault_matrix_segments_test.cc) defines the cells; the test prints
// the coverage and fails unless every cell was exercised (the injected fault
// was consumed by that path) and held every invariant.

#include "tests/util/fault_matrix.h"

#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/pool_options.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "src/lifetime/process_state.h"

namespace gpupool::fault_matrix {
namespace {

// ---------------------------------------------------------------------------
// Paths and scenarios (the harness: tests/util/fault_matrix.h)
// ---------------------------------------------------------------------------

std::string PathName(Path path) {
  switch (path) {
    case Path::kStreamConstruct:
      return "stream construct";
    case Path::kStreamAcquire:
      return "stream acquire (create)";
    case Path::kStreamPrewarm:
      return "stream prewarm";
    case Path::kStreamPrewarmAsync:
      return "stream prewarm async";
    case Path::kStreamValidate:
      return "stream validate-on-acquire";
    case Path::kStreamDrain:
      return "stream drain check";
    case Path::kStreamReturn:
      return "stream return";
    case Path::kStreamTrim:
      return "stream trim";
    case Path::kStreamClose:
      return "stream pool destructor";
    case Path::kStreamExitDrain:
      return "stream exit drain";
    case Path::kEventAcquire:
      return "event acquire (create)";
    case Path::kEventPrewarm:
      return "event prewarm";
    case Path::kEventPrewarmAsync:
      return "event prewarm async";
    case Path::kEventValidate:
      return "event validate-on-acquire";
    case Path::kEventDrain:
      return "event drain check";
    case Path::kEventReturn:
      return "event return";
    case Path::kEventTrim:
      return "event trim";
    case Path::kEventClose:
      return "event pool destructor";
    case Path::kEventExitDrain:
      return "event exit drain";
    case Path::kCacheAllocate:
      return "cache allocate";
    case Path::kCacheRelease:
      return "cache release";
    case Path::kCacheTrim:
      return "cache trim";
    case Path::kCacheOomChain:
      return "cache OOM chain";
    case Path::kCacheStable:
      return "cache stable buffer";
    case Path::kCacheClose:
      return "cache destructor";
    case Path::kCacheExitDrain:
      return "cache exit drain";
    case Path::kCacheSplit:
      return "cache allocate by split";
    case Path::kCacheMerge:
      return "cache release with merge";
    case Path::kCacheMergedReuse:
      return "cache allocate merged block";
    case Path::kCacheGiveBack:
      return "cache give-back before miss";
    case Path::kCacheDeferredFence:
      return "cache deferred fence";
    case Path::kGraphScopeOpen:
      return "graph capture scope open";
    case Path::kGraphAllocate:
      return "graph pool allocate";
    case Path::kGraphUnregisteredRelease:
      return "unregistered capture release";
    case Path::kGraphPoolRelease:
      return "graph pool release";
    case Path::kGraphLateReturn:
      return "graph lease after release";
    case Path::kGraphFree:
      return "graph blocks freed";
    case Path::kGraphRetain:
      return "graph pool retain by graph";
    case Path::kIpcExport:
      return "ipc export";
    case Path::kIpcImport:
      return "ipc import";
    case Path::kIpcClose:
      return "ipc mapping close";
  }
  return "?";
}

bool IsExitDrain(Path path) {
  return path == Path::kStreamExitDrain || path == Path::kEventExitDrain ||
         path == Path::kCacheExitDrain;
}

// Two handles returned while busy, their work since completed: the next
// query of each says idle (unless a fault is injected).
void TwoDrainedStreams(Harness& h) {
  for (int i = 0; i < 2; ++i) {
    if (!h.AcquireStream(kTarget).ok()) h.Error("setup: acquire");
    h.sim.SubmitWork(h.held_streams.back().get(), absl::InfiniteDuration());
  }
  for (PooledStream& s : h.held_streams) s.Release();
  h.sim.CompleteAllWork();
}

void TwoDrainedEvents(Harness& h) {
  if (!h.AcquireStream(kTarget).ok()) h.Error("setup: acquire stream");
  h.sim.SubmitWork(h.stream(0), absl::InfiniteDuration());
  for (int i = 0; i < 2; ++i) {
    if (!h.AcquireEvent(kTarget).ok()) h.Error("setup: acquire event");
    if (!h.backend.RecordEvent(kTarget, h.held_events.back().get(), h.stream(0))
             .ok()) {
      h.Error("setup: record");
    }
  }
  for (PooledEvent& e : h.held_events) e.Release();
  h.held_streams[0].Release();
  h.sim.CompleteAllWork();
}

// Cached blocks of two size classes on the target device. `on_stream`: used
// on a stream, so each carries a ready event (pending until queried);
// `work`: that stream still has `work` to do.
void TwoCachedBlocks(Harness& h, bool on_stream,
                     absl::Duration work = absl::ZeroDuration()) {
  NativeStream stream = nullptr;
  if (on_stream) {
    if (!h.AcquireStream(kTarget).ok()) h.Error("setup: acquire stream");
    stream = h.stream(0);
  }
  for (size_t bytes : {kMedium, kLarge}) {
    if (!h.Allocate(kTarget, bytes, MemoryKind::kDevice, stream).ok()) {
      h.Error("setup: allocate");
    }
  }
  if (work > absl::ZeroDuration()) h.sim.SubmitWork(stream, work);
  for (PooledAllocation& a : h.held_allocations) a.Release();
}

std::vector<Scenario> Scenarios() {
  std::vector<Scenario> s;
  auto add = [&s](Path path, SimOp op, std::string what,
                  std::function<void(Harness&)> setup,
                  std::function<absl::Status(Harness&)> step,
                  ExpectFn expect) -> Scenario& {
    s.push_back(Scenario{path, op, std::move(what), std::move(setup),
                         std::move(step), std::move(expect)});
    return s.back();
  };
  auto nothing = [](Harness&) {};
  auto exit_sequence = [](Harness&) {
    internal::RunExitSequenceForTesting();
    return absl::OkStatus();
  };

  // --- StreamPool ------------------------------------------------------------
  add(
      Path::kStreamConstruct, SimOp::kDeviceCount,
      "pool built while DeviceCount fails; Acquire reports it", nothing,
      [](Harness& h) { return h.streams->Acquire(kTarget).status(); },
      Passthrough())
      .inject_before_pools = true;
  add(
      Path::kStreamAcquire, SimOp::kStreamCreate, "Acquire on an empty pool",
      nothing, [](Harness& h) { return h.AcquireStream(kTarget); },
      Passthrough());
  add(
      Path::kStreamPrewarm, SimOp::kStreamCreate, "Prewarm(2)", nothing,
      [](Harness& h) { return h.streams->Prewarm(kTarget, {}, 2); },
      Passthrough());
  add(
      Path::kStreamPrewarmAsync, SimOp::kStreamCreate, "PrewarmAsync(2).Wait()",
      nothing,
      [](Harness& h) { return h.streams->PrewarmAsync(kTarget, {}, 2).Wait(); },
      Passthrough());
  add(
      Path::kStreamValidate, SimOp::kStreamQuery,
      "Acquire validates an idle stream (2 idle)",
      [](Harness& h) { (void)h.streams->Prewarm(kTarget, {}, 2); },
      [](Harness& h) { return h.AcquireStream(kTarget); },
      Recovers(/*shutdown=*/kOneStream))
      // Idle handles are trusted by default: the query at acquire is opt-in.
      .pool_options.validate_on_acquire = true;
  add(
      Path::kStreamDrain, SimOp::kStreamQuery,
      "Acquire checks a drained stream", TwoDrainedStreams,
      [](Harness& h) { return h.AcquireStream(kTarget); },
      Recovers(/*shutdown=*/kOneStream));
  add(
      Path::kStreamReturn, SimOp::kCaptureStatus,
      "Release while capturing (the query fails, then the status is asked)",
      [](Harness& h) {
        (void)h.AcquireStream(kTarget);
        h.sim.BeginCapture(h.stream(0));
      },
      [](Harness& h) {
        h.held_streams[0].Release();
        return absl::OkStatus();
      },
      Silent(/*shutdown=*/kOneStream));
  add(
      Path::kStreamReturn, SimOp::kEndCapture, "Release while capturing",
      [](Harness& h) {
        (void)h.AcquireStream(kTarget);
        h.sim.BeginCapture(h.stream(0));
      },
      [](Harness& h) {
        h.held_streams[0].Release();
        return absl::OkStatus();
      },
      // A capture that could not be ended leaves the stream capturing:
      // destroying it is undefined, so the pool leaks it.
      Silent(/*shutdown=*/kOneStream, /*other=*/kOneStream));
  add(
      Path::kStreamReturn, SimOp::kResetAttributes,
      "Release with a dirty attribute",
      [](Harness& h) {
        (void)h.AcquireStream(kTarget);
        h.sim.SetStreamAttribute(h.stream(0));
      },
      [](Harness& h) {
        h.held_streams[0].Release();
        return absl::OkStatus();
      },
      Silent(/*shutdown=*/kOneStream));
  add(
      Path::kStreamReturn, SimOp::kStreamQuery, "Release",
      [](Harness& h) { (void)h.AcquireStream(kTarget); },
      [](Harness& h) {
        h.held_streams[0].Release();
        return absl::OkStatus();
      },
      Silent(/*shutdown=*/kOneStream));
  add(
      Path::kStreamReturn, SimOp::kStreamDestroy, "Discard",
      [](Harness& h) { (void)h.AcquireStream(kTarget); },
      [](Harness& h) {
        h.held_streams[0].Discard();
        return absl::OkStatus();
      },
      Silent());
  add(
      Path::kStreamReturn, SimOp::kStreamDestroy,
      "Release beyond max_idle_per_key",
      [](Harness& h) { (void)h.AcquireStream(kTarget); },
      [](Harness& h) {
        h.held_streams[0].Release();
        return absl::OkStatus();
      },
      Silent())
      .pool_options.max_idle_per_key = 0;
  add(
      Path::kStreamTrim, SimOp::kStreamDestroy, "Trim() with 3 idle",
      [](Harness& h) { (void)h.streams->Prewarm(kTarget, {}, 3); },
      [](Harness& h) {
        h.streams->Trim();
        return absl::OkStatus();
      },
      Silent());
  add(
      Path::kStreamTrim, SimOp::kStreamQuery, "Trim() with 2 drained",
      TwoDrainedStreams,
      [](Harness& h) {
        h.streams->Trim();
        return absl::OkStatus();
      },
      Silent(/*shutdown=*/kOneStream));
  add(
      Path::kStreamClose, SimOp::kStreamDestroy, "~StreamPool with 3 idle",
      [](Harness& h) { (void)h.streams->Prewarm(kTarget, {}, 3); },
      [](Harness& h) {
        h.streams.reset();
        return absl::OkStatus();
      },
      Silent());
  add(
      Path::kStreamExitDrain, SimOp::kStreamDestroy, "exit with 3 idle",
      [](Harness& h) { (void)h.streams->Prewarm(kTarget, {}, 3); },
      exit_sequence, Silent());
  add(Path::kStreamExitDrain, SimOp::kStreamQuery, "exit with 2 drained",
      TwoDrainedStreams, exit_sequence, Silent(/*shutdown=*/kOneStream));

  // --- EventPool -------------------------------------------------------------
  add(
      Path::kEventAcquire, SimOp::kEventCreate, "Acquire on an empty pool",
      nothing, [](Harness& h) { return h.AcquireEvent(kTarget); },
      Passthrough());
  add(
      Path::kEventPrewarm, SimOp::kEventCreate, "Prewarm(2)", nothing,
      [](Harness& h) { return h.events->Prewarm(kTarget, {}, 2); },
      Passthrough());
  add(
      Path::kEventPrewarmAsync, SimOp::kEventCreate, "PrewarmAsync(2).Wait()",
      nothing,
      [](Harness& h) { return h.events->PrewarmAsync(kTarget, {}, 2).Wait(); },
      Passthrough());
  add(
      Path::kEventValidate, SimOp::kEventQuery,
      "Acquire validates an idle event (2 idle)",
      [](Harness& h) { (void)h.events->Prewarm(kTarget, {}, 2); },
      [](Harness& h) { return h.AcquireEvent(kTarget); },
      Recovers(/*shutdown=*/kOneEvent))
      // Idle handles are trusted by default: the query at acquire is opt-in.
      .pool_options.validate_on_acquire = true;
  add(
      Path::kEventDrain, SimOp::kEventQuery, "Acquire checks a drained event",
      TwoDrainedEvents, [](Harness& h) { return h.AcquireEvent(kTarget); },
      Recovers(/*shutdown=*/kOneEvent));
  add(
      Path::kEventReturn, SimOp::kEventQuery, "Release",
      [](Harness& h) { (void)h.AcquireEvent(kTarget); },
      [](Harness& h) {
        h.held_events[0].Release();
        return absl::OkStatus();
      },
      Silent(/*shutdown=*/kOneEvent));
  add(
      Path::kEventReturn, SimOp::kEventDestroy, "Discard",
      [](Harness& h) { (void)h.AcquireEvent(kTarget); },
      [](Harness& h) {
        h.held_events[0].Discard();
        return absl::OkStatus();
      },
      Silent());
  add(
      Path::kEventTrim, SimOp::kEventDestroy, "Trim() with 3 idle",
      [](Harness& h) { (void)h.events->Prewarm(kTarget, {}, 3); },
      [](Harness& h) {
        h.events->Trim();
        return absl::OkStatus();
      },
      Silent());
  add(
      Path::kEventTrim, SimOp::kEventQuery, "Trim() with 2 drained",
      TwoDrainedEvents,
      [](Harness& h) {
        h.events->Trim();
        return absl::OkStatus();
      },
      Silent(/*shutdown=*/kOneEvent));
  add(
      Path::kEventClose, SimOp::kEventDestroy, "~EventPool with 3 idle",
      [](Harness& h) { (void)h.events->Prewarm(kTarget, {}, 3); },
      [](Harness& h) {
        h.cache.reset();  // the cache must not outlive its event pool
        h.events.reset();
        return absl::OkStatus();
      },
      Silent());
  add(
      Path::kEventExitDrain, SimOp::kEventDestroy, "exit with 3 idle",
      [](Harness& h) { (void)h.events->Prewarm(kTarget, {}, 3); },
      exit_sequence, Silent());
  add(Path::kEventExitDrain, SimOp::kEventQuery, "exit with 2 drained",
      TwoDrainedEvents, exit_sequence, Silent(/*shutdown=*/kOneEvent));

  // --- AllocationCache
  // ---------------------------------------------------------
  add(
      Path::kCacheAllocate, SimOp::kAllocate, "Allocate, cache empty", nothing,
      [](Harness& h) { return h.Allocate(kTarget, kSmall); },
      CacheAllocation());
  // A block released on stream 0 is offered to a request on stream 1.
  // Two blocks released on stream 0 are offered to a request on stream 1;
  // both are checked (pending_checks_per_allocate = 2), so a sticky fault on
  // the first must spare the second any runtime call.
  auto pending_on_other_stream = [](Harness& h) {
    for (int i = 0; i < 2; ++i) (void)h.AcquireStream(kTarget);
    for (int i = 0; i < 2; ++i) {
      (void)h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(0));
    }
    for (PooledAllocation& a : h.held_allocations) a.Release();
  };
  add(
      Path::kCacheAllocate, SimOp::kEventQuery,
      "Allocate on stream B checks 2 blocks released on stream A",
      pending_on_other_stream,
      [](Harness& h) {
        return h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(1));
      },
      Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheAllocate, SimOp::kStreamWaitEvent,
      "Allocate on stream B waits on 2 blocks released on stream A",
      pending_on_other_stream,
      [](Harness& h) {
        return h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(1));
      },
      // Any other fault falls back to querying the (complete) event.
      Recovers(/*shutdown=*/kOneAllocation))
      .cache_options.cross_stream = CrossStreamPolicy::kWaitOnStream;
  // With nothing cached (cap 0), a released block with pending work
  // retires; the next Allocate polls it and frees it.
  auto one_retiring = [](Harness& h) {
    (void)h.AcquireStream(kTarget);
    (void)h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(0));
    h.sim.SubmitWork(h.stream(0), absl::InfiniteDuration());
    h.held_allocations[0].Release();
    h.sim.CompleteAllWork();
  };
  add(
      Path::kCacheAllocate, SimOp::kFree,
      "Allocate frees a retired block whose work completed", one_retiring,
      [](Harness& h) { return h.Allocate(kTarget, kSmall); },
      Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation))
      .cache_options.max_cached_bytes = 0;
  add(
      Path::kCacheAllocate, SimOp::kEventQuery,
      "Allocate polls a retired block", one_retiring,
      [](Harness& h) { return h.Allocate(kTarget, kSmall); },
      Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation))
      .cache_options.max_cached_bytes = 0;

  auto one_on_stream = [](Harness& h) {
    (void)h.AcquireStream(kTarget);
    (void)h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(0));
  };
  auto release_first = [](Harness& h) {
    h.held_allocations[0].Release();
    return absl::OkStatus();
  };
  add(Path::kCacheRelease, SimOp::kEventCreate,
      "Release takes a ready event from an empty EventPool", one_on_stream,
      release_first, Silent(/*shutdown=*/kOneAllocation));
  add(Path::kCacheRelease, SimOp::kEventRecord,
      "Release records the ready event", one_on_stream, release_first,
      Silent(/*shutdown=*/kOneAllocation));
  add(
      Path::kCacheRelease, SimOp::kStreamSynchronize,
      "Release falls back to synchronizing when the record failed",
      [=](Harness& h) {
        one_on_stream(h);
        h.InjectSetupFault(SimOp::kEventRecord, Fault::kResource);
      },
      release_first,
      // The stream's work may still touch the block: never reuse or free it.
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheRelease, SimOp::kFree,
      "Release of an uncached (oversized) block frees it",
      [](Harness& h) { (void)h.Allocate(kTarget, 4 * kLarge); }, release_first,
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation))
      .cache_options.max_cached_block_bytes = kLarge;
  // Found by the fuzzer: discarding the event whose record failed met a
  // sticky fault, and the release still synchronized the stream.
  add(
      Path::kCacheRelease, SimOp::kEventDestroy,
      "Release discards the event whose record failed",
      [=](Harness& h) {
        one_on_stream(h);
        h.InjectSetupFault(SimOp::kEventRecord, Fault::kResource);
      },
      release_first, Silent());
  // Found by the fuzzer: the free of one block poisoned the device, and the
  // same Release then polled another, retired block anyway.
  add(
      Path::kCacheRelease, SimOp::kFree,
      "Release frees an uncached block, then polls a retired one",
      [=](Harness& h) {
        (void)h.AcquireStream(kTarget);
        (void)h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(0));
        h.sim.SubmitWork(h.stream(0), absl::InfiniteDuration());
        h.held_allocations[0].Release();    // retires: nothing is cached
        (void)h.Allocate(kTarget, kSmall);  // polls it: still pending
        h.sim.CompleteAllWork();
      },
      [](Harness& h) {
        h.held_allocations[1].Release();  // freed at once, then the poll
        return absl::OkStatus();
      },
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation))
      .cache_options.max_cached_bytes = 0;
  add(
      Path::kCacheRelease, SimOp::kEventQuery, "Release polls a retired block",
      [=](Harness& h) {
        (void)h.AcquireStream(kTarget);
        (void)h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(0));
        h.sim.SubmitWork(h.stream(0), absl::InfiniteDuration());
        h.held_allocations[0].Release();    // retires: nothing is cached
        (void)h.Allocate(kTarget, kSmall);  // polls it: still pending
        h.sim.CompleteAllWork();
      },
      [](Harness& h) {
        h.held_allocations[1].Release();
        return absl::OkStatus();
      },
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation))
      .cache_options.max_cached_bytes = 0;

  auto trim = [](Harness& h) { return h.cache->Trim(kTarget); };
  add(
      Path::kCacheTrim, SimOp::kFree, "Trim with 2 idle blocks",
      [](Harness& h) { TwoCachedBlocks(h, /*on_stream=*/false); }, trim,
      Passthrough(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheTrim, SimOp::kEventQuery, "Trim with 2 released blocks",
      [](Harness& h) { TwoCachedBlocks(h, /*on_stream=*/true); }, trim,
      AlwaysOk(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheTrim, SimOp::kEventSynchronize,
      "Trim waits for 2 blocks with pending work",
      [](Harness& h) { TwoCachedBlocks(h, /*on_stream=*/true, kShortWork); },
      trim, AlwaysOk(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));

  // The first Allocate fails with out-of-memory (setup); the chain runs.
  auto oom = [](Harness& h) { return h.Allocate(kTarget, kSmall); };
  // Larger than the cached blocks together: no cached block can be split
  // for it, so the OOM chain frees both before its retry.
  auto oom_past_cached = [](Harness& h) {
    return h.Allocate(kTarget, 4 * kLarge);
  };
  add(
      Path::kCacheOomChain, SimOp::kAllocate, "the retry after trimming",
      [](Harness& h) {
        h.InjectSetupFault(SimOp::kAllocate, Fault::kOutOfMemory);
      },
      oom, OomRetry());
  add(
      Path::kCacheOomChain, SimOp::kMemoryInfo, "GetMemoryInfo for the numbers",
      [](Harness& h) {
        h.InjectSetupFault(SimOp::kAllocate, Fault::kOutOfMemory);
      },
      oom, Recovers());
  add(
      Path::kCacheOomChain, SimOp::kFree, "freeing 2 idle cached blocks",
      [](Harness& h) {
        TwoCachedBlocks(h, /*on_stream=*/false);
        h.InjectSetupFault(SimOp::kAllocate, Fault::kOutOfMemory);
      },
      oom_past_cached,
      Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheOomChain, SimOp::kEventQuery,
      "checking 2 released cached blocks",
      [](Harness& h) {
        TwoCachedBlocks(h, /*on_stream=*/true);
        h.InjectSetupFault(SimOp::kAllocate, Fault::kOutOfMemory);
      },
      oom_past_cached,
      Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheOomChain, SimOp::kEventSynchronize,
      "waiting for 2 cached blocks with pending work",
      [](Harness& h) {
        TwoCachedBlocks(h, /*on_stream=*/true, kShortWork);
        h.InjectSetupFault(SimOp::kAllocate, Fault::kOutOfMemory);
      },
      oom_past_cached,
      Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));

  add(
      Path::kCacheStable, SimOp::kAllocate,
      "StableBuffers::Acquire, first call", nothing,
      [](Harness& h) {
        return gpupool::StableBuffers(*h.cache)
            .Acquire("matrix", kTarget, kSmall)
            .status();
      },
      CacheAllocation());
  add(
      Path::kCacheStable, SimOp::kFree, "StableBuffers::Release",
      [](Harness& h) {
        (void)gpupool::StableBuffers(*h.cache).Acquire("matrix", kTarget,
                                                       kSmall);
      },
      [](Harness& h) {
        return gpupool::StableBuffers(*h.cache).Release("matrix", kTarget);
      },
      Passthrough(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheStable, SimOp::kFree,
      "StableBuffers::Acquire grows (frees the old)",
      [](Harness& h) {
        (void)gpupool::StableBuffers(*h.cache).Acquire("matrix", kTarget,
                                                       kSmall);
      },
      [](Harness& h) {
        return gpupool::StableBuffers(*h.cache)
            .Acquire("matrix", kTarget, kLarge)
            .status();
      },
      Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));

  auto close_cache = [](Harness& h) {
    h.cache.reset();
    return absl::OkStatus();
  };
  add(
      Path::kCacheClose, SimOp::kFree, "~AllocationCache with 2 idle blocks",
      [](Harness& h) { TwoCachedBlocks(h, /*on_stream=*/false); }, close_cache,
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheClose, SimOp::kEventQuery,
      "~AllocationCache with 2 released blocks",
      [](Harness& h) { TwoCachedBlocks(h, /*on_stream=*/true); }, close_cache,
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheClose, SimOp::kEventSynchronize,
      "~AllocationCache with 2 blocks with pending work",
      [](Harness& h) { TwoCachedBlocks(h, /*on_stream=*/true, kShortWork); },
      close_cache,
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  // At exit the streams the blocks were used on are back in their pool.
  auto release_streams = [](Harness& h) {
    for (PooledStream& stream : h.held_streams) stream.Release();
  };
  add(
      Path::kCacheExitDrain, SimOp::kFree, "exit with 2 idle blocks",
      [](Harness& h) { TwoCachedBlocks(h, /*on_stream=*/false); },
      exit_sequence,
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheExitDrain, SimOp::kEventQuery, "exit with 2 released blocks",
      [=](Harness& h) {
        TwoCachedBlocks(h, /*on_stream=*/true);
        release_streams(h);
      },
      exit_sequence,
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kCacheExitDrain, SimOp::kEventSynchronize,
      "exit with 2 blocks with pending work",
      [=](Harness& h) {
        TwoCachedBlocks(h, /*on_stream=*/true, kShortWork);
        release_streams(h);
      },
      exit_sequence,
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  return s;
}

// ---------------------------------------------------------------------------
// Running a cell
// ---------------------------------------------------------------------------

std::string CellName(const Scenario& scenario, Fault fault) {
  return absl::StrCat(PathName(scenario.path), " x ", SimOpName(scenario.op),
                      " x ", FaultName(fault), " (", scenario.what, ")");
}

// After the fault: device kOther serves every pool; the target device serves
// other keys and the same key — or refuses all of them, without a runtime
// call, when the fault poisoned it.
void CheckStillServing(Harness& h, bool target_poisoned) {
  const absl::StatusCode target_code =
      target_poisoned ? absl::StatusCode::kFailedPrecondition
                      : absl::StatusCode::kOk;
  auto expect = [&h](absl::Status status, absl::StatusCode code,
                     absl::string_view what) {
    if (status.code() != code) {
      h.Error(absl::StrCat("after the fault, ", what, ": got ",
                           status.ToString(), ", want ",
                           absl::StatusCodeToString(code)));
    }
  };
  if (h.streams != nullptr) {
    expect(h.AcquireStream(kOther), absl::StatusCode::kOk, "stream dev1");
    expect(h.AcquireStream(kTarget, {.priority = -1}), target_code,
           "stream dev0 other config");
    expect(h.AcquireStream(kTarget), target_code, "stream dev0 same config");
    if (h.streams->GetStats().in_use != h.live_streams_held()) {
      h.Error("stream pool in_use disagrees with the leases out");
    }
  }
  if (h.events != nullptr) {
    expect(h.AcquireEvent(kOther), absl::StatusCode::kOk, "event dev1");
    expect(h.AcquireEvent(kTarget, {.disable_timing = false}), target_code,
           "event dev0 other config");
    expect(h.AcquireEvent(kTarget), target_code, "event dev0 same config");
  }
  if (h.cache != nullptr) {
    expect(h.Allocate(kOther, kSmall), absl::StatusCode::kOk,
           "allocation dev1");
    expect(h.Allocate(kTarget, kSmall, MemoryKind::kPinnedHost), target_code,
           "allocation dev0 pinned host");
    expect(h.Allocate(kTarget, kSmall), target_code,
           "allocation dev0 device memory");
    if (h.cache->GetStats().allocations_in_use != h.live_allocations_held()) {
      h.Error("cache allocations_in_use disagrees with the leases out");
    }
  }
}

struct CellResult {
  bool exercised = false;
  std::vector<std::string> errors;
};

CellResult RunCellHere(const Scenario& scenario, Fault fault) {
  Harness h;
  auto inject = [&] {
    h.sim.FailNext(scenario.op,
                   FaultError(fault, InjectedCode(fault), kCellMarker),
                   scenario.op == SimOp::kDeviceCount ? -1 : kTarget);
  };
  if (scenario.inject_before_pools) inject();
  h.BuildPools(scenario);
  scenario.setup(h);
  if (!h.errors.empty()) return {false, h.errors};
  if (!scenario.inject_before_pools) {
    if (h.cell_faults() != 0) h.Error("setup consumed the fault");
    inject();
  }

  const absl::Status status = scenario.step(h);
  const Expectation want = scenario.expect(fault);
  const bool exit_path = IsExitDrain(scenario.path);

  CellResult result;
  result.exercised = h.cell_faults() == 1;
  if (!result.exercised) {
    h.Error(absl::StrCat("the path consumed ", h.cell_faults(),
                         " injected faults, want exactly 1"));
  }
  if (h.setup_faults() != h.setup_injections) {
    h.Error("a setup fault was not consumed");
  }
  if (want.code.has_value() && status.code() != *want.code) {
    h.Error(absl::StrCat("caller got ", status.ToString(), ", want ",
                         absl::StatusCodeToString(*want.code)));
  }
  // Only a sticky fault poisons; DeviceCount names no device.
  const bool want_poisoned =
      fault == Fault::kDevice && scenario.op != SimOp::kDeviceCount;
  if (h.health->is_poisoned(kTarget) != want_poisoned) {
    h.Error(absl::StrCat("device poisoned=", h.health->is_poisoned(kTarget),
                         ", want ", want_poisoned));
  }
  const int64_t target_calls = h.sim.calls_on_device(kTarget);

  if (exit_path) {
    // The exiting flag is set: pools refuse everything and leak on release.
    // The drain must have destroyed all but what the fault allows to leak.
    Leaks live = h.LiveHandles();
    if (!(live == want.leaks)) {
      h.Error(absl::StrCat("after the exit drain the runtime holds ",
                           live.ToString(), ", want ", want.leaks.ToString()));
    }
    for (int d = 0; d < kDevices; ++d) {
      if (!h.sim.is_poisoned(d)) h.sim.ResetDevice(d);
    }
  } else {
    if (scenario.op == SimOp::kDeviceCount) h.streams.reset();  // unusable
    CheckStillServing(h, want_poisoned);
    h.sim.CompleteAllWork();
    h.ReleaseHeld();
    h.cache.reset();
    h.events.reset();
    h.streams.reset();
    Leaks live = h.LiveHandles();
    if (!(live == want.leaks)) {
      h.Error(absl::StrCat("after destroying the pools the runtime holds ",
                           live.ToString(), ", want ", want.leaks.ToString()));
    }
    // The leaks the fault allowed are the test's to clean up.
    for (int d = 0; d < kDevices; ++d) {
      if (!h.sim.is_poisoned(d)) h.sim.ResetDevice(d);
    }
    if (absl::Status leaks = h.sim.CheckNoLeaks(); !leaks.ok()) {
      h.Error(absl::StrCat("CheckNoLeaks: ", leaks.ToString()));
    }
  }
  if (want_poisoned && h.sim.calls_on_device(kTarget) != target_calls) {
    h.Error("runtime called on the poisoned device after the step");
  }
  for (std::string& violation : h.backend.violations()) {
    h.Error(std::move(violation));
  }
  if (h.sim.graph_misuses() != 0) {
    h.Error(absl::StrCat("graph oracle: ",
                         absl::StrJoin(h.sim.graph_misuse_log(), "; ")));
  }
  if (h.sim.misuse_count() != 0) {
    h.Error(absl::StrCat("sim misuse: ",
                         absl::StrJoin(h.sim.misuse_messages(), "; ")));
  }
  // What a dead context holds is the test's to clean up too, after every
  // check: a user object leaked with it keeps gpupool's host-side token
  // until its destructor runs, which a reset does.
  for (int d = 0; d < kDevices; ++d) {
    if (h.sim.is_poisoned(d)) h.sim.ResetDevice(d);
  }
  if (!h.errors.empty()) result.exercised = false;
  result.errors = std::move(h.errors);
  return result;
}

// Exit-drain cells set the process-wide exiting flag: run them in a fork()ed
// child and bring the verdict back through a pipe.
CellResult RunCellInChild(const Scenario& scenario, Fault fault) {
  int fds[2];
  if (pipe(fds) != 0) return {false, {"pipe() failed"}};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    CellResult result = RunCellHere(scenario, fault);
    std::string out = absl::StrCat(result.exercised ? "1" : "0", "\n",
                                   absl::StrJoin(result.errors, "\n"));
    size_t written = 0;
    while (written < out.size()) {
      ssize_t n = write(fds[1], out.data() + written, out.size() - written);
      if (n <= 0) break;
      written += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  // The watchdog is ours: a child can hang inside fork() itself, before any
  // code of its own runs.
  std::string in;
  char buffer[4096];
  for (int waited_ms = 0;;) {
    pollfd ready{fds[0], POLLIN, 0};
    if (poll(&ready, 1, 100) == 0) {
      waited_ms += 100;
      if (waited_ms < 60000) continue;
      kill(pid, SIGKILL);
      break;
    }
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    in.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int wait_status = 0;
  waitpid(pid, &wait_status, 0);
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    return {false,
            {absl::StrCat("child died (wait status ", wait_status, ")")}};
  }
  std::vector<std::string> lines = absl::StrSplit(in, '\n');
  CellResult result;
  result.exercised = !lines.empty() && lines[0] == "1";
  for (size_t i = 1; i < lines.size(); ++i) {
    if (!lines[i].empty()) result.errors.push_back(lines[i]);
  }
  if (lines.empty()) result.errors.push_back("child reported nothing");
  return result;
}

TEST(FaultMatrixTest, EveryCellHoldsTheInvariants) {
  std::vector<Scenario> scenarios = Scenarios();
  for (Scenario& scenario : GraphIpcScenarios()) {
    scenarios.push_back(std::move(scenario));
  }
  for (Scenario& scenario : SegmentScenarios()) {
    scenarios.push_back(std::move(scenario));
  }
  for (Scenario& scenario : DeferredFenceScenarios()) {
    scenarios.push_back(std::move(scenario));
  }
  // A cell is (path, op, fault); several scenarios may drive one (path, op),
  // and the cell counts as exercised only when all of them passed.
  std::map<std::pair<Path, SimOp>, std::vector<const Scenario*>> keys;
  for (const Scenario& scenario : scenarios) {
    keys[{scenario.path, scenario.op}].push_back(&scenario);
  }
  int total = 0;
  int exercised = 0;
  std::printf(
      "fault matrix: path x op        R=kResource D=kDevice "
      "O=kOutOfMemory S=kShutdown C=kCaller\n");
  for (const auto& [key, drivers] : keys) {
    std::string row;
    for (Fault fault : kFaults) {
      ++total;
      bool cell_ok = true;
      for (const Scenario* scenario : drivers) {
        CellResult result = IsExitDrain(scenario->path)
                                ? RunCellInChild(*scenario, fault)
                                : RunCellHere(*scenario, fault);
        for (const std::string& error : result.errors) {
          ADD_FAILURE() << CellName(*scenario, fault) << ": " << error;
        }
        cell_ok = cell_ok && result.exercised;
      }
      exercised += cell_ok;
      absl::StrAppend(&row, cell_ok ? " ok" : " --");
    }
    std::printf("  %-28s %-18s%s\n", PathName(key.first).c_str(),
                std::string(SimOpName(key.second)).c_str(), row.c_str());
  }
  std::printf(
      "fault matrix coverage: %d/%d cells exercised (%zu path x op "
      "pairs x %zu fault classes, %zu scenarios)\n",
      exercised, total, keys.size(), std::size(kFaults), scenarios.size());
  std::fflush(stdout);
  EXPECT_EQ(exercised, total);
  EXPECT_EQ(total, static_cast<int>(keys.size() * std::size(kFaults)));
  // The matrix never shrinks unnoticed: a new path or primitive changes
  // this number on purpose.
  EXPECT_EQ(total, 440);
}

}  // namespace
}  // namespace gpupool::fault_matrix
