// A child test binary for gtest_integration_test: some of its tests leak on
// purpose, and the parent checks that the leak-check listener fails exactly
// those, naming the leak and its acquire site. Not registered with CTest.
//
// Lines the parent looks up are marked with "// SITE:<name>".
//
// Modes (first argument after GoogleTest's flags):
//   (none)            InstallProcessPoolsTestHooks() over ProcessPools()
//   --private_pools   a LeakCheckListener over a private SimBackend bundle
//   --check_poison    ProcessPools() hooks with fail_on_device_poisoned

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gpupool/gpupool.h"
#include "gpupool/testing/gtest_integration.h"
#include "gtest/gtest.h"

namespace {

gpupool::Pools* g_pools = nullptr;  // the bundle under check
std::vector<gpupool::PooledStream>* g_kept_streams = nullptr;
std::vector<gpupool::PooledEvent>* g_kept_events = nullptr;
std::vector<gpupool::PooledAllocation>* g_kept_allocations = nullptr;

gpupool::Pools& Bundle() {
  if (g_pools == nullptr) g_pools = *gpupool::ProcessPools();
  return *g_pools;
}

TEST(Leaky, KeepsAStreamPastTheEnd) {
  absl::StatusOr<gpupool::PooledStream> stream =
      Bundle().streams().Acquire(0, {.priority = -1});  // SITE:stream
  ASSERT_TRUE(stream.ok()) << stream.status();
  g_kept_streams->push_back(*std::move(stream));
}

TEST(Leaky, KeepsTwoEventsPastTheEnd) {
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<gpupool::PooledEvent> event =
        Bundle().events().Acquire(0);  // SITE:event
    ASSERT_TRUE(event.ok()) << event.status();
    g_kept_events->push_back(*std::move(event));
  }
}

TEST(Leaky, KeepsAnAllocationPastTheEnd) {
  absl::StatusOr<gpupool::PooledAllocation> buffer =
      Bundle().allocations().Allocate(0, 1 << 20);  // SITE:allocation
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  g_kept_allocations->push_back(*std::move(buffer));
}

TEST(Clean, ReturnsEverything) {
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<gpupool::PooledStream> stream =
        Bundle().streams().Acquire(0);
    ASSERT_TRUE(stream.ok()) << stream.status();
    absl::StatusOr<gpupool::PooledEvent> event = Bundle().events().Acquire(0);
    ASSERT_TRUE(event.ok()) << event.status();
    absl::StatusOr<gpupool::PooledAllocation> buffer =
        Bundle().allocations().Allocate(0, 4096, gpupool::MemoryKind::kDevice,
                                        stream->get());
    ASSERT_TRUE(buffer.ok()) << buffer.status();
  }
}

// A lease held by a fixture member is returned by the fixture's destructor,
// before the listener checks.
class CleanFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<gpupool::PooledStream> stream =
        Bundle().streams().Acquire(0);
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = *std::move(stream);
  }
  gpupool::PooledStream stream_;
};

TEST_F(CleanFixture, MemberLeaseIsReturnedInTime) { EXPECT_TRUE(stream_); }

// Leases acquired before a test starts are not that test's leaks.
class CleanSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_stream_ = new gpupool::PooledStream(*Bundle().streams().Acquire(0));
  }
  static void TearDownTestSuite() {
    delete suite_stream_;
    suite_stream_ = nullptr;
  }
  static gpupool::PooledStream* suite_stream_;
};
gpupool::PooledStream* CleanSuite::suite_stream_ = nullptr;

TEST_F(CleanSuite, SuiteLeaseIsNotATestLeak) { EXPECT_TRUE(*suite_stream_); }

// Poisons device 0 (sim) during the test and recovers it, so the device is
// healthy again: only the poison check can tell.
TEST(Poison, PoisonsAndRecoversDevice) {
  auto* sim = dynamic_cast<gpupool::SimBackend*>(&Bundle().backend());
  ASSERT_NE(sim, nullptr) << "needs GPUPOOL_BACKEND=sim";
  absl::StatusOr<gpupool::PooledStream> stream = Bundle().streams().Acquire(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  sim->PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  stream->Release();  // the return query sees the sticky error
  ASSERT_TRUE(Bundle().health()->is_poisoned(0));
  sim->ResetDevice(0);
  ASSERT_TRUE(Bundle().RecoverDevice(0).ok());
}

// Poisons device 0 and leaves it poisoned.
TEST(Poison, PoisonsDevice) {
  auto* sim = dynamic_cast<gpupool::SimBackend*>(&Bundle().backend());
  ASSERT_NE(sim, nullptr) << "needs GPUPOOL_BACKEND=sim";
  absl::StatusOr<gpupool::PooledEvent> event = Bundle().events().Acquire(0);
  ASSERT_TRUE(event.ok()) << event.status();
  sim->PoisonDevice(0, absl::InternalError("cudaErrorLaunchFailure"));
  event->Release();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  g_kept_streams = new std::vector<gpupool::PooledStream>();
  g_kept_events = new std::vector<gpupool::PooledEvent>();
  g_kept_allocations = new std::vector<gpupool::PooledAllocation>();
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "--private_pools") == 0) {
    gpupool::SimOptions options;
    options.device_count = 2;
    absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
        gpupool::Pools::Create(std::make_unique<gpupool::SimBackend>(options));
    if (!pools.ok()) return 2;
    g_pools = pools->release();  // lives until exit, like ProcessPools()
    ::testing::UnitTest::GetInstance()->listeners().Append(
        new gpupool::testing::LeakCheckListener(*g_pools));
  } else {
    gpupool::testing::LeakCheckOptions options;
    options.fail_on_device_poisoned = std::strcmp(mode, "--check_poison") == 0;
    gpupool::testing::InstallProcessPoolsTestHooks(options);
  }
  return RUN_ALL_TESTS();
}
