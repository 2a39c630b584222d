// The fault matrix's scenarios for blocks parked with their fence deferred
// (AllocationCacheOptions::defer_same_stream_fences; the harness and the
// invariants: tests/util/fault_matrix.h and fault_matrix_test.cc, which runs
// these cells with the others).
//
// A kSmall block leased on stream 0 and released is parked: no runtime call.
// Its fence is made when something else wants it — FenceStream(stream 0), or
// an Allocate on stream 1 that no parked block serves — in this order: the
// stream's capture status (CaptureStatus), the block's first ready event
// from the EventPool (EventCreate), its record on stream 0 (EventRecord);
// when the record fails, the event is discarded (EventDestroy) and the
// stream synchronized (StreamSynchronize). A fence that cannot be made
// leaves the block's last use unobservable: it is leaked (its segment with
// it), never reused or freed. A sticky fault poisons the device and the
// block is dropped without another call.
//
// Each scenario also runs once without a fault (DeferredFencePathsTest
// below): its step must call the cell's op and leave the block cached and
// fenced (FenceStream), or handed to stream 1 after the fence (Allocate).

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/util/fault_matrix.h"
#include "tests/util/fault_matrix_proof.h"

namespace gpupool::fault_matrix {
namespace {

// Streams 0 and 1; a kSmall block used on stream 0 and released: parked.
void ParkedOnStream0(Harness& h) {
  for (int i = 0; i < 2; ++i) {
    if (!h.AcquireStream(kTarget).ok()) h.Error("setup: acquire stream");
  }
  if (!h.errors.empty()) return;
  if (!h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(0)).ok()) {
    h.Error("setup: allocate");
    return;
  }
  const int64_t calls = h.sim.total_calls();
  h.held_allocations[0].Release();
  if (h.sim.total_calls() != calls) h.Error("setup: the release made a call");
}

// ParkedOnStream0, and the fence's record will fail (its fallback runs).
void RecordWillFail(Harness& h) {
  ParkedOnStream0(h);
  h.InjectSetupFault(SimOp::kEventRecord, Fault::kResource);
}

// FenceStream: the block is cached, fenced, no longer parked (a fault-free
// run); the one block is still the cache's only one.
ProofFn Fenced() {
  return [](Harness& h, const AllocationCacheStats& before, int64_t) {
    const AllocationCacheStats after = h.cache->GetStats(kTarget);
    Want(h, after.blocks_cached, 1, "blocks cached");
    Want(h, after.runtime_allocations - before.runtime_allocations, 0,
         "runtime allocations");
    // Fenced: a second FenceStream finds nothing to do.
    const int64_t calls = h.sim.total_calls();
    if (!h.cache->FenceStream(kTarget, h.stream(0)).ok()) {
      h.Error("second FenceStream failed");
    }
    Want(h, h.sim.total_calls() - calls, 0, "calls of a second FenceStream");
  };
}

// Allocate on stream 1: the fenced block (its fence complete: the stream
// had no work) serves the request; no new segment.
ProofFn HandedOver() {
  return [](Harness& h, const AllocationCacheStats& before, int64_t) {
    const AllocationCacheStats after = h.cache->GetStats(kTarget);
    Want(h, after.runtime_allocations - before.runtime_allocations, 0,
         "runtime allocations");
    Want(h, after.hits - before.hits, 1, "hits");
    Want(h, after.blocks_cached, 0, "blocks cached");
  };
}

std::vector<ProvenCase> DeferredCases() {
  std::vector<ProvenCase> cases;
  const struct {
    SimOp op;
    const char* what;
    std::function<void(Harness&)> setup;
    // Leaks when the fault is kShutdown / any other non-sticky one.
    Leaks shutdown;
    Leaks other;
  } fences[] = {
      // Capture unknown: the block is leaked (no event recorded into what
      // may be a capture).
      {SimOp::kCaptureStatus, "checks the stream's capture status",
       ParkedOnStream0, kOneAllocation, kOneAllocation},
      // No event: the stream is synchronized instead (shutdown: leaked).
      {SimOp::kEventCreate,
       "takes its first ready event",
       ParkedOnStream0,
       kOneAllocation,
       {}},
      {SimOp::kEventRecord,
       "records its ready event",
       ParkedOnStream0,
       kOneAllocation,
       {}},
      {SimOp::kEventDestroy,
       "discards the event whose record failed",
       RecordWillFail,
       {},
       {}},
      // The block's work may still touch it: leaked.
      {SimOp::kStreamSynchronize, "synchronizes when the record failed",
       RecordWillFail, kOneAllocation, kOneAllocation},
  };
  for (const auto& f : fences) {
    cases.push_back(ProvenCase{
        Scenario{
            Path::kCacheDeferredFence, f.op,
            absl::StrCat("FenceStream(stream 0) of a parked block ", f.what),
            f.setup,
            [](Harness& h) {
              return h.cache->FenceStream(kTarget, h.stream(0));
            },
            AlwaysOk(f.shutdown, f.other)},
        Fenced()});
    // The request gets a block anyway: the fenced one, or a new segment
    // when it was leaked (a sticky fault: FailedPrecondition).
    cases.push_back(ProvenCase{
        Scenario{Path::kCacheDeferredFence, f.op,
                 absl::StrCat("Allocate on stream 1 fences a block parked on "
                              "stream 0, which ",
                              f.what),
                 f.setup,
                 [](Harness& h) {
                   return h.Allocate(kTarget, kSmall, MemoryKind::kDevice,
                                     h.stream(1));
                 },
                 Recovers(f.shutdown, f.other)},
        HandedOver()});
  }
  for (ProvenCase& c : cases) {
    c.scenario.cache_options.defer_same_stream_fences = true;
  }
  return cases;
}

TEST(DeferredFencePathsTest, EveryScenarioCallsItsOpOnItsPath) {
  for (const ProvenCase& c : DeferredCases()) {
    for (const std::string& error : RunWithoutFault(c)) {
      ADD_FAILURE() << c.scenario.what << " (" << SimOpName(c.scenario.op)
                    << "): " << error;
    }
  }
}

}  // namespace

std::vector<Scenario> DeferredFenceScenarios() {
  std::vector<Scenario> scenarios;
  for (ProvenCase& c : DeferredCases()) {
    scenarios.push_back(std::move(c.scenario));
  }
  return scenarios;
}

}  // namespace gpupool::fault_matrix
