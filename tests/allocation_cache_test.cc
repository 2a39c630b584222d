// AllocationCache: a conformance part that runs on every built backend, and
// the SimBackend part: reuse per size class, stream-ordered safety, caps and
// Trim, the OOM chain, stable buffers, bad input, poisoning, exit, fork and a
// concurrency stress test with an address-overlap check.

#include "gpupool/allocation_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "src/core/process_state.h"
#include "tests/fork_util.h"
#include "tests/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::RunInForkedChild;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

// ===========================================================================
// Conformance: every built backend
// ===========================================================================

class AllocationCacheConformanceTest
    : public ::gpupool::testing::BackendParamTest {
 protected:
  AllocationCacheConformanceTest() : BackendParamTest(/*sim_devices=*/2) {}

  void SetUp() override {
    BackendParamTest::SetUp();
    if (IsSkipped()) return;
    events_ = std::make_unique<EventPool>(*backend_);
  }
  void TearDown() override { events_.reset(); }

  std::unique_ptr<EventPool> events_;
};

TEST_P(AllocationCacheConformanceTest, ReuseLoopAllocatesOncePerSizeClass) {
  AllocationCache cache(*backend_, *events_);
  // Six distinct classes: 512, 640, 1024, 4096, 112 KiB, 1.25 MiB.
  const std::vector<size_t> sizes = {3, 513, 1000, 4096, 100000, kMiB + 1};
  for (int i = 0; i < 1000; ++i) {
    std::vector<PooledAllocation> held;
    for (size_t bytes : sizes) {
      absl::StatusOr<PooledAllocation> allocation = cache.Allocate(0, bytes);
      ASSERT_THAT(allocation, IsOk());
      ASSERT_NE(allocation->data(), nullptr);
      EXPECT_EQ(allocation->size(), bytes);
      EXPECT_GE(allocation->capacity(), bytes);
      held.push_back(*std::move(allocation));
    }
  }
  const AllocationCacheStats stats = cache.GetStats();
  EXPECT_EQ(stats.misses, 6);
  EXPECT_EQ(stats.runtime_allocations, 6);
  EXPECT_EQ(stats.hits, 6 * 999);
  EXPECT_EQ(stats.blocks_cached, 6);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.bytes_cached,
            static_cast<int64_t>(512 + 640 + 1024 + 4096 + 114688 + kMiB +
                                 256 * kKiB));
}

TEST_P(AllocationCacheConformanceTest, StableBufferNeverMoves) {
  AllocationCache cache(*backend_, *events_);
  absl::StatusOr<void*> first = cache.AcquireStable("ipc", 0, kMiB);
  ASSERT_THAT(first, IsOk());
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<void*> again = cache.AcquireStable("ipc", 0, kMiB);
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(*again, *first);
  }
  EXPECT_EQ(cache.GetStats().runtime_allocations, 1);
}

TEST_P(AllocationCacheConformanceTest, BadInputGetsClearStatuses) {
  AllocationCache cache(*backend_, *events_);
  EXPECT_THAT(cache.Allocate(0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cache.Allocate(-1, 64),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cache.Allocate(1 << 20, 64),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cache.Allocate(0, size_t{1} << 56),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("requested 72057594037927936 bytes")));
  EXPECT_EQ(cache.GetStats().runtime_allocations, 0);
}

TEST_P(AllocationCacheConformanceTest, TrimFreesEverythingCached) {
  AllocationCache cache(*backend_, *events_);
  {
    std::vector<PooledAllocation> held;
    for (size_t bytes : {kMiB, kMiB, 2 * kMiB}) {
      absl::StatusOr<PooledAllocation> allocation = cache.Allocate(0, bytes);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
  }
  EXPECT_EQ(cache.GetStats(0).bytes_cached, static_cast<int64_t>(4 * kMiB));
  EXPECT_THAT(cache.Trim(0), IsOk());
  EXPECT_EQ(cache.GetStats(0).bytes_cached, 0);
  EXPECT_EQ(cache.GetStats().runtime_frees, 3);
}

INSTANTIATE_TEST_SUITE_P(Backends, AllocationCacheConformanceTest,
                         ::testing::Values("sim", "cuda", "hip"),
                         [](const auto& info) { return info.param; });

// ===========================================================================
// SimBackend
// ===========================================================================

class AllocationCacheSimTest : public ::testing::Test {
 protected:
  AllocationCacheSimTest() : sim_(StrictSimOptions(/*devices=*/2)) {
    health_ = std::make_shared<DeviceHealth>(2);
    events_ = std::make_unique<EventPool>(sim_, health_);
  }

  void TearDown() override {
    // Tests destroy their caches in their own scope.
    sim_.CompleteAllWork();
    for (auto [device, stream] : streams_) {
      EXPECT_THAT(sim_.DestroyStream(device, stream), IsOk());
    }
    events_.reset();
    EXPECT_EQ(sim_.misuse_count(), 0);
    EXPECT_THAT(sim_.CheckNoLeaks(), IsOk());
  }

  NativeStream NewStream(int device = 0) {
    absl::StatusOr<NativeStream> stream = sim_.CreateStream(device, {});
    EXPECT_THAT(stream, IsOk());
    streams_.push_back({device, *stream});
    return *stream;
  }

  std::unique_ptr<AllocationCache> NewCache(
      AllocationCacheOptions options = {}) {
    return std::make_unique<AllocationCache>(sim_, *events_, health_, options);
  }

  SimBackend sim_;
  std::shared_ptr<DeviceHealth> health_;
  std::unique_ptr<EventPool> events_;
  std::vector<std::pair<int, NativeStream>> streams_;
};

// --- reuse -----------------------------------------------------------------

TEST_F(AllocationCacheSimTest, ReuseLoopCallsTheRuntimeOncePerSizeClass) {
  auto cache = NewCache();
  NativeStream stream = NewStream();
  const std::vector<size_t> sizes = {3, 513, 1000, 4096, 100000, kMiB + 1};
  for (int i = 0; i < 1000; ++i) {
    std::vector<PooledAllocation> held;
    for (size_t bytes : sizes) {
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(0, bytes, MemoryKind::kDevice, stream);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
  }
  const AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.misses, 6);
  EXPECT_EQ(stats.hits, 6 * 999);
  EXPECT_EQ(sim_.allocations_made(), 6);
  EXPECT_EQ(sim_.calls(SimOp::kAllocate), 6);
  EXPECT_EQ(sim_.calls(SimOp::kFree), 0);
  cache.reset();
  EXPECT_EQ(sim_.allocations_freed(), 6);
}

TEST_F(AllocationCacheSimTest, SizesOfOneClassShareABlock) {
  auto cache = NewCache();
  void* first = nullptr;
  for (size_t bytes : {513, 600, 639, 640}) {
    absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, bytes);
    ASSERT_THAT(allocation, IsOk());
    EXPECT_EQ(allocation->capacity(), 640u);
    if (first == nullptr) first = allocation->data();
    EXPECT_EQ(allocation->data(), first);
  }
  EXPECT_EQ(cache->GetStats().misses, 1);
  // 641 is the next class: a new block.
  absl::StatusOr<PooledAllocation> next = cache->Allocate(0, 641);
  ASSERT_THAT(next, IsOk());
  EXPECT_NE(next->data(), first);
  EXPECT_EQ(next->capacity(), 768u);
}

TEST_F(AllocationCacheSimTest, DevicesAndKindsNeverShareBlocks) {
  auto cache = NewCache();
  std::vector<void*> seen;
  for (int device : {0, 1}) {
    for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(device, 4096, kind);
      ASSERT_THAT(allocation, IsOk());
      EXPECT_EQ(allocation->device(), device);
      EXPECT_EQ(allocation->kind(), kind);
      seen.push_back(allocation->data());
    }
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(cache->GetStats().misses, 4);
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kPinnedHost).blocks_cached, 1);
  EXPECT_EQ(cache->GetStats(1).blocks_cached, 2);
  EXPECT_EQ(sim_.bytes_allocated(1, MemoryKind::kPinnedHost), 4096u);
}

TEST_F(AllocationCacheSimTest, StatsTrackRequestedAndRoundedBytes) {
  auto cache = NewCache();
  absl::StatusOr<PooledAllocation> a = cache->Allocate(0, 1000);
  absl::StatusOr<PooledAllocation> b = cache->Allocate(1, 513);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  AllocationCacheStats total = cache->GetStats();
  EXPECT_EQ(total.allocations_in_use, 2);
  EXPECT_EQ(total.bytes_requested, 1513);
  EXPECT_EQ(total.bytes_rounded, 1024 + 640);
  EXPECT_EQ(total.bytes_in_use, 1024 + 640);
  EXPECT_EQ(total.peak_bytes_in_use, 1024 + 640);
  AllocationCacheStats sum = cache->GetStats(0);
  sum += cache->GetStats(1);
  EXPECT_EQ(sum.bytes_in_use, total.bytes_in_use);
  EXPECT_EQ(sum.misses, total.misses);
  a->Release();
  total = cache->GetStats();
  EXPECT_EQ(total.bytes_in_use, 640);
  EXPECT_EQ(total.bytes_requested, 513);
  EXPECT_EQ(total.bytes_cached, 1024);
  EXPECT_EQ(total.peak_bytes_in_use, 1024 + 640);
  EXPECT_THAT(total.ToString(),
              AllOf(HasSubstr("in_use=1"), HasSubstr("cached=1"),
                    HasSubstr("misses=2")));
  EXPECT_THAT(cache->DebugString(),
              AllOf(HasSubstr("allocation cache over sim"),
                    HasSubstr("dev0 device"), HasSubstr("dev1 device")));
}

// --- stream-ordered safety ---------------------------------------------------

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

TEST_F(AllocationCacheSimTest, WaitOnStreamPolicyHandsOverWithAStreamWait) {
  auto cache = NewCache({.cross_stream = CrossStreamPolicy::kWaitOnStream});
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  void* block = nullptr;
  {
    absl::StatusOr<PooledAllocation> on_a =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(on_a, IsOk());
    block = on_a->data();
    sim_.SubmitWork(a, absl::InfiniteDuration());
  }
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
  // ... until it completed; then its event goes back to the EventPool.
  sim_.CompleteAllWork();
  absl::StatusOr<PooledAllocation> later =
      cache->Allocate(0, 4096, MemoryKind::kDevice, b);
  ASSERT_THAT(later, IsOk());
  EXPECT_EQ(later->data(), block);
  EXPECT_EQ(events_->GetStats().in_use, 0);
  later->Release();
  on_b->Release();
  sim_.CompleteAllWork();
  cache.reset();
  EXPECT_EQ(events_->GetStats().in_use, 0);
}

// --- caps and Trim -----------------------------------------------------------

TEST_F(AllocationCacheSimTest, CapFreesReleasesBeyondIt) {
  auto cache = NewCache({.max_cached_bytes = 3 * kMiB});
  {
    std::vector<PooledAllocation> held;
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, kMiB);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
  }
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.bytes_cached, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(stats.blocks_cached, 3);
  EXPECT_EQ(stats.runtime_frees, 1);
  EXPECT_EQ(sim_.live_allocations(0), 3);
  // The cap is per device: both kinds count.
  absl::StatusOr<PooledAllocation> pinned =
      cache->Allocate(0, 512 * kKiB, MemoryKind::kPinnedHost);
  ASSERT_THAT(pinned, IsOk());
  pinned->Release();
  EXPECT_EQ(cache->GetStats(0).bytes_cached, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 2);
  // Device 1 has its own budget.
  absl::StatusOr<PooledAllocation> other = cache->Allocate(1, 2 * kMiB);
  ASSERT_THAT(other, IsOk());
  other->Release();
  EXPECT_EQ(cache->GetStats(1).bytes_cached, static_cast<int64_t>(2 * kMiB));
}

TEST_F(AllocationCacheSimTest, TrimLeavesExactlyTheExpectedBytes) {
  auto cache = NewCache();
  {
    std::vector<PooledAllocation> held;
    for (size_t bytes : {kMiB, kMiB, kMiB, 2 * kMiB}) {
      absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, bytes);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
    absl::StatusOr<PooledAllocation> pinned =
        cache->Allocate(0, 512 * kKiB, MemoryKind::kPinnedHost);
    ASSERT_THAT(pinned, IsOk());
    held.push_back(*std::move(pinned));
  }
  EXPECT_EQ(cache->GetStats(0).bytes_cached,
            static_cast<int64_t>(5 * kMiB + 512 * kKiB));
  // Largest first: the 2 MiB block, then one 1 MiB block.
  ASSERT_THAT(cache->Trim(0, 3 * kMiB), IsOk());
  EXPECT_EQ(cache->GetStats(0).bytes_cached,
            static_cast<int64_t>(2 * kMiB + 512 * kKiB));
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 2);
  // Device memory goes before pinned host memory.
  ASSERT_THAT(cache->Trim(0, 512 * kKiB), IsOk());
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kDevice).bytes_cached, 0);
  EXPECT_EQ(cache->GetStats(0, MemoryKind::kPinnedHost).bytes_cached,
            static_cast<int64_t>(512 * kKiB));
  // A keep above what is cached frees nothing.
  ASSERT_THAT(cache->Trim(0, 100 * kMiB), IsOk());
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 4);
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(cache->GetStats(0).bytes_cached, 0);
  EXPECT_EQ(cache->GetStats(0).runtime_frees, 5);
  EXPECT_EQ(sim_.live_allocations(0), 0);
  EXPECT_THAT(cache->Trim(2), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(AllocationCacheSimTest, TrimWaitsForPendingWorkBeforeFreeing) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  const absl::Time start = absl::Now();
  {
    absl::StatusOr<PooledAllocation> allocation =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(allocation, IsOk());
    sim_.SubmitWork(a, absl::Milliseconds(200));
  }
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_FALSE(sim_.has_pending_work(a));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_GE(sim_.calls(SimOp::kEventSynchronize), 1);
  EXPECT_EQ(cache->GetStats(0).bytes_cached, 0);
  EXPECT_EQ(sim_.live_allocations(0), 0);
}

TEST_F(AllocationCacheSimTest, OverCapBlockWithPendingWorkRetiresFirst) {
  auto cache = NewCache({.max_cached_bytes = kMiB + 4096});
  NativeStream a = NewStream();
  {
    std::vector<PooledAllocation> held;
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
    sim_.SubmitWork(a, absl::InfiniteDuration());
  }
  // One is cached; the other must not be freed while the GPU may use it.
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.blocks_retiring, 1);
  EXPECT_EQ(stats.bytes_retiring, static_cast<int64_t>(kMiB));
  EXPECT_EQ(sim_.calls(SimOp::kFree), 0);
  // Still pending: a miss and a release poll it and keep it.
  ASSERT_THAT(cache->Allocate(0, 4096), IsOk());
  EXPECT_EQ(cache->GetStats(0).blocks_retiring, 1);
  EXPECT_EQ(cache->GetStats(0).blocks_cached, 2);
  sim_.CompleteAllWork();
  // The next release notices the work finished and frees it.
  ASSERT_THAT(cache->Allocate(0, 4096), IsOk());
  EXPECT_EQ(cache->GetStats(0).hits, 1);
  stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_retiring, 0);
  EXPECT_EQ(stats.runtime_frees, 1);
}

TEST_F(AllocationCacheSimTest, LargeRequestsBypassTheCache) {
  auto cache = NewCache({.max_cached_block_bytes = kMiB});
  NativeStream a = NewStream();
  {
    absl::StatusOr<PooledAllocation> big = cache->Allocate(0, kMiB + 1);
    ASSERT_THAT(big, IsOk());
    EXPECT_EQ(big->capacity(), kMiB + 1);  // exact: never cached
  }
  AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.uncached_allocations, 1);
  EXPECT_EQ(stats.misses, 0);
  EXPECT_EQ(stats.runtime_frees, 1);
  EXPECT_EQ(stats.blocks_cached, 0);
  // With pending work it is freed only once that work completed.
  {
    absl::StatusOr<PooledAllocation> big =
        cache->Allocate(0, 3 * kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(big, IsOk());
    sim_.SubmitWork(a, absl::InfiniteDuration());
  }
  EXPECT_EQ(cache->GetStats().blocks_retiring, 1);
  EXPECT_EQ(cache->GetStats().runtime_frees, 1);
  sim_.CompleteAllWork();
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(cache->GetStats().blocks_retiring, 0);
  EXPECT_EQ(cache->GetStats().runtime_frees, 2);
  // Exactly at the threshold is still cached.
  ASSERT_THAT(cache->Allocate(0, kMiB), IsOk());
  EXPECT_EQ(cache->GetStats().blocks_cached, 1);
}

// --- OOM chain ---------------------------------------------------------------

TEST_F(AllocationCacheSimTest, OutOfMemoryTrimsTheCacheAndRetriesOnce) {
  auto cache = NewCache();
  sim_.SetMemoryLimit(0, 4 * kMiB);
  {
    std::vector<PooledAllocation> held;
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<PooledAllocation> allocation =
          cache->Allocate(0, 2 * kMiB);
      ASSERT_THAT(allocation, IsOk());
      held.push_back(*std::move(allocation));
    }
  }
  EXPECT_EQ(cache->GetStats(0).bytes_cached, static_cast<int64_t>(4 * kMiB));
  // 3 MiB fits only once the cached 4 MiB are gone.
  absl::StatusOr<PooledAllocation> big = cache->Allocate(0, 3 * kMiB);
  ASSERT_THAT(big, IsOk());
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.oom_retries, 1);
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(stats.runtime_frees, 2);
  EXPECT_EQ(stats.failed_allocations, 0);
  EXPECT_EQ(stats.bytes_in_use, static_cast<int64_t>(3 * kMiB));
}

TEST_F(AllocationCacheSimTest, OutOfMemoryWaitsForPendingCachedBlocks) {
  auto cache = NewCache();
  NativeStream a = NewStream();
  sim_.SetMemoryLimit(0, 2 * kMiB);
  {
    absl::StatusOr<PooledAllocation> allocation =
        cache->Allocate(0, 2 * kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(allocation, IsOk());
    sim_.SubmitWork(a, absl::Milliseconds(200));
  }
  // A different class: the pending 2 MiB block must be waited for and freed.
  absl::StatusOr<PooledAllocation> other = cache->Allocate(0, 1536 * kKiB);
  ASSERT_THAT(other, IsOk());
  EXPECT_FALSE(sim_.has_pending_work(a));
  EXPECT_EQ(cache->GetStats(0).oom_retries, 1);
  EXPECT_GE(sim_.calls(SimOp::kEventSynchronize), 1);
}

TEST_F(AllocationCacheSimTest, OutOfMemoryAfterRetryReportsTheNumbers) {
  auto cache = NewCache();
  sim_.SetMemoryLimit(0, 4 * kMiB);
  absl::StatusOr<PooledAllocation> held = cache->Allocate(0, 2 * kMiB);
  ASSERT_THAT(held, IsOk());
  ASSERT_THAT(cache->Allocate(0, 2 * kMiB), IsOk());  // now cached
  // 2.5 MiB requested, rounded to 3 MiB: even with the cache emptied only
  // 2 MiB are free.
  absl::StatusOr<PooledAllocation> failed =
      cache->Allocate(0, 2 * kMiB + 512 * kKiB + 1);
  EXPECT_THAT(
      failed,
      StatusIs(
          absl::StatusCode::kResourceExhausted,
          AllOf(HasSubstr("device 0"), HasSubstr("requested 2621441 bytes"),
                HasSubstr("rounded to 3145728 bytes"),
                HasSubstr("in use 2097152 bytes"), HasSubstr("cached 0 bytes"),
                HasSubstr("device free 2097152 bytes of "
                          "4194304 bytes total"),
                HasSubstr("after freeing 2097152 cached bytes"))))
      << failed.status();
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.oom_retries, 1);
  EXPECT_EQ(stats.failed_allocations, 1);
  // Consistent afterwards: in use and live runtime memory agree, and what
  // fits still works.
  EXPECT_EQ(stats.bytes_in_use, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(sim_.bytes_allocated(0), 2 * kMiB);
  absl::StatusOr<PooledAllocation> fits = cache->Allocate(0, 2 * kMiB);
  ASSERT_THAT(fits, IsOk());
  EXPECT_EQ(cache->GetStats(0).allocations_in_use, 2);
}

TEST_F(AllocationCacheSimTest, AbsurdSizesFailWithNumbersAndKeepTheCacheWarm) {
  auto cache = NewCache();
  ASSERT_THAT(cache->Allocate(0, kMiB), IsOk());  // cached
  for (size_t bytes : {size_t{1} << 50, std::numeric_limits<size_t>::max(),
                       (size_t{80} << 30) + 1}) {
    absl::StatusOr<PooledAllocation> absurd = cache->Allocate(0, bytes);
    EXPECT_THAT(absurd,
                StatusIs(absl::StatusCode::kResourceExhausted,
                         AllOf(HasSubstr(absl::StrCat("requested ", bytes)),
                               HasSubstr("of 85899345920 bytes total"))));
  }
  // Trimming could not have helped: nothing was freed, nothing retried.
  const AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.oom_retries, 0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.failed_allocations, 3);
  EXPECT_EQ(sim_.calls(SimOp::kFree), 0);
}

// --- stable allocations ------------------------------------------------------

// The stable buffer's address, or nullptr on error.
void* Stable(AllocationCache& cache, absl::string_view name, int device,
             size_t bytes) {
  absl::StatusOr<void*> ptr = cache.AcquireStable(
      std::string_view(name.data(), name.size()), device, bytes);
  EXPECT_THAT(ptr, IsOk());
  return ptr.ok() ? *ptr : nullptr;
}

TEST_F(AllocationCacheSimTest, StableBuffersKeepTheirAddress) {
  auto cache = NewCache();
  absl::StatusOr<void*> first = cache->AcquireStable("nccl-buffer", 0, kMiB);
  ASSERT_THAT(first, IsOk());
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<void*> again = cache->AcquireStable("nccl-buffer", 0, kMiB);
    ASSERT_THAT(again, IsOk());
    ASSERT_EQ(*again, *first);
  }
  // Smaller, or larger within the rounded capacity (1 MiB): same address.
  EXPECT_EQ(Stable(*cache, "nccl-buffer", 0, 4096), *first);
  // Another device or another name: another buffer.
  absl::StatusOr<void*> other_device =
      cache->AcquireStable("nccl-buffer", 1, kMiB);
  absl::StatusOr<void*> other_name = cache->AcquireStable("scratch", 0, kMiB);
  ASSERT_THAT(other_device, IsOk());
  ASSERT_THAT(other_name, IsOk());
  EXPECT_NE(*other_device, *first);
  EXPECT_NE(*other_name, *first);
  EXPECT_EQ(cache->GetStats().stable_reallocations, 0);
  EXPECT_EQ(sim_.allocations_made(), 3);

  // Growing moves it, frees the old one, and says so.
  absl::StatusOr<void*> grown =
      cache->AcquireStable("nccl-buffer", 0, 2 * kMiB);
  ASSERT_THAT(grown, IsOk());
  EXPECT_NE(*grown, *first);
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.stable_reallocations, 1);
  EXPECT_EQ(stats.stable_allocations, 2);
  EXPECT_EQ(stats.bytes_stable, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(sim_.allocations_freed(), 1);
  EXPECT_EQ(Stable(*cache, "nccl-buffer", 0, kMiB), *grown);
  // Stable buffers are not cache entries: Trim leaves them alone.
  ASSERT_THAT(cache->Trim(0), IsOk());
  EXPECT_EQ(Stable(*cache, "nccl-buffer", 0, kMiB), *grown);
  EXPECT_EQ(cache->GetStats(0).stable_allocations, 2);

  EXPECT_THAT(cache->ReleaseStable("scratch", 0), IsOk());
  EXPECT_THAT(cache->ReleaseStable("scratch", 0),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("scratch")));
  EXPECT_THAT(cache->AcquireStable("x", 0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cache->AcquireStable("x", 5, 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(AllocationCacheSimTest, ConcurrentStableCallersAgreeOnOneBuffer) {
  auto cache = NewCache();
  std::vector<void*> seen(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        absl::StatusOr<void*> ptr = cache->AcquireStable("shared", 1, 8192);
        ASSERT_THAT(ptr, IsOk());
        if (i == 0) seen[t] = *ptr;
        ASSERT_EQ(*ptr, seen[t]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (void* ptr : seen) EXPECT_EQ(ptr, seen[0]);
  EXPECT_EQ(cache->GetStats(1).runtime_allocations, 1);
}

// --- bad input ---------------------------------------------------------------

TEST_F(AllocationCacheSimTest, BadInputIsRejectedAndNothingLeaks) {
  auto cache = NewCache();
  EXPECT_THAT(cache->Allocate(0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bytes")));
  EXPECT_THAT(
      cache->Allocate(-1, 64),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device")));
  EXPECT_THAT(
      cache->Allocate(2, 64),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 2)")));
  EXPECT_THAT(
      cache->Allocate(0, 64, static_cast<MemoryKind>(7)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MemoryKind")));
  EXPECT_EQ(sim_.calls(SimOp::kAllocate), 0);

  absl::StatusOr<PooledAllocation> allocation = cache->Allocate(0, 100);
  ASSERT_THAT(allocation, IsOk());
  EXPECT_TRUE(*allocation);
  EXPECT_NE(allocation->lease_id(), 0u);
  allocation->Release();
  EXPECT_FALSE(*allocation);
  EXPECT_EQ(allocation->data(), nullptr);
  EXPECT_EQ(allocation->device(), -1);
  allocation->Release();               // double release: a no-op
  allocation->RecordUse(NewStream());  // on an empty lease: a no-op
  AllocationCacheStats stats = cache->GetStats();
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.blocks_cached, 1);

  // Moving transfers ownership exactly once.
  absl::StatusOr<PooledAllocation> source = cache->Allocate(0, 100);
  ASSERT_THAT(source, IsOk());
  PooledAllocation moved = *std::move(source);
  EXPECT_FALSE(*source);  // NOLINT: checking the moved-from state
  source->Release();
  EXPECT_EQ(cache->GetStats().allocations_in_use, 1);
  PooledAllocation assigned;
  assigned = std::move(moved);
  EXPECT_EQ(cache->GetStats().allocations_in_use, 1);
  assigned = PooledAllocation();
  stats = cache->GetStats();
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.runtime_allocations, 1);
}

TEST_F(AllocationCacheSimTest, OutstandingLeasesSayWhereTheyWereAcquired) {
  auto cache = NewCache();
  auto allocation = cache->Allocate(1, 4096, MemoryKind::kPinnedHost);
  const int line = __LINE__ - 1;
  ASSERT_THAT(allocation, IsOk());
  std::vector<OutstandingLease> leases = cache->GetOutstandingLeases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].resource, "allocation");
  EXPECT_EQ(leases[0].device, 1);
  EXPECT_EQ(leases[0].lease_id, allocation->lease_id());
  EXPECT_THAT(leases[0].key, HasSubstr("4096"));
  EXPECT_THAT(leases[0].where.file_name(),
              HasSubstr("allocation_cache_test.cc"));
  EXPECT_EQ(static_cast<int>(leases[0].where.line()), line);
  allocation->Release();
  EXPECT_TRUE(cache->GetOutstandingLeases().empty());
}

// --- poisoning
// -----------------------------------------------------------------

TEST_F(AllocationCacheSimTest, StickyErrorPoisonsAndLaterDropsNeedNoCalls) {
  auto cache = NewCache();
  NativeStream a = NewStream(0);
  absl::StatusOr<PooledAllocation> outstanding =
      cache->Allocate(0, kMiB, MemoryKind::kDevice, a);
  ASSERT_THAT(outstanding, IsOk());
  ASSERT_THAT(cache->Allocate(0, 4096), IsOk());  // cached, idle
  {
    absl::StatusOr<PooledAllocation> pending =
        cache->Allocate(0, 8192, MemoryKind::kDevice, a);
    ASSERT_THAT(pending, IsOk());
    sim_.SubmitWork(a, absl::InfiniteDuration());
  }  // cached with a pending event
  ASSERT_THAT(cache->AcquireStable("ipc", 0, kMiB), IsOk());

  sim_.PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  // A new class reaches the runtime, which reports the sticky error.
  EXPECT_THAT(cache->Allocate(0, 3 * kMiB),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cudaErrorIllegalAddress")));
  EXPECT_TRUE(health_->is_poisoned(0));
  const int64_t calls = sim_.calls_on_device(0);
  // From now on nothing on device 0 calls the runtime.
  EXPECT_THAT(cache->Allocate(0, 4096),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cudaErrorIllegalAddress")));
  EXPECT_THAT(cache->AcquireStable("ipc", 0, kMiB),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  outstanding->Release();
  EXPECT_THAT(cache->Trim(0), IsOk());
  AllocationCacheStats stats = cache->GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 0);
  EXPECT_EQ(stats.allocations_in_use, 0);
  EXPECT_EQ(stats.stable_allocations, 0);
  EXPECT_EQ(stats.blocks_dropped, 4);  // idle, pending, released, stable
  // Device 1 is unaffected.
  ASSERT_THAT(cache->Allocate(1, 4096), IsOk());
  cache.reset();
  EXPECT_EQ(sim_.calls_on_device(0), calls);

  // After a reset, a new generation starts from scratch.
  sim_.ResetDevice(0);
  ASSERT_THAT(health_->Recover(0), IsOk());
  streams_.clear();  // ResetDevice destroyed them
  auto fresh = NewCache();
  EXPECT_THAT(fresh->Allocate(0, 4096), IsOk());
}

TEST_F(AllocationCacheSimTest, PoisonSeenByAnotherPoolDropsCachedBlocks) {
  auto cache = NewCache();
  ASSERT_THAT(cache->Allocate(0, 4096), IsOk());
  absl::StatusOr<PooledAllocation> outstanding = cache->Allocate(0, 8192);
  ASSERT_THAT(outstanding, IsOk());
  // Another pool sharing the health object saw the sticky error.
  sim_.PoisonDevice(0, absl::InternalError("hipErrorLaunchFailure"));
  health_->Poison(0, absl::InternalError("hipErrorLaunchFailure"));
  const int64_t calls = sim_.calls_on_device(0);
  EXPECT_THAT(cache->Allocate(0, 4096),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("hipErrorLaunchFailure")));
  outstanding->Release();
  EXPECT_EQ(sim_.calls_on_device(0), calls);
  EXPECT_EQ(cache->GetStats(0).blocks_dropped, 2);

  // Blocks of the old generation are never handed out after recovery.
  sim_.ResetDevice(0);
  ASSERT_THAT(health_->Recover(0), IsOk());
  absl::StatusOr<PooledAllocation> fresh = cache->Allocate(0, 4096);
  ASSERT_THAT(fresh, IsOk());
  EXPECT_EQ(cache->GetStats(0).misses, 3);
}

TEST_F(AllocationCacheSimTest, ReleaseAfterTheCacheIsGoneLeaksWithoutCalls) {
  SimOptions options;
  options.device_count = 1;
  int64_t misuse = 0;
  options.on_misuse = [&misuse](absl::string_view) { ++misuse; };
  SimBackend sim(options);
  {
    EventPool events(sim);
    absl::StatusOr<PooledAllocation> survivor;
    {
      AllocationCache cache(sim, events);
      survivor = cache.Allocate(0, 4096);
      ASSERT_THAT(survivor, IsOk());
    }
    const int64_t calls = sim.total_calls();
    survivor->Release();
    EXPECT_FALSE(*survivor);
    EXPECT_EQ(sim.total_calls(), calls);
  }
  // Exactly that block was left to the OS.
  EXPECT_EQ(sim.live_allocations(0), 1);
  EXPECT_EQ(misuse, 0);
  sim.ResetDevice(0);
}

// --- exit and fork -----------------------------------------------------------

// In a death-test child: the exit sequence frees what is cached while the
// runtime lives; afterwards releases leak and allocations are refused.
int ExitSequenceChild() {
  SimOptions options;
  options.device_count = 1;
  SimBackend sim(options);
  EventPool events(sim);
  AllocationCache cache(sim, events);
  absl::StatusOr<PooledAllocation> outstanding = cache.Allocate(0, 8192);
  if (!outstanding.ok()) return 10;
  if (!cache.Allocate(0, 4096).ok()) return 11;  // cached
  if (!cache.AcquireStable("ipc", 0, 4096).ok()) return 12;
  internal::RunExitSequenceForTesting();
  if (sim.allocations_freed() != 2) return 13;  // cached + stable
  const int64_t calls = sim.total_calls();
  outstanding->Release();
  if (sim.total_calls() != calls) return 14;
  absl::StatusOr<PooledAllocation> refused = cache.Allocate(0, 4096);
  if (refused.status().code() != absl::StatusCode::kFailedPrecondition) {
    return 15;
  }
  if (cache.GetStats().blocks_leaked != 1) return 16;
  return 0;
}

TEST(AllocationCacheLifecycleTest, ExitFreesCachedBlocksThenLeaks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(ExitSequenceChild()), ::testing::ExitedWithCode(0), "");
}

TEST_F(AllocationCacheSimTest, ForkedChildRefusesAndLeaksWithoutCalls) {
  auto cache = NewCache();
  absl::StatusOr<PooledAllocation> inherited = cache->Allocate(0, 4096);
  ASSERT_THAT(inherited, IsOk());
  ASSERT_THAT(cache->Allocate(0, 8192), IsOk());  // cached
  const int code = RunInForkedChild([&] {
    const int64_t calls = sim_.total_calls();
    absl::StatusOr<PooledAllocation> refused = cache->Allocate(0, 8192);
    if (refused.status().code() != absl::StatusCode::kFailedPrecondition) {
      return 1;
    }
    if (refused.status().message().find("fork") == absl::string_view::npos) {
      return 2;
    }
    if (cache->AcquireStable("x", 0, 1).status().code() !=
        absl::StatusCode::kFailedPrecondition) {
      return 3;
    }
    inherited->Release();  // leaked: no lock, no runtime call
    if (cache->Trim(0).code() != absl::StatusCode::kFailedPrecondition) {
      return 4;
    }
    cache.reset();
    if (sim_.total_calls() != calls) return 5;
    return 0;
  });
  EXPECT_EQ(code, 0);
  // The parent is unaffected.
  inherited->Release();
  EXPECT_EQ(cache->GetStats().blocks_cached, 2);
  EXPECT_THAT(cache->Allocate(0, 4096), IsOk());
}

// --- concurrency -------------------------------------------------------------

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
  // Every runtime allocation is accounted for: freed, or still held.
  const int64_t held_blocks = total.blocks_cached + total.blocks_retiring;
  EXPECT_EQ(total.runtime_allocations - total.runtime_frees -
                total.blocks_dropped - total.blocks_leaked,
            held_blocks);
  EXPECT_EQ(sim_.live_allocations(0) + sim_.live_allocations(1), held_blocks);
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
