// The keyed pools (stream and event pools) after a sticky fault met inside a
// batch: Trim and the destructor stop calling the runtime for the device at
// once. Found by the fault matrix (fault_matrix_test.cc), pinned here on its
// own. A kDevice fault injected with FailNext does not poison the simulated
// device by itself; the test counts the calls made after it and poisons the
// sim at the end (as a real sticky error would have) so its leak check
// exempts the handles that were rightly dropped.

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::StrictSimOptions;

absl::Status StickyFault() {
  return FaultError(Fault::kDevice, absl::StatusCode::kInternal,
                    "cudaErrorIllegalAddress (injected)");
}

// Shard::Trim and Shard::Close destroyed a whole batch even after the first
// destroy met a sticky fault.
TEST(KeyedPoolStickyFaultTest, TrimAndCloseStopCallingAfterAStickyFault) {
  SimBackend sim(StrictSimOptions(2));
  {
    StreamPool streams(sim);
    ASSERT_TRUE(streams.Prewarm(0, {}, 3).ok());
    sim.FailNext(SimOp::kStreamDestroy, StickyFault(), 0);
    streams.Trim();
    EXPECT_EQ(sim.calls(SimOp::kStreamDestroy), 1);
    EXPECT_EQ(streams.GetStats().dropped, 2);
    ASSERT_TRUE(streams.RecoverDevice(0).ok());
    ASSERT_TRUE(streams.Prewarm(0, {}, 3).ok());
    sim.FailNext(SimOp::kStreamDestroy, StickyFault(), 0);
  }  // ~StreamPool: one destroy, then drops
  EXPECT_EQ(sim.calls(SimOp::kStreamDestroy), 2);
  {
    EventPool events(sim);
    PooledEvent busy[2];
    absl::StatusOr<NativeStream> stream = sim.CreateStream(1, {});
    ASSERT_TRUE(stream.ok());
    sim.SubmitWork(*stream, absl::InfiniteDuration());
    for (PooledEvent& event : busy) {
      absl::StatusOr<PooledEvent> lease = events.Acquire(1);
      ASSERT_TRUE(lease.ok());
      ASSERT_TRUE(sim.RecordEvent(1, lease->get(), *stream).ok());
      event = *std::move(lease);
    }
    for (PooledEvent& event : busy) event.Release();  // draining
    sim.CompleteAllWork();
    const int64_t queries = sim.calls(SimOp::kEventQuery);
    sim.FailNext(SimOp::kEventQuery, StickyFault(), 1);
    events.Trim();
    EXPECT_EQ(sim.calls(SimOp::kEventQuery), queries + 1);
    ASSERT_TRUE(sim.DestroyStream(1, *stream).ok());
  }
  sim.PoisonDevice(0, StickyFault());
  sim.PoisonDevice(1, StickyFault());
  EXPECT_EQ(sim.misuse_count(), 0);
}

}  // namespace
}  // namespace gpupool
