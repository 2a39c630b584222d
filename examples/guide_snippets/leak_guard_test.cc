// docs/guide.md, "Checking part of a test": ScopedLeakGuard over a private
// bundle. Built and run as a test.

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "gpupool/gpupool.h"
#include "gpupool/testing/gtest_integration.h"
#include "gtest/gtest.h"

TEST(MyRuntimeTest, StepReturnsEverything) {
  absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
      gpupool::Pools::Create(std::make_unique<gpupool::SimBackend>());
  ASSERT_TRUE(pools.ok()) << pools.status();

  gpupool::testing::ScopedLeakGuard guard(**pools);  // declared first
  absl::StatusOr<gpupool::PooledStream> stream = (*pools)->streams().Acquire(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  stream->Release();
  EXPECT_TRUE(guard.Check().ok()) << guard.Check();
}  // ~guard: a lease acquired above and still out fails the test here
