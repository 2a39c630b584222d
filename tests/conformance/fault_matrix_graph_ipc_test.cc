// The fault matrix's scenarios for graph pools and IPC (the harness and the
// invariants: tests/util/fault_matrix.h and fault_matrix_test.cc, which runs
// these cells with the others).
//
// Graph pools: every runtime call the capture-private pools add — the capture
// query of GraphPool::BeginCapture, of an Allocate while a scope is open and of
// a release with unregistered-capture detection; the ready events of
// GraphPool::Release on the replay streams, and of a lease returned after
// that release; the frees of pool blocks and held blocks when the cache
// ends; the user objects of GraphPool::RetainBy (create, retain by the
// graph, and the release of an object the graph refused). Besides the usual
// invariants, no fault may invalidate the user's capture, the simulator's
// graph oracle must count no misuse, and a pool whose RetainBy failed stays
// the handle's: Release gives its blocks back.
//
// IPC: StableBuffers::Export's GetIpcHandle, Import's OpenIpcHandle and the
// three ways a mapping is closed (last lease of a superseded version, Trim, the
// cache's destructor). The runtimes refuse to open a handle of the opening
// process, so the handles come from another process: ipc_cache_peer (the
// helper of stable_buffers_test.cc), started once per test binary in this
// test's IPC namespace and asked to export a fresh buffer per cell.

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/event_pool.h"
#include "gpupool/graph_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"
#include "tests/util/fault_matrix.h"
#include "tests/util/peer_process.h"

namespace gpupool::fault_matrix {
namespace {

// A runtime call of the cache whose failure the caller sees: a sticky error
// poisons the device (FailedPrecondition), anything else as the runtime said.
ExpectFn CacheCall() {
  return [](Fault f) {
    return Expectation{f == Fault::kDevice
                           ? absl::StatusCode::kFailedPrecondition
                           : InjectedCode(f),
                       {}};
  };
}

// --- Captures ----------------------------------------------------------------

void BeginCapture(Harness& h) {
  if (!h.sim.BeginCapture(h.stream(0), SimCaptureMode::kRelaxed).ok()) {
    h.Error("setup: BeginCapture");
  }
}

// Ends the capture on stream 0 and keeps its graph. Faults of the pools must
// never invalidate the user's capture (only a dead device ends it).
void EndCapture(Harness& h) {
  absl::StatusOr<SimGraph> graph = h.sim.EndCaptureToGraph(h.stream(0));
  if (graph.ok()) {
    h.graphs.push_back(*graph);
  } else if (!h.sim.is_poisoned(kTarget)) {
    h.Error(absl::StrCat("the capture was lost: ", graph.status().ToString()));
  }
}

// A stream, a graph pool and a scope registered before the capture begins.
void ScopeOnStream(Harness& h) {
  if (!h.AcquireStream(kTarget).ok()) h.Error("setup: acquire stream");
  absl::StatusOr<GraphPool> pool =
      gpupool::GraphPool::Create(*h.cache, kTarget);
  if (!pool.ok()) return h.Error("setup: GraphPool::Create");
  h.graph_pools.push_back(*std::move(pool));
  absl::StatusOr<CaptureScope> scope =
      (h.graph_pools[0]).BeginCapture(h.stream(0));
  if (!scope.ok()) return h.Error("setup: GraphPool::BeginCapture");
  h.scopes.push_back(*std::move(scope));
}

// Allocates on the capturing stream 0 and has the capture touch the block.
absl::Status AllocateCaptured(Harness& h) {
  absl::Status status =
      h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(0));
  if (status.ok()) h.sim.TouchMemory(h.stream(0), h.held_allocations[0].data());
  return status;
}

// A graph pool holding the one block a captured graph uses, the graph
// instantiated and launched once on stream 0. `release_lease`: the lease was
// released during the capture (the block is the pool's, free); else it is
// still held.
void ReplayedPool(Harness& h, bool release_lease) {
  ScopeOnStream(h);
  BeginCapture(h);
  if (!AllocateCaptured(h).ok()) h.Error("setup: allocate in the capture");
  if (release_lease) h.held_allocations[0].Release();
  EndCapture(h);
  h.scopes[0].End();
  if (h.graphs.empty()) return;
  if (!h.sim.InstantiateGraph(h.graphs[0]).ok() ||
      !h.sim.LaunchGraph(h.graphs[0], h.stream(0)).ok()) {
    h.Error("setup: replay");
  }
}

// A graph pool holding the one free block a captured graph used; the graph
// is not instantiated yet (RetainBy comes first).
void CapturedPool(Harness& h) {
  ScopeOnStream(h);
  BeginCapture(h);
  if (!AllocateCaptured(h).ok()) h.Error("setup: allocate in the capture");
  h.held_allocations[0].Release();
  EndCapture(h);
  h.scopes[0].End();
  if (h.graphs.empty()) h.Error("setup: no graph");
}

// RetainBy(graph) with a fault in one of its runtime calls; then, unless
// the device died, the pool is still the handle's to Release.
absl::Status RetainThenRelease(Harness& h) {
  if (h.graphs.empty()) return absl::InternalError("setup: no graph");
  const absl::Status status =
      h.graph_pools[0].RetainBy(NativeGraphOf(h.graphs[0]));
  if (status.ok()) h.Error("RetainBy succeeded through an injected fault");
  if (!h.health->is_poisoned(kTarget)) {
    if (absl::Status released = h.graph_pools[0].Release({h.stream(0)});
        !released.ok()) {
      h.Error(absl::StrCat("Release after a failed RetainBy: ",
                           released.ToString()));
    }
    if (h.cache->GetStats().graph_pools_awaiting_graphs != 0) {
      h.Error("a pool whose RetainBy failed awaits graphs");
    }
  }
  return status;
}

// A block used on stream 0 and released while stream 0 captures for nobody's
// scope (detect_unregistered_captures holds it).
void UsedBeforeCapture(Harness& h) {
  if (!h.AcquireStream(kTarget).ok()) h.Error("setup: acquire stream");
  if (!h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(0)).ok()) {
    h.Error("setup: allocate");
  }
  BeginCapture(h);
  h.sim.TouchMemory(h.stream(0), h.held_allocations[0].data());
}

// --- The peer exporter -------------------------------------------------------

// ipc_cache_peer in this process's IPC namespace; asked to quit (so that it
// removes its segments) when the test binary exits. When it quits it reports
// "leaked at destruction" for the versions whose importer's close was made
// to fail: such a mapping keeps its pin, so the exporter never frees memory
// that may still be mapped (it leaks it instead, by design).
class Peer {
 public:
  Peer() : process_(GPUPOOL_IPC_CACHE_PEER, {IpcNamespace()}) {}
  ~Peer() {
    if (!process_.started()) return;
    process_.Send("quit");
    process_.Wait();
  }

  // StableBuffers::Export(name, bytes) in the peer: a handle of another
  // process.
  absl::StatusOr<IpcHandle> Export(const std::string& name, size_t bytes) {
    if (!process_.started()) {
      return absl::InternalError("ipc_cache_peer did not start");
    }
    const std::string answer =
        process_.Ask(absl::StrCat("export ", name, " ", bytes, " 7"));
    if (answer.size() != 2 * IpcHandle::kSerializedBytes) {
      return absl::InternalError(absl::StrCat("peer answered '", answer, "'"));
    }
    return IpcHandle::Parse(absl::HexStringToBytes(answer));
  }

 private:
  testing::PeerProcess process_;
};

Peer& ThePeer() {
  static Peer peer;
  return peer;
}

// The peer's buffer `matrix-<cell>` of `bytes` (a new cell number gives a
// fresh buffer; the same one with more bytes, a newer version of it).
IpcHandle PeerHandle(Harness& h, int cell, size_t bytes) {
  absl::StatusOr<IpcHandle> handle =
      ThePeer().Export(absl::StrCat("matrix-", cell), bytes);
  if (!handle.ok()) {
    h.Error(absl::StrCat("setup: peer export: ", handle.status().ToString()));
    return {};
  }
  return *handle;
}

int NextCell() {
  static int cell = 0;
  return ++cell;
}

absl::Status Import(Harness& h, const IpcHandle& handle) {
  absl::StatusOr<ImportedBuffer> buffer =
      gpupool::StableBuffers(*h.cache).Import(handle, kTarget);
  if (!buffer.ok()) return buffer.status();
  if (buffer->local() || buffer->data() == nullptr) {
    h.Error("an import of another process's handle came back local or empty");
  }
  h.imports.push_back(*std::move(buffer));
  return absl::OkStatus();
}

// One mapping open, its lease released: Trim and the destructor close it.
void UnleasedMapping(Harness& h) {
  const IpcHandle handle = PeerHandle(h, NextCell(), kSmall);
  if (!Import(h, handle).ok()) h.Error("setup: import");
  for (ImportedBuffer& buffer : h.imports) buffer.Release();
}

}  // namespace

std::vector<Scenario> GraphIpcScenarios() {
  std::vector<Scenario> s;
  auto add = [&s](Path path, SimOp op, std::string what,
                  std::function<void(Harness&)> setup,
                  std::function<absl::Status(Harness&)> step,
                  ExpectFn expect) -> Scenario& {
    s.push_back(Scenario{path, op, std::move(what), std::move(setup),
                         std::move(step), std::move(expect)});
    return s.back();
  };
  auto close_cache = [](Harness& h) {
    h.cache.reset();
    return absl::OkStatus();
  };

  // --- Graph pools -----------------------------------------------------------
  add(
      Path::kGraphScopeOpen, SimOp::kCaptureStatus,
      "GraphPool::BeginCapture before the capture",
      [](Harness& h) {
        if (!h.AcquireStream(kTarget).ok()) h.Error("setup: acquire stream");
        absl::StatusOr<GraphPool> pool =
            gpupool::GraphPool::Create(*h.cache, kTarget);
        if (pool.ok()) h.graph_pools.push_back(*std::move(pool));
      },
      [](Harness& h) {
        absl::StatusOr<CaptureScope> scope =
            (h.graph_pools[0]).BeginCapture(h.stream(0));
        if (!scope.ok()) return scope.status();
        h.scopes.push_back(*std::move(scope));
        return absl::OkStatus();
      },
      CacheCall());
  // The capture query fails: whether the stream captures for the scope is
  // unknown, so the allocation fails rather than hand the graph memory of
  // the general cache.
  auto allocate_captured = [](Harness& h) {
    absl::Status status = AllocateCaptured(h);
    EndCapture(h);
    h.scopes[0].End();
    return status;
  };
  add(
      Path::kGraphAllocate, SimOp::kCaptureStatus,
      "Allocate on a capturing stream while a scope is open",
      [](Harness& h) {
        ScopeOnStream(h);
        BeginCapture(h);
      },
      allocate_captured, CacheCall());
  add(
      Path::kGraphAllocate, SimOp::kAllocate,
      "Allocate in a routed capture, pool empty",
      [](Harness& h) {
        ScopeOnStream(h);
        BeginCapture(h);
      },
      allocate_captured, CacheAllocation());
  // A failed query leaves the capture unknown: the block is held (freed with
  // the cache), nothing is recorded into the capture.
  add(
      Path::kGraphUnregisteredRelease, SimOp::kCaptureStatus,
      "Release while the stream captures for no scope", UsedBeforeCapture,
      [](Harness& h) {
        h.held_allocations[0].Release();
        EndCapture(h);
        return absl::OkStatus();
      },
      Silent())
      .cache_options.detect_unregistered_captures = true;

  auto release_pool = [](Harness& h) {
    return h.graph_pools[0].Release({h.stream(0)});
  };
  auto replayed_free = [](Harness& h) {
    ReplayedPool(h, /*release_lease=*/true);
  };
  // Release gives the block back fenced by a ready event on the replay
  // stream, as a release of a lease used there: the same reactions.
  add(Path::kGraphPoolRelease, SimOp::kEventCreate,
      "Release({replay stream}) takes a ready event from an empty EventPool",
      replayed_free, release_pool, AlwaysOk(/*shutdown=*/kOneAllocation));
  add(Path::kGraphPoolRelease, SimOp::kEventRecord,
      "Release({replay stream}) records the ready event", replayed_free,
      release_pool, AlwaysOk(/*shutdown=*/kOneAllocation));
  add(
      Path::kGraphPoolRelease, SimOp::kStreamSynchronize,
      "Release({replay stream}) synchronizes when the record failed",
      [=](Harness& h) {
        replayed_free(h);
        h.InjectSetupFault(SimOp::kEventRecord, Fault::kResource);
      },
      release_pool,
      // The replay may still write the block: never reuse or free it.
      AlwaysOk(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(Path::kGraphPoolRelease, SimOp::kCaptureStatus,
      "Release({replay stream}) asks whether the replay stream captures",
      replayed_free, release_pool, AlwaysOk())
      .cache_options.detect_unregistered_captures = true;

  // A lease still out at Release follows when it is returned.
  auto late_return = [](Harness& h) {
    h.held_allocations[0].Release();
    return absl::OkStatus();
  };
  auto replayed_leased = [](Harness& h) {
    ReplayedPool(h, /*release_lease=*/false);
    if (!h.graph_pools[0].Release({h.stream(0)}).ok()) {
      h.Error("setup: Release");
    }
  };
  add(Path::kGraphLateReturn, SimOp::kEventCreate,
      "a lease returned after Release takes a ready event", replayed_leased,
      late_return, Silent(/*shutdown=*/kOneAllocation));
  add(Path::kGraphLateReturn, SimOp::kEventRecord,
      "a lease returned after Release records the ready event", replayed_leased,
      late_return, Silent(/*shutdown=*/kOneAllocation));

  add(
      Path::kGraphFree, SimOp::kFree,
      "~AllocationCache with a graph pool's free block",
      [=](Harness& h) {
        replayed_free(h);
        h.sim.CompleteAllWork();
      },
      close_cache,
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation));
  add(
      Path::kGraphFree, SimOp::kFree,
      "~AllocationCache with a block held for an unregistered capture",
      [](Harness& h) {
        UsedBeforeCapture(h);
        h.held_allocations[0].Release();
        EndCapture(h);
      },
      close_cache,
      Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation))
      .cache_options.detect_unregistered_captures = true;

  // --- Graph-owned pools (GraphPool::RetainBy) -------------------------------
  add(Path::kGraphRetain, SimOp::kUserObjectCreate,
      "RetainBy creates the user object", CapturedPool, RetainThenRelease,
      CacheCall());
  // The graph refused the reference: RetainBy releases the object (its
  // destructor runs) unless the device died.
  add(Path::kGraphRetain, SimOp::kUserObjectRetain,
      "RetainBy moves the reference into the graph", CapturedPool,
      RetainThenRelease, CacheCall());
  // The retain failed (a setup fault) and so does the release of the object
  // the graph refused: the object keeps its reference (leaked, never
  // destroyed twice); a sticky error there still poisons.
  add(
      Path::kGraphRetain, SimOp::kUserObjectRelease,
      "RetainBy releases the object the graph refused",
      [](Harness& h) {
        CapturedPool(h);
        h.InjectSetupFault(SimOp::kUserObjectRetain, Fault::kResource);
      },
      RetainThenRelease,
      [](Fault f) {
        return Expectation{f == Fault::kDevice
                               ? absl::StatusCode::kFailedPrecondition
                               : InjectedCode(Fault::kResource),
                           LeaksFor(f, kOneUserObject, kOneUserObject)};
      });

  // --- IPC -------------------------------------------------------------------
  add(
      Path::kIpcExport, SimOp::kIpcGetHandle,
      "StableBuffers::Export, first call", [](Harness&) {},
      [](Harness& h) {
        return gpupool::StableBuffers(*h.cache)
            .Export("matrix", kTarget, kSmall)
            .status();
      },
      CacheCall());
  add(
      Path::kIpcImport, SimOp::kIpcOpenHandle,
      "Import of another process's handle",
      [](Harness& h) {
        h.peer_handles.push_back(PeerHandle(h, NextCell(), kSmall));
      },
      [](Harness& h) { return Import(h, h.peer_handles[0]); }, CacheCall());
  // A close that failed leaves the mapping open (and the exporter's version
  // pinned): a leak, never memory freed under a mapping.
  add(
      Path::kIpcClose, SimOp::kIpcCloseHandle,
      "the last lease of a superseded version goes",
      [](Harness& h) {
        const int cell = NextCell();
        if (!Import(h, PeerHandle(h, cell, kSmall)).ok()) h.Error("setup");
        if (!Import(h, PeerHandle(h, cell, kLarge)).ok()) h.Error("setup");
      },
      [](Harness& h) {
        h.imports[0].Release();
        return absl::OkStatus();
      },
      Silent(/*shutdown=*/kOneMapping, /*other=*/kOneMapping));
  add(
      Path::kIpcClose, SimOp::kIpcCloseHandle, "Trim with an unleased mapping",
      UnleasedMapping, [](Harness& h) { return h.cache->Trim(kTarget); },
      AlwaysOk(/*shutdown=*/kOneMapping, /*other=*/kOneMapping));
  add(Path::kIpcClose, SimOp::kIpcCloseHandle,
      "~AllocationCache with an unleased mapping", UnleasedMapping, close_cache,
      Silent(/*shutdown=*/kOneMapping, /*other=*/kOneMapping));
  return s;
}

}  // namespace gpupool::fault_matrix
