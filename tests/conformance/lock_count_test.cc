// Locks per allocation cycle, counted on the calling thread
// (tests/util/lock_counter.h), pinned as the runtime calls per cycle are
// (runtime_calls_test.cc): a same-stream hit takes one lock pair and makes
// no EventPool round trip, with deferred fences too (its release takes
// none: the release slot); a buffer passed between two streams takes one
// (its lease is made unchecked and kept once its event is seen complete,
// or once the other stream waits on it: CrossStreamPolicy::kWaitOnStream);
// a block that is part of a segment two (the split at the request, the
// merge at the release, each once); a miss two (the search, and the lease
// that admits its runtime allocation), with no lock to poll retiring blocks
// when none retire nor to read the give-back budget when nothing is cached;
// a pool's end no lock per idle handle, a cache's end none per freed segment
// beyond its event's return to the EventPool.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/util/lock_counter.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::LockCounterLive;
using ::gpupool::testing::StrictSimOptions;
using ::gpupool::testing::ThreadLocks;

constexpr size_t kMiB = size_t{1} << 20;

// What one window of work cost this thread.
struct Cost {
  int64_t locks = 0;
  int64_t calls = 0;  // runtime calls, counted by SimBackend
};

class LockCountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!LockCounterLive()) {
      GTEST_SKIP() << "pthread_mutex_lock is not counted in this build";
    }
    for (NativeStream* stream : {&a_, &b_}) {
      absl::StatusOr<NativeStream> created = sim_.CreateStream(0, {});
      ASSERT_THAT(created, IsOk());
      *stream = *created;
    }
  }
  void TearDown() override {
    sim_.CompleteAllWork();
    for (NativeStream stream : {a_, b_}) {
      if (stream != nullptr) {
        EXPECT_THAT(sim_.DestroyStream(0, stream), IsOk());
      }
    }
    EXPECT_EQ(sim_.misuse_count(), 0);
  }

  // One allocation of `bytes` on `stream`, released at once: its status
  // (checked by the caller, outside any counted window).
  static absl::Status Cycle(AllocationCache& cache, size_t bytes,
                            NativeStream stream) {
    absl::StatusOr<PooledAllocation> lease =
        cache.Allocate(0, bytes, MemoryKind::kDevice, stream);
    return lease.status();  // the lease is released here
  }

  // The locks and runtime calls of `work()` on this thread.
  template <typename Work>
  Cost Window(Work work) {
    const int64_t locks = ThreadLocks();
    const int64_t calls = sim_.total_calls();
    work();
    return Cost{ThreadLocks() - locks, sim_.total_calls() - calls};
  }

  // The cost of `count` cycles of `bytes` on `stream`.
  Cost Measure(AllocationCache& cache, size_t bytes, NativeStream stream,
               int count, absl::Status* status) {
    return Window([&] {
      for (int i = 0; i < count && status->ok(); ++i) {
        *status = Cycle(cache, bytes, stream);
      }
    });
  }

  // The cost of `round_trips` cycles of 1 MiB on `a_`, then on `b_`: one
  // block passed back and forth, every cycle a crossing once warm.
  Cost MeasureCrossings(AllocationCache& cache, int round_trips,
                        absl::Status* status) {
    return Window([&] {
      for (int i = 0; i < round_trips && status->ok(); ++i) {
        *status = Cycle(cache, kMiB, a_);
        if (status->ok()) *status = Cycle(cache, kMiB, b_);
      }
    });
  }

  SimBackend sim_{StrictSimOptions(1)};
  EventPool events_{sim_};
  NativeStream a_ = nullptr;
  NativeStream b_ = nullptr;
};

TEST_F(LockCountTest, ASameStreamHitTakesOneLockPair) {
  AllocationCache cache(sim_, events_);
  // Warm: the block, and the event its release records.
  for (int i = 0; i < 2; ++i) ASSERT_THAT(Cycle(cache, kMiB, a_), IsOk());
  absl::Status status;
  const Cost cost = Measure(cache, kMiB, a_, 10, &status);
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(cost.locks, 10) << "one lock pair per cycle";
  EXPECT_EQ(cost.calls, 10) << "the ready event's record";
  EXPECT_EQ(cache.GetStats().hits, 11);
}

TEST_F(LockCountTest, ADeferredSameStreamHitTakesOneLockPairAndNoCall) {
  AllocationCacheOptions options;
  options.defer_same_stream_fences = true;
  AllocationCache cache(sim_, events_, options);
  for (int i = 0; i < 2; ++i) ASSERT_THAT(Cycle(cache, kMiB, a_), IsOk());
  absl::Status status;
  const Cost cost = Measure(cache, kMiB, a_, 10, &status);
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(cost.locks, 10);
  EXPECT_EQ(cost.calls, 0);
  ASSERT_THAT(cache.FenceStream(0, a_), IsOk());
}

TEST_F(LockCountTest, ABufferPassedBetweenStreamsTakesOneLockPair) {
  AllocationCache cache(sim_, events_);
  // Warm: one block, its work done at once (the sim runs none), back and
  // forth between the two streams.
  absl::Status status;
  MeasureCrossings(cache, 2, &status);
  ASSERT_THAT(status, IsOk());
  const Cost cost = MeasureCrossings(cache, 5, &status);
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(cost.locks, 10) << "one lock pair per crossing";
  EXPECT_EQ(cost.calls, 20) << "the event's query, then its record";
  EXPECT_EQ(cache.GetStats().runtime_allocations, 1);
}

TEST_F(LockCountTest, ABufferWaitedOnByTheOtherStreamTakesOneLockPair) {
  AllocationCacheOptions options;
  options.cross_stream = CrossStreamPolicy::kWaitOnStream;
  AllocationCache cache(sim_, events_, options);
  // Warm: a miss on `a`, then three crossings. Nothing reads the cache in
  // between (GetStats would settle the release slot: the block would go to
  // its lane, whose lone-lane shortcut settles a candidate under the lock
  // a second time).
  absl::Status status;
  MeasureCrossings(cache, 2, &status);
  ASSERT_THAT(status, IsOk());
  const Cost cost = MeasureCrossings(cache, 5, &status);
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(cost.locks, 10) << "one lock pair per crossing";
  EXPECT_EQ(cost.calls, 20) << "the stream's wait, then the record";
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery), 0);
  const AllocationCacheStats stats = cache.GetStats();
  EXPECT_EQ(stats.cross_stream_waits, 3 + 10);
  EXPECT_EQ(stats.runtime_allocations, 1);
}

TEST_F(LockCountTest, APartOfASegmentTakesTheLockOnceEachWay) {
  AllocationCache cache(sim_, events_);
  // A 4 MiB segment, cached; its 1 MiB parts are split off at each request
  // and merged back at each release.
  ASSERT_THAT(Cycle(cache, 4 * kMiB, a_), IsOk());
  for (int i = 0; i < 3; ++i) ASSERT_THAT(Cycle(cache, kMiB, a_), IsOk());
  absl::Status status;
  const Cost cost = Measure(cache, kMiB, a_, 10, &status);
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(cost.locks, 20) << "the split's and the merge's";
  EXPECT_EQ(cost.calls, 10);
  EXPECT_EQ(cache.GetStats().runtime_allocations, 1);
}

TEST_F(LockCountTest, AMissWithNothingRetiringTakesNoLockToPollIt) {
  AllocationCache cache(sim_, events_);
  absl::StatusOr<PooledAllocation> first =
      cache.Allocate(0, kMiB, MemoryKind::kDevice, a_);
  ASSERT_THAT(first, IsOk());
  // A second miss (the first block is still leased): the search, and the
  // lease with the admission of its runtime allocation, take the lock;
  // polling retiring blocks, with none, does not, and neither does reading
  // the give-back budget with nothing cached on the device.
  const int64_t locks = ThreadLocks();
  absl::StatusOr<PooledAllocation> second =
      cache.Allocate(0, kMiB, MemoryKind::kDevice, a_);
  const int64_t taken = ThreadLocks() - locks;
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(taken, 2);
  EXPECT_EQ(cache.GetStats().misses, 2);
}

TEST_F(LockCountTest, AMissWithSomethingCachedReadsTheBudgetUnderTheLock) {
  AllocationCacheOptions options;
  options.give_back_above_percent = 100;  // room for all: nothing given back
  AllocationCache cache(sim_, events_, options);
  absl::StatusOr<PooledAllocation> held =
      cache.Allocate(0, kMiB, MemoryKind::kDevice, a_);
  ASSERT_THAT(held, IsOk());
  ASSERT_THAT(Cycle(cache, kMiB / 2, a_), IsOk());  // cached now
  const int64_t locks = ThreadLocks();
  absl::StatusOr<PooledAllocation> miss =
      cache.Allocate(0, kMiB, MemoryKind::kDevice, a_);
  const int64_t taken = ThreadLocks() - locks;
  ASSERT_THAT(miss, IsOk());
  EXPECT_EQ(taken, 3) << "the search, the budget, the lease";
  const AllocationCacheStats stats = cache.GetStats();
  EXPECT_EQ(stats.misses, 3);
  EXPECT_EQ(stats.runtime_allocations, 3);
  EXPECT_EQ(stats.blocks_cached, 1) << "the half-MiB block, not given back";
}

// A pool's end: its idle handles are destroyed and retired under one lock
// pair for all of them, not one each (nothing can read the pool's
// statistics afterwards, so their destroys are not timed either).
TEST_F(LockCountTest, APoolsEndTakesNoLockPerIdleHandle) {
  // The cost of destroying an EventPool holding `idle` idle events.
  auto end_of_pool_with = [this](int idle) {
    auto pool = std::make_unique<EventPool>(sim_);
    std::vector<PooledEvent> events;
    for (int i = 0; i < idle; ++i) {
      absl::StatusOr<PooledEvent> event = pool->Acquire(0);
      EXPECT_THAT(event, IsOk());
      if (event.ok()) events.push_back(*std::move(event));
    }
    events.clear();  // all idle now
    EXPECT_EQ(pool->GetStats().idle, idle);
    return Window([&pool] { pool.reset(); });
  };
  const Cost few = end_of_pool_with(2);
  const Cost many = end_of_pool_with(16);
  EXPECT_EQ(few.calls, 2) << "one destroy per idle event";
  EXPECT_EQ(many.calls, 16);
  EXPECT_EQ(many.locks, few.locks) << "the lock pairs do not grow with the "
                                      "idle events";
}

// A cache's end: the segments it frees are kept or freed, and retired, under
// one lock pair for all of them (was two per segment); what is left per
// segment is its ready event's return to the EventPool.
TEST_F(LockCountTest, ACachesEndTakesOneLockPerFreedSegmentForItsEvent) {
  // The cost of destroying a cache holding `cached` idle 1 MiB segments.
  auto end_of_cache_with = [this](int cached) {
    auto cache = std::make_unique<AllocationCache>(sim_, events_);
    std::vector<PooledAllocation> leases;
    for (int i = 0; i < cached; ++i) {
      absl::StatusOr<PooledAllocation> lease =
          cache->Allocate(0, kMiB, MemoryKind::kDevice, a_);
      EXPECT_THAT(lease, IsOk());
      if (lease.ok()) leases.push_back(*std::move(lease));
    }
    leases.clear();  // all cached now, each with its ready event
    sim_.CompleteAllWork();
    const AllocationCacheStats stats = cache->GetStats();
    EXPECT_EQ(stats.blocks_cached, cached);
    EXPECT_EQ(stats.runtime_allocations, cached);
    return Window([&cache] { cache.reset(); });
  };
  // Not counted: the first end on this thread, whose first return to a pool
  // (an event, to the EventPool) registers the thread's return announcement
  // slot under a lock, once (run alone, this test would see it in `few`).
  (void)end_of_cache_with(1);
  const Cost few = end_of_cache_with(2);
  const Cost many = end_of_cache_with(16);
  EXPECT_EQ(sim_.live_allocations(0), 0) << "every segment freed";
  EXPECT_EQ(many.locks - few.locks, 14)
      << "one lock pair per segment: its event back to the EventPool";
  EXPECT_EQ(few.calls, 2 * 2) << "a ready-event query and a free per segment";
  EXPECT_EQ(many.calls, 2 * 16);
}

}  // namespace
}  // namespace gpupool
