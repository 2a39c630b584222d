// EventPool: conformance on every built backend, plus pending/fault/poison
// behaviour on SimBackend.

#include "gpupool/event_pool.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;
using ::testing::HasSubstr;

class EventPoolConformanceTest : public ::gpupool::testing::BackendParamTest {};

TEST_P(EventPoolConformanceTest, RecordQueryReleaseCyclesCreateEachEventOnce) {
  StreamPool streams(*backend_);
  EventPool events(*backend_);
  absl::StatusOr<PooledStream> stream = streams.Acquire(0);
  ASSERT_THAT(stream, IsOk());
  for (int i = 0; i < 100; ++i) {
    std::vector<PooledEvent> batch;
    for (int j = 0; j < 16; ++j) {
      absl::StatusOr<PooledEvent> event = events.Acquire(0);
      ASSERT_THAT(event, IsOk());
      ASSERT_THAT(backend_->RecordEvent(0, event->get(), stream->get()),
                  IsOk());
      batch.push_back(*std::move(event));
    }
    ASSERT_THAT(backend_->SynchronizeStream(0, stream->get()), IsOk());
  }
  const EventPoolStats stats = events.GetStats();
  EXPECT_EQ(stats.created, 16);
  EXPECT_EQ(stats.acquired, 1600);
  EXPECT_EQ(stats.reused, 1584);
  EXPECT_EQ(stats.idle, 16);
  EXPECT_EQ(stats.destroyed, 0);
}

TEST_P(EventPoolConformanceTest, DifferentConfigsNeverShareAnEvent) {
  EventPool events(*backend_);
  const EventConfig plain{};
  const EventConfig timing{.disable_timing = false};
  const EventConfig blocking{.blocking_sync = true};
  NativeEvent plain_handle;
  {
    absl::StatusOr<PooledEvent> event = events.Acquire(0, plain);
    ASSERT_THAT(event, IsOk());
    plain_handle = event->get();
  }
  for (const EventConfig& config : {timing, blocking}) {
    absl::StatusOr<PooledEvent> event = events.Acquire(0, config);
    ASSERT_THAT(event, IsOk());
    EXPECT_NE(event->get(), plain_handle);
    EXPECT_EQ(event->config(), config);
  }
  EXPECT_EQ(events.GetStats().created, 3);
}

TEST_P(EventPoolConformanceTest, InvalidArgumentsChangeNothing) {
  EventPool events(*backend_);
  EXPECT_THAT(events.Acquire(-1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(events.Prewarm(0, {}, -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // The runtime rule: interprocess events must disable timing.
  EXPECT_THAT(
      events.Acquire(0, {.disable_timing = false, .interprocess = true}),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(events.GetStats().created, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, EventPoolConformanceTest,
                         ::testing::Values(std::string("sim"),
                                           std::string("cuda"),
                                           std::string("hip")),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

class EventPoolSimTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(sim_.misuse_count(), 0); }
  SimBackend sim_{StrictSimOptions(2)};
};

TEST_F(EventPoolSimTest, PendingEventIsNotReusedUntilComplete) {
  StreamPool streams(sim_);
  EventPool events(sim_);
  absl::StatusOr<PooledStream> stream = streams.Acquire(0);
  ASSERT_THAT(stream, IsOk());
  NativeEvent pending;
  {
    absl::StatusOr<PooledEvent> event = events.Acquire(0);
    ASSERT_THAT(event, IsOk());
    pending = event->get();
    sim_.SubmitWork(stream->get(), absl::InfiniteDuration());
    ASSERT_THAT(sim_.RecordEvent(0, pending, stream->get()), IsOk());
  }
  EXPECT_EQ(events.GetStats().draining, 1);
  {
    absl::StatusOr<PooledEvent> other = events.Acquire(0);
    ASSERT_THAT(other, IsOk());
    EXPECT_NE(other->get(), pending);
  }
  sim_.CompleteAllWork();
  absl::StatusOr<PooledEvent> first = events.Acquire(0);
  absl::StatusOr<PooledEvent> second = events.Acquire(0);
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->get(), pending);
  EXPECT_THAT(sim_.QueryEvent(0, second->get()), IsOk());
  EXPECT_EQ(events.GetStats().created, 2);
}

TEST_F(EventPoolSimTest, FaultedEventIsDestroyed) {
  EventPool events(sim_);
  absl::StatusOr<PooledEvent> event = events.Acquire(1);
  ASSERT_THAT(event, IsOk());
  const NativeEvent handle = event->get();
  sim_.FailNext(SimOp::kEventQuery,
                FaultError(Fault::kResource, absl::StatusCode::kInternal,
                           "hipErrorInvalidHandle"));
  event->Release();
  EXPECT_FALSE(sim_.is_live_event(handle));
  EXPECT_EQ(events.GetStats().discarded_faulty, 1);
}

TEST_F(EventPoolSimTest, StickyQueryErrorPoisonsStreamsAndEventsOfTheDevice) {
  auto health = std::make_shared<DeviceHealth>(2);
  StreamPool streams(sim_, health);
  EventPool events(sim_, health);
  ASSERT_THAT(streams.Prewarm(1, {}, 2), IsOk());
  absl::StatusOr<PooledEvent> event = events.Acquire(1);
  ASSERT_THAT(event, IsOk());
  sim_.PoisonDevice(1, absl::InternalError("hipErrorIllegalAddress"));
  event->Release();
  EXPECT_TRUE(health->is_poisoned(1));
  const int64_t calls = sim_.calls_on_device(1);
  EXPECT_THAT(streams.Acquire(1),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("hipErrorIllegalAddress")));
  EXPECT_EQ(streams.GetStats().dropped, 2);
  EXPECT_EQ(sim_.calls_on_device(1), calls);
  EXPECT_THAT(events.Acquire(0), IsOk());
}

}  // namespace
}  // namespace gpupool
