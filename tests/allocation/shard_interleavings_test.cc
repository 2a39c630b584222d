// The shard driven directly, so that an interleaving with another thread is
// exact: what one thread leaves between two of its calls, as another thread
// sees it.
//
// * A release that read the device's generation just before another thread
//   poisoned the device, recovered it and swept the shard: the block it
//   brings is of a dead generation, and the sweep that would have taken it
//   out is over. Whatever path the release takes into the shard (TakeBack,
//   Park, the release slot), the block must never be leased again: the
//   runtime that allocated it is gone.
// * A parked block taken off its lane to have its fence recorded (deferred
//   fences): until its release ends, observers must see the cached block it
//   still is, not a lease.

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "gpupool/allocation_cache.h"
#include "gpupool/snapshot.h"
#include "gtest/gtest.h"
#include "src/allocation/block.h"
#include "src/allocation/shard.h"
#include "src/allocation/size_classes.h"

namespace gpupool::internal {
namespace {

constexpr size_t kBytes = size_t{1} << 20;
// The release read generation 1; the poison made 2, the recovery 3, and
// the other thread's next shard call swept for 3.
constexpr uint64_t kReadByTheRelease = 1;
constexpr uint64_t kAfterRecovery = 3;

class ShardInterleavingTest : public ::testing::Test {
 protected:
  ShardInterleavingTest()
      : shard_(/*device=*/0, MemoryKind::kDevice,
               SizeClassCount(AllocationCacheOptions().max_cached_block_bytes),
               AllocationCacheOptions().max_split_ratio,
               std::numeric_limits<size_t>::max(), &device_cached_bytes_) {
    shard_.set_lease_holds(&lease_holds_);
  }

  ~ShardInterleavingTest() override {
    for (AllocationBlock* block : stale_) delete block;
  }

  LeaseRequest Request() const {
    LeaseRequest request;
    request.bytes = kBytes;
    request.lease_bytes = kBytes;
    request.stream = stream_;
    return request;
  }

  // A whole segment of generation 1, leased on `stream_`.
  AllocationBlock* Leased(size_t bytes = kBytes) {
    auto* block = new AllocationBlock();
    block->ptr = reinterpret_cast<void*>(uintptr_t{0x7f0000000000} +
                                         shard_.Stats().runtime_allocations *
                                             (uintptr_t{1} << 30));
    block->size = bytes;
    block->size_class = FloorSizeClass(bytes);
    block->device = 0;
    block->generation = kReadByTheRelease;
    LeaseRequest request = Request();
    request.bytes = bytes;
    request.lease_bytes = bytes;
    shard_.LeaseNew(block, request, CacheCounter::kMiss);
    return block;
  }

  // Another thread's first shard call after the recovery.
  void SweepAfterRecovery() {
    shard_.TakeStale(kAfterRecovery, &stale_);
    stale_.clear();  // nothing cached yet: nothing to take
  }

  // What the recovered device's next request of the same stream and size
  // gets from each place a cached block can be: the lane, then the index.
  AllocationBlock* NextRequestTakes() {
    bool deferred_left = false;
    if (AllocationBlock* block = shard_.TakeParked(Request(), kAfterRecovery,
                                                   &stale_, &deferred_left)) {
      return block;
    }
    BlockVector candidates;
    AllocationBlock* block = shard_.TakeCached(
        Request(), /*pending_checks=*/0, kAfterRecovery, &candidates, &stale_);
    EXPECT_TRUE(candidates.empty());
    return block;
  }

  // A request of another stream than the released blocks'.
  LeaseRequest OtherStreamRequest() const {
    LeaseRequest request = Request();
    request.stream = reinterpret_cast<NativeStream>(uintptr_t{0x52});
    return request;
  }

  // A block released on `stream_` with its ready event recorded, left in
  // the release slot, then taken by `other`'s request as its one candidate
  // (the lone-lane shortcut). nullptr, with a failure, if it was not.
  AllocationBlock* SlotCandidateFor(const LeaseRequest& other) {
    AllocationBlock* block = Leased();
    block->release_stream = stream_;
    if (!shard_.Stash(block, kReadByTheRelease)) {
      ADD_FAILURE() << "not stashed";
      return nullptr;
    }
    BlockVector candidates;
    EXPECT_EQ(shard_.TakeCached(other, /*pending_checks=*/1, kReadByTheRelease,
                                &candidates, &stale_),
              nullptr);
    if (candidates.size() != 1 || candidates[0] != block) {
      ADD_FAILURE() << "the slot's block is not the one candidate";
      return nullptr;
    }
    return block;
  }

  // A block released on `stream_` with its ready event recorded, left in
  // the release slot, then leased unchecked to `other`'s request (the
  // lone-lane shortcut, with the lease made before the query). Empty, with
  // a failure, if it was not.
  std::optional<UncheckedLease> UncheckedFor(const LeaseRequest& other) {
    AllocationBlock* block = Leased();
    block->release_stream = stream_;
    if (!shard_.Stash(block, kReadByTheRelease)) {
      ADD_FAILURE() << "not stashed";
      return std::nullopt;
    }
    BlockVector candidates;
    UncheckedLease unchecked;
    EXPECT_EQ(shard_.TakeCached(other, /*pending_checks=*/1, kReadByTheRelease,
                                &candidates, &stale_, &unchecked),
              nullptr);
    EXPECT_TRUE(candidates.empty());
    if (unchecked.block != block) {
      ADD_FAILURE() << "the slot's block is not leased unchecked";
      return std::nullopt;
    }
    return unchecked;
  }

  // Everything the shard holds, taken (and closed with `close`): the
  // cached blocks are deleted, the parked ones go to stale_.
  void TakeEverything(bool close) {
    BlockVector blocks;
    std::vector<void*> stable;
    SpareEvents spares;
    shard_.TakeEverything(close, /*leak=*/false, kReadByTheRelease, &blocks,
                          &stable, &spares, &stale_);
    for (AllocationBlock* taken : blocks) delete taken;
  }

  std::atomic<size_t> device_cached_bytes_{0};
  // The lease owner's holds: the cache's own and the one lease these tests
  // release (a stashed block carries its hold until it leaves the slot).
  std::atomic<int64_t> lease_holds_{2};
  AllocationShard shard_;
  NativeStream stream_ = reinterpret_cast<NativeStream>(uintptr_t{0x51});
  BlockVector stale_;
};

TEST_F(ShardInterleavingTest, TakeBackDropsABlockOfASweptGeneration) {
  AllocationBlock* block = Leased();
  SweepAfterRecovery();

  const AllocationShard::AfterReturn taken =
      shard_.TakeBack(block, BlockState::kIdle, kReadByTheRelease);

  EXPECT_EQ(taken.to_delete, block);  // forgotten, no runtime call
  EXPECT_EQ(taken.to_free, nullptr);
  delete taken.to_delete;
  const AllocationCacheStats stats = shard_.Stats();
  EXPECT_EQ(stats.blocks_dropped, 1);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(NextRequestTakes(), nullptr);
}

TEST_F(ShardInterleavingTest, ParkRefusesABlockOfASweptGeneration) {
  AllocationBlock* block = Leased();
  SweepAfterRecovery();

  AllocationBlock* to_poll = nullptr;
  EXPECT_FALSE(shard_.Park(block, kReadByTheRelease, &to_poll));
  EXPECT_EQ(shard_.Stats().blocks_cached, 0);
  EXPECT_EQ(shard_.Stats().allocations_in_use, 1);  // still the caller's
  // The release goes on as a refused Park's does.
  const AllocationShard::AfterReturn taken =
      shard_.TakeBack(block, BlockState::kIdle, kReadByTheRelease);
  EXPECT_EQ(taken.to_delete, block);
  delete taken.to_delete;
  EXPECT_EQ(NextRequestTakes(), nullptr);
}

TEST_F(ShardInterleavingTest,
       TheReleaseSlotsBlockIsSweptBeforeItsStreamTakesIt) {
  AllocationBlock* block = Leased();
  SweepAfterRecovery();

  // Without the lock the slot cannot know of the sweep: it takes the block.
  ASSERT_TRUE(shard_.Stash(block, kReadByTheRelease));

  EXPECT_TRUE(block->slot_hold);
  EXPECT_EQ(lease_holds_.load(), 2);

  EXPECT_EQ(NextRequestTakes(), nullptr);
  ASSERT_EQ(stale_.size(), 1u);
  EXPECT_EQ(stale_[0], block);
  // Out of the slot, and not leased: the hold it carried is dropped.
  EXPECT_FALSE(block->slot_hold);
  EXPECT_EQ(lease_holds_.load(), 1);
  const AllocationCacheStats stats = shard_.Stats();
  EXPECT_EQ(stats.blocks_dropped, 1);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(device_cached_bytes_.load(), 0u);
}

// The slot's block taken back by its stream's next request keeps the hold
// it carried: the new lease takes it over (AllocationCacheCore::MakeLease).
TEST_F(ShardInterleavingTest, ASlotHitHandsTheCarriedHoldToTheNextLease) {
  AllocationBlock* block = Leased();
  ASSERT_TRUE(shard_.Stash(block, kReadByTheRelease));
  bool deferred_left = false;
  EXPECT_EQ(
      shard_.TakeParked(Request(), kReadByTheRelease, &stale_, &deferred_left),
      block);
  EXPECT_TRUE(block->slot_hold);
  EXPECT_EQ(lease_holds_.load(), 2);
  EXPECT_EQ(shard_.Stats().allocations_in_use, 1);
  block->slot_hold = false;  // what MakeLease does
  const AllocationShard::AfterReturn taken =
      shard_.TakeBack(block, BlockState::kIdle, kReadByTheRelease);
  EXPECT_EQ(taken.to_delete, nullptr);
}

// The cache's end closes the slot under its lock: the block waiting there
// drops its hold, and no release can stash a block afterwards.
TEST_F(ShardInterleavingTest, TheCachesEndTakesTheSlotsHoldAndClosesIt) {
  AllocationBlock* block = Leased();
  AllocationBlock* later = Leased(2 * kBytes);
  ASSERT_TRUE(shard_.Stash(block, kReadByTheRelease));
  TakeEverything(/*close=*/true);
  EXPECT_FALSE(block->slot_hold);
  EXPECT_EQ(lease_holds_.load(), 1);
  EXPECT_FALSE(shard_.Stash(later, kReadByTheRelease));
  EXPECT_FALSE(later->slot_hold);
  EXPECT_EQ(lease_holds_.load(), 1);
  const AllocationShard::AfterReturn refused =
      shard_.TakeBack(later, BlockState::kIdle, kReadByTheRelease);
  EXPECT_EQ(refused.to_delete, later);  // the closed shard leaks it
  delete refused.to_delete;
}

TEST_F(ShardInterleavingTest, ASlotBlockSettledByAnObserverIsStillSwept) {
  AllocationBlock* block = Leased();
  SweepAfterRecovery();
  ASSERT_TRUE(shard_.Stash(block, kReadByTheRelease));

  // Stats settles the slot (parks the block) without a sweep of its own.
  EXPECT_EQ(shard_.Stats().blocks_cached, 1);

  EXPECT_EQ(NextRequestTakes(), nullptr);
  ASSERT_EQ(stale_.size(), 1u);
  EXPECT_EQ(stale_[0], block);
  EXPECT_EQ(shard_.Stats().blocks_dropped, 1);
  EXPECT_EQ(shard_.Stats().blocks_cached, 0);
}

// Another stream's request takes a fenced block out as its candidate,
// checks its event outside the lock and comes back to lease it; meanwhile
// another thread poisoned, recovered and swept. The candidate is dropped,
// not leased.
TEST_F(ShardInterleavingTest, ACandidateCheckedAcrossASweepIsDropped) {
  const LeaseRequest other_stream = OtherStreamRequest();
  AllocationBlock* block = SlotCandidateFor(other_stream);
  ASSERT_NE(block, nullptr);

  SweepAfterRecovery();
  BlockVector garbage;
  EXPECT_EQ(shard_.SettleCandidates(block, /*waited=*/false, {}, {}, {},
                                    other_stream, kReadByTheRelease, &garbage),
            nullptr);

  ASSERT_EQ(garbage.size(), 1u);
  EXPECT_EQ(garbage[0], block);
  // It came from the release slot with its lease's hold: not leased, the
  // hold is dropped.
  EXPECT_FALSE(block->slot_hold);
  EXPECT_EQ(lease_holds_.load(), 1);
  delete block;
  const AllocationCacheStats stats = shard_.Stats();
  EXPECT_EQ(stats.blocks_dropped, 1);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.hits, 0);
}

// Another stream's request takes the slot's block as its candidate: the
// hold the block carried goes to the request's lease when the candidate is
// chosen, and is dropped when it is not (still pending: kept cached).
TEST_F(ShardInterleavingTest, ASlotCandidateHandsItsHoldOnlyToItsLease) {
  const LeaseRequest other_stream = OtherStreamRequest();
  for (const bool chosen : {true, false}) {
    AllocationBlock* block = SlotCandidateFor(other_stream);
    ASSERT_NE(block, nullptr);
    EXPECT_TRUE(block->slot_hold);
    BlockVector garbage;
    BlockVector keep;
    if (!chosen) keep.push_back(block);
    EXPECT_EQ(
        shard_.SettleCandidates(chosen ? block : nullptr,
                                /*waited=*/false, keep, {}, {}, other_stream,
                                kReadByTheRelease, &garbage),
        chosen ? block : nullptr);
    EXPECT_TRUE(garbage.empty());
    EXPECT_EQ(block->slot_hold, chosen);
    EXPECT_EQ(lease_holds_.load(), chosen ? 2 : 1);
    if (chosen) {
      block->slot_hold = false;  // what MakeLease does: the lease holds
      ASSERT_EQ(shard_.TakeBack(block, BlockState::kIdle, kReadByTheRelease)
                    .to_delete,
                nullptr);
      lease_holds_.fetch_sub(1);  // that lease's release drops it
    }
    EXPECT_EQ(lease_holds_.load(), 1);
    lease_holds_.store(2);  // the next round's lease
    TakeEverything(/*close=*/false);
  }
}

// A sweep run again for a stale block (NoteStaleLocked) by a caller that
// read an old generation long ago drops only what is older than the newest
// generation the shard has seen, and never a block of a generation newer
// still (allocated after a later recovery, before any sweep for it).
TEST_F(ShardInterleavingTest, ALateSweepDropsOnlyWhatIsOlderThanTheNewestSeen) {
  constexpr uint64_t kNewer = kAfterRecovery + 2;
  AllocationBlock* stale = Leased();
  AllocationBlock* current = Leased(2 * kBytes);
  current->generation = kAfterRecovery;
  AllocationBlock* newer = Leased(4 * kBytes);
  newer->generation = kNewer;
  SweepAfterRecovery();
  ASSERT_EQ(
      shard_.TakeBack(current, BlockState::kIdle, kAfterRecovery).to_delete,
      nullptr);
  ASSERT_EQ(shard_.TakeBack(newer, BlockState::kIdle, kNewer).to_delete,
            nullptr);
  ASSERT_TRUE(shard_.Stash(stale, kReadByTheRelease));
  ASSERT_EQ(shard_.Stats().blocks_cached, 3);  // settled: parked

  shard_.TakeStale(kReadByTheRelease, &stale_);

  ASSERT_EQ(stale_.size(), 1u);
  EXPECT_EQ(stale_[0], stale);
  const AllocationCacheStats stats = shard_.Stats();
  EXPECT_EQ(stats.blocks_dropped, 1);
  EXPECT_EQ(stats.blocks_cached, 2);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(6 * kBytes));
}

// Under deferred fences a parked block is taken off its lane (Unpark) to
// have its fence recorded, then released again; in between it sits in the
// in-use list. Another thread looking then sees the parked block.
TEST_F(ShardInterleavingTest, ABlockBeingFencedIsShownAsTheParkedBlockItWas) {
  AllocationBlock* block = Leased();
  AllocationBlock* to_poll = nullptr;
  ASSERT_TRUE(shard_.Park(block, kReadByTheRelease, &to_poll));  // deferred
  const AllocationCacheStats parked = shard_.Stats();
  ASSERT_EQ(parked.allocations_in_use, 0);
  ASSERT_EQ(parked.blocks_cached, 1);

  BlockVector fencing;
  shard_.Unpark(std::nullopt, /*deferred_only=*/true, &fencing);
  ASSERT_EQ(fencing.size(), 1u);
  ASSERT_EQ(fencing[0], block);

  // What another thread sees while the fence is recorded.
  const AllocationCacheStats seen = shard_.Stats();
  EXPECT_EQ(seen.allocations_in_use, 0);
  EXPECT_EQ(seen.bytes_in_use, 0);
  EXPECT_EQ(seen.bytes_rounded, 0);
  EXPECT_EQ(seen.bytes_requested, 0);
  EXPECT_EQ(seen.blocks_cached, 1);
  EXPECT_EQ(seen.bytes_cached, static_cast<int64_t>(kBytes));
  std::vector<OutstandingLease> leases;
  shard_.AppendOutstanding(&leases);
  EXPECT_TRUE(leases.empty());
  int leased = 0;
  int pending = 0;
  shard_.ForEachBlock(
      [&](const AllocationBlock& seen_block, BlockUse use) {
        EXPECT_EQ(&seen_block, block);
        leased += use == BlockUse::kLeased;
        pending += use == BlockUse::kPending;
      },
      [](absl::string_view, const StableBuffer&) {});
  EXPECT_EQ(leased, 0);
  EXPECT_EQ(pending, 1);
  // A lease meanwhile: the peak counts its bytes, not the fenced block's.
  AllocationBlock* other = Leased(2 * kBytes);
  EXPECT_EQ(shard_.Stats().peak_bytes_in_use, static_cast<int64_t>(2 * kBytes));
  EXPECT_EQ(shard_.Stats().allocations_in_use, 1);

  // Fenced, it is released again: cached, as it was shown.
  const AllocationShard::AfterReturn taken =
      shard_.TakeBack(block, BlockState::kIdle, kReadByTheRelease);
  EXPECT_EQ(taken.to_delete, nullptr);
  EXPECT_EQ(taken.to_free, nullptr);
  const AllocationCacheStats after = shard_.Stats();
  EXPECT_EQ(after.allocations_in_use, 1);  // `other`
  EXPECT_EQ(after.bytes_in_use, static_cast<int64_t>(2 * kBytes));
  EXPECT_EQ(after.blocks_cached, 1);
  EXPECT_EQ(after.bytes_cached, static_cast<int64_t>(kBytes));
  leases.clear();
  shard_.AppendOutstanding(&leases);
  EXPECT_EQ(leases.size(), 1u);
  EXPECT_EQ(
      shard_.TakeBack(other, BlockState::kIdle, kReadByTheRelease).to_delete,
      nullptr);
}

// Another stream's request leases the slot's block before querying its
// event: until the query answers, every observer sees that lease and its
// hit. Still pending, the lease is undone: the block is back as it was
// released (its stream, its uses, its lease id, cached), the hit
// uncounted, the hold dropped.
TEST_F(ShardInterleavingTest, AnUncheckedLeaseIsALeaseUntilItIsUndone) {
  const LeaseRequest other_stream = OtherStreamRequest();
  std::optional<UncheckedLease> unchecked = UncheckedFor(other_stream);
  ASSERT_TRUE(unchecked.has_value());
  AllocationBlock* block = unchecked->block;
  const uint64_t released_lease_id = unchecked->lease_id;
  AllocationCacheStats stats = shard_.Stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.allocations_in_use, 1);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(block->stream, other_stream.stream);
  ASSERT_EQ(block->uses.size(), 1u);
  EXPECT_EQ(block->uses.front(), other_stream.stream);
  EXPECT_NE(block->lease_id, released_lease_id);
  EXPECT_TRUE(block->slot_hold);
  EXPECT_EQ(lease_holds_.load(), 2);

  BlockVector garbage;
  shard_.UndoUncheckedLease(*unchecked, BlockState::kPending, kReadByTheRelease,
                            &garbage);

  EXPECT_TRUE(garbage.empty());
  stats = shard_.Stats();
  EXPECT_EQ(stats.hits, 0);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.bytes_requested, 0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(kBytes));
  EXPECT_EQ(block->stream, stream_);
  ASSERT_EQ(block->uses.size(), 1u);
  EXPECT_EQ(block->uses.front(), stream_);
  EXPECT_EQ(block->lease_id, released_lease_id);
  EXPECT_FALSE(block->slot_hold);
  EXPECT_EQ(lease_holds_.load(), 1);
  // Cached (ready here: these tests record no events), its stream's next
  // request takes it.
  BlockVector candidates;
  EXPECT_EQ(shard_.TakeCached(Request(), /*pending_checks=*/1,
                              kReadByTheRelease, &candidates, &stale_),
            block);
  EXPECT_TRUE(candidates.empty());
  EXPECT_EQ(shard_.Stats().hits, 1);
  ASSERT_EQ(
      shard_.TakeBack(block, BlockState::kIdle, kReadByTheRelease).to_delete,
      nullptr);
  TakeEverything(/*close=*/false);
}

// The query of an unchecked lease answered after another thread poisoned,
// recovered and swept (or met a sticky fault, or an event it cannot trust):
// the block is never leased, and goes as an unchosen candidate would.
TEST_F(ShardInterleavingTest, AnUncheckedLeaseUndoneDeadOrUnprovenIsForgotten) {
  const LeaseRequest other_stream = OtherStreamRequest();
  struct Case {
    BlockState state;
    uint64_t generation;
    bool swept;
    int64_t dropped;
    int64_t leaked;
  };
  for (const Case& c :
       {Case{BlockState::kIdle, kAfterRecovery, true, 1, 0},
        Case{BlockState::kDrop, kReadByTheRelease, false, 1, 0},
        Case{BlockState::kLeak, kReadByTheRelease, false, 0, 1}}) {
    SCOPED_TRACE(static_cast<int>(c.state));
    const AllocationCacheStats before = shard_.Stats();
    std::optional<UncheckedLease> unchecked = UncheckedFor(other_stream);
    ASSERT_TRUE(unchecked.has_value());
    if (c.swept) SweepAfterRecovery();
    BlockVector garbage;
    shard_.UndoUncheckedLease(*unchecked, c.state, c.generation, &garbage);
    ASSERT_EQ(garbage.size(), 1u);
    EXPECT_EQ(garbage[0], unchecked->block);
    EXPECT_FALSE(unchecked->block->slot_hold);
    EXPECT_EQ(lease_holds_.load(), 1);
    delete garbage[0];
    const AllocationCacheStats stats = shard_.Stats();
    EXPECT_EQ(stats.hits, 0);
    EXPECT_EQ(stats.allocations_in_use, 0);
    EXPECT_EQ(stats.blocks_cached, 0);
    EXPECT_EQ(stats.blocks_dropped - before.blocks_dropped, c.dropped);
    EXPECT_EQ(stats.blocks_leaked - before.blocks_leaked, c.leaked);
    lease_holds_.store(2);  // the next case's lease
  }
}

// Kept, an unchecked lease is a lease like any other: the hold its block
// carried is its lease's, and its release takes the block back.
TEST_F(ShardInterleavingTest, AKeptUncheckedLeaseIsReleasedAsAnyLease) {
  const LeaseRequest other_stream = OtherStreamRequest();
  std::optional<UncheckedLease> unchecked = UncheckedFor(other_stream);
  ASSERT_TRUE(unchecked.has_value());
  AllocationBlock* block = unchecked->block;
  block->slot_hold = false;  // what MakeLease does: the lease holds
  block->release_stream = other_stream.stream;
  ASSERT_EQ(
      shard_.TakeBack(block, BlockState::kIdle, kReadByTheRelease).to_delete,
      nullptr);
  lease_holds_.fetch_sub(1);  // that lease's release drops it
  EXPECT_EQ(lease_holds_.load(), 1);
  const AllocationCacheStats stats = shard_.Stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.blocks_cached, 1);
  TakeEverything(/*close=*/false);
}

}  // namespace
}  // namespace gpupool::internal
