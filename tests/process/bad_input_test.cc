// Bad input at every public entry point (issue 5): out-of-range devices,
// null, foreign and stale handles, zero and huge sizes and counts, double
// release, release after the pool is gone, moved-from and empty leases. Each
// case asserts the documented outcome — a specific status code, or a
// documented no-op — and, through StrictSimOptions, that nothing reached the
// runtime as misuse. The suite also runs under ASan + UBSan (`asan` preset),
// which turns any undefined behaviour on these paths into a failure.
// docs/reliability.md lists the outcomes.

#include <climits>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/pools.h"
#include "gpupool/prewarm.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;
using ::testing::HasSubstr;

constexpr int kDevices = 2;
const int kBadDevices[] = {-1, kDevices, INT_MIN, INT_MAX};

class BadInputTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(sim_.misuse_count(), 0); }
  SimBackend sim_{StrictSimOptions(kDevices)};
};

// --- StreamPool / EventPool
// ----------------------------------------------------

TEST_F(BadInputTest, OutOfRangeDevicesAreInvalidArgumentWithoutRuntimeCalls) {
  StreamPool streams(sim_);
  EventPool events(sim_);
  const int64_t calls = sim_.total_calls();
  for (int device : kBadDevices) {
    SCOPED_TRACE(device);
    EXPECT_THAT(streams.Acquire(device),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("out of range")));
    EXPECT_THAT(events.Acquire(device),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(streams.Acquire(device, {}, absl::ZeroDuration()),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(streams.Prewarm(device, {}, 1),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(events.Prewarm(device, {}, 1),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(streams.PrewarmAsync(device, {}, 1).Wait(),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(events.PrewarmAsync(device, {}, 1).Wait(),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(streams.RecoverDevice(device),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(events.RecoverDevice(device),
                StatusIs(absl::StatusCode::kInvalidArgument));
    // Documented no-ops / empty answers.
    streams.Trim(device);
    events.Trim(device);
    EXPECT_EQ(streams.GetStats(device, {}).acquired, 0);
    EXPECT_EQ(events.GetStats(device, {}).acquired, 0);
  }
  EXPECT_EQ(sim_.total_calls(), calls);
}

TEST_F(BadInputTest, TrimOfAnOutOfRangeDeviceLeavesOtherDevicesAlone) {
  StreamPool streams(sim_);
  EventPool events(sim_);
  ASSERT_THAT(streams.Prewarm(0, {}, 2), IsOk());
  ASSERT_THAT(events.Prewarm(1, {}, 2), IsOk());
  for (int device : kBadDevices) {
    streams.Trim(device);
    events.Trim(device);
  }
  EXPECT_EQ(streams.GetStats().idle, 2);
  EXPECT_EQ(events.GetStats().idle, 2);
}

TEST_F(BadInputTest, ConfigsTheRuntimeRejectsReachTheCallerAndChangeNothing) {
  StreamPool streams(sim_);
  EventPool events(sim_);
  // The instant profile accepts priorities [-5, 0] and no CU masks.
  EXPECT_THAT(
      streams.Acquire(0, {.priority = 7}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("priority")));
  EXPECT_THAT(streams.Acquire(0, {.priority = INT_MIN}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(streams.Acquire(0, {.cu_mask = {0xffu}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(streams.Prewarm(0, {.priority = 7}, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      events.Acquire(0, {.disable_timing = false, .interprocess = true}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("interprocess")));
  EXPECT_FALSE(sim_.is_poisoned(0));
  EXPECT_FALSE(streams.health()->is_poisoned(0));
  EXPECT_EQ(streams.GetStats().in_use, 0);
  EXPECT_EQ(streams.GetStats().created, 0);
  EXPECT_EQ(sim_.live_streams(0), 0);
  EXPECT_EQ(sim_.live_events(0), 0);
  EXPECT_THAT(streams.Acquire(0), IsOk());  // the pool still works
}

TEST_F(BadInputTest, PrewarmCountsAreCheckedAndBounded) {
  StreamPoolOptions options;
  options.max_idle_per_key = 5;
  StreamPool streams(sim_, options);
  EXPECT_THAT(streams.Prewarm(0, {}, -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("count")));
  EXPECT_THAT(streams.Prewarm(0, {}, INT_MIN),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(streams.PrewarmAsync(0, {}, -1).Wait(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(streams.Prewarm(0, {}, 0), IsOk());
  EXPECT_EQ(sim_.streams_created(), 0);
  // A huge count stops at max_idle_per_key, it never loops "forever".
  EXPECT_THAT(streams.Prewarm(0, {}, INT_MAX), IsOk());
  EXPECT_EQ(sim_.streams_created(), 5);
  EXPECT_EQ(streams.GetStats().idle, 5);
}

TEST_F(BadInputTest, RecoverOfAHealthyDeviceIsFailedPrecondition) {
  StreamPool streams(sim_);
  EXPECT_THAT(streams.RecoverDevice(0),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not poisoned")));
}

TEST_F(BadInputTest, DoubleReleaseDiscardAfterReleaseAndEmptyLeasesAreNoOps) {
  StreamPool streams(sim_);
  EventPool events(sim_);
  absl::StatusOr<PooledStream> stream = streams.Acquire(0);
  absl::StatusOr<PooledEvent> event = events.Acquire(0);
  ASSERT_THAT(stream, IsOk());
  ASSERT_THAT(event, IsOk());
  stream->Release();
  const int64_t calls = sim_.total_calls();
  stream->Release();
  stream->Discard();
  EXPECT_FALSE(*stream);
  EXPECT_EQ(stream->get(), nullptr);
  EXPECT_EQ(stream->device(), -1);
  EXPECT_EQ(stream->lease_id(), 0u);
  EXPECT_EQ(stream->config(), StreamConfig{});
  EXPECT_EQ(sim_.total_calls(), calls);
  event->Discard();
  event->Discard();
  event->Release();
  EXPECT_EQ(event->get(), nullptr);
  EXPECT_EQ(streams.GetStats().idle, 1);
  EXPECT_EQ(streams.GetStats().in_use, 0);
  EXPECT_EQ(events.GetStats().destroyed, 1);

  PooledStream empty;
  PooledEvent empty_event;
  empty.Release();
  empty.Discard();
  empty_event.Release();
  EXPECT_EQ(empty.device(), -1);
  EXPECT_EQ(empty_event.config(), EventConfig{});
}

TEST_F(BadInputTest, MovedFromLeasesAreEmptyAndSelfMoveKeepsTheLease) {
  StreamPool streams(sim_);
  absl::StatusOr<PooledStream> acquired = streams.Acquire(0);
  ASSERT_THAT(acquired, IsOk());
  PooledStream lease = *std::move(acquired);
  const NativeStream handle = lease.get();
  PooledStream moved = std::move(lease);
  EXPECT_FALSE(lease);  // NOLINT(bugprone-use-after-move): the point
  EXPECT_EQ(lease.get(), nullptr);
  lease.Release();
  lease.Discard();
  EXPECT_EQ(moved.get(), handle);
  EXPECT_EQ(streams.GetStats().in_use, 1);
  // Self-move-assignment must not return (or lose) the stream.
  PooledStream& alias = moved;
  moved = std::move(alias);
  EXPECT_EQ(moved.get(), handle);
  EXPECT_EQ(streams.GetStats().in_use, 1);
  // Assigning over a live lease returns the old one first.
  absl::StatusOr<PooledStream> other = streams.Acquire(0);
  ASSERT_THAT(other, IsOk());
  moved = *std::move(other);
  EXPECT_EQ(streams.GetStats().in_use, 1);
  EXPECT_EQ(streams.GetStats().idle, 1);
}

TEST_F(BadInputTest, ReleaseAfterThePoolIsGoneLeaksWithoutRuntimeCalls) {
  absl::StatusOr<PooledStream> stream;
  absl::StatusOr<PooledEvent> event;
  {
    StreamPool streams(sim_);
    EventPool events(sim_);
    stream = streams.Acquire(0);
    event = events.Acquire(1);
    ASSERT_THAT(stream, IsOk());
    ASSERT_THAT(event, IsOk());
  }
  const int64_t calls = sim_.total_calls();
  stream->Release();
  event->Discard();  // even a discard: the backend may be gone
  stream->Release();
  EXPECT_EQ(sim_.total_calls(), calls);
  // The leaked handles are the test's to clean up.
  sim_.ResetDevice(0);
  sim_.ResetDevice(1);
}

TEST_F(BadInputTest, ABackendWithoutDevicesFailsEveryAcquireWithItsStatus) {
  SimOptions options = StrictSimOptions(kDevices);
  options.device_count = 0;
  SimBackend none(options);
  StreamPool streams(none);
  EventPool events(none);
  AllocationCache cache(none, events);
  EXPECT_THAT(streams.Acquire(0),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no simulated device")));
  EXPECT_THAT(events.Prewarm(0, {}, 1),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(cache.Allocate(0, 64),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(gpupool::StableBuffers(cache).Acquire("x", 0, 64),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(cache.Trim(), StatusIs(absl::StatusCode::kFailedPrecondition));
  streams.Trim();
  EXPECT_EQ(streams.GetStats().acquired, 0);
  EXPECT_EQ(cache.GetStats(0).hits, 0);
  EXPECT_THAT(streams.DebugString(), HasSubstr("no simulated device"));
  EXPECT_EQ(none.misuse_count(), 0);
}

// --- AllocationCache
// -----------------------------------------------------------

class BadAllocationTest : public BadInputTest {
 protected:
  BadAllocationTest() : events_(sim_), cache_(sim_, events_) {}
  EventPool events_;
  AllocationCache cache_;
};

TEST_F(BadAllocationTest, OutOfRangeDevicesAndZeroSizesAreInvalidArgument) {
  const int64_t calls = sim_.total_calls();
  for (int device : kBadDevices) {
    SCOPED_TRACE(device);
    EXPECT_THAT(cache_.Allocate(device, 64),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("out of range")));
    EXPECT_THAT(gpupool::StableBuffers(cache_).Acquire("x", device, 64),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(gpupool::StableBuffers(cache_).Release("x", device),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(cache_.Trim(device),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(cache_.GetStats(device).hits, 0);
    EXPECT_EQ(cache_.GetStats(device, MemoryKind::kDevice).misses, 0);
  }
  EXPECT_THAT(cache_.Allocate(0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bytes must be > 0")));
  EXPECT_THAT(gpupool::StableBuffers(cache_).Acquire("x", 0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      cache_.Allocate(0, 64, static_cast<MemoryKind>(7)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MemoryKind")));
  EXPECT_EQ(cache_.GetStats(0, static_cast<MemoryKind>(7)).hits, 0);
  EXPECT_EQ(sim_.total_calls(), calls);
  EXPECT_EQ(cache_.GetStats().runtime_allocations, 0);
}

TEST_F(BadAllocationTest, HugeSizesAreResourceExhaustedWithNumbers) {
  absl::StatusOr<PooledAllocation> warm = cache_.Allocate(0, 4096);
  ASSERT_THAT(warm, IsOk());
  warm->Release();
  for (size_t bytes : {std::numeric_limits<size_t>::max(),
                       std::numeric_limits<size_t>::max() / 2 + 1,
                       size_t{1} << 62, (size_t{1} << 62) + 1}) {
    SCOPED_TRACE(bytes);
    EXPECT_THAT(
        cache_.Allocate(0, bytes),
        StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("requested")));
    EXPECT_THAT(cache_.Allocate(0, bytes, MemoryKind::kPinnedHost),
                StatusIs(absl::StatusCode::kResourceExhausted));
    EXPECT_THAT(gpupool::StableBuffers(cache_).Acquire("huge", 0, bytes),
                StatusIs(absl::StatusCode::kResourceExhausted));
  }
  // Larger than the device: its cache was not trimmed for nothing (pinned
  // host memory has no total to compare with, so it trims and retries).
  EXPECT_EQ(cache_.GetStats(0, MemoryKind::kDevice).blocks_cached, 1);
  EXPECT_EQ(cache_.GetStats(0, MemoryKind::kDevice).oom_retries, 0);
  EXPECT_EQ(cache_.GetStats(0, MemoryKind::kPinnedHost).oom_retries, 4);
  EXPECT_THAT(cache_.Allocate(0, 4096), IsOk());
}

TEST_F(BadAllocationTest, RoundedSizeIsDefinedForEverySize) {
  EXPECT_EQ(RoundedAllocationSize(0), 512u);
  EXPECT_EQ(RoundedAllocationSize(1), 512u);
  const size_t max = std::numeric_limits<size_t>::max();
  EXPECT_EQ(RoundedAllocationSize(max), max);  // beyond every class
  EXPECT_GE(RoundedAllocationSize(size_t{1} << 40), size_t{1} << 40);
}

TEST_F(BadAllocationTest, StableNamesMayBeAnythingAndUnknownOnesAreNotFound) {
  EXPECT_THAT(gpupool::StableBuffers(cache_).Release("never", 0),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("never")));
  absl::StatusOr<void*> empty_name =
      gpupool::StableBuffers(cache_).Acquire("", 0, 64);
  ASSERT_THAT(empty_name, IsOk());
  const std::string with_nul("a\0b", 3);
  absl::StatusOr<void*> nul =
      gpupool::StableBuffers(cache_).Acquire(with_nul, 0, 64);
  ASSERT_THAT(nul, IsOk());
  EXPECT_NE(*nul, *empty_name);
  EXPECT_THAT(gpupool::StableBuffers(cache_).Release("", 0), IsOk());
  EXPECT_THAT(gpupool::StableBuffers(cache_).Release("", 0),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(gpupool::StableBuffers(cache_).Acquire(with_nul, 0, 32), IsOk());
}

TEST_F(BadAllocationTest, EmptyLeasesRecordUseOfNullAndDoubleReleaseAreNoOps) {
  PooledAllocation empty;
  empty.RecordUse(nullptr);
  empty.RecordUse(reinterpret_cast<NativeStream>(0x1234));  // never read
  empty.Release();
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.device(), -1);

  absl::StatusOr<PooledAllocation> block = cache_.Allocate(0, 4096);
  ASSERT_THAT(block, IsOk());
  block->RecordUse(nullptr);  // documented: ignored
  block->Release();
  const int64_t calls = sim_.total_calls();
  block->Release();
  block->RecordUse(nullptr);
  EXPECT_EQ(sim_.total_calls(), calls);
  EXPECT_EQ(cache_.GetStats().allocations_in_use, 0);
  EXPECT_EQ(cache_.GetStats().blocks_cached, 1);

  absl::StatusOr<PooledAllocation> again = cache_.Allocate(0, 4096);
  ASSERT_THAT(again, IsOk());
  PooledAllocation moved = *std::move(again);
  PooledAllocation& alias = moved;
  moved = std::move(alias);  // self-move keeps it
  EXPECT_TRUE(moved);
  PooledAllocation target = std::move(moved);
  EXPECT_FALSE(moved);  // NOLINT(bugprone-use-after-move)
  moved.Release();
  EXPECT_EQ(cache_.GetStats().allocations_in_use, 1);
}

TEST_F(BadAllocationTest, ReleaseAfterTheCacheIsGoneLeaksWithoutRuntimeCalls) {
  absl::StatusOr<PooledAllocation> block;
  {
    AllocationCache cache(sim_, events_);
    block = cache.Allocate(1, 4096);
    ASSERT_THAT(block, IsOk());
  }
  const int64_t calls = sim_.total_calls();
  block->Release();
  block->Release();
  EXPECT_EQ(sim_.total_calls(), calls);
  sim_.ResetDevice(1);  // the leaked block is the test's to clean up
}

// A stream of another device, or of another backend, passed where the
// allocation's stream goes: the runtime rejects recording on it (kCaller),
// and the cache, unable to prove the memory idle, leaks the block rather
// than ever reuse or free it. Never reused, never a crash. (This is a
// precondition violation, so the simulator counts it as misuse.)
TEST(BadStreamTest, ForeignStreamsLeakTheBlockInsteadOfReusingIt) {
  SimOptions options = StrictSimOptions(kDevices);
  int64_t misuse = 0;
  options.on_misuse = [&misuse](absl::string_view) { ++misuse; };
  SimBackend sim(options);
  SimBackend other(StrictSimOptions(kDevices));
  EventPool events(sim);
  AllocationCache cache(sim, events);
  absl::StatusOr<NativeStream> device1_stream = sim.CreateStream(1, {});
  absl::StatusOr<NativeStream> foreign_stream = other.CreateStream(0, {});
  ASSERT_THAT(device1_stream, IsOk());
  ASSERT_THAT(foreign_stream, IsOk());
  for (NativeStream stream : {*device1_stream, *foreign_stream}) {
    {
      absl::StatusOr<PooledAllocation> block =
          cache.Allocate(0, 4096, MemoryKind::kDevice, stream);
      ASSERT_THAT(block, IsOk());
      absl::StatusOr<PooledAllocation> used = cache.Allocate(0, 8192);
      ASSERT_THAT(used, IsOk());
      used->RecordUse(stream);
    }
    EXPECT_EQ(cache.GetStats().allocations_in_use, 0);
  }
  const AllocationCacheStats stats = cache.GetStats();
  EXPECT_EQ(stats.blocks_leaked, 4);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_FALSE(cache.health()->is_poisoned(0));
  EXPECT_GT(misuse, 0);
  // The cache goes on serving with fresh blocks.
  EXPECT_THAT(cache.Allocate(0, 4096), IsOk());
  EXPECT_THAT(sim.DestroyStream(1, *device1_stream), IsOk());
  EXPECT_THAT(other.DestroyStream(0, *foreign_stream), IsOk());
  sim.ResetDevice(0);  // the leaked blocks
}

// --- Pools, DeviceHealth, MakeBackend, tickets
// ------------------------------------

TEST(BadPoolsTest, PoolsEntryPointsCheckTheirInput) {
  EXPECT_THAT(Pools::Create(nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(std::make_unique<SimBackend>(StrictSimOptions(kDevices)));
  ASSERT_THAT(pools, IsOk());
  for (int device : kBadDevices) {
    EXPECT_THAT((*pools)->RecoverDevice(device),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_THAT((*pools)->RecoverDevice(0),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  (*pools)->Trim();
  EXPECT_TRUE((*pools)->GetOutstandingLeases().empty());
}

TEST(BadPoolsTest, DeviceHealthAnswersForEveryDeviceNumber) {
  DeviceHealth health(kDevices);
  for (int device : kBadDevices) {
    SCOPED_TRACE(device);
    EXPECT_FALSE(health.is_poisoned(device));
    EXPECT_EQ(health.generation(device), 0u);  // no handle is of generation 0
    EXPECT_FALSE(health.Poison(device, absl::InternalError("x")));
    EXPECT_THAT(health.CheckHealthy(device),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(health.poison_cause(device), IsOk());
    EXPECT_THAT(health.Recover(device),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_EQ(health.poison_count(), 0);
  DeviceHealth none(-3);
  EXPECT_EQ(none.device_count(), 0);
  EXPECT_FALSE(none.is_poisoned(0));
}

TEST(BadPoolsTest, UnknownBackendNamesAndDevicesAreRejected) {
  EXPECT_THAT(MakeBackend("bogus"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeBackend(""), StatusIs(absl::StatusCode::kInvalidArgument));
  SimBackend sim(StrictSimOptions(kDevices));
  EXPECT_THAT(ScopedDevice::Create(sim, kDevices),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ScopedDevice::Create(sim, -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(FaultOf(absl::OkStatus()), Fault::kNone);
  EXPECT_THAT(WithFault(absl::OkStatus(), Fault::kDevice), IsOk());
}

TEST(BadPoolsTest, AnEmptyPrewarmTicketIsDone) {
  PrewarmTicket ticket;
  EXPECT_TRUE(ticket.done());
  EXPECT_THAT(ticket.Wait(), IsOk());
  EXPECT_THAT(ticket.WaitFor(absl::ZeroDuration()), IsOk());
}

TEST(BadPoolsTest, ALeaseSiteWithoutAFileNameIsReportedSafely) {
  SimBackend sim(StrictSimOptions(1));
  StreamPool streams(sim);
  absl::StatusOr<PooledStream> stream =
      streams.Acquire(0, {}, SourceLocation::Current(nullptr, 0));
  ASSERT_THAT(stream, IsOk());
  std::vector<OutstandingLease> out = streams.GetOutstandingLeases();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ToString(), HasSubstr("stream"));

  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(std::make_unique<SimBackend>(StrictSimOptions(1)));
  ASSERT_THAT(pools, IsOk());
  absl::StatusOr<PooledEvent> event =
      (*pools)->events().Acquire(0, {}, SourceLocation::Current(nullptr, 7));
  ASSERT_THAT(event, IsOk());
  std::vector<OutstandingLease> leases = (*pools)->GetOutstandingLeases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_THAT(leases[0].ToString(), HasSubstr(":7"));
}

}  // namespace
}  // namespace gpupool
