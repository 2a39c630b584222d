// The stream-order fence of the AllocationCache on SimBackend: same-stream
// reuse at once, other streams only after the ready events completed or with
// a stream wait, and the ready events' round trip through the EventPool.

#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gpupool/event_pool.h"
#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;

TEST_F(AllocationCacheSimTest, PendingBlockGoesToItsOwnStreamAtOnceOnly) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = nullptr;
  {
    absl::StatusOr<PooledAllocation> on_a =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(on_a, IsOk());
    EXPECT_EQ(on_a->stream(), a);
    block = on_a->data();
    sim_.SubmitWork(a, absl::InfiniteDuration());  // kernel using the block
  }
  // Stream B must not get it while A's work is pending.
  absl::StatusOr<PooledAllocation> on_b =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(on_b, IsOk());
  EXPECT_NE(on_b->data(), block);
  // Neither may a request without a stream (ready for any use at once).
  absl::StatusOr<PooledAllocation> unordered = cache->Allocate(0, kMiB);
  ASSERT_THAT(unordered, IsOk());
  EXPECT_NE(unordered->data(), block);
  // Stream A gets it at once: its new work is ordered after the old.
  {
    absl::StatusOr<PooledAllocation> again =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(again->data(), block);
  }
  EXPECT_EQ(cache->GetStats().cross_stream_waits, 0);
  // Once A's work completed, B may have it.
  sim_.CompleteAllWork();
  absl::StatusOr<PooledAllocation> later =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(later, IsOk());
  EXPECT_EQ(later->data(), block);
  EXPECT_EQ(sim_.stream_wait_edges(), 0);
  const AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.misses, 3);
  EXPECT_EQ(stats.hits, 2);
}

// A request takes the tightest block it may use — another stream's, once
// its events are checked complete — rather than split a larger one of its
// own stream, whose rest would strand beside the lease.
TEST_F(AllocationCacheSimTest, TighterBlockOfAnotherStreamBeatsSplittingOwn) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* tight = nullptr;
  {
    absl::StatusOr<PooledAllocation> on_a =
        cache->Allocate(0, 4 * kMiB, MemoryKind::kDevice, a);
    absl::StatusOr<PooledAllocation> on_b =
        cache->Allocate(0, 16 * kMiB, MemoryKind::kDevice, b);
    ASSERT_THAT(on_a, IsOk());
    ASSERT_THAT(on_b, IsOk());
    tight = on_a->data();
  }
  absl::StatusOr<PooledAllocation> lease =
      cache->Allocate(0, 4 * kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(lease, IsOk());
  EXPECT_EQ(lease->data(), tight);
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_allocations, 2);
  EXPECT_EQ(stats.blocks_cached, 1);  // b's block, whole
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(16 * kMiB));
}

// While the tighter block's work still runs, the stream's own block serves:
// checking first never costs a new segment.
TEST_F(AllocationCacheSimTest, BusyTighterBlockFallsBackToTheStreamsOwn) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* own = nullptr;
  {
    absl::StatusOr<PooledAllocation> on_a =
        cache->Allocate(0, 4 * kMiB, MemoryKind::kDevice, a);
    absl::StatusOr<PooledAllocation> on_b =
        cache->Allocate(0, 16 * kMiB, MemoryKind::kDevice, b);
    ASSERT_THAT(on_a, IsOk());
    ASSERT_THAT(on_b, IsOk());
    own = on_b->data();
    sim_.SubmitWork(a, absl::InfiniteDuration());
    sim_.SubmitWork(b, absl::InfiniteDuration());
  }
  absl::StatusOr<PooledAllocation> lease =
      cache->Allocate(0, 4 * kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(lease, IsOk());
  EXPECT_EQ(lease->data(), own);  // split: b's work is ordered before it
  EXPECT_EQ(cache->GetStats(0).runtime_allocations, 2);
  sim_.CompleteAllWork();  // the cache's end waits for the blocks' work
}

TEST_F(AllocationCacheSimTest, WaitOnStreamPolicyHandsOverWithAStreamWait) {
  auto cache = NewCache({.cross_stream = CrossStreamPolicy::kWaitOnStream});
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = AllocateAndRelease(*cache, a, absl::InfiniteDuration());
  ASSERT_NE(block, nullptr);
  const int64_t edges = sim_.stream_wait_edges();
  const int64_t syncs = sim_.calls(SimOp::kEventSynchronize) +
                        sim_.calls(SimOp::kStreamSynchronize);
  absl::StatusOr<PooledAllocation> on_b =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(on_b, IsOk());
  EXPECT_EQ(on_b->data(), block);
  EXPECT_EQ(sim_.stream_wait_edges(), edges + 1);
  // No host synchronisation: B now carries A's pending work instead.
  EXPECT_EQ(sim_.calls(SimOp::kEventSynchronize) +
                sim_.calls(SimOp::kStreamSynchronize),
            syncs);
  EXPECT_TRUE(sim_.has_pending_work(b));
  EXPECT_EQ(cache->GetStats().cross_stream_waits, 1);
  EXPECT_EQ(cache->GetStats().misses, 1);
  // The cache's destructor waits for pending work before freeing.
  sim_.CompleteAllWork();
}

TEST_F(AllocationCacheSimTest, BlockUsedOnTwoStreamsWaitsForBoth) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = nullptr;
  {
    absl::StatusOr<PooledAllocation> allocation =
        cache->Allocate(0, 64 * kKiB, MemoryKind::kDevice, a);
    ASSERT_THAT(allocation, IsOk());
    block = allocation->data();
    allocation->RecordUse(b);
    allocation->RecordUse(b);        // repeats are no-ops
    allocation->RecordUse(nullptr);  // so is nullptr
    sim_.SubmitWork(b, absl::InfiniteDuration());
  }
  // Not even A may have it: B's work may still read it.
  absl::StatusOr<PooledAllocation> on_a =
      cache->Allocate(0, 64 * kKiB, MemoryKind::kDevice, a);
  ASSERT_THAT(on_a, IsOk());
  EXPECT_NE(on_a->data(), block);
  sim_.CompleteWork(b);
  absl::StatusOr<PooledAllocation> after =
      cache->Allocate(0, 64 * kKiB, MemoryKind::kDevice, a);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->data(), block);
}

TEST_F(AllocationCacheSimTest, ReadyEventsGoBackToTheEventPool) {
  {
    auto cache = NewCache();
    NativeStream a = NewStream();
    for (int i = 0; i < 100; ++i) {
      {
        absl::StatusOr<PooledAllocation> allocation =
            cache->Allocate(0, 4096, MemoryKind::kDevice, a);
        ASSERT_THAT(allocation, IsOk());
        sim_.SubmitWork(a, absl::InfiniteDuration());
      }
      // One block, one event: each reuse handed the previous event back.
      ASSERT_EQ(events_->GetStats().in_use, 1);
      sim_.CompleteAllWork();
    }
  }
  EXPECT_EQ(events_->GetStats().in_use, 0);
  EXPECT_LE(sim_.events_created(), 2);
}

// A same-stream cycle keeps the block's ready event and re-records it at the
// next release: one EventRecord per cycle, no EventPool round trip (no
// acquire, no validating query, no return). The event still guards the
// block for other streams.
TEST_F(AllocationCacheSimTest, SameStreamReuseReRecordsItsOwnReadyEvent) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = nullptr;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<PooledAllocation> allocation =
        cache->Allocate(0, 4096, MemoryKind::kDevice, a);
    ASSERT_THAT(allocation, IsOk());
    if (i == 0) block = allocation->data();
    EXPECT_EQ(allocation->data(), block);
    sim_.SubmitWork(a, absl::InfiniteDuration());  // never completes alone
  }
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord), 50);
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery), 0);
  EXPECT_EQ(sim_.events_created(), 1);
  const EventPoolStats event_stats = events_->GetStats();
  EXPECT_EQ(event_stats.acquired, 1);
  EXPECT_EQ(event_stats.in_use, 1);
  // A's work is still pending: B must not get the block ...
  absl::StatusOr<PooledAllocation> on_b =
      cache->Allocate(0, 4096, MemoryKind::kDevice, b);
  ASSERT_THAT(on_b, IsOk());
  EXPECT_NE(on_b->data(), block);
  // ... until it completed; then its event stays with the block as a spare
  // (one query, no EventPool round trip) and its next release re-records it.
  sim_.CompleteAllWork();
  const int64_t queries = sim_.calls(SimOp::kEventQuery);
  absl::StatusOr<PooledAllocation> later =
      cache->Allocate(0, 4096, MemoryKind::kDevice, b);
  ASSERT_THAT(later, IsOk());
  EXPECT_EQ(later->data(), block);
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery), queries + 1);
  EXPECT_EQ(events_->GetStats().in_use, 1);
  later->Release();
  EXPECT_EQ(events_->GetStats().acquired,
            1);  // the same event, re-recorded on b
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery), queries + 1);
  on_b->Release();
  sim_.CompleteAllWork();
  cache.reset();
  EXPECT_EQ(events_->GetStats().in_use, 0);
}

TEST(AllocationCacheFenceTest, ReleaseNeverWaitsForAFullEventPool) {
  SimBackend sim(::gpupool::testing::StrictSimOptions(/*devices=*/1));
  NativeStream stream = *sim.CreateStream(0, {});
  {
    // A bounded event pool whose only event is held, and which would wait
    // for one forever.
    EventPoolOptions event_options;
    event_options.max_live_per_key = 1;
    event_options.acquire_timeout = absl::InfiniteDuration();
    EventPool events(sim, event_options);
    AllocationCache cache(sim, events);
    absl::StatusOr<PooledEvent> held = events.Acquire(0);
    ASSERT_THAT(held, IsOk());
    absl::StatusOr<PooledAllocation> allocation =
        cache.Allocate(0, kMiB, MemoryKind::kDevice, stream);
    ASSERT_THAT(allocation, IsOk());
    const int64_t syncs = sim.calls(SimOp::kStreamSynchronize);

    // The release takes no event (the pool is full) and falls back to a
    // stream synchronize at once. The bound below only turns a release that
    // waits on the pool into a failure instead of a hang.
    absl::Notification released;
    std::thread releaser([&] {
      allocation->Release();
      released.Notify();
    });
    const bool in_time =
        released.WaitForNotificationWithTimeout(absl::Seconds(60));
    if (!in_time) held->Release();  // unblocks the waiting release
    releaser.join();
    EXPECT_TRUE(in_time) << "the release waited for the EventPool";
    EXPECT_EQ(sim.calls(SimOp::kStreamSynchronize), syncs + 1);
    const AllocationCacheStats stats = cache.GetStats(0);
    EXPECT_EQ(stats.blocks_cached, 1);  // idle after the synchronize
    EXPECT_EQ(stats.blocks_leaked, 0);
    held->Release();
  }
  EXPECT_THAT(sim.DestroyStream(0, stream), IsOk());
  EXPECT_EQ(sim.misuse_count(), 0);
  EXPECT_THAT(sim.CheckNoLeaks(), IsOk());
}

// Same-stream reuse trusts the stream's handle value (the contract in
// gpupool/allocation_cache.h): a request carrying the value of the stream a
// pending block was released on gets that block at once, with no event
// query, stream wait or synchronize. A stream destroyed with work pending on
// a cached block must therefore be synchronized first, or a runtime that
// hands its value to a new stream would hand the block over too.
TEST_F(AllocationCacheSimTest, SameStreamReuseIsKeyedByTheStreamHandleValue) {
  auto cache = NewCache();
  NativeStream stream = NewStream();
  void* block = AllocateAndRelease(*cache, stream, absl::InfiniteDuration());
  ASSERT_NE(block, nullptr);
  const int64_t queries = sim_.calls(SimOp::kEventQuery);
  const int64_t waits = sim_.calls(SimOp::kStreamWaitEvent);
  const int64_t syncs = sim_.calls(SimOp::kStreamSynchronize) +
                        sim_.calls(SimOp::kEventSynchronize);
  // Only the handle value identifies the stream.
  const NativeStream same_value = stream;
  absl::StatusOr<PooledAllocation> again =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, same_value);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->data(), block);
  EXPECT_TRUE(sim_.has_pending_work(stream));
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery), queries);
  EXPECT_EQ(sim_.calls(SimOp::kStreamWaitEvent), waits);
  EXPECT_EQ(sim_.calls(SimOp::kStreamSynchronize) +
                sim_.calls(SimOp::kEventSynchronize),
            syncs);
  sim_.CompleteAllWork();  // the cache's destructor waits for pending work
}

// The free index remembers the last stream it looked up; the entries of
// streams with nothing cached are swept once more than 64 streams have been
// seen. Going back to a stream after the sweep finds its block again, and
// never another stream's pending one.
TEST_F(AllocationCacheSimTest, SameStreamReuseSurvivesTheIdleStreamSweep) {
  auto cache = NewCache();
  constexpr int kStreams = 80;
  std::vector<NativeStream> streams;
  std::vector<void*> blocks;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(NewStream());
    absl::StatusOr<PooledAllocation> lease =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, streams.back());
    ASSERT_THAT(lease, IsOk());
    blocks.push_back(lease->data());
    sim_.SubmitWork(streams.back(), absl::InfiniteDuration());
  }
  // Every stream takes its block back and holds it: every stream's entry
  // is empty, and the next new stream sweeps them all.
  std::vector<PooledAllocation> held;
  for (int i = 0; i < kStreams; ++i) {
    absl::StatusOr<PooledAllocation> again =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, streams[i]);
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(again->data(), blocks[i]) << "stream " << i;
    held.push_back(*std::move(again));
  }
  NativeStream late = NewStream();
  {
    absl::StatusOr<PooledAllocation> lease =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, late);
    ASSERT_THAT(lease, IsOk());
    sim_.SubmitWork(late, absl::InfiniteDuration());
  }
  held.clear();  // each pending again on its own stream
  // Each stream, in an order that crosses the memo, gets its own block
  // back and nothing else.
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kStreams; ++i) {
      const int s = (i * 7 + round) % kStreams;
      absl::StatusOr<PooledAllocation> again =
          cache->Allocate(0, kMiB, MemoryKind::kDevice, streams[s]);
      ASSERT_THAT(again, IsOk());
      EXPECT_EQ(again->data(), blocks[s]) << "stream " << s;
    }
  }
  EXPECT_EQ(sim_.allocations_made(), kStreams + 1);
  EXPECT_EQ(cache->GetStats().hits, 3 * kStreams);
  sim_.CompleteAllWork();  // the cache's destructor waits for pending work
  EXPECT_EQ(sim_.misuse_count(), 0);
}

}  // namespace
}  // namespace gpupool
