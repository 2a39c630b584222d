// The keyed-pool engine under StreamPool and EventPool
// (src/pools/keyed_pool.h): generations never go backwards, one prewarm worker
// per pool, lease ids that never repeat, peak_in_use counting only leases that
// went out, a release racing the pool's destruction never reaching a destroyed
// backend (announced or counted), and shards outliving their pool until their
// last lease.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/device_health.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "src/lifetime/lease_ids.h"
#include "src/lifetime/return_announcements.h"
#include "src/lifetime/stale_handles.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;

struct Entry {
  int id;
  uint64_t generation;
};

TEST(StaleHandlesTest, AStaleGenerationNeverErasesNewerHandles) {
  std::deque<Entry> list = {{1, 3}, {2, 3}, {3, 2}};
  // A caller that read generation 1 before a poison and a recovery moved the
  // device to 3 must not forget the generation-3 handles (nor the 2).
  EXPECT_EQ(internal::EraseOlderGenerations(list, 1), 0);
  EXPECT_EQ(list.size(), 3u);
  EXPECT_EQ(internal::EraseOlderGenerations(list, 3), 1);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, 1);
  EXPECT_EQ(list[1].id, 2);
}

TEST(LeaseIdsTest, IdsNeverRepeatAcrossShardsOrBlocks) {
  // Started just below the old per-shard 2^40 boundary: ids crossing it do
  // not run into another shard's.
  std::atomic<uint64_t> source{(uint64_t{1} << 40) - 3};
  internal::LeaseIdBlock a(&source);
  internal::LeaseIdBlock b(&source);
  std::set<uint64_t> seen;
  const uint64_t draws = 2 * internal::LeaseIdBlock::kBlock + 7;
  for (uint64_t i = 0; i < draws; ++i) {
    EXPECT_TRUE(seen.insert(a.Next()).second);
    EXPECT_TRUE(seen.insert(b.Next()).second);
  }
  EXPECT_EQ(seen.size(), 2 * draws);
  EXPECT_EQ(seen.count(0), 0u);
}

TEST(LeaseIdsTest, TwoPoolsNeverShareALeaseId) {
  SimBackend sim(StrictSimOptions(2));
  StreamPool first(sim);
  StreamPool second(sim);
  std::set<uint64_t> ids;
  std::vector<PooledStream> held;
  for (int i = 0; i < 20; ++i) {
    for (StreamPool* pool : {&first, &second}) {
      for (int device = 0; device < 2; ++device) {
        absl::StatusOr<PooledStream> stream = pool->Acquire(device);
        ASSERT_THAT(stream, IsOk());
        EXPECT_NE(stream->lease_id(), 0u);
        EXPECT_TRUE(ids.insert(stream->lease_id()).second);
        held.push_back(*std::move(stream));
      }
    }
  }
  EXPECT_EQ(ids.size(), 80u);
}

TEST(KeyedPoolPeakTest, AFailedValidationDoesNotRaiseThePeak) {
  SimBackend sim(StrictSimOptions(1));
  StreamPoolOptions options;
  options.max_live_per_key = 2;
  StreamPool pool(sim, options);
  {
    absl::StatusOr<PooledStream> busy = pool.Acquire(0);
    ASSERT_THAT(busy, IsOk());
    sim.SubmitWork(busy->get(), absl::InfiniteDuration());
  }  // returned still busy: draining
  absl::StatusOr<PooledStream> held = pool.Acquire(0);  // a second stream
  ASSERT_THAT(held, IsOk());
  ASSERT_EQ(pool.GetStats().draining, 1);
  ASSERT_EQ(pool.GetStats().peak_in_use, 1);
  // Both live streams are taken (one out, one still busy): the drained one is
  // reserved, fails validation (still running), and the acquire times out.
  EXPECT_THAT(pool.Acquire(0, {}, absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(pool.GetStats().peak_in_use, 1);
  EXPECT_EQ(pool.GetStats().in_use, 1);
  EXPECT_EQ(pool.GetStats().acquired, 2);
  sim.CompleteAllWork();
}

// Counts the creations in flight at once; the first `block_first` creations
// wait until released.
class GatedCreateSim : public SimBackend {
 public:
  using SimBackend::SimBackend;

  absl::StatusOr<NativeStream> CreateStream(
      int device, const StreamConfig& config) override {
    {
      absl::MutexLock lock(&mu_);
      ++in_flight_;
      max_in_flight_ = std::max(max_in_flight_, in_flight_);
      if (gated_) mu_.Await(absl::Condition(&open_));
    }
    absl::StatusOr<NativeStream> created =
        SimBackend::CreateStream(device, config);
    absl::MutexLock lock(&mu_);
    --in_flight_;
    return created;
  }

  void Gate() {
    absl::MutexLock lock(&mu_);
    gated_ = true;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Waits (bounded) until `n` creations are in flight at once.
  bool AwaitInFlight(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return in_flight_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  int max_in_flight() {
    absl::MutexLock lock(&mu_);
    return max_in_flight_;
  }

 private:
  absl::Mutex mu_;
  bool gated_ ABSL_GUARDED_BY(mu_) = false;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(KeyedPoolPrewarmTest, BackgroundPrewarmsShareOneWorkerThread) {
  GatedCreateSim sim(StrictSimOptions(1));
  StreamPool pool(sim);
  sim.Gate();
  std::vector<PrewarmTicket> tickets;
  for (int priority = 0; priority < 3; ++priority) {
    tickets.push_back(pool.PrewarmAsync(0, StreamConfig{.priority = -priority},
                                        /*count=*/1));
  }
  ASSERT_TRUE(sim.AwaitInFlight(1, absl::Seconds(10)));
  // A thread per call would have all three creations in flight by now; one
  // worker has one, the other jobs queued behind it.
  sim.AwaitInFlight(3, absl::Milliseconds(300));
  sim.Open();
  for (const PrewarmTicket& ticket : tickets)
    EXPECT_THAT(ticket.Wait(), IsOk());
  EXPECT_EQ(sim.max_in_flight(), 1);
  EXPECT_EQ(pool.GetStats().idle, 3);
}

// A SimBackend whose stream queries wait at a gate once armed, and which
// records its own destruction in flags that outlive it.
struct RaceFlags {
  absl::Notification in_query;
  absl::Notification go;
  std::atomic<bool> destroyed{false};
  std::atomic<bool> query_saw_destroyed{false};
};

class GatedQuerySim : public SimBackend {
 public:
  GatedQuerySim(SimOptions options, RaceFlags* flags)
      : SimBackend(std::move(options)), flags_(flags) {}
  ~GatedQuerySim() override { flags_->destroyed.store(true); }

  absl::Status QueryStream(int device, NativeStream stream) override {
    if (armed_.exchange(false)) {
      flags_->in_query.Notify();
      flags_->go.WaitForNotification();
      if (flags_->destroyed.load()) {
        flags_->query_saw_destroyed.store(true);
        return absl::OkStatus();  // do not touch the destroyed simulator
      }
    }
    return SimBackend::QueryStream(device, stream);
  }
  void Arm() { armed_.store(true); }

 private:
  RaceFlags* const flags_;
  std::atomic<bool> armed_{false};
};

// The race below, with the releasing thread's return either announced (the
// usual path where membarrier exists) or counted (`slot_busy`: the thread is
// already inside an announced return, as where the fence is missing).
void ReleaseRacingDestruction(bool slot_busy) {
  RaceFlags flags;
  // The backend's memory outlives its destruction so that a faulty pool is
  // caught by the flag instead of crashing the test.
  alignas(GatedQuerySim) unsigned char storage[sizeof(GatedQuerySim)];
  SimOptions options;  // the leased stream is leaked at close: not a failure
  options.device_count = 1;
  options.on_misuse = [](absl::string_view) {};
  auto* sim = new (storage) GatedQuerySim(options, &flags);
  auto pool = std::make_unique<StreamPool>(*sim);
  absl::StatusOr<PooledStream> stream = pool->Acquire(0);
  ASSERT_THAT(stream, IsOk());
  sim->Arm();
  std::thread releaser([&] {
    int outer = 0;
    const bool busy = slot_busy && internal::BeginAnnouncedReturn(&outer);
    stream->Release();
    if (busy) internal::EndAnnouncedReturn();
  });
  flags.in_query.WaitForNotification();
  absl::Notification destroyed_both;
  std::thread destroyer([&] {
    pool.reset();
    sim->~GatedQuerySim();
    destroyed_both.Notify();
  });
  // A pool that does not wait for the release lets both destructions finish
  // now; one that does is still inside its destructor.
  destroyed_both.WaitForNotificationWithTimeout(absl::Milliseconds(300));
  flags.go.Notify();
  releaser.join();
  destroyer.join();
  EXPECT_FALSE(flags.query_saw_destroyed.load());
  EXPECT_TRUE(flags.destroyed.load());
}

TEST(KeyedPoolReleaseTest, AReleaseRacingDestructionNeverReachesAFreedBackend) {
  ReleaseRacingDestruction(/*slot_busy=*/false);
}

TEST(KeyedPoolReleaseTest, ACountedReleaseRacingDestructionIsWaitedForToo) {
  ReleaseRacingDestruction(/*slot_busy=*/true);
}

// Leases hold their shard without a reference count of their own: the shard
// counts them, outlives its pool while any is out, and is deleted by the
// last return (the health it shares is then let go).
TEST(KeyedPoolOwnershipTest, AShardOutlivesItsPoolUntilItsLastLeaseReturns) {
  SimBackend sim(StrictSimOptions(1));
  auto health = std::make_shared<DeviceHealth>(1);
  std::vector<NativeStream> handles;
  absl::StatusOr<PooledStream> first;
  absl::StatusOr<PooledStream> second;
  absl::StatusOr<PooledStream> other_config;
  {
    StreamPool pool(sim, health);
    first = pool.Acquire(0);
    second = pool.Acquire(0);
    other_config = pool.Acquire(0, StreamConfig{.priority = -1});
    ASSERT_THAT(first, IsOk());
    ASSERT_THAT(second, IsOk());
    ASSERT_THAT(other_config, IsOk());
    handles = {first->get(), second->get(), other_config->get()};
    ASSERT_EQ(health.use_count(), 4);  // ours, the pool's, two shards'
  }
  // The pool is gone; both shards live on for their leases, which still
  // answer from them.
  EXPECT_EQ(health.use_count(), 3);
  EXPECT_EQ(first->device(), 0);
  EXPECT_EQ(other_config->config().priority, -1);
  const int64_t calls = sim.total_calls();
  first->Release();
  EXPECT_EQ(health.use_count(), 3);  // the shard still has a lease out
  other_config->Release();
  EXPECT_EQ(health.use_count(), 2);  // its last lease: that shard is gone
  second->Release();
  EXPECT_EQ(health.use_count(), 1);
  // Leaked without runtime calls, as any release after the pool's end.
  EXPECT_EQ(sim.total_calls(), calls);
  for (NativeStream handle : handles) {
    ASSERT_THAT(sim.DestroyStream(0, handle), IsOk());
  }
}

}  // namespace
}  // namespace gpupool
