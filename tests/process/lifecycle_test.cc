// Process lifetime: exit with pools alive (atexit drain, then leak) and
// fork (the child refuses and leaks inherited handles without locks).

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gpupool/pools.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/util/fork_util.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::RunInForkedChild;
using ::gpupool::testing::StrictSimOptions;

// --- exit --------------------------------------------------------------------
// Globals: the checker runs from atexit, after the pools' drain.
SimBackend* exit_sim = nullptr;
std::vector<PooledStream>* exit_leases = nullptr;

// Registered before the pools exist, so it runs after their drain.
void CheckNoRuntimeCallsAfterDrain() {
  const int live_after_drain = exit_sim->live_streams(0);
  const int64_t calls = exit_sim->total_calls();
  const size_t leases = exit_leases->size();
  exit_leases->clear();  // releases after the drain must leak
  if (exit_sim->total_calls() != calls) {
    std::fprintf(stderr, "exit-check: runtime called after the drain\n");
    _exit(3);
  }
  if (live_after_drain != static_cast<int>(leases)) {
    std::fprintf(stderr, "exit-check: drain left %d idle streams alive\n",
                 live_after_drain - static_cast<int>(leases));
    _exit(4);
  }
  std::fprintf(stderr, "exit-check: ok, %zu leases leaked after drain\n",
               leases);
}

void ExitWithPoolsAlive(bool from_other_thread) {
  std::atexit(&CheckNoRuntimeCallsAfterDrain);
  setenv("GPUPOOL_BACKEND", "sim", 1);
  absl::StatusOr<Pools*> pools = ProcessPools();
  if (!pools.ok()) _exit(5);
  exit_sim = dynamic_cast<SimBackend*>(&(*pools)->backend());
  if (exit_sim == nullptr) _exit(6);
  if (!(*pools)->streams().Prewarm(0, {}, 4).ok()) _exit(7);
  exit_leases = new std::vector<PooledStream>();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<PooledStream> stream = (*pools)->streams().Acquire(0);
    if (!stream.ok()) _exit(8);
    exit_leases->push_back(*std::move(stream));
  }
  (*pools)->streams().PrewarmAsync(0, {.priority = -1}, 8);  // still running
  if (from_other_thread) {
    std::thread([] { std::exit(0); }).join();
  }
  std::exit(0);
}

TEST(LifecycleDeathTest, ExitWithLeasesOutDrainsThenLeaks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitWithPoolsAlive(false), ::testing::ExitedWithCode(0),
              "exit-check: ok, 3 leases leaked after drain");
}

TEST(LifecycleDeathTest, ExitFromAnotherThreadDrainsThenLeaks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitWithPoolsAlive(true), ::testing::ExitedWithCode(0),
              "exit-check: ok, 3 leases leaked after drain");
}

// --- fork --------------------------------------------------------------------
TEST(LifecycleTest, ForkedChildRefusesAndLeaksInheritedHandles) {
  SimBackend sim(StrictSimOptions(2));
  StreamPool pool(sim);
  ASSERT_THAT(pool.Prewarm(0, {}, 2), IsOk());
  absl::StatusOr<PooledStream> lease = pool.Acquire(1);
  ASSERT_THAT(lease, IsOk());
  const int code = RunInForkedChild([&] {
    const int64_t calls = sim.total_calls();
    absl::StatusOr<PooledStream> refused = pool.Acquire(0);
    if (refused.ok()) return 1;
    if (refused.status().code() != absl::StatusCode::kFailedPrecondition) {
      return 2;
    }
    if (refused.status().message().find("fork") == absl::string_view::npos) {
      return 3;
    }
    lease->Release();  // inherited handle: leaked, no runtime call
    pool.Trim();
    if (sim.total_calls() != calls) return 4;
    return 0;
  });
  EXPECT_EQ(code, 0);
  // The parent is unaffected.
  lease->Release();
  EXPECT_EQ(pool.GetStats().idle, 3);
  EXPECT_THAT(pool.Acquire(0), IsOk());
}

TEST(LifecycleTest, ForkWhileAnotherThreadHoldsShardLocksDoesNotDeadlock) {
  SimBackend sim(StrictSimOptions(1));
  StreamPool pool(sim);
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop.load()) {
      absl::StatusOr<PooledStream> stream = pool.Acquire(0);
      if (stream.ok()) stream->Release();
    }
  });
  int failures = 0;
  for (int i = 0; i < 20; ++i) {
    const int code = RunInForkedChild([&] {
      absl::StatusOr<PooledStream> refused = pool.Acquire(0);
      return refused.status().code() == absl::StatusCode::kFailedPrecondition
                 ? 0
                 : 1;
    });
    failures += code != 0;
  }
  stop.store(true);
  churn.join();
  EXPECT_EQ(failures, 0);
}

TEST(LifecycleTest, PoolCreatedInTheChildWorks) {
  const int code = RunInForkedChild([] {
    SimBackend sim;
    StreamPool pool(sim);
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    return stream.ok() ? 0 : 1;
  });
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace gpupool
