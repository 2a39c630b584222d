// Segments, split and merge in the AllocationCache on SimBackend: a smaller
// request is carved from a cached block, neighbours merge back, every byte of
// a segment is in exactly one block, fences survive split and merge, and the
// OOM chain frees only what a request needs. Also the free index's bitmap.

#include <cstdint>
#include <map>
#include <random>

#include "gpupool/snapshot.h"
#include "src/allocation/free_index.h"
#include "src/allocation/size_classes.h"
#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;

uintptr_t Address(const PooledAllocation& allocation) {
  return reinterpret_cast<uintptr_t>(allocation.data());
}

TEST(FreeIndexTest, BitmapFindsTheFirstClassAtOrAboveAcrossWords) {
  internal::ClassBitmap bits;
  EXPECT_TRUE(bits.empty());
  EXPECT_EQ(bits.FindAtOrAbove(0), -1);
  for (int size_class : {3, 64, 130, 255}) bits.Set(size_class);
  EXPECT_EQ(bits.FindAtOrAbove(0), 3);
  EXPECT_EQ(bits.FindAtOrAbove(3), 3);
  EXPECT_EQ(bits.FindAtOrAbove(4), 64);
  EXPECT_EQ(bits.FindAtOrAbove(65), 130);
  EXPECT_EQ(bits.FindAtOrAbove(131), 255);
  bits.Clear(255);
  EXPECT_EQ(bits.FindAtOrAbove(131), -1);
  bits.Clear(3);
  bits.Clear(64);
  bits.Clear(130);
  EXPECT_TRUE(bits.empty());
}

TEST(FreeIndexTest, FloorClassIsTheLargestClassNotAboveTheSize) {
  for (size_t bytes = 512; bytes < 64 * kKiB; bytes += 128) {
    const int floor = internal::FloorSizeClass(bytes);
    EXPECT_LE(internal::SizeClassBytes(floor), bytes);
    EXPECT_GT(internal::SizeClassBytes(floor + 1), bytes);
  }
}

TEST_F(AllocationCacheSimTest, SmallerRequestsAreCarvedFromOneSegment) {
  auto cache = NewCache();
  NativeStream stream = NewStream();
  uintptr_t base = 0;
  {
    absl::StatusOr<PooledAllocation> whole =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, stream);
    ASSERT_THAT(whole, IsOk());
    base = Address(*whole);
  }
  {
    absl::StatusOr<PooledAllocation> first =
        cache->Allocate(0, 256 * kKiB, MemoryKind::kDevice, stream);
    absl::StatusOr<PooledAllocation> second =
        cache->Allocate(0, 256 * kKiB, MemoryKind::kDevice, stream);
    ASSERT_THAT(first, IsOk());
    ASSERT_THAT(second, IsOk());
    EXPECT_EQ(Address(*first), base);
    EXPECT_EQ(Address(*second), base + 256 * kKiB);
    EXPECT_EQ(first->capacity(), 256 * kKiB);
    const AllocationCacheStats stats = cache->GetStats();
    EXPECT_EQ(stats.runtime_allocations, 1);
    EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(512 * kKiB));
    EXPECT_EQ(stats.blocks_cached, 1);
  }
  // Both came back and merged with the rest: the whole segment again.
  absl::StatusOr<PooledAllocation> again =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, stream);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(Address(*again), base);
  const AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.runtime_allocations, 1);
  EXPECT_EQ(stats.hits, 3);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(sim_.allocations_made(), 1);
}

TEST_F(AllocationCacheSimTest, LargeBlocksAreNotShreddedForSmallRequests) {
  auto cache = NewCache();
  uintptr_t base = 0;
  {
    absl::StatusOr<PooledAllocation> large = cache->Allocate(0, 64 * kMiB);
    ASSERT_THAT(large, IsOk());
    base = Address(*large);
  }
  // 4 KiB from a 64 MiB block would pin the segment: a segment of its own.
  absl::StatusOr<PooledAllocation> small = cache->Allocate(0, 4 * kKiB);
  ASSERT_THAT(small, IsOk());
  EXPECT_NE(Address(*small), base);
  // 16 MiB is a quarter of it: split.
  absl::StatusOr<PooledAllocation> quarter = cache->Allocate(0, 16 * kMiB);
  ASSERT_THAT(quarter, IsOk());
  EXPECT_EQ(Address(*quarter), base);
  EXPECT_EQ(cache->GetStats().runtime_allocations, 2);
}

TEST_F(AllocationCacheSimTest, EveryByteOfASegmentIsInExactlyOneBlock) {
  auto cache = NewCache();
  NativeStream streams[] = {NewStream(), NewStream(), nullptr};
  std::mt19937 rng(34);
  const size_t sizes[] = {600,        4 * kKiB, 20 * kKiB, 100 * kKiB,
                          300 * kKiB, kMiB + 1, 3 * kMiB,  5 * kMiB};
  std::map<uintptr_t, uintptr_t> live;
  std::vector<PooledAllocation> held;
  for (int op = 0; op < 3000; ++op) {
    if (held.size() >= 12 || (!held.empty() && rng() % 2 == 0)) {
      const size_t index = rng() % held.size();
      live.erase(Address(held[index]));
      held[index].Release();
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(index));
    } else {
      NativeStream stream = streams[rng() % 3];
      absl::StatusOr<PooledAllocation> allocation = cache->Allocate(
          0, sizes[rng() % std::size(sizes)], MemoryKind::kDevice, stream);
      ASSERT_THAT(allocation, IsOk());
      const uintptr_t start = Address(*allocation);
      const uintptr_t end = start + allocation->capacity();
      auto next = live.lower_bound(start);
      ASSERT_TRUE(next == live.end() || next->first >= end) << "overlap";
      ASSERT_TRUE(next == live.begin() || std::prev(next)->second <= start)
          << "overlap";
      live.emplace(start, end);
      held.push_back(*std::move(allocation));
    }
    if (op % 7 == 0) sim_.CompleteAllWork();
    // In use and cached add up to what the runtime handed out.
    const AllocationCacheStats stats = cache->GetStats(0);
    ASSERT_EQ(stats.bytes_in_use + stats.bytes_cached + stats.bytes_retiring,
              static_cast<int64_t>(sim_.bytes_allocated(0)))
        << "after op " << op;
  }
  held.clear();
  const AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.bytes_in_use, 0);
  EXPECT_GT(stats.hits, stats.misses);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(sim_.bytes_allocated(0)));
  sim_.CompleteAllWork();
  ASSERT_THAT(cache->Trim(), IsOk());
  EXPECT_EQ(sim_.live_allocations(0), 0);
  EXPECT_EQ(sim_.misuse_count(), 0);
}

TEST_F(AllocationCacheSimTest, SplitRemainderKeepsItsParentsFence) {
  auto cache = NewCache();  // kWaitForCompletion
  NativeStream mine = NewStream();
  NativeStream other = NewStream();
  uintptr_t base = 0;
  {
    absl::StatusOr<PooledAllocation> whole =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, mine);
    ASSERT_THAT(whole, IsOk());
    base = Address(*whole);
    sim_.SubmitWork(mine, absl::InfiniteDuration());
  }
  auto inside = [&](const PooledAllocation& allocation) {
    return Address(allocation) >= base && Address(allocation) < base + kMiB;
  };
  // Its own stream takes a part at once; the rest still waits for the work.
  absl::StatusOr<PooledAllocation> part =
      cache->Allocate(0, 256 * kKiB, MemoryKind::kDevice, mine);
  ASSERT_THAT(part, IsOk());
  EXPECT_EQ(Address(*part), base);
  absl::StatusOr<PooledAllocation> elsewhere =
      cache->Allocate(0, 256 * kKiB, MemoryKind::kDevice, other);
  ASSERT_THAT(elsewhere, IsOk());
  EXPECT_FALSE(inside(*elsewhere));
  sim_.CompleteAllWork();
  absl::StatusOr<PooledAllocation> after =
      cache->Allocate(0, 256 * kKiB, MemoryKind::kDevice, other);
  ASSERT_THAT(after, IsOk());
  EXPECT_TRUE(inside(*after));
}

TEST_F(AllocationCacheSimTest, MergedBlockWaitsForBothHalvesFences) {
  for (CrossStreamPolicy policy : {CrossStreamPolicy::kWaitForCompletion,
                                   CrossStreamPolicy::kWaitOnStream}) {
    AllocationCacheOptions options;
    options.cross_stream = policy;
    auto cache = NewCache(options);
    NativeStream mine = NewStream();
    NativeStream other = NewStream();
    uintptr_t base = 0;
    {
      absl::StatusOr<PooledAllocation> whole =
          cache->Allocate(0, kMiB, MemoryKind::kDevice, mine);
      ASSERT_THAT(whole, IsOk());
      base = Address(*whole);
    }
    {
      absl::StatusOr<PooledAllocation> low =
          cache->Allocate(0, 512 * kKiB, MemoryKind::kDevice, mine);
      absl::StatusOr<PooledAllocation> high =
          cache->Allocate(0, 512 * kKiB, MemoryKind::kDevice, mine);
      ASSERT_THAT(low, IsOk());
      ASSERT_THAT(high, IsOk());
      ASSERT_EQ(Address(*high), base + 512 * kKiB);
      // The upper half is also used on another stream, still busy there.
      high->RecordUse(other);
      sim_.SubmitWork(other, absl::InfiniteDuration());
    }
    // Merged: fenced on both streams. Its first stream alone may not take
    // it at once any more.
    const int64_t waits = sim_.stream_wait_edges();
    absl::StatusOr<PooledAllocation> again =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, mine);
    ASSERT_THAT(again, IsOk());
    if (policy == CrossStreamPolicy::kWaitForCompletion) {
      EXPECT_NE(Address(*again), base);
    } else {
      // Handed over behind a wait on both halves' events.
      EXPECT_EQ(Address(*again), base);
      EXPECT_GE(sim_.stream_wait_edges() - waits, 2);
    }
    again->Release();
    sim_.CompleteAllWork();
    cache.reset();
    EXPECT_EQ(sim_.misuse_count(), 0);
  }
}

TEST_F(AllocationCacheSimTest, SameStreamCycleOnASplitBlockIsOneCall) {
  auto cache = NewCache();
  NativeStream stream = NewStream();
  ASSERT_THAT(cache->Allocate(0, 4 * kMiB, MemoryKind::kDevice, stream),
              IsOk());           // released at once: a 4 MiB segment cached
  for (int i = 0; i < 3; ++i) {  // warm up: events settle as spares
    ASSERT_THAT(cache->Allocate(0, kMiB, MemoryKind::kDevice, stream), IsOk());
  }
  const int64_t calls = sim_.total_calls();
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<PooledAllocation> part =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, stream);
    ASSERT_THAT(part, IsOk());
  }
  EXPECT_EQ(sim_.total_calls() - calls, 100);  // one event record each
  EXPECT_EQ(cache->GetStats().runtime_allocations, 1);
}

TEST_F(AllocationCacheSimTest, MixedSizesOnOneStreamStayNearOneCallACycle) {
  // Blocks split and merge all the time: their events move between blocks as
  // fences and spares, and a cycle still records one event and takes none
  // from the EventPool (whose return would query it).
  auto cache = NewCache();
  NativeStream stream = NewStream();
  std::mt19937 rng(7);
  std::vector<size_t> sizes;
  for (int i = 0; i < 64; ++i) sizes.push_back(512 + rng() % (4 * kMiB));
  std::vector<PooledAllocation> ring(8);
  auto cycle = [&](int i) {
    ring[i % ring.size()] = PooledAllocation();  // release the oldest
    absl::StatusOr<PooledAllocation> allocation = cache->Allocate(
        0, sizes[rng() % sizes.size()], MemoryKind::kDevice, stream);
    ASSERT_THAT(allocation, IsOk());
    ring[i % ring.size()] = *std::move(allocation);
  };
  for (int i = 0; i < 4000; ++i) cycle(i);
  const int64_t calls = sim_.total_calls();
  const int64_t records = sim_.calls(SimOp::kEventRecord);
  for (int i = 0; i < 4000; ++i) cycle(i);
  EXPECT_LE(sim_.total_calls() - calls, 4000 + 40);
  EXPECT_LE(sim_.calls(SimOp::kEventRecord) - records, 4000);
  ring.clear();
}

TEST_F(AllocationCacheSimTest, StashedSpareEventsDieWithTheirGeneration) {
  auto cache = NewCache();
  {
    // Split and merge on a stream until the shard keeps spare events.
    absl::StatusOr<NativeStream> stream = sim_.CreateStream(0, {});
    ASSERT_THAT(stream, IsOk());
    std::mt19937 rng(11);
    std::vector<PooledAllocation> ring(8);
    for (int i = 0; i < 2000; ++i) {
      ring[i % ring.size()] = PooledAllocation();
      absl::StatusOr<PooledAllocation> allocation = cache->Allocate(
          0, 512 + rng() % (2 * kMiB), MemoryKind::kDevice, *stream);
      ASSERT_THAT(allocation, IsOk());
      ring[i % ring.size()] = *std::move(allocation);
    }
    ring.clear();
    ASSERT_THAT(sim_.DestroyStream(0, *stream), IsOk());
  }
  sim_.PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  health_->Poison(0, absl::InternalError("cudaErrorIllegalAddress"));
  sim_.ResetDevice(0);
  ASSERT_THAT(health_->Recover(0), IsOk());
  // The new generation's releases record fresh events, never stashed ones
  // of the dead context (the simulator flags a record on those).
  NativeStream stream = NewStream();
  for (int i = 0; i < 50; ++i) {
    ASSERT_THAT(cache->Allocate(0, 4096 + 512 * i, MemoryKind::kDevice, stream),
                IsOk());
  }
  EXPECT_EQ(sim_.misuse_count(), 0);
}

TEST_F(AllocationCacheSimTest, OutOfMemoryFreesOnlyWhatTheRequestNeeds) {
  // The OOM chain alone gives memory back here (no give-back before a miss).
  AllocationCacheOptions options;
  options.give_back_above_percent = -1;
  auto cache = NewCache(options);
  sim_.SetMemoryLimit(0, 4 * kMiB);
  {
    std::vector<PooledAllocation> held;
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, kMiB);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
  }
  ASSERT_EQ(cache->GetStats().bytes_cached, static_cast<int64_t>(4 * kMiB));
  // 2 MiB fits in no cached block: the chain frees two 1 MiB segments, not
  // four, and the retry succeeds.
  absl::StatusOr<PooledAllocation> big = cache->Allocate(0, 2 * kMiB);
  ASSERT_THAT(big, IsOk());
  const AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.oom_retries, 1);
  EXPECT_EQ(stats.runtime_frees, 2);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(2 * kMiB));
  // Back in the cache, the 2 MiB segment serves a smaller request.
  big->Release();
  absl::StatusOr<PooledAllocation> part = cache->Allocate(0, 1536 * kKiB);
  ASSERT_THAT(part, IsOk());
  EXPECT_EQ(cache->GetStats().runtime_allocations, 5);
}

// The split policy and the large-request rounding are options: by default
// a 16 MiB free block does not serve a 1 MiB request (a segment of its own
// does), with max_split_ratio = 0 it does; requests above
// large_rounding_from_bytes are leased in multiples of large_granule_bytes.
TEST_F(AllocationCacheSimTest, SplitPolicyAndLargeRoundingAreOptions) {
  NativeStream stream = NewStream();
  for (const size_t ratio : {size_t{8}, size_t{0}}) {
    AllocationCacheOptions options;
    options.max_split_ratio = ratio;
    auto cache = NewCache(options);
    uintptr_t base = 0;
    {
      absl::StatusOr<PooledAllocation> large =
          cache->Allocate(0, 16 * kMiB, MemoryKind::kDevice, stream);
      ASSERT_THAT(large, IsOk());
      base = Address(*large);
    }
    absl::StatusOr<PooledAllocation> small =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, stream);
    ASSERT_THAT(small, IsOk());
    const AllocationCacheStats stats = cache->GetStats();
    if (ratio == 0) {
      EXPECT_EQ(Address(*small), base);
      EXPECT_EQ(stats.runtime_allocations, 1);
    } else {
      EXPECT_NE(Address(*small), base);
      EXPECT_EQ(stats.runtime_allocations, 2);
    }
  }
  {
    auto cache = NewCache();
    absl::StatusOr<PooledAllocation> rounded =
        cache->Allocate(0, 9 * kMiB + 1, MemoryKind::kDevice, stream);
    ASSERT_THAT(rounded, IsOk());
    EXPECT_EQ(rounded->capacity(), 10 * kMiB);
  }
  AllocationCacheOptions coarse;
  coarse.large_rounding_from_bytes = 4 * kMiB;
  coarse.large_granule_bytes = 4 * kMiB;
  auto cache = NewCache(coarse);
  absl::StatusOr<PooledAllocation> rounded =
      cache->Allocate(0, 9 * kMiB + 1, MemoryKind::kDevice, stream);
  ASSERT_THAT(rounded, IsOk());
  EXPECT_EQ(rounded->capacity(), 12 * kMiB);
}

// A part of a segment whose last use cannot be proven complete (its stream
// failed) is leaked: the rest of the segment is still reused, but the
// segment never goes back to the runtime — freeing it would free the leaked
// part under work that may still use it (and its address is not the
// segment's: the runtime would refuse it as an interior pointer).
TEST_F(AllocationCacheSimTest, LeakedPartKeepsItsSegmentFromTheRuntime) {
  auto cache = NewCache();
  NativeStream stream = NewStream();
  NativeStream failing = NewStream();
  uintptr_t base = 0;
  {
    absl::StatusOr<PooledAllocation> whole =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, stream);
    ASSERT_THAT(whole, IsOk());
    base = Address(*whole);
  }
  {
    absl::StatusOr<PooledAllocation> low =
        cache->Allocate(0, 256 * kKiB, MemoryKind::kDevice, failing);
    absl::StatusOr<PooledAllocation> high =
        cache->Allocate(0, 256 * kKiB, MemoryKind::kDevice, stream);
    ASSERT_THAT(low, IsOk());
    ASSERT_THAT(high, IsOk());
    ASSERT_EQ(Address(*low), base);
    ASSERT_EQ(Address(*high), base + 256 * kKiB);
    // Neither an event nor a synchronize proves `low`'s work done.
    sim_.FailNext(SimOp::kEventRecord, absl::UnavailableError("injected"));
    sim_.FaultStream(failing, absl::InternalError("stream failed"));
    low->Release();
  }
  AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.blocks_leaked, 1);
  EXPECT_EQ(stats.runtime_frees, 0);

  MemorySnapshot snapshot = TakeSnapshot(*cache);
  const auto& segments = snapshot.devices[0].memory[0].segments;
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].address, base);
  EXPECT_EQ(segments[0].bytes, kMiB);
  ASSERT_FALSE(segments[0].blocks.empty());
  EXPECT_EQ(segments[0].blocks[0].use, BlockUse::kLeaked);
  EXPECT_EQ(segments[0].blocks[0].offset, 0u);
  EXPECT_EQ(segments[0].blocks[0].bytes, 256 * kKiB);

  // The rest of the segment is still served from the cache...
  {
    absl::StatusOr<PooledAllocation> rest =
        cache->Allocate(0, 512 * kKiB, MemoryKind::kDevice, stream);
    ASSERT_THAT(rest, IsOk());
    EXPECT_EQ(Address(*rest), base + 256 * kKiB);
  }
  // ...but a trim, and the cache's end, free nothing of it.
  EXPECT_THAT(cache->Trim(), IsOk());
  stats = cache->GetStats();
  EXPECT_EQ(stats.runtime_allocations, 1);
  EXPECT_EQ(stats.runtime_frees, 0);
  cache.reset();
  EXPECT_EQ(sim_.misuse_count(), 0);
  EXPECT_EQ(sim_.live_allocations(0), 1);
  // The leaked segment is the test's to clean up.
  EXPECT_THAT(sim_.Free(0, reinterpret_cast<void*>(base), MemoryKind::kDevice),
              IsOk());
}

}  // namespace
}  // namespace gpupool
