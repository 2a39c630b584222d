// The in-use list (src/allocation/in_use.h): a lease taken again from the
// release slot keeps its place and writes no other block (their cache
// lines belong to other threads' leases), and the leak report's order,
// newest lease first, comes from the lease clock.

#include "src/allocation/in_use.h"

#include <cstdint>
#include <vector>

#include "gpupool/allocation_cache.h"
#include "gtest/gtest.h"
#include "src/allocation/block.h"

namespace gpupool::internal {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::vector<const AllocationBlock*> LeasesNewestFirst(const InUseList& list) {
  std::vector<const AllocationBlock*> out;
  list.ForEachLeaseNewestFirst(
      [&out](const AllocationBlock& block) { out.push_back(&block); });
  return out;
}

// A block as a lease stamps it: its size, what it asked for, its place on
// the shard's lease clock.
void Lease(AllocationBlock* block, size_t requested, uint64_t leased_at) {
  block->size = kMiB;
  block->requested = requested;
  block->leased_at = leased_at;
}

TEST(InUseListTest, ALeaseTakenAgainWritesNoOtherBlock) {
  AllocationBlock oldest;
  AllocationBlock middle;
  AllocationBlock newest;
  Lease(&oldest, kMiB, 1);
  Lease(&middle, kMiB, 2);
  Lease(&newest, kMiB, 3);
  InUseList list;
  list.Add(&oldest);
  list.Add(&middle);
  list.Add(&newest);
  const BlockLinks middle_links = middle.links;
  const BlockLinks newest_links = newest.links;

  // The oldest lease released into the slot and taken back: the shard
  // stamps it (the newest on the clock) and the list relends it.
  oldest.leased_at = 4;
  list.Relend(&oldest, kMiB - 100);

  // Its neighbour and the list's front are as they were: moving the block
  // to the front would have rewritten both.
  EXPECT_EQ(middle.links.prev, middle_links.prev);
  EXPECT_EQ(middle.links.next, middle_links.next);
  EXPECT_EQ(newest.links.prev, newest_links.prev);
  EXPECT_EQ(newest.links.next, newest_links.next);
  EXPECT_EQ(oldest.requested, kMiB - 100);
  // The leak report still lists it first.
  EXPECT_EQ(LeasesNewestFirst(list),
            (std::vector<const AllocationBlock*>{&oldest, &newest, &middle}));
}

TEST(InUseListTest, RelendChangesOnlyWhatTheLeaseAskedFor) {
  AllocationBlock first;
  AllocationBlock second;
  Lease(&first, kMiB, 1);
  Lease(&second, kMiB / 2, 2);
  InUseList list;
  list.Add(&first);
  list.Add(&second);
  list.RaisePeak();

  first.leased_at = 3;
  list.Relend(&first, 1000);

  AllocationCacheStats stats;
  list.AddTo(&stats);
  EXPECT_EQ(stats.allocations_in_use, 2);
  EXPECT_EQ(stats.bytes_in_use, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(stats.bytes_requested, static_cast<int64_t>(1000 + kMiB / 2));
  EXPECT_EQ(stats.peak_bytes_in_use, static_cast<int64_t>(2 * kMiB));
}

TEST(InUseListTest, TheLeakReportLeavesBlocksBeingFencedOut) {
  AllocationBlock lease;
  AllocationBlock parked;
  Lease(&lease, kMiB, 2);
  Lease(&parked, kMiB, 1);  // its last lease, before it was parked
  InUseList list;
  list.Add(&lease);
  list.Add(&parked);
  list.StartFencing(&parked);

  EXPECT_EQ(LeasesNewestFirst(list),
            (std::vector<const AllocationBlock*>{&lease}));
  int visited = 0;
  list.ForEach([&visited](const AllocationBlock&) { ++visited; });
  EXPECT_EQ(visited, 2);  // the snapshot's walk sees both
  AllocationCacheStats stats;
  list.AddTo(&stats);
  EXPECT_EQ(stats.allocations_in_use, 1);
  EXPECT_EQ(stats.blocks_cached, 1);

  list.Remove(&parked);
  list.Remove(&lease);
  EXPECT_TRUE(LeasesNewestFirst(list).empty());
}

}  // namespace
}  // namespace gpupool::internal
