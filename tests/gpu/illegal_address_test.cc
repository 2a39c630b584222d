// The sticky-fault path on a real GPU: a kernel stores to an illegal address
// on a pooled stream, and the pools must classify the error as
// Fault::kDevice (cudaErrorIllegalAddress, 700), poison the device, refuse
// further acquires with FailedPrecondition naming the original error, and
// let the process exit without hanging.
//
// A dead context cannot be revived inside the process, so each case runs in
// a subprocess (a threadsafe death test: the binary re-executed, so no CUDA
// state is inherited) that ends with exit(0) once every check passed. The
// subprocess reports failed checks on stderr and exits 1; an alarm() watchdog
// kills it (SIGALRM) if anything hangs, teardown at exit included. Without a
// CUDA device the tests skip with the runtime's own reason.

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/cuda_backend.h"
#include "gpupool/pools.h"
#include "gtest/gtest.h"
#include "tests/gpu/illegal_address_kernel.h"

namespace gpupool {
namespace {

using ::gpupool::gpu_test::LaunchStore;

// Generous: the whole subprocess (CUDA init, the fault, teardown) takes well
// under a second on a healthy machine.
constexpr unsigned kWatchdogSeconds = 60;
constexpr char kOk[] = "illegal-address: ok";

// Checks inside the subprocess. GoogleTest does not report assertion
// failures from a death-test child, so failures are printed here and turned
// into a non-zero exit status.
class ChildChecks {
 public:
  void Expect(bool ok, const std::string& what) {
    if (ok) return;
    std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
    ++failures_;
  }
  // A check the rest of the case cannot do without.
  void Require(bool ok, const std::string& what) {
    Expect(ok, what);
    if (!ok) Finish();
  }
  // The status is FailedPrecondition naming the original error.
  void ExpectRefused(const absl::Status& status, const std::string& what) {
    Expect(status.code() == absl::StatusCode::kFailedPrecondition &&
               absl::StrContains(status.message(), "cudaErrorIllegalAddress"),
           absl::StrCat(what,
                        " refused with FailedPrecondition naming "
                        "cudaErrorIllegalAddress; got ",
                        status.ToString()));
  }
  // exit(), not _exit(): the atexit teardown on a dead context is part of
  // what must not hang.
  [[noreturn]] void Finish() {
    if (failures_ > 0) {
      std::fprintf(stderr, "illegal-address: %d check(s) failed\n", failures_);
      std::fflush(stderr);
      std::exit(1);
    }
    std::fprintf(stderr, "%s\n", kOk);
    std::fflush(stderr);
    std::exit(0);
  }

 private:
  int failures_ = 0;
};

// Polls `stream` until its work is no longer pending (or 20 s passed).
absl::Status WaitForStream(Backend& backend, int device, NativeStream stream) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (;;) {
    absl::Status status = backend.QueryStream(device, stream);
    if (FaultOf(status) != Fault::kNotReady || absl::Now() > deadline) {
      return status;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// The device's poison state, checked the same way in both cases.
void ExpectPoisoned(ChildChecks& checks, const Pools& pools) {
  checks.Expect(pools.health()->is_poisoned(0), "device 0 is poisoned");
  const absl::Status cause = pools.health()->poison_cause(0);
  checks.Expect(
      FaultOf(cause) == Fault::kDevice &&
          cause.code() == absl::StatusCode::kInternal &&
          absl::StrContains(cause.message(), "cudaErrorIllegalAddress (700)"),
      absl::StrCat("poison cause is the kDevice error 700; got ",
                   cause.ToString(), " fault ", FaultName(FaultOf(cause))));
}

// A pooled stream faults; the test waits for the fault, checks the query's
// classification directly, then releases the stream to its pool.
[[noreturn]] void FaultThenRelease() {
  alarm(kWatchdogSeconds);
  ChildChecks checks;
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeCudaBackend();
  checks.Require(backend.ok(), backend.status().ToString());
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(*std::move(backend));
  checks.Require(pools.ok(), pools.status().ToString());
  Pools& p = **pools;

  absl::StatusOr<PooledStream> stream = p.streams().Acquire(0);
  checks.Require(stream.ok(), stream.status().ToString());
  const cudaError_t launch = LaunchStore(
      static_cast<cudaStream_t>(stream->get()), nullptr, /*spin_cycles=*/0);
  checks.Require(launch == cudaSuccess,
                 absl::StrCat("kernel launch: ", cudaGetErrorName(launch)));

  // The backend's own answer, through FaultOf.
  const absl::Status query = WaitForStream(p.backend(), 0, stream->get());
  checks.Expect(
      FaultOf(query) == Fault::kDevice &&
          query.code() == absl::StatusCode::kInternal,
      absl::StrCat("QueryStream after the fault is kDevice/Internal; "
                   "got ",
                   query.ToString(), " fault ", FaultName(FaultOf(query))));
  checks.Expect(absl::StrContains(query.message(),
                                  "cudaStreamQuery on device 0: "
                                  "cudaErrorIllegalAddress (700)"),
                absl::StrCat("query message names call, device and error; got ",
                             query.message()));
  const cudaError_t raw =
      cudaStreamQuery(static_cast<cudaStream_t>(stream->get()));
  checks.Expect(
      raw == cudaErrorIllegalAddress,
      absl::StrCat("raw cudaStreamQuery is 700; got ", cudaGetErrorName(raw)));

  // The pool's return protocol sees the same sticky error.
  stream->Release();
  ExpectPoisoned(checks, p);
  const StreamPoolStats stats = p.streams().GetStats();
  checks.Expect(stats.dropped == 1 && stats.destroyed == 0,
                absl::StrCat("the faulted stream is dropped without a runtime "
                             "call; dropped=",
                             stats.dropped, " destroyed=", stats.destroyed));

  checks.ExpectRefused(p.streams().Acquire(0).status(), "stream Acquire");
  StreamConfig other;
  other.non_blocking = false;
  checks.ExpectRefused(p.streams().Acquire(0, other).status(),
                       "stream Acquire of another config");
  checks.ExpectRefused(p.events().Acquire(0).status(), "event Acquire");
  checks.ExpectRefused(p.allocations().Allocate(0, 4096).status(), "Allocate");
  checks.ExpectRefused(p.streams().Prewarm(0, {}, 1), "Prewarm");

  pools->reset();  // destroying pools over a dead context must not hang
  checks.Finish();
}

// The process-wide bundle (GPUPOOL_BACKEND=cuda) with idle streams, events and
// cached memory on the device; the faulting stream is released at once,
// probably while its kernel still runs, so the fault is found later by the
// pool itself. The process then exits with the bundle alive: its exit drain
// must not call the runtime on the poisoned device.
[[noreturn]] void ReleaseWhilePendingThenExit() {
  alarm(kWatchdogSeconds);
  ChildChecks checks;
  setenv("GPUPOOL_BACKEND", "cuda", /*overwrite=*/1);
  setenv("GPUPOOL_STATS", "1", /*overwrite=*/1);  // the exit report, too
  absl::StatusOr<Pools*> pools = ProcessPools();
  checks.Require(pools.ok(), pools.status().ToString());
  Pools& p = **pools;

  checks.Expect(p.streams().Prewarm(0, {}, 2).ok(), "prewarm two streams");
  {
    absl::StatusOr<PooledEvent> event = p.events().Acquire(0);
    checks.Expect(event.ok(), event.status().ToString());
    absl::StatusOr<PooledAllocation> block = p.allocations().Allocate(0, 4096);
    checks.Expect(block.ok(), block.status().ToString());
  }  // both back in their pools, idle

  {
    absl::StatusOr<PooledStream> stream = p.streams().Acquire(0);
    checks.Require(stream.ok(), stream.status().ToString());
    // About 0.1 s of spinning: the release below finds the work pending.
    const cudaError_t launch =
        LaunchStore(static_cast<cudaStream_t>(stream->get()), nullptr,
                    /*spin_cycles=*/200'000'000);
    checks.Require(launch == cudaSuccess,
                   absl::StrCat("kernel launch: ", cudaGetErrorName(launch)));
  }

  // Keep using the pool as a client would until it refuses.
  absl::Status refused;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    absl::StatusOr<PooledStream> stream = p.streams().Acquire(0);
    if (!stream.ok()) {
      refused = stream.status();
      break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  checks.ExpectRefused(refused, "stream Acquire after the fault");
  ExpectPoisoned(checks, p);
  checks.ExpectRefused(p.events().Acquire(0).status(), "event Acquire");
  checks.ExpectRefused(p.allocations().Allocate(0, 4096).status(), "Allocate");
  checks.Finish();  // exit(0) with the process bundle alive
}

class IllegalAddressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> backend = MakeCudaBackend();
    if (!backend.ok()) GTEST_SKIP() << backend.status().message();
    // Re-execute the binary for the child: a forked CUDA process is unusable.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(IllegalAddressTest, FaultSeenByQueryPoisonsTheDeviceOnRelease) {
  EXPECT_EXIT(FaultThenRelease(), ::testing::ExitedWithCode(0), kOk);
}

TEST_F(IllegalAddressTest, FaultFoundByThePoolPoisonsAndExitDoesNotHang) {
  EXPECT_EXIT(ReleaseWhilePendingThenExit(), ::testing::ExitedWithCode(0), kOk);
}

}  // namespace
}  // namespace gpupool
