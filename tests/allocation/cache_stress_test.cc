// The AllocationCache under many threads on SimBackend: no two live
// allocations ever overlap, and the counters add up afterwards.

#include "tests/allocation/sim_fixture.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;

class AllocationCacheStressTest
    : public AllocationCacheSimTest,
      public ::testing::WithParamInterface<CrossStreamPolicy> {};

TEST_P(AllocationCacheStressTest, NoTwoLiveAllocationsOverlap) {
  constexpr int kThreads = 8;
  constexpr int kOps = 10000;
  auto cache = NewCache({.max_cached_bytes = 8 * kMiB,
                         .max_cached_block_bytes = 2 * kMiB,
                         .cross_stream = GetParam()});
  std::vector<std::vector<NativeStream>> streams(2);
  for (int device = 0; device < 2; ++device) {
    for (int i = 0; i < 3; ++i) streams[device].push_back(NewStream(device));
  }
  const std::vector<size_t> sizes = {1,     512,  700,      4096,
                                     65537, kMiB, kMiB + 3, 3 * kMiB};

  absl::Mutex mu;
  // Live ranges: start -> end (sim addresses are unique across devices).
  std::map<uintptr_t, uintptr_t> live;  // guarded by mu
  std::atomic<int64_t> successes{0};
  std::atomic<int64_t> overlaps{0};

  auto worker = [&](int seed) {
    std::mt19937 rng(seed);
    std::vector<PooledAllocation> held;
    auto release_one = [&] {
      const size_t index = rng() % held.size();
      PooledAllocation& victim = held[index];
      {
        // Forget the range before the block can be handed out again.
        absl::MutexLock lock(&mu);
        live.erase(reinterpret_cast<uintptr_t>(victim.data()));
      }
      if (rng() % 4 == 0 && victim.stream() != nullptr) {
        sim_.SubmitWork(victim.stream(), absl::Microseconds(rng() % 50));
      }
      victim.Release();
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(index));
    };
    for (int op = 0; op < kOps; ++op) {
      if (held.size() >= 6 || (!held.empty() && rng() % 2 == 0)) {
        release_one();
        continue;
      }
      const int device = static_cast<int>(rng() % 2);
      const MemoryKind kind =
          rng() % 8 == 0 ? MemoryKind::kPinnedHost : MemoryKind::kDevice;
      const size_t pick = rng() % (streams[device].size() + 1);
      NativeStream stream =
          pick == streams[device].size() ? nullptr : streams[device][pick];
      const size_t bytes = sizes[rng() % sizes.size()];
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(device, bytes, kind, stream);
      ASSERT_THAT(allocation, IsOk());
      successes.fetch_add(1);
      if (rng() % 5 == 0) {
        allocation->RecordUse(streams[device][rng() % streams[device].size()]);
      }
      const uintptr_t start = reinterpret_cast<uintptr_t>(allocation->data());
      const uintptr_t end = start + allocation->capacity();
      {
        absl::MutexLock lock(&mu);
        auto next = live.lower_bound(start);
        if (next != live.end() && next->first < end) overlaps.fetch_add(1);
        if (next != live.begin() && std::prev(next)->second > start) {
          overlaps.fetch_add(1);
        }
        live.emplace(start, end);
      }
      held.push_back(*std::move(allocation));
    }
    while (!held.empty()) release_one();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, 1000 + t);
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(sim_.misuse_count(), 0);
  AllocationCacheStats total = cache->GetStats();
  AllocationCacheStats sum = cache->GetStats(0);
  sum += cache->GetStats(1);
  EXPECT_EQ(sum.hits, total.hits);
  EXPECT_EQ(sum.runtime_allocations, total.runtime_allocations);
  EXPECT_EQ(total.hits + total.misses + total.uncached_allocations,
            successes.load());
  EXPECT_EQ(total.allocations_in_use, 0);
  EXPECT_EQ(total.bytes_in_use, 0);
  EXPECT_EQ(total.bytes_requested, 0);
  EXPECT_EQ(total.failed_allocations, 0);
  EXPECT_GT(total.hits, total.misses);
  // Every runtime allocation (segment) is accounted for: freed, or still
  // held as one or more free blocks (adjacent free blocks whose fences were
  // too many events to merge stay apart until a trim).
  const int64_t held_blocks = total.blocks_cached + total.blocks_retiring;
  const int64_t held_segments = total.runtime_allocations -
                                total.runtime_frees - total.blocks_dropped -
                                total.blocks_leaked;
  EXPECT_LE(held_segments, held_blocks);
  EXPECT_EQ(sim_.live_allocations(0) + sim_.live_allocations(1), held_segments);
  EXPECT_EQ(total.blocks_leaked, 0);
  for (int device = 0; device < 2; ++device) {
    EXPECT_LE(cache->GetStats(device).bytes_cached,
              static_cast<int64_t>(8 * kMiB));
  }
  if (GetParam() == CrossStreamPolicy::kWaitOnStream) {
    EXPECT_EQ(total.cross_stream_waits > 0, sim_.stream_wait_edges() > 0);
  }
  sim_.CompleteAllWork();
  ASSERT_THAT(cache->Trim(), IsOk());
  EXPECT_EQ(sim_.live_allocations(0) + sim_.live_allocations(1), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, AllocationCacheStressTest,
    ::testing::Values(CrossStreamPolicy::kWaitForCompletion,
                      CrossStreamPolicy::kWaitOnStream),
    [](const auto& info) {
      return info.param == CrossStreamPolicy::kWaitOnStream
                 ? std::string("WaitOnStream")
                 : std::string("WaitForCompletion");
    });

}  // namespace
}  // namespace gpupool
