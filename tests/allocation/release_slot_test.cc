// The release slot on SimBackend: a block released onto its lane waits in
// its shard's slot, its bookkeeping finished by whoever takes the shard's
// lock next. Whatever comes next must see what a release that parked it at
// once would have left: the counters, the leak report, Trim, the cap, a dead
// generation, another stream, the cache's end, and other threads.

#include "src/allocation/release_slot.h"

#include <atomic>
#include <memory>
#include <thread>  // NOLINT(build/c++11): test threads
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpupool/snapshot.h"
#include "src/allocation/cache_core.h"
#include "tests/allocation/sim_fixture.h"
#include "tests/allocation/snapshot_blocks.h"

namespace gpupool {
namespace {

using ::gpupool::testing::CountBlocks;
using ::gpupool::testing::IsOk;
using ::gpupool::testing::SnapshotBlocks;
using ::testing::HasSubstr;

AllocationCacheOptions Deferred() {
  AllocationCacheOptions options;
  options.defer_same_stream_fences = true;
  return options;
}

class ReleaseSlotTest : public AllocationCacheSimTest,
                        public ::testing::WithParamInterface<bool> {
 protected:
  AllocationCacheOptions Options() {
    return GetParam() ? Deferred() : AllocationCacheOptions{};
  }
};

TEST_P(ReleaseSlotTest, EveryObserverSeesAReleasedBlockAsCached) {
  auto cache = NewCache(Options());
  NativeStream a = NewStream();
  void* block = AllocateAndRelease(*cache, a);
  ASSERT_NE(block, nullptr);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.bytes_in_use, 0);
  EXPECT_EQ(stats.bytes_requested, 0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(kMiB));
  EXPECT_TRUE(cache->GetOutstandingLeases().empty());
  EXPECT_EQ(
      CountBlocks(SnapshotBlocks(TakeSnapshot(*cache), 0), BlockUse::kPending),
      1);
  EXPECT_EQ(
      CountBlocks(SnapshotBlocks(TakeSnapshot(*cache), 0), BlockUse::kLeased),
      0);
}

TEST_P(ReleaseSlotTest, TrimTheFirstToLookFreesAReleasedBlock) {
  auto cache = NewCache(Options());
  NativeStream a = NewStream();
  // Trim frees what the device has cached beyond what it keeps: the block
  // counts, though nothing looked at the cache since its release.
  ASSERT_NE(AllocateAndRelease(*cache, a), nullptr);
  sim_.CompleteAllWork();
  EXPECT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(sim_.calls(SimOp::kFree), 1);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(stats.runtime_frees, 1);
}

TEST_P(ReleaseSlotTest, TakenBackOnItsStreamAsTheNewestLease) {
  auto cache = NewCache(Options());
  NativeStream a = NewStream();
  absl::StatusOr<PooledAllocation> first =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
  ASSERT_THAT(first, IsOk());
  void* block = first->data();
  absl::StatusOr<PooledAllocation> older =
      cache->Allocate(0, 2 * kMiB, MemoryKind::kDevice, a);
  ASSERT_THAT(older, IsOk());
  first->Release();
  const int64_t calls = sim_.total_calls();
  absl::StatusOr<PooledAllocation> again =
      cache->Allocate(0, kMiB - 100, MemoryKind::kDevice, a);
  const int line = __LINE__ - 1;
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->data(), block);
  EXPECT_EQ(sim_.total_calls(), calls);  // stream order covers it
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.allocations_in_use, 2);
  EXPECT_EQ(stats.bytes_in_use, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(stats.bytes_requested, static_cast<int64_t>(3 * kMiB - 100));
  EXPECT_EQ(stats.blocks_cached, 0);
  // The leak report lists the newest lease first, with its own request,
  // lease id and call site.
  std::vector<OutstandingLease> leases = cache->GetOutstandingLeases();
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_EQ(leases[0].lease_id, again->lease_id());
  EXPECT_THAT(leases[0].key, HasSubstr(absl::StrCat(kMiB - 100, " bytes")));
  EXPECT_EQ(static_cast<int>(leases[0].where.line()), line);
  EXPECT_EQ(leases[1].lease_id, older->lease_id());
  EXPECT_THAT(leases[1].key, HasSubstr(absl::StrCat(2 * kMiB, " bytes")));
}

TEST_P(ReleaseSlotTest, AnotherSizeOrStreamStillFindsTheBlock) {
  auto cache = NewCache(Options());
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = AllocateAndRelease(*cache, a);
  ASSERT_NE(block, nullptr);
  sim_.CompleteAllWork();
  // Another stream: the block is fenced if it was not, then given once its
  // event is seen complete; no second segment.
  absl::StatusOr<PooledAllocation> on_b =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(on_b, IsOk());
  EXPECT_EQ(on_b->data(), block);
  on_b->Release();
  sim_.CompleteAllWork();
  // A smaller size on the first stream: the block serves it too.
  absl::StatusOr<PooledAllocation> small =
      cache->Allocate(0, kMiB / 2 + 1, MemoryKind::kDevice, a);
  ASSERT_THAT(small, IsOk());
  EXPECT_EQ(small->data(), block);
  EXPECT_EQ(cache->GetStats(0).runtime_allocations, 1);
  EXPECT_EQ(cache->GetStats(0).hits, 2);
}

TEST_P(ReleaseSlotTest, CappedCacheReservesTheBlockOnceAndGivesItBack) {
  auto cache = NewCache([&] {
    AllocationCacheOptions options = Options();
    options.max_cached_bytes = kMiB;
    return options;
  }());
  NativeStream a = NewStream();
  // Twenty cycles of one block: each release fits the cap (the reservation
  // of the one before was given back by its hit).
  for (int i = 0; i < 20; ++i)
    ASSERT_NE(AllocateAndRelease(*cache, a), nullptr);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_allocations, 1);
  EXPECT_EQ(stats.hits, 19);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(kMiB));
  // Two at once: the second release finds the cap full and is freed once
  // its work is done (no work here: at once).
  std::vector<void*> two = AllocateAndReleaseMany(*cache, a, 2);
  ASSERT_EQ(two.size(), 2u);
  stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_allocations, 2);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(kMiB));
  EXPECT_EQ(stats.blocks_retiring + stats.runtime_frees, 1);
  // Trimmed, the cap is whole again: the next release is cached.
  sim_.CompleteAllWork();
  EXPECT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(cache->GetStats(0).bytes_cached, 0);
  ASSERT_NE(AllocateAndRelease(*cache, a), nullptr);
  EXPECT_EQ(cache->GetStats(0).bytes_cached, static_cast<int64_t>(kMiB));
}

TEST_P(ReleaseSlotTest, CappedCacheBufferPassedBetweenStreamsStaysOne) {
  auto cache = NewCache([&] {
    AllocationCacheOptions options = Options();
    options.max_cached_bytes = kMiB;
    return options;
  }());
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  // One buffer back and forth, its work done each time: the other stream
  // gets it as its one candidate, and its bytes are never counted twice
  // against the cap (a second count would leave no room for its release).
  for (int i = 0; i < 20; ++i) {
    void* block = AllocateAndRelease(*cache, i % 2 == 0 ? a : b);
    ASSERT_NE(block, nullptr);
    sim_.CompleteAllWork();
  }
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.runtime_allocations, 1);
  EXPECT_EQ(stats.runtime_frees, 0);
  EXPECT_EQ(stats.hits, 19);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(kMiB));
  // 19 crossings, each checked once: the ready event recorded at every
  // release is queried by the other stream's request.
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery), 19);
}

// Another stream's request while the released block's work still runs:
// the block stays cached (its stream's), the request gets a new segment,
// and no observer is left seeing a lease or a hit that was not made.
TEST_P(ReleaseSlotTest, AnotherStreamWhileTheWorkRunsLeavesTheBlockCached) {
  auto cache = NewCache(Options());
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = AllocateAndRelease(*cache, a, absl::InfiniteDuration());
  ASSERT_NE(block, nullptr);
  absl::StatusOr<PooledAllocation> on_b =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, b);
  ASSERT_THAT(on_b, IsOk());
  EXPECT_NE(on_b->data(), block);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.hits, 0);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.allocations_in_use, 1);
  EXPECT_EQ(stats.bytes_requested, static_cast<int64_t>(kMiB));
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(kMiB));
  std::vector<OutstandingLease> leases = cache->GetOutstandingLeases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].lease_id, on_b->lease_id());
  const std::vector<BlockSnapshot> blocks =
      SnapshotBlocks(TakeSnapshot(*cache), 0);
  EXPECT_EQ(CountBlocks(blocks, BlockUse::kPending), 1);
  EXPECT_EQ(CountBlocks(blocks, BlockUse::kLeased), 1);
  // Still its stream's: that stream takes it back at once, in stream order.
  absl::StatusOr<PooledAllocation> on_a =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
  ASSERT_THAT(on_a, IsOk());
  EXPECT_EQ(on_a->data(), block);
  EXPECT_EQ(cache->GetStats(0).hits, 1);
  EXPECT_EQ(cache->GetStats(0).runtime_allocations, 2);
  sim_.CompleteAllWork();  // else the cache's end would wait for it
}

TEST_P(ReleaseSlotTest, ABlockOfADeadGenerationIsNeverLeasedAgain) {
  auto cache = NewCache(Options());
  NativeStream a = NewStream();
  ASSERT_NE(AllocateAndRelease(*cache, a), nullptr);
  // The device is declared dead and recovered (a new generation) while the
  // block waits; its stream lives on. Its next request on that stream gets
  // a new segment: the old one is dropped, without a call.
  health_->Poison(0, absl::InternalError("cudaErrorIllegalAddress"));
  ASSERT_THAT(health_->Recover(0), IsOk());
  const int64_t mallocs = sim_.calls(SimOp::kAllocate);
  const int64_t frees = sim_.calls(SimOp::kFree);
  absl::StatusOr<PooledAllocation> after =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(sim_.calls(SimOp::kAllocate), mallocs + 1);
  EXPECT_EQ(sim_.calls(SimOp::kFree), frees);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_dropped, 1);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.hits, 0);
  after->Release();
  cache.reset();
  // The dropped segment is the simulated runtime's to reclaim, with the
  // events: the event pool goes first.
  events_.reset();
  sim_.ResetDevice(0);
  streams_.clear();  // ResetDevice destroyed them
}

TEST_P(ReleaseSlotTest, TheCachesEndFreesTheBlock) {
  {
    auto cache = NewCache(Options());
    NativeStream a = NewStream();
    ASSERT_NE(AllocateAndRelease(*cache, a), nullptr);
    sim_.CompleteAllWork();
  }
  // The cache is gone: its one segment went back to the runtime (TearDown
  // checks that nothing leaked).
  EXPECT_EQ(sim_.calls(SimOp::kFree), 1);
}

TEST_P(ReleaseSlotTest, ThreadsAndObserversAgreeOnTheCounts) {
  constexpr int kThreads = 3;
  constexpr int kCycles = 3000;
  auto cache = NewCache(Options());
  std::vector<NativeStream> streams;
  for (int i = 0; i < kThreads; ++i) streams.push_back(NewStream());
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  // Each check reports itself (gtest's failures are thread-safe here).
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int cycle = 0; cycle < kCycles; ++cycle) {
        const size_t bytes = (cycle % 7 == 0) ? 2 * kMiB : kMiB;
        absl::StatusOr<PooledAllocation> allocation =
            cache->Allocate(0, bytes, MemoryKind::kDevice, streams[i]);
        if (!allocation.ok()) {
          ADD_FAILURE() << "thread " << i << " cycle " << cycle << ": "
                        << allocation.status();
        }
      }
    });
  }
  // An observer the whole time: counters, snapshots, leak reports, Trim.
  // At most one lease per thread is out (under deferred fences too: a parked
  // block whose fence is being recorded is shown as the cached block it is).
  std::thread observer([&] {
    while (!done.load()) {
      AllocationCacheStats stats = cache->GetStats(0);
      const int64_t bound = kThreads;
      if (stats.allocations_in_use < 0 || stats.allocations_in_use > bound ||
          stats.blocks_cached < 0 || stats.bytes_cached < 0 ||
          stats.bytes_in_use < 0) {
        ADD_FAILURE() << "gauges: in use " << stats.allocations_in_use
                      << " (bound " << bound << "), blocks cached "
                      << stats.blocks_cached << ", bytes cached "
                      << stats.bytes_cached << ", bytes in use "
                      << stats.bytes_in_use;
      }
      const size_t leases = cache->GetOutstandingLeases().size();
      if (static_cast<int64_t>(leases) > kThreads) {
        ADD_FAILURE() << "leak report: " << leases << " leases (bound "
                      << kThreads << ")";
      }
      TakeSnapshot(*cache);
      if (absl::Status trimmed = cache->Trim(0, 4 * kMiB); !trimmed.ok()) {
        ADD_FAILURE() << "Trim: " << trimmed;
      }
    }
  });
  for (std::thread& thread : threads) thread.join();
  done.store(true);
  observer.join();
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.bytes_in_use, 0);
  EXPECT_EQ(stats.bytes_requested, 0);
  EXPECT_EQ(stats.hits + stats.misses, kThreads * kCycles);
  EXPECT_TRUE(cache->GetOutstandingLeases().empty());
  sim_.CompleteAllWork();
  EXPECT_THAT(cache->Trim(0), IsOk());
  stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(stats.runtime_frees, stats.runtime_allocations);
}

// A block released into the slot carries its lease's hold on the shard to
// its next lease (or drops it when it leaves the slot otherwise): the core
// goes exactly when the last hold does, whatever the slot carried.
TEST_P(ReleaseSlotTest, TheCoreGoesWithTheLastHoldWhateverTheSlotCarried) {
  SimOptions options;
  options.device_count = 1;
  SimBackend sim(options);  // of its own: the survivor is left to the OS
  const int64_t before = internal::AllocationCacheCore::LiveForTesting();
  {
    EventPool events(sim);
    absl::StatusOr<NativeStream> a = sim.CreateStream(0, {});
    absl::StatusOr<NativeStream> b = sim.CreateStream(0, {});
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    absl::StatusOr<PooledAllocation> survivor;
    {
      auto cache = std::make_unique<AllocationCache>(sim, events, Options());
      // Slot hits on one stream, the slot's block taken by another stream,
      // and a block left in the slot at the cache's end.
      for (NativeStream stream : {*a, *a, *a, *b, *a, *a}) {
        absl::StatusOr<PooledAllocation> lease =
            cache->Allocate(0, kMiB, MemoryKind::kDevice, stream);
        ASSERT_THAT(lease, IsOk());
        sim.CompleteAllWork();
      }
      EXPECT_GE(cache->GetStats(0).hits, 4);
      survivor = cache->Allocate(0, 2 * kMiB, MemoryKind::kDevice, *a);
      ASSERT_THAT(survivor, IsOk());
      absl::StatusOr<PooledAllocation> last =
          cache->Allocate(0, kMiB, MemoryKind::kDevice, *a);
      ASSERT_THAT(last, IsOk());
      EXPECT_EQ(internal::AllocationCacheCore::LiveForTesting(), before + 1);
    }
    // The survivor's lease holds the core after the cache's end.
    EXPECT_EQ(internal::AllocationCacheCore::LiveForTesting(), before + 1);
    survivor->Release();
    EXPECT_EQ(internal::AllocationCacheCore::LiveForTesting(), before);
    sim.CompleteAllWork();
    EXPECT_THAT(sim.DestroyStream(0, *a), IsOk());
    EXPECT_THAT(sim.DestroyStream(0, *b), IsOk());
  }
  sim.ResetDevice(0);
}

// Releases race the cache's end. A release whose block went into the
// release slot touches neither the cache nor the slot again (the block
// carries its lease's hold on the shard, and the end settles the slot
// under its lock), so under ASan and TSan no access may be flagged; and
// every block is accounted for: freed by the end, or released after it and
// left to the OS, never both, never lost.
TEST_P(ReleaseSlotTest, ReleasesRacingTheCachesEndAreFreedOrLeftToTheOS) {
  constexpr int kRounds = 200;
  constexpr int kThreads = 2;
  for (int round = 0; round < kRounds && !HasFailure(); ++round) {
    // A runtime of its own: what is left to the OS stays allocated there.
    SimOptions options;
    options.device_count = 1;
    int64_t misuse = 0;
    options.on_misuse = [&misuse](absl::string_view) { ++misuse; };
    SimBackend sim(options);
    {
      EventPool events(sim);
      std::vector<NativeStream> streams;
      for (int i = 0; i < kThreads; ++i) {
        absl::StatusOr<NativeStream> stream = sim.CreateStream(0, {});
        ASSERT_THAT(stream, IsOk());
        streams.push_back(*stream);
      }
      auto cache = std::make_unique<AllocationCache>(sim, events, Options());
      std::vector<PooledAllocation> leases;
      for (NativeStream stream : streams) {
        // A first cycle, so that the second lease's release is a lane's.
        for (int cycle = 0; cycle < 2; ++cycle) {
          absl::StatusOr<PooledAllocation> lease =
              cache->Allocate(0, kMiB, MemoryKind::kDevice, stream);
          ASSERT_THAT(lease, IsOk());
          if (cycle == 1) leases.push_back(*std::move(lease));
        }
      }
      std::atomic<int> ready{0};
      std::atomic<bool> go{false};
      std::vector<std::thread> releasers;
      for (PooledAllocation& lease : leases) {
        releasers.emplace_back(
            [&ready, &go, lease = std::move(lease)]() mutable {
              ready.fetch_add(1);
              while (!go.load()) {
              }
              lease.Release();
            });
      }
      while (ready.load() < kThreads) {
      }
      go.store(true);
      cache.reset();
      for (std::thread& releaser : releasers) releaser.join();
      sim.CompleteAllWork();
      for (NativeStream stream : streams) {
        EXPECT_THAT(sim.DestroyStream(0, stream), IsOk());
      }
    }
    // Every block (one per thread) freed by the end or left to the OS.
    EXPECT_EQ(sim.allocations_freed() + sim.live_allocations(0), kThreads);
    EXPECT_EQ(misuse, 0);
    sim.ResetDevice(0);
  }
}

// The slot's own protocol.
TEST(ReleaseSlotProtocolTest, OneBlockAtATimeAndPutBackOnlyIntoAnEmptySlot) {
  internal::ReleaseSlot slot;
  internal::AllocationBlock first;
  internal::AllocationBlock second;
  EXPECT_FALSE(slot.occupied());
  EXPECT_EQ(slot.Take(), nullptr);
  EXPECT_TRUE(slot.Offer(&first));
  EXPECT_FALSE(slot.Offer(&second));  // full: the second parks instead
  EXPECT_EQ(slot.Peek(), &first);
  EXPECT_EQ(slot.Take(), &first);
  EXPECT_TRUE(slot.Offer(&second));  // a release while `first` was out
  EXPECT_FALSE(slot.PutBack(&first));
  EXPECT_EQ(slot.Take(), &second);
  EXPECT_TRUE(slot.PutBack(&first));
  EXPECT_EQ(slot.Take(), &first);
  EXPECT_FALSE(slot.occupied());
}

TEST(ReleaseSlotProtocolTest,
     CloseTakesTheWaitingBlockAndRefusesEveryLaterOffer) {
  internal::ReleaseSlot slot;
  internal::AllocationBlock before;
  internal::AllocationBlock after;
  EXPECT_TRUE(slot.Offer(&before));
  EXPECT_EQ(slot.Close(), &before);  // under the closing lock
  EXPECT_FALSE(slot.Offer(&after));
  EXPECT_FALSE(slot.occupied());
  EXPECT_EQ(slot.Peek(), nullptr);
  EXPECT_EQ(slot.Take(), nullptr);
  EXPECT_FALSE(slot.PutBack(&after));
  EXPECT_EQ(slot.Close(), nullptr);  // closed once is closed for good
}

TEST(ReleaseSlotProtocolTest, CloseOfAnEmptySlotReturnsNothing) {
  internal::ReleaseSlot slot;
  internal::AllocationBlock block;
  EXPECT_EQ(slot.Close(), nullptr);
  EXPECT_FALSE(slot.Offer(&block));
  EXPECT_FALSE(slot.occupied());
}

TEST(ReleaseSlotProtocolTest, NoOfferIsLostToAConcurrentClose) {
  // Offers race a close: every block is either refused (its release parks
  // it) or taken by the close, never both, never neither, and an accepted
  // offer is the releasing thread's last access to the slot.
  constexpr int kRounds = 2000;
  int refused = 0;
  int settled = 0;
  for (int round = 0; round < kRounds; ++round) {
    internal::ReleaseSlot slot;
    internal::AllocationBlock block;
    std::atomic<bool> go{false};
    bool offered = false;
    std::thread releaser([&] {
      while (!go.load()) {
      }
      offered = slot.Offer(&block);
    });
    go.store(true);
    internal::AllocationBlock* taken = slot.Close();
    releaser.join();
    if (offered) {
      EXPECT_EQ(taken, &block);
      ++settled;
    } else {
      EXPECT_EQ(taken, nullptr);
      ++refused;
    }
    EXPECT_FALSE(slot.occupied());
    EXPECT_EQ(slot.Take(), nullptr);
  }
  EXPECT_EQ(refused + settled, kRounds);
}

INSTANTIATE_TEST_SUITE_P(Policies, ReleaseSlotTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Deferred" : "Fenced";
                         });

}  // namespace
}  // namespace gpupool
