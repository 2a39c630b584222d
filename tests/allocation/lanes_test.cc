// Same-stream lanes on SimBackend, the cache's default policy: a whole
// segment released on its one stream waits in that stream's lane with its
// ready event recorded, counted as cached; the stream's next request for its
// lease size takes it back without a search, any other request lists it in
// the free index first (no runtime call), and a release into a lane (fenced,
// or parked unfenced under deferred fences) still checks a retiring block as
// any release does; another stream's lone lane block of the request's size,
// with nothing in the index, is that request's candidate at once. A part of
// a segment is never parked, deferred or not: it
// merges with its free neighbours at its release.

#include <vector>

#include "gpupool/snapshot.h"
#include "tests/allocation/sim_fixture.h"
#include "tests/allocation/snapshot_blocks.h"

namespace gpupool {
namespace {

using ::gpupool::testing::CountBlocks;
using ::gpupool::testing::IsOk;
using ::gpupool::testing::SnapshotBlocks;

TEST_F(AllocationCacheSimTest,
       ALaneBlockIsCachedFencedAndTakenBackOnItsStream) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  void* block = AllocateAndRelease(*cache, a, absl::InfiniteDuration());
  ASSERT_NE(block, nullptr);
  // Released: its ready event recorded on `a`, cached, listed pending.
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord), 1);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(kMiB));
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(
      CountBlocks(SnapshotBlocks(TakeSnapshot(*cache), 0), BlockUse::kPending),
      1);
  // The same stream takes it back at once, with no runtime call, though its
  // work is still pending: stream order covers it.
  const int64_t calls = sim_.total_calls();
  absl::StatusOr<PooledAllocation> again =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->data(), block);
  EXPECT_EQ(sim_.total_calls(), calls);
  stats = cache->GetStats(0);
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.allocations_in_use, 1);
  again->Release();
  sim_.CompleteAllWork();
}

TEST_F(AllocationCacheSimTest,
       AnotherStreamGetsALaneBlockOnlyOnceItsWorkIsDone) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = AllocateAndRelease(*cache, a, absl::InfiniteDuration());
  ASSERT_NE(block, nullptr);
  // Stream b's request is not served by its lane: the block goes to the free
  // index, its event is queried (pending), and b gets a new segment.
  absl::StatusOr<PooledAllocation> on_b =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(on_b, IsOk());
  EXPECT_NE(on_b->data(), block);
  EXPECT_EQ(cache->GetStats(0).runtime_allocations, 2);
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery), 1);
  on_b->Release();
  // Once a's work is done, b's next request of that size takes one of the
  // two: its own from its lane.
  sim_.CompleteAllWork();
  absl::StatusOr<PooledAllocation> later =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(later, IsOk());
  EXPECT_NE(later->data(), block);
  // And a third stream gets a's block, its event now complete.
  NativeStream c = NewStream();
  absl::StatusOr<PooledAllocation> on_c =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, c);
  ASSERT_THAT(on_c, IsOk());
  EXPECT_EQ(on_c->data(), block);
  EXPECT_EQ(cache->GetStats(0).runtime_allocations, 2);
}

// One buffer passed between two streams: each request takes the other
// stream's lane block straight as its one candidate, one query and one
// record per cycle, no runtime allocation after the first.
TEST_F(AllocationCacheSimTest, OneBlockPingPongsBetweenTwoStreams) {
  auto cache = NewCache();
  NativeStream streams[2] = {NewStream(), NewStream()};
  void* block = AllocateAndRelease(*cache, streams[0]);
  ASSERT_NE(block, nullptr);
  const int64_t records = sim_.calls(SimOp::kEventRecord);
  const int64_t queries = sim_.calls(SimOp::kEventQuery);
  constexpr int kCycles = 6;
  for (int i = 1; i <= kCycles; ++i) {
    absl::StatusOr<PooledAllocation> allocation =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, streams[i % 2]);
    ASSERT_THAT(allocation, IsOk());
    EXPECT_EQ(allocation->data(), block);
  }
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery) - queries, kCycles);
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord) - records, kCycles);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_allocations, 1);
  EXPECT_EQ(stats.hits, kCycles);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(kMiB));
  EXPECT_EQ(stats.allocations_in_use, 0);
}

// With no pending checks allowed, another stream's lane block is never
// queried: the request gets a new segment, the lane block stays cached.
TEST_F(AllocationCacheSimTest, NoPendingChecksLeaveAnotherStreamsLaneBlock) {
  auto cache = NewCache({.pending_checks_per_allocate = 0});
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = AllocateAndRelease(*cache, a);
  ASSERT_NE(block, nullptr);
  absl::StatusOr<PooledAllocation> on_b =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(on_b, IsOk());
  EXPECT_NE(on_b->data(), block);
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery), 0);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_allocations, 2);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.allocations_in_use, 1);
}

TEST_F(AllocationCacheSimTest, AReleaseIntoALaneFreesADoneRetiringBlock) {
  auto cache = NewCache({.max_cached_bytes = kMiB + 4096});
  NativeStream a = NewStream();
  // Two blocks released with work running: under a cap of one block and a
  // bit, one is cached and the other retires until that work is done.
  ASSERT_EQ(
      AllocateAndReleaseMany(*cache, a, 2, absl::InfiniteDuration()).size(),
      2u);
  // One in a's lane; the other over the cap, retiring while its work runs.
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.blocks_retiring, 1);
  EXPECT_EQ(sim_.calls(SimOp::kFree), 0);
  sim_.CompleteAllWork();
  // A same-stream cycle: the lane's block, back into the lane, and the
  // release checks the retiring one, done now, and frees it.
  ASSERT_THAT(cache->Allocate(0, kMiB, MemoryKind::kDevice, a), IsOk());
  stats = cache->GetStats(0);
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.blocks_retiring, 0);
  EXPECT_EQ(stats.runtime_frees, 1);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(sim_.calls(SimOp::kFree), 1);
}

TEST_F(AllocationCacheSimTest, ADeferredReleaseFreesADoneRetiringBlock) {
  AllocationCacheOptions options;
  options.max_cached_bytes = kMiB + 4096;
  options.defer_same_stream_fences = true;
  auto cache = NewCache(options);
  NativeStream a = NewStream();
  // Two blocks released with work running: under a cap of one block and a
  // bit, one is cached and the other retires until that work is done.
  ASSERT_EQ(
      AllocateAndReleaseMany(*cache, a, 2, absl::InfiniteDuration()).size(),
      2u);
  // One parked unfenced; the other over the cap, fenced and retiring.
  EXPECT_EQ(cache->GetStats(0).blocks_retiring, 1);
  sim_.CompleteAllWork();
  const int64_t records = sim_.calls(SimOp::kEventRecord);
  ASSERT_THAT(cache->Allocate(0, kMiB, MemoryKind::kDevice, a), IsOk());
  // The parked cycle records nothing and still frees the retiring block.
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord), records);
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_retiring, 0);
  EXPECT_EQ(stats.runtime_frees, 1);
  EXPECT_EQ(sim_.calls(SimOp::kFree), 1);
}

TEST_F(AllocationCacheSimTest, ADeferredPartOfASegmentIsFencedAndMerged) {
  AllocationCacheOptions options;
  options.defer_same_stream_fences = true;
  auto cache = NewCache(options);
  NativeStream a = NewStream();
  // A 4 MiB segment, parked; a 1 MiB request on its stream is carved from
  // it (the lane holds no 1 MiB block: the segment is fenced first).
  ASSERT_THAT(cache->Allocate(0, 4 * kMiB, MemoryKind::kDevice, a), IsOk());
  absl::StatusOr<PooledAllocation> part =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
  ASSERT_THAT(part, IsOk());
  EXPECT_EQ(cache->GetStats(0).runtime_allocations, 1);
  EXPECT_EQ(cache->GetStats(0).blocks_cached, 1);  // the rest, 3 MiB
  // The part is not parked: its event is recorded at its release and it
  // merges with the rest into the whole segment.
  const int64_t records = sim_.calls(SimOp::kEventRecord);
  part->Release();
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord), records + 1);
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(4 * kMiB));
}

TEST_F(AllocationCacheSimTest, TrimFreesALaneBlockOnceItsWorkIsDone) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  ASSERT_NE(AllocateAndRelease(*cache, a), nullptr);
  sim_.CompleteAllWork();
  EXPECT_EQ(cache->GetStats(0).blocks_cached, 1);
  ASSERT_THAT(cache->Trim(), IsOk());
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.runtime_frees, 1);
  EXPECT_EQ(sim_.live_allocations(0), 0);
}

TEST_F(AllocationCacheSimTest, TheCachesEndFreesLaneBlocksAsTheyWereFenced) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  // Lane blocks fenced at their release: three on `a` whose work is done,
  // two on `b` whose work still runs.
  {
    std::vector<PooledAllocation> held;
    for (NativeStream stream : {a, a, a, b, b}) {
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(0, kMiB, MemoryKind::kDevice, stream);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
    sim_.SubmitWork(b, absl::Milliseconds(30));
  }
  EXPECT_EQ(cache->GetStats(0).blocks_cached, 5);
  EXPECT_EQ(sim_.live_allocations(0), 5);
  const int64_t records = sim_.calls(SimOp::kEventRecord);
  cache.reset();
  // Each freed with the fence its release recorded (no record now), those
  // of `b` once their work finished (the fixture checks that no memory was
  // freed under running work), none leaked.
  EXPECT_EQ(sim_.calls(SimOp::kEventRecord), records);
  EXPECT_EQ(sim_.calls(SimOp::kFree), 5);
  EXPECT_EQ(sim_.live_allocations(0), 0);
}

}  // namespace
}  // namespace gpupool
