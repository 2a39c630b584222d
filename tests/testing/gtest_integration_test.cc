// gpupool::testing: the leak-check listener, ScopedLeakGuard and the
// ProcessPools environment, checked with GoogleTest's own facilities — a
// child test binary (leaky_suite) whose leaking tests must be reported
// failed, and EXPECT_NONFATAL_FAILURE for in-process checks.

#include "gpupool/testing/gtest_integration.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gpupool/pools.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// --- the child binary -------------------------------------------------------

struct ChildResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs leaky_suite with `env` (e.g. "GPUPOOL_BACKEND=sim") and `args`.
ChildResult RunLeakySuite(const std::string& env, const std::string& args) {
  const std::string command =
      absl::StrCat("env -u GPUPOOL_CONF -u GPUPOOL_STATS ", env, " '",
                   GPUPOOL_LEAKY_SUITE, "' --gtest_color=no ", args, " 2>&1");
  ChildResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    result.output.append(buffer, n);
  }
  const int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

// "leaky_suite.cc:<line>" of the line marked "// SITE:<name>".
std::string SiteOf(const std::string& name) {
  std::ifstream source(GPUPOOL_LEAKY_SUITE_SOURCE);
  std::string line;
  for (int number = 1; std::getline(source, line); ++number) {
    if (line.find("// SITE:" + name) != std::string::npos) {
      return absl::StrCat("leaky_suite.cc:", number);
    }
  }
  ADD_FAILURE() << "no SITE:" << name << " in " << GPUPOOL_LEAKY_SUITE_SOURCE;
  return "?";
}

TEST(LeakCheckListenerTest, LeakingStreamFailsItsTestAtTheAcquireSite) {
  const ChildResult child = RunLeakySuite(
      "GPUPOOL_BACKEND=sim", "--gtest_filter=Leaky.KeepsAStreamPastTheEnd");
  const std::string site = SiteOf("stream");
  EXPECT_EQ(child.exit_code, 1) << child.output;
  // The failure is attributed to the acquire site and names the lease.
  EXPECT_THAT(child.output,
              AllOf(HasSubstr(site + ": Failure"),
                    HasSubstr("gpupool: stream dev0 {priority=-1,"
                              "non_blocking=1}"),
                    HasSubstr(site + " is still out at the end of test "
                                     "Leaky.KeepsAStreamPastTheEnd"),
                    HasSubstr("[  FAILED  ] Leaky.KeepsAStreamPastTheEnd")))
      << child.output;
}

TEST(LeakCheckListenerTest, EveryLeakedEventIsNamed) {
  const ChildResult child = RunLeakySuite(
      "GPUPOOL_BACKEND=sim", "--gtest_filter=Leaky.KeepsTwoEventsPastTheEnd");
  EXPECT_EQ(child.exit_code, 1) << child.output;
  size_t count = 0;
  for (size_t at = child.output.find("gpupool: event dev0");
       at != std::string::npos;
       at = child.output.find("gpupool: event dev0", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 2u) << child.output;
  EXPECT_THAT(child.output, HasSubstr(SiteOf("event") + " is still out"));
}

TEST(LeakCheckListenerTest, LeakingAllocationFailsItsTest) {
  const ChildResult child =
      RunLeakySuite("GPUPOOL_BACKEND=sim",
                    "--gtest_filter=Leaky.KeepsAnAllocationPastTheEnd");
  const std::string site = SiteOf("allocation");
  EXPECT_EQ(child.exit_code, 1) << child.output;
  EXPECT_THAT(child.output,
              AllOf(HasSubstr(site + ": Failure"),
                    HasSubstr("gpupool: allocation dev0 {"),
                    HasSubstr(site + " is still out at the end of test "
                                     "Leaky.KeepsAnAllocationPastTheEnd")))
      << child.output;
}

TEST(LeakCheckListenerTest, CleanTestsPass) {
  const ChildResult child =
      RunLeakySuite("GPUPOOL_BACKEND=sim",
                    "--gtest_filter=Clean*:CleanFixture.*:CleanSuite.*");
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_THAT(child.output, AllOf(HasSubstr("[  PASSED  ] 3 tests."),
                                  Not(HasSubstr("gpupool:"))))
      << child.output;
}

TEST(LeakCheckListenerTest, OnlyTheLeakingTestFailsInAFullRun) {
  const ChildResult child =
      RunLeakySuite("GPUPOOL_BACKEND=sim", "--gtest_filter=Leaky.*:Clean*");
  EXPECT_EQ(child.exit_code, 1) << child.output;
  EXPECT_THAT(
      child.output,
      AllOf(HasSubstr("[  PASSED  ] 3 tests."), HasSubstr("3 FAILED TESTS"),
            HasSubstr("[  FAILED  ] Leaky.KeepsAStreamPastTheEnd"),
            HasSubstr("[  FAILED  ] Leaky.KeepsTwoEventsPastTheEnd"),
            HasSubstr("[  FAILED  ] Leaky.KeepsAnAllocationPastTheEnd")))
      << child.output;
}

TEST(LeakCheckListenerTest, WorksOverAPrivateBundle) {
  // No GPUPOOL_BACKEND: ProcessPools() is never needed.
  const ChildResult child = RunLeakySuite(
      "-u GPUPOOL_BACKEND",
      "--gtest_filter=Leaky.KeepsAStreamPastTheEnd:Clean* --private_pools");
  EXPECT_EQ(child.exit_code, 1) << child.output;
  EXPECT_THAT(child.output, AllOf(HasSubstr(SiteOf("stream") + " is still out"),
                                  HasSubstr("[  PASSED  ] 3 tests."),
                                  HasSubstr("1 FAILED TEST")))
      << child.output;
}

TEST(LeakCheckListenerTest, PoisonCheckIsOptIn) {
  const std::string filter = "--gtest_filter=Poison.PoisonsDevice";
  const ChildResult quiet = RunLeakySuite("GPUPOOL_BACKEND=sim", filter);
  EXPECT_EQ(quiet.exit_code, 0) << quiet.output;

  const ChildResult checked =
      RunLeakySuite("GPUPOOL_BACKEND=sim", filter + " --check_poison");
  EXPECT_EQ(checked.exit_code, 1) << checked.output;
  EXPECT_THAT(checked.output,
              AllOf(HasSubstr("gpupool: device 0 was poisoned ("
                              "cudaErrorLaunchFailure"),
                    HasSubstr("at the end of test Poison.PoisonsDevice"),
                    HasSubstr("[  FAILED  ] Poison.PoisonsDevice")))
      << checked.output;
}

TEST(LeakCheckListenerTest, PoisonCheckSeesARecoveredDevice) {
  const ChildResult child = RunLeakySuite(
      "GPUPOOL_BACKEND=sim",
      "--gtest_filter=Poison.PoisonsAndRecoversDevice --check_poison");
  EXPECT_EQ(child.exit_code, 1) << child.output;
  EXPECT_THAT(child.output,
              HasSubstr("1 device poisoning(s) happened (since recovered)"))
      << child.output;
}

TEST(ProcessPoolsEnvironmentTest, UnusableBackendFailsTheRunLoudly) {
  const ChildResult child =
      RunLeakySuite("GPUPOOL_BACKEND=bogus", "--gtest_filter=Clean*");
  EXPECT_EQ(child.exit_code, 1) << child.output;
  EXPECT_THAT(child.output,
              AllOf(HasSubstr("gpupool: ProcessPools() failed, no test can "
                              "run: INVALID_ARGUMENT: GPUPOOL_BACKEND=bogus"),
                    Not(HasSubstr("[       OK ]"))))
      << child.output;
}

// --- in process
// ---------------------------------------------------------------

class PrivateBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = std::make_unique<SimBackend>(StrictSimOptions(2));
    sim_ = backend.get();
    absl::StatusOr<std::unique_ptr<Pools>> pools =
        Pools::Create(std::move(backend));
    ASSERT_THAT(pools, IsOk());
    pools_ = *std::move(pools);
  }
  // Poisons `device` the way a kernel fault does: the sticky error shows up
  // when a stream is returned.
  void PoisonDevice(int device, const char* error) {
    absl::StatusOr<PooledStream> stream = pools_->streams().Acquire(device);
    ASSERT_THAT(stream, IsOk());
    sim_->PoisonDevice(device, absl::InternalError(error));
    stream->Release();
    ASSERT_TRUE(pools_->health()->is_poisoned(device));
  }
  SimBackend* sim_ = nullptr;
  std::unique_ptr<Pools> pools_;
};

TEST_F(PrivateBundleTest, GuardCheckIsOkWhenEverythingWasReturned) {
  gpupool::testing::ScopedLeakGuard guard(*pools_);
  {
    absl::StatusOr<PooledStream> stream = pools_->streams().Acquire(1);
    ASSERT_THAT(stream, IsOk());
    absl::StatusOr<PooledEvent> event = pools_->events().Acquire(1);
    ASSERT_THAT(event, IsOk());
  }
  EXPECT_THAT(guard.Check(), IsOk());
}

TEST_F(PrivateBundleTest, GuardCheckNamesLeaksAndIgnoresOlderLeases) {
  absl::StatusOr<PooledStream> older = pools_->streams().Acquire(0);
  ASSERT_THAT(older, IsOk());
  gpupool::testing::ScopedLeakGuard guard(*pools_);
  const int guard_line = __LINE__ - 1;
  absl::StatusOr<PooledEvent> event = pools_->events().Acquire(0);
  const int event_line = __LINE__ - 1;
  ASSERT_THAT(event, IsOk());
  EXPECT_THAT(
      guard.Check(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr(absl::StrCat("1 leak finding(s) since the "
                                            "ScopedLeakGuard at ",
                                            __FILE__, ":", guard_line)),
                     HasSubstr(absl::StrCat(
                         "event dev0 {", EventConfig{}.ToString(), "} #",
                         event->lease_id(), " acquired at ", __FILE__, ":",
                         event_line, " is still out")),
                     Not(HasSubstr("stream")))));
  event->Release();
  EXPECT_THAT(guard.Check(), IsOk());
}

TEST_F(PrivateBundleTest, GuardDestructorFailsTheTestAtTheAcquireSite) {
  std::vector<PooledStream> kept;
  int acquire_line = 0;
  int guard_line = 0;
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::
            INTERCEPT_ONLY_CURRENT_THREAD,
        &failures);
    gpupool::testing::ScopedLeakGuard guard(*pools_);
    guard_line = __LINE__ - 1;
    absl::StatusOr<PooledStream> stream = pools_->streams().Acquire(0);
    acquire_line = __LINE__ - 1;
    ASSERT_THAT(stream, IsOk());
    kept.push_back(*std::move(stream));
  }
  ASSERT_EQ(failures.size(), 1);
  const ::testing::TestPartResult& failure = failures.GetTestPartResult(0);
  EXPECT_TRUE(failure.nonfatally_failed());
  EXPECT_STREQ(failure.file_name(), __FILE__);
  EXPECT_EQ(failure.line_number(), acquire_line);
  EXPECT_THAT(
      failure.message(),
      AllOf(HasSubstr(absl::StrCat("gpupool: stream dev0 {",
                                   StreamConfig{}.ToString(), "} #",
                                   kept[0].lease_id())),
            HasSubstr(absl::StrCat("is still out when the ScopedLeakGuard of ",
                                   __FILE__, ":", guard_line, " ended"))));
}

TEST_F(PrivateBundleTest, CacheReadyEventsAreNotLeaks) {
  // A block released on a stream keeps a ready event from the EventPool while
  // cached: gpupool's own lease, not the test's.
  absl::StatusOr<PooledStream> stream = pools_->streams().Acquire(0);
  ASSERT_THAT(stream, IsOk());
  gpupool::testing::ScopedLeakGuard guard(*pools_);
  {
    absl::StatusOr<PooledAllocation> buffer = pools_->allocations().Allocate(
        0, 1 << 16, MemoryKind::kDevice, stream->get());
    ASSERT_THAT(buffer, IsOk());
  }
  ASSERT_GT(pools_->events().GetStats().in_use, 0);
  EXPECT_THAT(guard.Check(), IsOk());
}

TEST_F(PrivateBundleTest, CacheReadyEventsAreNotLeaksWithoutSites) {
  PoolsOptions options;
  options.events.track_lease_sites = false;
  absl::StatusOr<std::unique_ptr<Pools>> pools =
      Pools::Create(std::make_unique<SimBackend>(StrictSimOptions(1)), options);
  ASSERT_THAT(pools, IsOk());
  absl::StatusOr<PooledStream> stream = (*pools)->streams().Acquire(0);
  ASSERT_THAT(stream, IsOk());
  gpupool::testing::ScopedLeakGuard guard(**pools);
  {
    absl::StatusOr<PooledAllocation> buffer = (*pools)->allocations().Allocate(
        0, 1 << 16, MemoryKind::kDevice, stream->get());
    ASSERT_THAT(buffer, IsOk());
  }
  ASSERT_GT((*pools)->events().GetStats().in_use, 0);
  EXPECT_THAT(guard.Check(), IsOk());
  // A real event leak is still counted.
  absl::StatusOr<PooledEvent> event = (*pools)->events().Acquire(0);
  ASSERT_THAT(event, IsOk());
  EXPECT_THAT(guard.Check(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr("1 more event still out")));
  event->Release();
}

TEST_F(PrivateBundleTest, UntrackedSitesAreReportedAsACount) {
  PoolsOptions options;
  options.streams.track_lease_sites = false;
  absl::StatusOr<std::unique_ptr<Pools>> untracked =
      Pools::Create(std::make_unique<SimBackend>(StrictSimOptions(1)), options);
  ASSERT_THAT(untracked, IsOk());
  gpupool::testing::ScopedLeakGuard guard(**untracked);
  absl::StatusOr<PooledStream> first = (*untracked)->streams().Acquire(0);
  absl::StatusOr<PooledStream> second = (*untracked)->streams().Acquire(0);
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  EXPECT_THAT(guard.Check(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("2 more streams still out (acquire sites "
                                 "not tracked")));
}

TEST_F(PrivateBundleTest, GuardPoisonCheckIsOptIn) {
  gpupool::testing::LeakCheckOptions options;
  options.fail_on_device_poisoned = true;
  auto checked =
      std::make_unique<gpupool::testing::ScopedLeakGuard>(*pools_, options);
  gpupool::testing::ScopedLeakGuard unchecked(*pools_);
  PoisonDevice(1, "hipErrorIllegalAddress");
  EXPECT_THAT(unchecked.Check(), IsOk());
  EXPECT_THAT(checked->Check(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("device 1 was poisoned ("
                                                   "hipErrorIllegalAddress")));
  // Recovered, the poisoning is still reported, by Check() and at the end.
  sim_->ResetDevice(1);
  ASSERT_THAT(pools_->RecoverDevice(1), IsOk());
  EXPECT_THAT(checked->Check(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("1 device poisoning(s) happened (since "
                                 "recovered)")));
  EXPECT_NONFATAL_FAILURE(checked.reset(), "since recovered");
}

TEST_F(PrivateBundleTest, GuardDestructorReportsAPoisoning) {
  gpupool::testing::LeakCheckOptions options;
  options.fail_on_device_poisoned = true;
  EXPECT_NONFATAL_FAILURE(
      {
        gpupool::testing::ScopedLeakGuard guard(*pools_, options);
        PoisonDevice(0, "cudaErrorIllegalAddress");
      },
      "device 0 was poisoned (cudaErrorIllegalAddress");
}

TEST_F(PrivateBundleTest, ListenerFailsTheTestItWatches) {
  // Drive a listener by hand around a leak inside this test.
  gpupool::testing::LeakCheckListener listener(*pools_);
  const ::testing::TestInfo& self =
      *::testing::UnitTest::GetInstance()->current_test_info();
  std::vector<PooledEvent> kept;
  listener.OnTestStart(self);
  absl::StatusOr<PooledEvent> event = pools_->events().Acquire(0);
  ASSERT_THAT(event, IsOk());
  kept.push_back(*std::move(event));
  EXPECT_NONFATAL_FAILURE(listener.OnTestEnd(self),
                          "is still out at the end of test PrivateBundleTest."
                          "ListenerFailsTheTestItWatches");
  // And passes it when nothing is out.
  kept.clear();
  listener.OnTestStart(self);
  listener.OnTestEnd(self);
}

}  // namespace
}  // namespace gpupool
