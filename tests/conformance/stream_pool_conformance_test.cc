// Stream-pool conformance suite: written once, run on every backend that is
// built (sim always; cuda and hip skip with the runtime's own reason when no
// device is present). Only behaviour every runtime shares is checked here;
// fault injection lives in stream_pool_sim_test.cc.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::testing::HasSubstr;

class StreamPoolConformanceTest : public ::gpupool::testing::BackendParamTest {
 protected:
  void SetUp() override {
    BackendParamTest::SetUp();
    if (IsSkipped()) return;
    devices_ = std::min(4, *backend_->DeviceCount());
  }

  int devices_ = 0;
};

// The stream set of a PJRT-style client on one device.
std::vector<StreamConfig> ClientStreamConfigs() {
  std::vector<StreamConfig> configs;
  configs.push_back({});                              // compute
  configs.push_back({.priority = -1});                // host-to-device
  for (int i = 0; i < 4; ++i) configs.push_back({});  // device-to-host
  for (int i = 0; i < 4; ++i) configs.push_back({});  // device-to-device
  for (int i = 0; i < 4; ++i) configs.push_back({.non_blocking = false});
  return configs;
}

TEST_P(StreamPoolConformanceTest, ClientLifecycleCreatesStreamsOnce) {
  StreamPool pool(*backend_);
  const std::vector<StreamConfig> configs = ClientStreamConfigs();
  const int per_client = devices_ * static_cast<int>(configs.size());
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<PooledStream> client;
    for (int device = 0; device < devices_; ++device) {
      for (const StreamConfig& config : configs) {
        absl::StatusOr<PooledStream> stream = pool.Acquire(device, config);
        ASSERT_THAT(stream, IsOk());
        EXPECT_EQ(stream->device(), device);
        EXPECT_EQ(stream->config(), config);
        client.push_back(*std::move(stream));
      }
    }
  }  // the client is destroyed: every stream goes back
  const StreamPoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.created, per_client);
  EXPECT_EQ(stats.acquired, 50 * per_client);
  EXPECT_EQ(stats.reused, 49 * per_client);
  EXPECT_EQ(stats.destroyed, 0);
  EXPECT_EQ(stats.in_use, 0);
  EXPECT_EQ(stats.idle, per_client);
  EXPECT_EQ(stats.peak_in_use, per_client);
}

TEST_P(StreamPoolConformanceTest, DifferentConfigsNeverShareAStream) {
  StreamPool pool(*backend_);
  const StreamConfig low{.priority = 0};
  const StreamConfig high{.priority = -1};
  const StreamConfig blocking{.non_blocking = false};
  NativeStream low_handle;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0, low);
    ASSERT_THAT(stream, IsOk());
    low_handle = stream->get();
  }
  for (const StreamConfig& other : {high, blocking}) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0, other);
    ASSERT_THAT(stream, IsOk());
    EXPECT_NE(stream->get(), low_handle) << other.ToString();
    EXPECT_EQ(stream->config(), other);
  }
  absl::StatusOr<PooledStream> again = pool.Acquire(0, low);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->get(), low_handle);
  EXPECT_EQ(pool.GetStats(0, low).reused, 1);
  EXPECT_EQ(pool.GetStats(0, high).reused, 0);
  EXPECT_EQ(pool.GetStats().created, 3);
}

TEST_P(StreamPoolConformanceTest, DiscardDestroysTheStream) {
  StreamPool pool(*backend_);
  NativeStream first;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    first = stream->get();
    stream->Discard();
    EXPECT_FALSE(*stream);
    EXPECT_EQ(stream->get(), nullptr);
  }
  const StreamPoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.destroyed, 1);
  EXPECT_EQ(stats.discarded_faulty, 1);
  EXPECT_EQ(stats.idle, 0);
  absl::StatusOr<PooledStream> next = pool.Acquire(0);
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(pool.GetStats().created, 2);
  EXPECT_EQ(pool.GetStats().reused, 0);
  (void)first;
}

TEST_P(StreamPoolConformanceTest, LeaseIdsAreUniqueAcrossReuse) {
  StreamPool pool(*backend_);
  absl::flat_hash_set<uint64_t> ids;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    EXPECT_TRUE(ids.insert(stream->lease_id()).second);
  }
  EXPECT_EQ(pool.GetStats().created, 1);
}

TEST_P(StreamPoolConformanceTest, MoveTransfersTheLease) {
  StreamPool pool(*backend_);
  absl::StatusOr<PooledStream> acquired = pool.Acquire(0);
  ASSERT_THAT(acquired, IsOk());
  PooledStream a = *std::move(acquired);
  const NativeStream handle = a.get();
  PooledStream b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): checking moved-from
  EXPECT_EQ(b.get(), handle);
  EXPECT_EQ(pool.GetStats().in_use, 1);
  PooledStream c;
  c = std::move(b);
  EXPECT_EQ(pool.GetStats().in_use, 1);
  c.Release();
  c.Release();  // second release is a no-op
  EXPECT_EQ(pool.GetStats().in_use, 0);
  EXPECT_EQ(pool.GetStats().idle, 1);
}

TEST_P(StreamPoolConformanceTest, InvalidArgumentsChangeNothing) {
  StreamPool pool(*backend_);
  EXPECT_THAT(pool.Acquire(-1), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("out of range")));
  EXPECT_THAT(pool.Acquire(1000), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(pool.Prewarm(0, {}, -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(">= 0")));
  EXPECT_THAT(pool.Prewarm(1000, {}, 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(pool.PrewarmAsync(0, {}, -3).Wait(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const StreamPoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.created, 0);
  EXPECT_EQ(stats.acquired, 0);
}

TEST_P(StreamPoolConformanceTest, PrewarmCreatesAheadAndIsIdempotent) {
  StreamPool pool(*backend_);
  ASSERT_THAT(pool.Prewarm(0, {}, 6), IsOk());
  EXPECT_EQ(pool.GetStats().created, 6);
  EXPECT_EQ(pool.GetStats().idle, 6);
  ASSERT_THAT(pool.Prewarm(0, {}, 6), IsOk());
  EXPECT_EQ(pool.GetStats().created, 6);
  std::vector<PooledStream> leases;
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    leases.push_back(*std::move(stream));
  }
  EXPECT_EQ(pool.GetStats().created, 6);
  EXPECT_EQ(pool.GetStats().reused, 6);
}

TEST_P(StreamPoolConformanceTest, PrewarmAsyncOverlapsAndReports) {
  StreamPool pool(*backend_);
  PrewarmTicket ticket = pool.PrewarmAsync(0, {.priority = -1}, 4);
  EXPECT_THAT(ticket.Wait(), IsOk());
  EXPECT_TRUE(ticket.done());
  EXPECT_EQ(pool.GetStats(0, {.priority = -1}).idle, 4);
}

TEST_P(StreamPoolConformanceTest, TrimDestroysIdleStreams) {
  StreamPool pool(*backend_);
  ASSERT_THAT(pool.Prewarm(0, {}, 3), IsOk());
  absl::StatusOr<PooledStream> held = pool.Acquire(0);
  ASSERT_THAT(held, IsOk());
  pool.Trim();
  StreamPoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.idle, 0);
  EXPECT_EQ(stats.destroyed, 2);
  EXPECT_EQ(stats.in_use, 1);
}

TEST_P(StreamPoolConformanceTest, MaxIdlePerKeyDestroysTheSurplus) {
  StreamPool pool(*backend_, StreamPoolOptions{.max_idle_per_key = 2});
  {
    std::vector<PooledStream> leases;
    for (int i = 0; i < 5; ++i) {
      absl::StatusOr<PooledStream> stream = pool.Acquire(0);
      ASSERT_THAT(stream, IsOk());
      leases.push_back(*std::move(stream));
    }
  }
  const StreamPoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.idle, 2);
  EXPECT_EQ(stats.destroyed, 3);
  EXPECT_EQ(stats.discarded_faulty, 0);
}

TEST_P(StreamPoolConformanceTest, CurrentDeviceIsUnchanged) {
  if (devices_ < 2) GTEST_SKIP() << "needs 2 devices";
  ASSERT_THAT(backend_->SetCurrentDevice(1), IsOk());
  {
    StreamPool pool(*backend_);
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
  }
  EXPECT_EQ(*backend_->GetCurrentDevice(), 1);
  ASSERT_THAT(backend_->SetCurrentDevice(0), IsOk());
}

std::vector<std::string> AllBackends() { return {"sim", "cuda", "hip"}; }

INSTANTIATE_TEST_SUITE_P(Backends, StreamPoolConformanceTest,
                         ::testing::ValuesIn(AllBackends()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace gpupool
