// examples/test_harness/client_test.cc — a test suite that builds a fresh
// PJRT-style client in every test, the way runtime test suites do. With the
// gpupool test hooks installed (see main.cc) the clients share the warm
// process-wide pools, and any test that leaks a lease fails, naming it.

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "examples/pjrt_client/client_config.h"
#include "examples/pjrt_client/pooled_client.h"
#include "gpupool/gpupool.h"
#include "gpupool/testing/gtest_integration.h"
#include "gtest/gtest.h"

namespace {

// Every test gets its own client; ~ClientTest returns its leases before the
// leak check runs.
class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<gpupool::Pools*> pools = gpupool::ProcessPools();
    ASSERT_TRUE(pools.ok()) << pools.status();
    pools_ = *pools;
    absl::StatusOr<std::unique_ptr<pjrt_example::PooledClient>> client =
        pjrt_example::PooledClient::Create(*pools_, {});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  gpupool::Pools* pools_ = nullptr;
  std::unique_ptr<pjrt_example::PooledClient> client_;
};

TEST_F(ClientTest, RunsAStep) { EXPECT_TRUE(client_->RunStep().ok()); }

TEST_F(ClientTest, RunsManySteps) {
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(client_->RunStep().ok());
}

TEST_F(ClientTest, ASecondClientIsServedFromThePools) {
  // The fixture's client holds one set; a second client needs a second set
  // the first time, and none after that.
  absl::StatusOr<std::unique_ptr<pjrt_example::PooledClient>> second =
      pjrt_example::PooledClient::Create(*pools_, {});
  ASSERT_TRUE(second.ok()) << second.status();
  second->reset();
  const int64_t created = pools_->streams().GetStats().created;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<std::unique_ptr<pjrt_example::PooledClient>> again =
        pjrt_example::PooledClient::Create(*pools_, {});
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE((*again)->RunStep().ok());
  }
  EXPECT_EQ(pools_->streams().GetStats().created, created);
}

TEST_F(ClientTest, ScopedLeakGuardChecksABlock) {
  // The listener checks whole tests; a guard checks part of one.
  gpupool::testing::ScopedLeakGuard guard(*pools_);
  {
    absl::StatusOr<std::unique_ptr<pjrt_example::PooledClient>> scoped =
        pjrt_example::PooledClient::Create(*pools_, {});
    ASSERT_TRUE(scoped.ok()) << scoped.status();
  }
  EXPECT_TRUE(guard.Check().ok()) << guard.Check();
}

}  // namespace
