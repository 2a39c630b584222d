// The fault matrix's scenarios for the cache's segments (the harness and the
// invariants: tests/util/fault_matrix.h and fault_matrix_test.cc, which runs
// these cells with the others; the layout: docs/allocation_cache.md, "How
// the cache lays out memory").
//
// Split: an Allocate served by cutting a smaller lease from a larger free
// block released on another stream, so the block's ready event is checked
// first (EventQuery; StreamWaitEvent under kWaitOnStream) — a whole segment,
// and the free half of a segment whose other half is still leased.
// Merge: a Release whose block merges with a free neighbour still pending on
// another stream (the release's own ready event: EventCreate, EventRecord,
// and, when the record fails, the discard and the stream synchronize), the
// released block being the lower or the upper half; then the reuse of the
// merged block, which checks both halves' fences.
// Give-back: an Allocate miss with give-back on, which first frees the wholly
// free segments too small for the request (Free, after the EventQuery and,
// with work pending, the EventSynchronize of their fences) and then
// allocates.
//
// Each scenario also runs once without a fault (SegmentPathsTest below): its
// step must call the cell's op and take the path it is named for (no runtime
// allocation for a split, one block left for a merge, the free before the
// allocation for a give-back).

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

// The two halves of one kLarge segment: a size class each, so that each is
// leased exactly (no further split).
constexpr size_t kLow = kSmall;
constexpr size_t kHigh = kLarge - kSmall;  // 28 KiB, a size class
// The library's default threshold: low enough that the give-back scenarios'
// cached segments (2 * kMedium, or the merged kLarge one) exceed it for their
// request (kLarge, 2 * kLarge).
constexpr int kGiveBackPercent = 25;

uintptr_t Address(const PooledAllocation& allocation) {
  return reinterpret_cast<uintptr_t>(allocation.data());
}

void ThreeStreams(Harness& h) {
  for (int i = 0; i < 3; ++i) {
    if (!h.AcquireStream(kTarget).ok()) h.Error("setup: acquire stream");
  }
}

void AllocateOrError(Harness& h, size_t bytes, NativeStream stream) {
  if (!h.Allocate(kTarget, bytes, MemoryKind::kDevice, stream).ok()) {
    h.Error(absl::StrCat("setup: allocate ", bytes));
  }
}

// Streams 0-2; one kLarge segment leased in two halves: held_allocations[1]
// (kLow bytes, used on stream 0) and [2] (kHigh bytes, on stream 1), side by
// side. held_allocations[0] is the segment's first, released, lease.
void SegmentInTwoLeases(Harness& h) {
  ThreeStreams(h);
  AllocateOrError(h, kLarge, nullptr);
  if (!h.errors.empty()) return;
  const uintptr_t base = Address(h.held_allocations[0]);
  h.held_allocations[0].Release();  // a whole free segment, ready
  AllocateOrError(h, kLow, h.stream(0));
  AllocateOrError(h, kHigh, h.stream(1));
  if (!h.errors.empty()) return;
  if (Address(h.held_allocations[1]) != base ||
      Address(h.held_allocations[2]) != base + kLow) {
    h.Error("setup: the two leases are not the halves of one segment");
  }
}

// Which half a merge scenario releases in its step; the other is released
// in the setup (pending on its own stream).
enum class Half { kLow, kHigh };
int Index(Half half) { return half == Half::kLow ? 1 : 2; }
Half Other(Half half) { return half == Half::kLow ? Half::kHigh : Half::kLow; }
const char* Name(Half half) { return half == Half::kLow ? "lower" : "upper"; }

// SegmentInTwoLeases, then the half other than `released` comes back: it
// stays a free block pending on its stream, beside the leased `released`.
void NeighbourPending(Harness& h, Half released) {
  SegmentInTwoLeases(h);
  if (!h.errors.empty()) return;
  h.held_allocations[Index(Other(released))].Release();
}

// Both halves released (`last` second, merging with the other): one free
// kLarge block whose fence is two events on streams 0 and 1.
void MergedSegment(Harness& h, Half last) {
  NeighbourPending(h, last);
  if (!h.errors.empty()) return;
  h.held_allocations[Index(last)].Release();
}

// Two kMedium segments, cached: used on stream 0 when `on_stream` (each
// with a ready event, pending until queried), with `work` left to do there.
void TwoCachedSegments(Harness& h, bool on_stream,
                       absl::Duration work = absl::ZeroDuration()) {
  NativeStream stream = nullptr;
  if (on_stream) {
    if (!h.AcquireStream(kTarget).ok()) h.Error("setup: acquire stream");
    stream = h.stream(0);
  }
  for (int i = 0; i < 2; ++i) AllocateOrError(h, kMedium, stream);
  if (work > absl::ZeroDuration()) h.sim.SubmitWork(stream, work);
  for (PooledAllocation& a : h.held_allocations) a.Release();
}

// Served from the cache by a split: no runtime allocation, and the rest of
// the block (`rest` bytes) is cached.
ProofFn Split(size_t rest) {
  return [rest](Harness& h, const AllocationCacheStats& before, int64_t) {
    const AllocationCacheStats after = h.cache->GetStats(kTarget);
    Want(h, after.misses - before.misses, 0, "runtime allocations (misses)");
    Want(h, after.hits - before.hits, 1, "hits");
    Want(h, after.bytes_cached, static_cast<int64_t>(rest), "bytes cached");
  };
}

// The release merged its block with the neighbour: one free block, the
// whole segment.
ProofFn Merged() {
  return [](Harness& h, const AllocationCacheStats&, int64_t) {
    const AllocationCacheStats after = h.cache->GetStats(kTarget);
    Want(h, after.blocks_cached, 1, "blocks cached");
    Want(h, after.bytes_cached, kLarge, "bytes cached");
  };
}

// The merged block served the request whole after one call of the op per
// half's fence.
ProofFn ReusedMerged() {
  return [](Harness& h, const AllocationCacheStats& before, int64_t calls) {
    const AllocationCacheStats after = h.cache->GetStats(kTarget);
    Want(h, after.misses - before.misses, 0, "runtime allocations (misses)");
    Want(h, after.hits - before.hits, 1, "hits");
    Want(h, after.blocks_cached, 0, "blocks cached");
    Want(h, calls, 2, "calls of the op (one per fence)");
  };
}

// The miss freed the `segments` cached segments before allocating: with the
// device's memory limited (GiveBackRoom) an allocation first would have met
// out-of-memory and run the OOM chain.
ProofFn GaveBack(int64_t segments) {
  return [segments](Harness& h, const AllocationCacheStats& before, int64_t) {
    const AllocationCacheStats after = h.cache->GetStats(kTarget);
    Want(h, after.misses - before.misses, 1, "misses");
    Want(h, after.runtime_frees - before.runtime_frees, segments,
         "runtime frees");
    Want(h, after.oom_retries - before.oom_retries, 0, "OOM retries");
    Want(h, after.bytes_cached, 0, "bytes cached");
  };
}

// Room on the device for the request alone once the cached segments are
// freed.
std::function<void(Harness&)> GiveBackRoom(size_t request) {
  return [request](Harness& h) {
    h.sim.SetMemoryLimit(kTarget, h.sim.bytes_allocated(kTarget) + request - 1);
  };
}

std::vector<ProvenCase> ProvenCases() {
  std::vector<ProvenCase> s;
  auto add = [&s](Path path, SimOp op, std::string what,
                  std::function<void(Harness&)> setup,
                  std::function<absl::Status(Harness&)> step, ExpectFn expect,
                  ProofFn proof) -> ProvenCase& {
    s.push_back(ProvenCase{Scenario{path, op, std::move(what), std::move(setup),
                                    std::move(step), std::move(expect)},
                           std::move(proof)});
    return s.back();
  };

  // --- Split -----------------------------------------------------------------
  // A kLarge block released on stream 1 (a whole segment, or the upper half
  // of one whose lower half is still leased) serves kSmall on stream 2.
  auto whole_on_stream1 = [](Harness& h) {
    ThreeStreams(h);
    AllocateOrError(h, kLarge, h.stream(1));
    for (PooledAllocation& a : h.held_allocations) a.Release();
  };
  auto half_on_stream1 = [](Harness& h) { NeighbourPending(h, Half::kLow); };
  auto small_on_stream2 = [](Harness& h) {
    return h.Allocate(kTarget, kSmall, MemoryKind::kDevice, h.stream(2));
  };
  const struct {
    const char* what;
    std::function<void(Harness&)> setup;
    size_t rest;
  } split_blocks[] = {
      {"a whole segment", whole_on_stream1, kLarge - kSmall},
      {"the free half of a half-leased segment", half_on_stream1,
       kHigh - kSmall},
  };
  for (const auto& block : split_blocks) {
    // A failed query leaves the block's last use unobservable: it is
    // leaked (its whole segment with it) and the request gets a new one.
    add(Path::kCacheSplit, SimOp::kEventQuery,
        absl::StrCat("Allocate on stream 2 checks ", block.what,
                     " released on stream 1, then splits it"),
        block.setup, small_on_stream2,
        Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation),
        Split(block.rest));
    // Any fault but a sticky or shutdown one falls back to the query.
    add(Path::kCacheSplit, SimOp::kStreamWaitEvent,
        absl::StrCat("Allocate on stream 2 waits on ", block.what,
                     " released on stream 1, then splits it"),
        block.setup, small_on_stream2, Recovers(/*shutdown=*/kOneAllocation),
        Split(block.rest))
        .scenario.cache_options.cross_stream = CrossStreamPolicy::kWaitOnStream;
  }

  // --- Merge -----------------------------------------------------------------
  for (Half released : {Half::kLow, Half::kHigh}) {
    auto neighbour_pending = [released](Harness& h) {
      NeighbourPending(h, released);
    };
    auto release = [released](Harness& h) {
      h.held_allocations[Index(released)].Release();
      return absl::OkStatus();
    };
    const std::string which = absl::StrCat(
        "Release of the ", Name(released), " half of a segment, its ",
        Name(Other(released)), " half free and pending on another stream");
    // The release's own event fails: the stream is synchronized instead and
    // the block merges with no event of its own (kShutdown: the block is
    // leaked, and the segment with it).
    add(Path::kCacheMerge, SimOp::kEventCreate,
        absl::StrCat(which, ": its ready event from an empty EventPool"),
        neighbour_pending, release, Silent(/*shutdown=*/kOneAllocation),
        Merged());
    add(Path::kCacheMerge, SimOp::kEventRecord,
        absl::StrCat(which, ": records its ready event"), neighbour_pending,
        release, Silent(/*shutdown=*/kOneAllocation), Merged());
    auto record_fails = [released](Harness& h) {
      NeighbourPending(h, released);
      h.InjectSetupFault(SimOp::kEventRecord, Fault::kResource);
    };
    // The block's work may still touch it: the block is never merged, reused
    // or freed, so its segment is leaked.
    add(Path::kCacheMerge, SimOp::kStreamSynchronize,
        absl::StrCat(which, ": synchronizes when the record failed"),
        record_fails, release,
        Silent(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation),
        Merged());
    add(Path::kCacheMerge, SimOp::kEventDestroy,
        absl::StrCat(which, ": discards the event whose record failed"),
        record_fails, release, Silent(), Merged());
  }

  // --- The merged block reused -----------------------------------------------
  // The fault meets the first fence checked: the lower half's, recorded by
  // the merging release (the lower half released last) or before it.
  for (Half last : {Half::kLow, Half::kHigh}) {
    auto merged = [last](Harness& h) { MergedSegment(h, last); };
    auto large_on_stream2 = [](Harness& h) {
      return h.Allocate(kTarget, kLarge, MemoryKind::kDevice, h.stream(2));
    };
    const std::string which =
        absl::StrCat("a segment merged by the release of its ", Name(last),
                     " half (2 fences)");
    add(Path::kCacheMergedReuse, SimOp::kEventQuery,
        absl::StrCat("Allocate on stream 2 checks ", which), merged,
        large_on_stream2,
        Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation),
        ReusedMerged());
    add(Path::kCacheMergedReuse, SimOp::kStreamWaitEvent,
        absl::StrCat("Allocate on stream 2 waits on ", which), merged,
        large_on_stream2, Recovers(/*shutdown=*/kOneAllocation), ReusedMerged())
        .scenario.cache_options.cross_stream = CrossStreamPolicy::kWaitOnStream;
  }

  // --- Give-back before growth -----------------------------------------------
  // A miss of kLarge with two kMedium segments cached, or of 2 * kLarge with
  // the merged kLarge one: the cached segments are freed first. A failed
  // free (or a fence that cannot be proven complete) leaks the segment and
  // the allocation goes on; after a sticky fault on the first of two
  // segments the second gets no call.
  auto large = [](Harness& h) { return h.Allocate(kTarget, kLarge); };
  auto twice_large = [](Harness& h) { return h.Allocate(kTarget, 2 * kLarge); };
  auto merged = [](Harness& h) { MergedSegment(h, Half::kLow); };
  auto idle = [](Harness& h) { TwoCachedSegments(h, /*on_stream=*/false); };
  auto used = [](Harness& h) { TwoCachedSegments(h, /*on_stream=*/true); };
  const ExpectFn leaks_segment =
      Recovers(/*shutdown=*/kOneAllocation, /*other=*/kOneAllocation);
  const struct {
    SimOp op;
    std::string what;
    std::function<void(Harness&)> setup;
    std::function<absl::Status(Harness&)> step;
    size_t request;
    int64_t segments;  // freed by the give-back
    ExpectFn expect;
  } give_backs[] = {
      {SimOp::kFree, "Allocate(32 KiB) frees 2 idle cached 16 KiB segments",
       idle, large, kLarge, 2, leaks_segment},
      {SimOp::kFree,
       "Allocate(64 KiB) frees a cached segment merged from 2 halves", merged,
       twice_large, 2 * kLarge, 1, leaks_segment},
      {SimOp::kEventQuery,
       "Allocate(32 KiB) checks 2 cached 16 KiB segments released on a "
       "stream, then frees them",
       used, large, kLarge, 2, leaks_segment},
      {SimOp::kEventQuery,
       "Allocate(64 KiB) checks both fences of a merged cached segment, then "
       "frees it",
       merged, twice_large, 2 * kLarge, 1, leaks_segment},
      {SimOp::kEventSynchronize,
       "Allocate(32 KiB) waits for 2 cached 16 KiB segments with pending "
       "work, then frees them",
       [](Harness& h) { TwoCachedSegments(h, /*on_stream=*/true, kShortWork); },
       large, kLarge, 2, leaks_segment},
      // The allocation after the give-back: as any miss's (the OOM chain
      // finds nothing left to free and retries).
      {SimOp::kAllocate,
       "Allocate(32 KiB) allocates after freeing 2 cached 16 KiB segments",
       idle, large, kLarge, 2, CacheAllocation()},
  };
  for (const auto& g : give_backs) {
    ProvenCase& c = add(Path::kCacheGiveBack, g.op, g.what, g.setup, g.step,
                        g.expect, GaveBack(g.segments));
    c.scenario.cache_options.give_back_above_percent = kGiveBackPercent;
    c.prepare = GiveBackRoom(g.request);
  }
  return s;
}

TEST(SegmentPathsTest, EveryScenarioCallsItsOpOnItsPath) {
  for (const ProvenCase& c : ProvenCases()) {
    for (const std::string& error : RunWithoutFault(c)) {
      ADD_FAILURE() << c.scenario.what << " (" << SimOpName(c.scenario.op)
                    << "): " << error;
    }
  }
}

}  // namespace

std::vector<Scenario> SegmentScenarios() {
  std::vector<Scenario> scenarios;
  for (ProvenCase& c : ProvenCases()) {
    scenarios.push_back(std::move(c.scenario));
  }
  return scenarios;
}

}  // namespace gpupool::fault_matrix
