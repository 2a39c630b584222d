// Lifecycle edges (issue 5), beyond tests/process/lifecycle_test.cc:
//
//   * exit with leases held by another library's static object: its
//     destructor runs after gpupool's exit drain, and everything it does then
//     is defined — releases leak, acquires fail — with no runtime call; a
//     static destroyed before the drain still returns its lease normally;
//   * exit while an asynchronous prewarm is creating streams: the drain stops
//     and joins it, destroys what it created, and its ticket says Cancelled;
//   * fork while other threads churn every pool (shard locks, and Abseil's
//     process-wide locks, held at fork time): the child neither deadlocks
//     nor calls the runtime; inherited pools refuse, leak, and destroy no
//     mutex (even that can block in such a child);
//   * device reset (RecoverDevice) while leases of the old generation are
//     out: streams, events and allocations are dropped on release without a
//     runtime call, and the new generation never sees an old handle.

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/pools.h"
#include "gpupool/prewarm.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/process/lifecycle/static_holder.h"
#include "tests/util/checking_backend.h"
#include "tests/util/fork_util.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::kChildHung;
using ::gpupool::testing::RunInForkedChild;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;
using ::testing::HasSubstr;

// Exit tests run in death-test children; a misuse there ends the child with
// a code the parent's matcher rejects.
SimOptions ExitSimOptions(SimProfile profile = SimProfile::Instant()) {
  SimOptions options;
  options.device_count = 1;
  options.profile = std::move(profile);
  options.on_misuse = [](absl::string_view message) {
    std::fprintf(stderr, "misuse: %.*s\n", static_cast<int>(message.size()),
                 message.data());
    _exit(9);
  };
  return options;
}

// Pools that live until the process ends, like ProcessPools().
Pools* ProcessLifetimePools(SimBackend** sim, SimProfile profile) {
  auto backend = std::make_unique<SimBackend>(ExitSimOptions(profile));
  *sim = backend.get();
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(std::move(backend));
  if (!pools.ok()) _exit(2);
  return pools->release();  // NOLINT: never destroyed, on purpose
}

// --- exit: statics of other libraries and of this TU
// ----------------------------

struct HeldLeases {
  PooledStream stream;
  PooledEvent event;
  PooledAllocation allocation;
};

// A static of this TU constructed after the pools: C++ destroys it before the
// atexit hook registered earlier runs, i.e. while the runtime is alive.
class EarlyStatic {
 public:
  EarlyStatic(Pools* pools, SimBackend* sim, PooledStream stream)
      : pools_(pools), sim_(sim), stream_(std::move(stream)) {}
  ~EarlyStatic() {
    const int64_t idle = pools_->streams().GetStats().idle;
    stream_.Release();  // a normal return: validated, back to idle
    if (pools_->streams().GetStats().idle != idle + 1) _exit(10);
    if (sim_->live_streams(0) < 1) _exit(11);
    std::fprintf(stderr, "early-static-dtor: ok\n");
  }

 private:
  Pools* pools_;
  SimBackend* sim_;
  PooledStream stream_;
};

void ExitWithLeasesHeldByStatics() {
  SimBackend* sim = nullptr;
  Pools* pools = ProcessLifetimePools(&sim, SimProfile::Instant());
  if (!pools->streams().Prewarm(0, {}, 3).ok()) _exit(3);
  auto* held = new HeldLeases();
  absl::StatusOr<PooledStream> stream = pools->streams().Acquire(0);
  absl::StatusOr<PooledEvent> event = pools->events().Acquire(0);
  absl::StatusOr<PooledAllocation> allocation =
      pools->allocations().Allocate(0, 4096);
  absl::StatusOr<PooledStream> early = pools->streams().Acquire(0);
  if (!stream.ok() || !event.ok() || !allocation.ok() || !early.ok()) {
    _exit(4);
  }
  held->stream = *std::move(stream);
  held->event = *std::move(event);
  held->allocation = *std::move(allocation);
  static EarlyStatic early_static(pools, sim, *std::move(early));

  gpupool_test_support::RunAtLibraryStaticDestruction([sim, pools, held] {
    // gpupool's drain ran: every idle handle is gone, only the three held
    // leases' handles are left.
    if (sim->live_streams(0) != 1 || sim->live_events(0) != 1 ||
        sim->live_allocations(0) != 1) {
      std::fprintf(stderr, "library-static-dtor: drain left %d/%d/%d\n",
                   sim->live_streams(0), sim->live_events(0),
                   sim->live_allocations(0));
      _exit(5);
    }
    const int64_t calls = sim->total_calls();
    delete held;  // every release leaks now
    if (pools->streams().Acquire(0).status().code() !=
            absl::StatusCode::kFailedPrecondition ||
        pools->events().Acquire(0).status().code() !=
            absl::StatusCode::kFailedPrecondition ||
        pools->allocations().Allocate(0, 64).status().code() !=
            absl::StatusCode::kFailedPrecondition) {
      _exit(6);
    }
    pools->Trim();
    if (sim->total_calls() != calls) {
      std::fprintf(stderr, "library-static-dtor: runtime called\n");
      _exit(7);
    }
    if (pools->streams().GetStats().leaked != 1 ||
        pools->events().GetStats().leaked != 1 ||
        pools->allocations().GetStats().blocks_leaked != 1) {
      _exit(8);
    }
    std::fprintf(stderr, "library-static-dtor: ok\n");
  });
  std::exit(0);
}

TEST(LifecycleEdgesDeathTest, StaticsOnEitherSideOfTheExitDrainAreDefined) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitWithLeasesHeldByStatics(), ::testing::ExitedWithCode(0),
              "early-static-dtor: ok.*library-static-dtor: ok");
}

// --- exit: an asynchronous prewarm still creating
// --------------------------------

SimBackend* prewarm_sim = nullptr;
PrewarmTicket* prewarm_ticket = nullptr;

// Registered before the pools exist, so it runs after their exit drain.
void CheckPrewarmStoppedByTheDrain() {
  if (!prewarm_ticket->done()) _exit(20);
  const absl::Status status = prewarm_ticket->Wait();
  if (status.code() != absl::StatusCode::kCancelled) {
    std::fprintf(stderr, "prewarm-check: ticket says %s\n",
                 status.ToString().c_str());
    _exit(21);
  }
  const int64_t created = prewarm_sim->streams_created();
  if (created < 1 || created >= 40) _exit(22);  // it was mid-way
  if (prewarm_sim->live_streams(0) != 0) {
    std::fprintf(stderr, "prewarm-check: %d streams survived the drain\n",
                 prewarm_sim->live_streams(0));
    _exit(23);
  }
  std::fprintf(stderr, "prewarm-check: ok, stopped after %lld of 40\n",
               static_cast<long long>(created));
}

void ExitWhileAnAsyncPrewarmIsCreating() {
  std::atexit(&CheckPrewarmStoppedByTheDrain);
  SimProfile slow = SimProfile::Instant();
  slow.stream_create = absl::Milliseconds(10);
  Pools* pools = ProcessLifetimePools(&prewarm_sim, slow);
  prewarm_ticket = new PrewarmTicket(pools->streams().PrewarmAsync(0, {}, 40));
  while (prewarm_sim->streams_created() < 2)
    absl::SleepFor(absl::Milliseconds(1));
  std::exit(0);  // ~400 ms of creation still to go
}

TEST(LifecycleEdgesDeathTest, ExitStopsAnAsyncPrewarmAndDestroysWhatItMade) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitWhileAnAsyncPrewarmIsCreating(), ::testing::ExitedWithCode(0),
              "prewarm-check: ok");
}

// --- fork while other threads hold shard locks
// -------------------------------------

// Parent threads hammering every pool (and so Abseil's mutexes) while the
// test forks, so that some fork lands while one of them holds a shard lock,
// or Abseil's process-wide deadlock-detection lock that every absl::Mutex
// operation takes in Debian's build.
class Churn {
 public:
  explicit Churn(Pools& pools) {
    for (int t = 0; t < 3; ++t) {
      threads_.emplace_back([this, &pools, t] {
        while (!stop_.load()) {
          absl::StatusOr<PooledStream> s = pools.streams().Acquire(t % 2);
          absl::StatusOr<PooledEvent> e = pools.events().Acquire(t % 2);
          absl::StatusOr<PooledAllocation> a = pools.allocations().Allocate(
              t % 2, 512u << t, MemoryKind::kDevice,
              s.ok() ? s->get() : nullptr);
          if (t == 0) pools.Trim();
        }
      });
    }
  }
  ~Churn() {
    stop_.store(true);
    for (std::thread& thread : threads_) thread.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Pools over a wrapper, not over the simulator itself: the child destroys
// the inherited pools (and the backend they own), and the simulator's own
// locks are the runtime's business, not gpupool's.
std::unique_ptr<Pools> PoolsOver(SimBackend& sim) {
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(std::make_unique<testing::CheckingBackend>(sim));
  EXPECT_THAT(pools, IsOk());
  return pools.ok() ? *std::move(pools) : nullptr;
}

// Everything a child may do with what it inherited: refused, leaked, never
// a lock, never a runtime call. With Abseil's deadlock detection on (the
// default), even destroying a mutex could block, so the pools' destructors
// must not destroy one either (they leak instead).
TEST(LifecycleEdgesTest, ForkWhileThreadsChurnEveryPoolNeverDeadlocksTheChild) {
  SimBackend sim(StrictSimOptions(2));
  std::unique_ptr<Pools> pools = PoolsOver(sim);
  ASSERT_NE(pools, nullptr);
  absl::StatusOr<PooledStream> inherited = pools->streams().Acquire(0);
  absl::StatusOr<PooledAllocation> inherited_block =
      pools->allocations().Allocate(1, 4096);
  ASSERT_THAT(inherited, IsOk());
  ASSERT_THAT(inherited_block, IsOk());
  // Leases that outlived their pools before the fork: in the child their
  // release holds the last reference to the pool's internals.
  absl::StatusOr<PooledStream> orphan_stream;
  absl::StatusOr<PooledAllocation> orphan_block;
  {
    std::unique_ptr<Pools> gone = PoolsOver(sim);
    ASSERT_NE(gone, nullptr);
    orphan_stream = gone->streams().Acquire(1);
    orphan_block = gone->allocations().Allocate(0, 512);
    ASSERT_THAT(orphan_stream, IsOk());
    ASSERT_THAT(orphan_block, IsOk());
  }

  int failures = 0;
  {
    Churn churn(*pools);
    for (int i = 0; i < 30; ++i) {
      const int code = RunInForkedChild([&] {
        const int64_t calls = sim.total_calls();
        auto refused = [](const absl::Status& status) {
          return status.code() == absl::StatusCode::kFailedPrecondition &&
                 status.message().find("fork") != absl::string_view::npos;
        };
        if (!refused(pools->streams().Acquire(0).status())) return 1;
        if (!refused(pools->events().Acquire(1).status())) return 2;
        if (!refused(pools->allocations().Allocate(0, 64).status())) return 3;
        if (!refused(pools->streams().Prewarm(0, {}, 1))) return 4;
        if (!refused(pools->events().PrewarmAsync(0, {}, 1).Wait())) return 5;
        pools->Trim();
        (void)pools->streams().GetStats();
        (void)pools->allocations().GetStats();
        (void)pools->DebugString();
        (void)pools->GetOutstandingLeases();
        inherited->Release();        // leaked: the parent's context
        inherited_block->Release();  // likewise
        orphan_stream->Release();    // last reference to a closed shard
        orphan_block->Release();     // last reference to a destroyed cache
        pools.reset();               // leaks everything, destroys no mutex
        if (sim.total_calls() != calls) return 6;
        return 0;
      });
      if (code != 0) {
        ADD_FAILURE() << "fork child " << i << " ended with " << code
                      << (code == kChildHung ? " (hung)" : "");
        ++failures;
      }
    }
  }
  EXPECT_EQ(failures, 0);
  // The parent is unaffected.
  inherited->Release();
  inherited_block->Release();
  EXPECT_THAT(pools->streams().Acquire(0), IsOk());
  pools.reset();             // before the simulator they wrap
  orphan_stream->Release();  // leaked: their pools are gone
  orphan_block->Release();
  sim.ResetDevice(0);
  sim.ResetDevice(1);
  EXPECT_EQ(sim.misuse_count(), 0);
}

// --- device reset while old-generation leases are out
// ----------------------------

TEST(LifecycleEdgesTest, LeasesOfAResetDeviceAreDroppedWithoutRuntimeCalls) {
  auto backend = std::make_unique<SimBackend>(StrictSimOptions(2));
  SimBackend* sim = backend.get();
  absl::StatusOr<std::unique_ptr<Pools>> created =
      Pools::Create(std::move(backend));
  ASSERT_THAT(created, IsOk());
  Pools& pools = **created;
  ASSERT_THAT(pools.streams().Prewarm(0, {}, 2), IsOk());
  absl::StatusOr<PooledStream> stream = pools.streams().Acquire(0);
  absl::StatusOr<PooledEvent> event = pools.events().Acquire(0);
  ASSERT_THAT(stream, IsOk());
  ASSERT_THAT(event, IsOk());
  absl::StatusOr<PooledAllocation> on_stream =
      pools.allocations().Allocate(0, 4096, MemoryKind::kDevice, stream->get());
  absl::StatusOr<PooledAllocation> pinned =
      pools.allocations().Allocate(0, 8192, MemoryKind::kPinnedHost);
  ASSERT_THAT(on_stream, IsOk());
  ASSERT_THAT(pinned, IsOk());
  pinned->RecordUse(stream->get());
  // Device 1 keeps a lease through all of it.
  absl::StatusOr<PooledStream> other_device = pools.streams().Acquire(1);
  ASSERT_THAT(other_device, IsOk());
  const NativeStream old_stream = stream->get();
  const NativeEvent old_event = event->get();

  // A sticky error; the pools find it on their next call of the device:
  // the query of a returned handle (an idle one is handed out unqueried).
  sim->PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  {
    absl::StatusOr<PooledStream> idle = pools.streams().Acquire(0);
    ASSERT_THAT(idle, IsOk());
  }
  ASSERT_TRUE(pools.health()->is_poisoned(0));
  EXPECT_THAT(pools.streams().Acquire(0),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cudaErrorIllegalAddress")));
  ASSERT_TRUE(pools.health()->is_poisoned(0));
  // The user resets the device (every handle of it is destroyed), then
  // tells the pools: a new generation.
  sim->ResetDevice(0);
  ASSERT_THAT(pools.RecoverDevice(0), IsOk());

  const int64_t calls = sim->calls_on_device(0);
  stream->Release();
  event->Release();
  on_stream->Release();
  pinned->Release();
  EXPECT_EQ(sim->calls_on_device(0), calls)
      << "a lease of the old generation reached the runtime";
  EXPECT_GE(pools.streams().GetStats().dropped, 1);
  EXPECT_GE(pools.events().GetStats().dropped, 1);
  EXPECT_EQ(pools.allocations().GetStats(0).blocks_dropped, 2);
  EXPECT_EQ(pools.allocations().GetStats(0).blocks_cached, 0);

  // The new generation works and never hands out an old handle.
  absl::StatusOr<PooledStream> fresh_stream = pools.streams().Acquire(0);
  absl::StatusOr<PooledEvent> fresh_event = pools.events().Acquire(0);
  ASSERT_THAT(fresh_stream, IsOk());
  ASSERT_THAT(fresh_event, IsOk());
  EXPECT_NE(fresh_stream->get(), old_stream);
  EXPECT_NE(fresh_event->get(), old_event);
  EXPECT_TRUE(sim->is_live_stream(fresh_stream->get()));
  EXPECT_THAT(pools.allocations().Allocate(0, 4096, MemoryKind::kDevice,
                                           fresh_stream->get()),
              IsOk());
  // Device 1 never noticed.
  EXPECT_TRUE(sim->is_live_stream(other_device->get()));
  other_device->Release();
  EXPECT_EQ(pools.streams().GetStats(1, {}).idle, 1);
  EXPECT_EQ(sim->misuse_count(), 0);
}

}  // namespace
}  // namespace gpupool
