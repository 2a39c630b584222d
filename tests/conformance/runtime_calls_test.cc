// Runtime calls per pool operation, counted by SimBackend: the hot path's
// limits (a stream acquire makes none; a stream cycle at most two, one on a
// backend without resettable attributes; an event cycle one; a same-stream
// allocation hit one, a hit under a registered capture one) and the opt-in
// validation at acquire.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/graph_pool.h"
#include "gpupool/pool_options.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StrictSimOptions;

SimProfile WithAttributes() {
  SimProfile profile = SimProfile::Instant();
  profile.stream_attributes = true;  // like CUDA with persisting L2
  return profile;
}

class RuntimeCallsTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(sim_.misuse_count(), 0); }

  // Runtime calls since the previous Delta().
  int64_t Delta() {
    const int64_t now = sim_.total_calls();
    const int64_t delta = now - last_;
    last_ = now;
    return delta;
  }

  SimBackend sim_{StrictSimOptions(2)};
  int64_t last_ = 0;
};

TEST_F(RuntimeCallsTest, StreamAcquireNoneReturnOneQuery) {
  StreamPool pool(sim_);
  ASSERT_THAT(pool.Prewarm(0, {}, 1), IsOk());
  Delta();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    EXPECT_EQ(Delta(), 0) << "acquire of an idle stream";
    const int64_t queries = sim_.calls(SimOp::kStreamQuery);
    stream->Release();
    EXPECT_EQ(Delta(), 1) << "return";
    EXPECT_EQ(sim_.calls(SimOp::kStreamQuery), queries + 1);
  }
  EXPECT_EQ(sim_.calls(SimOp::kCaptureStatus), 0);
  EXPECT_EQ(sim_.calls(SimOp::kResetAttributes), 0);
  EXPECT_EQ(pool.GetStats().created, 1);
  EXPECT_EQ(pool.GetStats().reused, 3);
}

TEST_F(RuntimeCallsTest, StreamCycleIsTwoWhereAttributesExist) {
  SimBackend sim(StrictSimOptions(1, WithAttributes()));
  StreamPool pool(sim);
  ASSERT_THAT(pool.Prewarm(0, {}, 1), IsOk());
  const int64_t before = sim.total_calls();
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
  }
  EXPECT_EQ(sim.total_calls() - before, 8);  // query + reset, 4 cycles
  EXPECT_EQ(sim.calls(SimOp::kResetAttributes), 4);
  EXPECT_EQ(sim.calls(SimOp::kCaptureStatus), 0);
}

TEST_F(RuntimeCallsTest, CapturingStreamIsCaughtByTheQueryAndDiscarded) {
  StreamPool pool(sim_);
  NativeStream handle = nullptr;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    handle = stream->get();
    sim_.BeginCapture(handle);
    Delta();
  }
  // The refused query, then the capture status, the end, the destroy.
  EXPECT_EQ(Delta(), 4);
  EXPECT_EQ(sim_.calls(SimOp::kStreamQuery), 1);
  EXPECT_EQ(sim_.calls(SimOp::kCaptureStatus), 1);
  EXPECT_EQ(sim_.calls(SimOp::kEndCapture), 1);
  EXPECT_EQ(sim_.calls(SimOp::kStreamDestroy), 1);
  EXPECT_FALSE(sim_.is_live_stream(handle));
  EXPECT_EQ(pool.GetStats().idle, 0);
  EXPECT_EQ(pool.GetStats().discarded_faulty, 1);
}

TEST_F(RuntimeCallsTest, BusyStreamDrainsAndIsCheckedAtAcquire) {
  PoolOptions options;
  options.drain_checks_per_acquire = 1;
  StreamPool pool(sim_, options);
  NativeStream busy = nullptr;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    busy = stream->get();
    sim_.SubmitWork(busy, absl::InfiniteDuration());
  }
  EXPECT_EQ(pool.GetStats().draining, 1);
  Delta();
  {
    // The drained stream is queried (still busy), then a new one created.
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    EXPECT_NE(stream->get(), busy);
    EXPECT_EQ(Delta(), 2);
  }
  sim_.CompleteAllWork();
  Delta();
  {
    // Idle first: the new stream, no call.
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    EXPECT_EQ(Delta(), 0);
  }
}

TEST_F(RuntimeCallsTest, EventCycleIsOneQuery) {
  EventPool pool(sim_);
  ASSERT_THAT(pool.Prewarm(0, {}, 1), IsOk());
  Delta();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<PooledEvent> event = pool.Acquire(0);
    ASSERT_THAT(event, IsOk());
    EXPECT_EQ(Delta(), 0) << "acquire of an idle event";
    event->Release();
    EXPECT_EQ(Delta(), 1) << "return";
  }
  EXPECT_EQ(sim_.calls(SimOp::kEventQuery), 3);
}

TEST_F(RuntimeCallsTest, SameStreamAllocationHitIsOneCall) {
  absl::StatusOr<NativeStream> stream = sim_.CreateStream(0, {});
  ASSERT_THAT(stream, IsOk());
  {
    EventPool events(sim_);
    AllocationCache cache(sim_, events);
    {
      absl::StatusOr<PooledAllocation> warm =
          cache.Allocate(0, 4096, MemoryKind::kDevice, *stream);
      ASSERT_THAT(warm, IsOk());
    }
    Delta();
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<PooledAllocation> block =
          cache.Allocate(0, 4096, MemoryKind::kDevice, *stream);
      ASSERT_THAT(block, IsOk());
      block->Release();
      EXPECT_LE(Delta(), 1) << "allocate + release on the same stream";
    }
    EXPECT_EQ(cache.GetStats().runtime_allocations, 1);
  }
  ASSERT_THAT(sim_.DestroyStream(0, *stream), IsOk());
}

// With defer_same_stream_fences the same cycle makes no call at all: the
// block is parked at release and taken back by the next request.
TEST_F(RuntimeCallsTest, DeferredSameStreamAllocationHitIsNoCall) {
  absl::StatusOr<NativeStream> stream = sim_.CreateStream(0, {});
  ASSERT_THAT(stream, IsOk());
  {
    EventPool events(sim_);
    AllocationCacheOptions options;
    options.defer_same_stream_fences = true;
    AllocationCache cache(sim_, events, options);
    ASSERT_THAT(cache.Allocate(0, 4096, MemoryKind::kDevice, *stream), IsOk());
    Delta();
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<PooledAllocation> block =
          cache.Allocate(0, 4096, MemoryKind::kDevice, *stream);
      ASSERT_THAT(block, IsOk());
      block->Release();
      EXPECT_EQ(Delta(), 0) << "allocate + release on the same stream";
    }
    EXPECT_EQ(cache.GetStats().runtime_allocations, 1);
    ASSERT_THAT(cache.FenceStream(0, *stream), IsOk());
  }
  ASSERT_THAT(sim_.DestroyStream(0, *stream), IsOk());
}

// A hit on a stream capturing into a graph pool: one capture query at
// allocate, nothing at release (no ready event is recorded into a capture).
// The pool's recordings add no call: a capture begun after RetainBy (which
// sets the earlier recording apart) costs the same.
TEST_F(RuntimeCallsTest, CapturedAllocationHitIsOneCall) {
  absl::StatusOr<NativeStream> stream = sim_.CreateStream(0, {});
  ASSERT_THAT(stream, IsOk());
  {
    EventPool events(sim_);
    AllocationCache cache(sim_, events);
    absl::StatusOr<GraphPool> pool = GraphPool::Create(cache, 0);
    ASSERT_THAT(pool, IsOk());
    for (int recording = 0; recording < 2; ++recording) {
      absl::StatusOr<CaptureScope> scope = pool->BeginCapture(*stream);
      ASSERT_THAT(scope, IsOk());
      ASSERT_THAT(sim_.BeginCapture(*stream, SimCaptureMode::kGlobal), IsOk());
      {
        absl::StatusOr<PooledAllocation> warm =
            cache.Allocate(0, 4096, MemoryKind::kDevice, *stream);
        ASSERT_THAT(warm, IsOk());
      }
      Delta();
      for (int i = 0; i < 3; ++i) {
        absl::StatusOr<PooledAllocation> block =
            cache.Allocate(0, 4096, MemoryKind::kDevice, *stream);
        ASSERT_THAT(block, IsOk());
        block->Release();
        EXPECT_EQ(Delta(), 1) << "allocate + release under capture";
      }
      absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(*stream);
      ASSERT_THAT(graph, IsOk());
      scope->End();
      ASSERT_THAT(pool->RetainBy(NativeGraphOf(*graph)), IsOk());
      ASSERT_THAT(sim_.DestroyGraph(*graph), IsOk());
    }
    // The first recording's graph was gone when the second began: its block
    // served the second.
    EXPECT_EQ(cache.GetStats().runtime_allocations, 1);
    ASSERT_THAT(pool->Release(), IsOk());
  }
  ASSERT_THAT(sim_.DestroyStream(0, *stream), IsOk());
}

// A block released on one stream and wanted on another: its ready event is
// queried (kWaitForCompletion, the default) or waited on by the new stream
// (kWaitOnStream): one call; the release re-records that same event: one
// call. The event never goes back to the EventPool in between, whose return
// would query it again.
TEST_F(RuntimeCallsTest, CrossStreamAllocationReuseIsTwoCalls) {
  absl::StatusOr<NativeStream> a = sim_.CreateStream(0, {});
  absl::StatusOr<NativeStream> b = sim_.CreateStream(0, {});
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  for (CrossStreamPolicy policy : {CrossStreamPolicy::kWaitForCompletion,
                                   CrossStreamPolicy::kWaitOnStream}) {
    SCOPED_TRACE(static_cast<int>(policy));
    const bool wait = policy == CrossStreamPolicy::kWaitOnStream;
    EventPool events(sim_);
    AllocationCacheOptions options;
    options.cross_stream = policy;
    AllocationCache cache(sim_, events, options);
    {
      absl::StatusOr<PooledAllocation> warm =
          cache.Allocate(0, 4096, MemoryKind::kDevice, *a);
      ASSERT_THAT(warm, IsOk());
    }
    Delta();
    const int64_t queries = sim_.calls(SimOp::kEventQuery);
    const int64_t waits = sim_.calls(SimOp::kStreamWaitEvent);
    for (int i = 0; i < 4; ++i) {
      NativeStream stream = i % 2 == 0 ? *b : *a;
      absl::StatusOr<PooledAllocation> block =
          cache.Allocate(0, 4096, MemoryKind::kDevice, stream);
      ASSERT_THAT(block, IsOk());
      block->Release();
      EXPECT_EQ(Delta(), 2) << "check + re-record, cycle " << i;
    }
    EXPECT_EQ(sim_.calls(SimOp::kEventQuery), queries + (wait ? 0 : 4));
    EXPECT_EQ(sim_.calls(SimOp::kStreamWaitEvent), waits + (wait ? 4 : 0));
    EXPECT_EQ(cache.GetStats().runtime_allocations, 1);
    EXPECT_EQ(cache.GetStats().cross_stream_waits, wait ? 4 : 0);
    EXPECT_EQ(events.GetStats().acquired, 1);
  }
  ASSERT_THAT(sim_.DestroyStream(0, *a), IsOk());
  ASSERT_THAT(sim_.DestroyStream(0, *b), IsOk());
}

TEST_F(RuntimeCallsTest, ValidateOnAcquireIsOffByDefault) {
  EXPECT_FALSE(PoolOptions{}.validate_on_acquire);
}

TEST_F(RuntimeCallsTest, ValidateOnAcquireQueriesAndCatchesAnIdleFault) {
  PoolOptions options;
  options.validate_on_acquire = true;
  StreamPool pool(sim_, options);
  ASSERT_THAT(pool.Prewarm(0, {}, 1), IsOk());
  NativeStream idle = nullptr;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    idle = stream->get();
  }
  // A fault arriving while the stream sits idle: only the opt-in query at
  // acquire can see it.
  sim_.FaultStream(idle,
                   FaultError(Fault::kResource, absl::StatusCode::kInternal,
                              "cudaErrorLaunchFailure"));
  Delta();
  absl::StatusOr<PooledStream> stream = pool.Acquire(0);
  ASSERT_THAT(stream, IsOk());
  EXPECT_NE(stream->get(), idle);
  // The query that caught it, its destroy, the replacement's create.
  EXPECT_EQ(Delta(), 3);
  EXPECT_FALSE(sim_.is_live_stream(idle));
  EXPECT_EQ(pool.GetStats().discarded_faulty, 1);
  stream->Release();
  Delta();
  // A healthy idle stream costs exactly the one query at acquire.
  absl::StatusOr<PooledStream> again = pool.Acquire(0);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(Delta(), 1);
  // Two validated cycles (2 queries each) and the query that caught it.
  EXPECT_EQ(sim_.calls(SimOp::kStreamQuery), 5);
}

TEST_F(RuntimeCallsTest, EventValidateOnAcquireCostsOneQuery) {
  PoolOptions options;
  options.validate_on_acquire = true;
  EventPool pool(sim_, options);
  ASSERT_THAT(pool.Prewarm(0, {}, 1), IsOk());
  Delta();
  absl::StatusOr<PooledEvent> event = pool.Acquire(0);
  ASSERT_THAT(event, IsOk());
  EXPECT_EQ(Delta(), 1);
  event->Release();
  EXPECT_EQ(Delta(), 1);
}

}  // namespace
}  // namespace gpupool
