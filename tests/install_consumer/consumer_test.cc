// A downstream test binary linked with gpupool::testing_main: no main() of its
// own. The hooks create ProcessPools() before the first test and fail a test
// that ends with a lease still out; this one returns everything it takes.

#include "gpupool/gpupool.h"
#include "gtest/gtest.h"

TEST(ConsumerTest, LeasesAStreamFromTheProcessPools) {
  absl::StatusOr<gpupool::Pools*> pools = gpupool::ProcessPools();
  ASSERT_TRUE(pools.ok()) << pools.status();
  absl::StatusOr<gpupool::PooledStream> stream = (*pools)->streams().Acquire(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_NE(stream->get(), nullptr);
}
