// Pools bundle and ProcessPools(): shared device health, recovery, leak
// listing, and backend selection from GPUPOOL_BACKEND (each selection case
// runs in a fork()ed child, because the process bundle is created once).

#include "gpupool/pools.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;
using ::testing::HasSubstr;

std::unique_ptr<Pools> MakeSimPools(SimBackend** sim, int devices = 2) {
  auto backend = std::make_unique<SimBackend>(StrictSimOptions(devices));
  *sim = backend.get();
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(std::move(backend));
  EXPECT_THAT(pools, IsOk());
  return pools.ok() ? *std::move(pools) : nullptr;
}

TEST(PoolsTest, CreateRejectsNullAndDeviceLessBackends) {
  EXPECT_THAT(Pools::Create(nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null")));
  SimOptions none;
  none.device_count = 0;
  EXPECT_FALSE(Pools::Create(std::make_unique<SimBackend>(none)).ok());
}

TEST(PoolsTest, AStickyErrorSeenByOnePoolPoisonsAllThree) {
  SimBackend* sim = nullptr;
  std::unique_ptr<Pools> pools = MakeSimPools(&sim);
  ASSERT_NE(pools, nullptr);
  absl::StatusOr<PooledAllocation> block =
      pools->allocations().Allocate(1, 4096);
  ASSERT_THAT(block, IsOk());
  absl::StatusOr<PooledEvent> event = pools->events().Acquire(1);
  ASSERT_THAT(event, IsOk());
  sim->PoisonDevice(1, absl::InternalError("cudaErrorIllegalAddress"));
  event->Release();  // the event pool sees the sticky error
  EXPECT_TRUE(pools->health()->is_poisoned(1));
  EXPECT_THAT(pools->streams().Acquire(1),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cudaErrorIllegalAddress")));
  EXPECT_THAT(pools->allocations().Allocate(1, 4096),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(pools->streams().Acquire(0), IsOk());  // device 0 is fine
  block->Release();
  sim->ResetDevice(1);
  ASSERT_THAT(pools->RecoverDevice(1), IsOk());
  EXPECT_THAT(pools->streams().Acquire(1), IsOk());
  EXPECT_THAT(pools->allocations().Allocate(1, 4096), IsOk());
}

TEST(PoolsTest, OutstandingLeasesCoverEveryPool) {
  SimBackend* sim = nullptr;
  std::unique_ptr<Pools> pools = MakeSimPools(&sim);
  ASSERT_NE(pools, nullptr);
  absl::StatusOr<PooledStream> stream = pools->streams().Acquire(0);
  absl::StatusOr<PooledEvent> event = pools->events().Acquire(0);
  absl::StatusOr<PooledAllocation> block =
      pools->allocations().Allocate(0, 1 << 20);
  ASSERT_THAT(stream, IsOk());
  ASSERT_THAT(event, IsOk());
  ASSERT_THAT(block, IsOk());
  {
    // A block released on a stream keeps an internal ready event: held by
    // gpupool, never listed as the user's lease.
    absl::StatusOr<PooledStream> other = pools->streams().Acquire(0);
    ASSERT_THAT(other, IsOk());
    absl::StatusOr<PooledAllocation> on_stream = pools->allocations().Allocate(
        0, 4096, MemoryKind::kDevice, other->get());
    ASSERT_THAT(on_stream, IsOk());
  }
  const std::vector<OutstandingLease> event_leases =
      pools->events().GetOutstandingLeases();
  ASSERT_EQ(event_leases.size(), 2u);  // the user's and the cache's
  EXPECT_EQ(std::count_if(event_leases.begin(), event_leases.end(),
                          [](const OutstandingLease& lease) {
                            return lease.where.is_internal();
                          }),
            1);
  std::vector<OutstandingLease> leases = pools->GetOutstandingLeases();
  ASSERT_EQ(leases.size(), 3u);
  EXPECT_EQ(leases[0].resource, "stream");
  EXPECT_EQ(leases[1].resource, "event");
  EXPECT_EQ(leases[2].resource, "allocation");
  for (const OutstandingLease& lease : leases) {
    EXPECT_THAT(lease.where.file_name(), HasSubstr("pools_test.cc"));
  }
  EXPECT_THAT(pools->DebugString(), HasSubstr("stream pool over sim"));
}

TEST(PoolsTest, TrimEmptiesEveryPool) {
  SimBackend* sim = nullptr;
  std::unique_ptr<Pools> pools = MakeSimPools(&sim);
  ASSERT_NE(pools, nullptr);
  ASSERT_THAT(pools->streams().Prewarm(0, {}, 3), IsOk());
  ASSERT_THAT(pools->events().Prewarm(0, {}, 2), IsOk());
  { ASSERT_THAT(pools->allocations().Allocate(0, 1 << 20), IsOk()); }
  EXPECT_GT(sim->live_allocations(0), 0);
  pools->Trim();
  EXPECT_EQ(sim->live_streams(0), 0);
  EXPECT_EQ(sim->live_events(0), 0);
  EXPECT_EQ(sim->live_allocations(0), 0);
}

// Pools over a one-device simulator with fences deferred, after a block
// leased on a pool stream and released with it: parked on that stream, which
// is back in the stream pool, idle. `*sim` is the pools' simulator.
std::unique_ptr<Pools> PoolsWithAParkedBlock(SimBackend** sim,
                                             PoolsOptions options = {}) {
  auto backend = std::make_unique<SimBackend>(StrictSimOptions(1));
  *sim = backend.get();
  options.allocations.defer_same_stream_fences = true;
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(std::move(backend), options);
  EXPECT_THAT(pools, IsOk());
  if (!pools.ok()) return nullptr;
  absl::StatusOr<PooledStream> stream = (*pools)->streams().Acquire(0, {});
  EXPECT_THAT(stream, IsOk());
  if (!stream.ok()) return nullptr;
  EXPECT_THAT((*pools)->allocations().Allocate(0, 1 << 20, MemoryKind::kDevice,
                                               stream->get()),
              IsOk());
  return *std::move(pools);
}

// With deferred fences, a stream the stream pool destroys has the blocks
// parked on it fenced first: the event is recorded on the live stream, the
// block stays cached, and nothing touches the destroyed handle.
TEST(PoolsTest, AStreamThePoolDestroysIsFencedFirst) {
  SimBackend* sim = nullptr;
  PoolsOptions options;
  int user_hook_calls = 0;
  options.streams.before_destroy = [&user_hook_calls](int, void*) {
    ++user_hook_calls;
  };
  std::unique_ptr<Pools> pools = PoolsWithAParkedBlock(&sim, options);
  ASSERT_NE(pools, nullptr);
  AllocationCacheStats stats = pools->allocations().GetStats(0);
  ASSERT_EQ(stats.blocks_cached, 1);  // parked: no event recorded yet
  const int64_t records = sim->calls(SimOp::kEventRecord);
  pools->streams().Trim();  // destroys the idle stream
  EXPECT_EQ(sim->live_streams(0), 0);
  EXPECT_EQ(sim->calls(SimOp::kEventRecord) - records, 1);
  EXPECT_EQ(user_hook_calls, 1);
  stats = pools->allocations().GetStats(0);
  EXPECT_EQ(stats.blocks_cached, 1);
  EXPECT_EQ(stats.blocks_leaked, 0);
  EXPECT_EQ(sim->misuse_count(), 0);
}

// A sticky fault met while the pool's hook fences a stream's parked blocks
// poisons the device: the block is dropped, and the stream too, with no
// call on the dead device (not even the destroy the pool was about to make).
TEST(PoolsTest, AStickyFaultInTheFenceBeforeADestroyDropsTheStream) {
  SimBackend* sim = nullptr;
  std::unique_ptr<Pools> pools = PoolsWithAParkedBlock(&sim);
  ASSERT_NE(pools, nullptr);
  sim->FailNext(SimOp::kEventCreate,
                FaultError(Fault::kDevice, absl::StatusCode::kInternal,
                           "cudaErrorIllegalAddress"),
                0);
  const int64_t destroys = sim->calls(SimOp::kStreamDestroy);
  pools->streams().Trim();
  EXPECT_TRUE(pools->health()->is_poisoned(0));
  EXPECT_EQ(sim->calls(SimOp::kStreamDestroy), destroys);
  EXPECT_EQ(pools->allocations().GetStats(0).blocks_dropped, 1);
  EXPECT_EQ(sim->misuse_count(), 0);
  // The real device would be dead: its handles die with its context.
  sim->PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
}

// Runs ProcessPools() in a fresh child with GPUPOOL_BACKEND=`env` (unset when
// null) and returns the child's report: "ok:<backend>" or "error:<code>:<msg>".
std::string ProcessPoolsInChild(const char* env) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (env == nullptr) {
      unsetenv("GPUPOOL_BACKEND");
    } else {
      setenv("GPUPOOL_BACKEND", env, 1);
    }
    absl::StatusOr<Pools*> pools = ProcessPools();
    std::string report =
        pools.ok()
            ? "ok:" + std::string((*pools)->backend().name())
            : "error:" +
                  std::to_string(static_cast<int>(pools.status().code())) +
                  ":" + std::string(pools.status().message());
    (void)!write(fds[1], report.data(), report.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buffer[512];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) out.append(buffer, n);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

TEST(ProcessPoolsTest, SimWhenAskedFor) {
  EXPECT_EQ(ProcessPoolsInChild("sim"), "ok:sim");
}

TEST(ProcessPoolsTest, UnknownBackendIsInvalidArgument) {
  const std::string report = ProcessPoolsInChild("opencl");
  EXPECT_THAT(report, HasSubstr("error:3:"));  // kInvalidArgument
  EXPECT_THAT(report, HasSubstr("GPUPOOL_BACKEND=\"opencl\""));
}

TEST(ProcessPoolsTest, WhitespaceAroundTheBackendNameIsIgnored) {
  EXPECT_EQ(ProcessPoolsInChild(" sim"), "ok:sim");
  EXPECT_EQ(ProcessPoolsInChild("sim \t"), "ok:sim");
}

TEST(ProcessPoolsTest, WhitespaceInsideTheNameIsStillRefused) {
  const std::string report = ProcessPoolsInChild(" s im ");
  EXPECT_THAT(report, HasSubstr("error:3:"));  // kInvalidArgument
  EXPECT_THAT(report, HasSubstr("GPUPOOL_BACKEND=\" s im \""));
}

TEST(ProcessPoolsTest, NoSilentFallbackToSim) {
  const std::string report = ProcessPoolsInChild(nullptr);
  if (report.rfind("ok:", 0) == 0) {
    // A machine with a GPU: a runtime backend was chosen, never sim.
    EXPECT_NE(report, "ok:sim");
  } else {
    EXPECT_THAT(report, HasSubstr("error:5:"));  // kNotFound
    EXPECT_THAT(report, HasSubstr("no runtime backend reports a device"));
    EXPECT_THAT(report, HasSubstr("GPUPOOL_BACKEND=sim"));
  }
}

}  // namespace
}  // namespace gpupool
