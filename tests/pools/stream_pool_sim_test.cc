// StreamPool behaviour under faults, busy streams, captures and bounds,
// driven through SimBackend's fault injection.

#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
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

class StreamPoolSimTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(sim_.misuse_count(), 0); }
  SimBackend sim_{StrictSimOptions(4)};
};

TEST_F(StreamPoolSimTest, BusyStreamIsNotReusedUntilItsWorkCompletes) {
  StreamPool pool(sim_);
  NativeStream busy;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    busy = stream->get();
    sim_.SubmitWork(busy, absl::InfiniteDuration());
  }
  EXPECT_EQ(pool.GetStats().draining, 1);
  EXPECT_EQ(pool.GetStats().idle, 0);
  {
    absl::StatusOr<PooledStream> other = pool.Acquire(0);
    ASSERT_THAT(other, IsOk());
    EXPECT_NE(other->get(), busy);
    EXPECT_EQ(pool.GetStats().created, 2);
  }
  sim_.CompleteAllWork();
  // The idle stream comes first (LIFO); the drained one after it.
  absl::StatusOr<PooledStream> first = pool.Acquire(0);
  absl::StatusOr<PooledStream> second = pool.Acquire(0);
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->get(), busy);
  EXPECT_EQ(pool.GetStats().created, 2);
  EXPECT_EQ(pool.GetStats().reused, 2);
}

TEST_F(StreamPoolSimTest, StreamReturnedWhileCapturingIsDestroyed) {
  StreamPool pool(sim_);
  NativeStream capturing;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    capturing = stream->get();
    sim_.BeginCapture(capturing);
  }
  EXPECT_FALSE(sim_.is_live_stream(capturing));
  // The return's one query is refused (and, as on a real runtime, kills the
  // capture: its graph is discarded anyway); only then is the capture
  // status asked and the capture ended.
  EXPECT_EQ(sim_.calls(SimOp::kStreamQuery), 1);
  EXPECT_EQ(sim_.calls(SimOp::kCaptureStatus), 1);
  EXPECT_EQ(sim_.calls(SimOp::kEndCapture), 1);
  const StreamPoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.discarded_faulty, 1);
  EXPECT_EQ(stats.idle, 0);
  absl::StatusOr<PooledStream> next = pool.Acquire(0);
  ASSERT_THAT(next, IsOk());
  EXPECT_NE(next->get(), capturing);
}

TEST_F(StreamPoolSimTest, StreamWhoseCaptureCannotBeEndedIsLeakedNotDestroyed) {
  StreamPool pool(sim_);
  NativeStream capturing;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    capturing = stream->get();
    sim_.BeginCapture(capturing);
    sim_.FailNext(SimOp::kEndCapture,
                  FaultError(Fault::kResource, absl::StatusCode::kInternal,
                             "cudaErrorStreamCaptureWrongThread"));
  }
  // Destroying a stream that is still capturing is undefined: left alone.
  EXPECT_TRUE(sim_.is_live_stream(capturing));
  EXPECT_EQ(pool.GetStats().leaked, 1);
  EXPECT_EQ(pool.GetStats().destroyed, 0);
  EXPECT_EQ(pool.GetStats().idle, 0);
  ASSERT_THAT(sim_.EndCapture(0, capturing), IsOk());
  ASSERT_THAT(sim_.DestroyStream(0, capturing), IsOk());
}

// CUDA 13.0 refuses a cross-thread cudaStreamEndCapture of a global-mode
// capture (cudaErrorStreamCaptureWrongThread) yet terminates the capture (seen
// on an H100, driver 580). A SimBackend that does the same: the pool asks the
// capture status again and, the stream no longer capturing, destroys it
// instead of leaking it.
class RefusingButEndingSim : public SimBackend {
 public:
  using SimBackend::SimBackend;
  absl::Status EndCapture(int device, NativeStream stream) override {
    absl::Status ended = SimBackend::EndCapture(device, stream);
    if (!ended.ok()) return ended;
    return FaultError(Fault::kResource, absl::StatusCode::kInternal,
                      "cudaErrorStreamCaptureWrongThread");
  }
};

TEST(StreamPoolCaptureTest, StreamWhoseRefusedEndCaptureEndedItIsDestroyed) {
  RefusingButEndingSim sim(StrictSimOptions(1));
  StreamPool pool(sim);
  NativeStream capturing;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    capturing = stream->get();
    sim.BeginCapture(capturing);
  }
  EXPECT_FALSE(sim.is_live_stream(capturing));
  EXPECT_EQ(sim.calls(SimOp::kEndCapture), 1);
  EXPECT_EQ(sim.calls(SimOp::kCaptureStatus), 2);
  const StreamPoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.leaked, 0);
  EXPECT_EQ(stats.destroyed, 1);
  EXPECT_EQ(stats.discarded_faulty, 1);
  EXPECT_EQ(stats.idle, 0);
  EXPECT_EQ(sim.misuse_count(), 0);
}

TEST_F(StreamPoolSimTest, AttributesAreResetOnReturn) {
  SimProfile profile;
  profile.stream_attributes = true;  // like a CUDA device with persisting L2
  SimBackend sim(StrictSimOptions(1, profile));
  StreamPool pool(sim);
  NativeStream handle;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    handle = stream->get();
    sim.SetStreamAttribute(handle);
    EXPECT_TRUE(sim.attributes_dirty(handle));
  }
  EXPECT_FALSE(sim.attributes_dirty(handle));
  EXPECT_EQ(sim.calls(SimOp::kResetAttributes), 1);
  EXPECT_EQ(pool.GetStats().idle, 1);
}

TEST_F(StreamPoolSimTest, NoAttributeResetWhereTheBackendHasNone) {
  StreamPool pool(sim_);  // the instant profile: no resettable attribute
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
  }
  EXPECT_EQ(sim_.calls(SimOp::kResetAttributes), 0);
  EXPECT_EQ(sim_.calls(SimOp::kStreamQuery), 3);
}

TEST_F(StreamPoolSimTest, FaultedStreamIsDestroyedNotReused) {
  StreamPool pool(sim_);
  NativeStream faulty;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(1);
    ASSERT_THAT(stream, IsOk());
    faulty = stream->get();
    sim_.FaultStream(faulty,
                     FaultError(Fault::kResource, absl::StatusCode::kInternal,
                                "cudaErrorInvalidResourceHandle"));
  }
  EXPECT_FALSE(sim_.is_live_stream(faulty));
  EXPECT_EQ(pool.GetStats().discarded_faulty, 1);
  EXPECT_FALSE(sim_.is_poisoned(1));
  absl::StatusOr<PooledStream> next = pool.Acquire(1);
  ASSERT_THAT(next, IsOk());
  EXPECT_NE(next->get(), faulty);
}

TEST_F(StreamPoolSimTest, IdleStreamThatFaultsIsSkippedAtAcquireWhenOptedIn) {
  PoolOptions options;
  options.validate_on_acquire = true;
  StreamPool pool(sim_, options);
  NativeStream handle;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    handle = stream->get();
  }
  // Faults while idle (e.g. a kernel launched through a stale pointer).
  sim_.FaultStream(handle, absl::InternalError("faulted while idle"));
  absl::StatusOr<PooledStream> next = pool.Acquire(0);
  ASSERT_THAT(next, IsOk());
  EXPECT_NE(next->get(), handle);
  EXPECT_FALSE(sim_.is_live_stream(handle));
  EXPECT_EQ(pool.GetStats().discarded_faulty, 1);
}

// By default an idle stream is trusted (it was validated at its return): a
// fault that arrives while it sits idle is handed out, and caught by the
// query at its next return.
TEST_F(StreamPoolSimTest, IdleStreamThatFaultsIsCaughtAtItsNextReturn) {
  StreamPool pool(sim_);
  NativeStream handle;
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
    handle = stream->get();
  }
  sim_.FaultStream(handle, absl::InternalError("faulted while idle"));
  {
    absl::StatusOr<PooledStream> same = pool.Acquire(0);
    ASSERT_THAT(same, IsOk());
    EXPECT_EQ(same->get(), handle);
  }
  EXPECT_FALSE(sim_.is_live_stream(handle));
  EXPECT_EQ(pool.GetStats().discarded_faulty, 1);
  EXPECT_EQ(pool.GetStats().idle, 0);
}

TEST_F(StreamPoolSimTest, StickyErrorPoisonsTheDevice) {
  StreamPool pool(sim_);
  ASSERT_THAT(pool.Prewarm(2, {}, 3), IsOk());
  ASSERT_THAT(pool.Prewarm(3, {}, 1), IsOk());
  absl::StatusOr<PooledStream> leased = pool.Acquire(2);
  ASSERT_THAT(leased, IsOk());
  sim_.PoisonDevice(2, absl::InternalError("cudaErrorIllegalAddress"));
  // The return sees the sticky error and poisons the pool's view.
  leased->Release();
  EXPECT_TRUE(pool.health()->is_poisoned(2));
  const int64_t calls_before = sim_.calls_on_device(2);
  absl::StatusOr<PooledStream> refused = pool.Acquire(2);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr("cudaErrorIllegalAddress")));
  // Callers can tell a dead device from a bad handle.
  EXPECT_EQ(FaultOf(refused.status()), Fault::kDevice);
  EXPECT_THAT(pool.Prewarm(2, {}, 1),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  pool.Trim(2);
  // Idle streams of the dead device are dropped without a runtime call.
  EXPECT_EQ(sim_.calls_on_device(2), calls_before);
  StreamPoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.dropped, 3);
  EXPECT_EQ(stats.idle, 1);  // device 3's stream
  // Other devices are unaffected.
  absl::StatusOr<PooledStream> healthy = pool.Acquire(3);
  ASSERT_THAT(healthy, IsOk());
  EXPECT_EQ(pool.GetStats(3, {}).reused, 1);
}

TEST_F(StreamPoolSimTest, RecoverDeviceStartsANewGeneration) {
  // Validated acquires, so that the acquire below is the call that meets the
  // sticky error (by default the next return would).
  PoolOptions options;
  options.validate_on_acquire = true;
  StreamPool pool(sim_, options);
  absl::StatusOr<PooledStream> old_lease = pool.Acquire(1);
  ASSERT_THAT(old_lease, IsOk());
  ASSERT_THAT(pool.Prewarm(1, {}, 2), IsOk());
  sim_.PoisonDevice(1, absl::InternalError("cudaErrorLaunchFailure"));
  EXPECT_THAT(pool.Acquire(1), StatusIs(absl::StatusCode::kFailedPrecondition));
  const uint64_t poisoned_generation = pool.health()->generation(1);
  EXPECT_THAT(pool.RecoverDevice(0),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not poisoned")));
  sim_.ResetDevice(1);  // the user resets the device (cudaDeviceReset)
  ASSERT_THAT(pool.RecoverDevice(1), IsOk());
  EXPECT_GT(pool.health()->generation(1), poisoned_generation);
  const int64_t calls_before = sim_.calls_on_device(1);
  // A lease of the old generation is dropped without a runtime call.
  old_lease->Release();
  EXPECT_EQ(sim_.calls_on_device(1), calls_before);
  absl::StatusOr<PooledStream> fresh = pool.Acquire(1);
  ASSERT_THAT(fresh, IsOk());
  EXPECT_TRUE(sim_.is_live_stream(fresh->get()));
  EXPECT_EQ(pool.GetStats(1, {}).reused, 0);
}

TEST_F(StreamPoolSimTest, CreateFailureReachesTheCallerAndPoolStaysUsable) {
  StreamPool pool(sim_);
  sim_.FailNext(
      SimOp::kStreamCreate,
      FaultError(Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted,
                 "cudaErrorMemoryAllocation"));
  EXPECT_THAT(pool.Acquire(0),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("cudaErrorMemoryAllocation")));
  sim_.FailNext(SimOp::kStreamCreate,
                FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                           "bad priority"));
  EXPECT_THAT(pool.Acquire(0), StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<PooledStream> next = pool.Acquire(0);
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(pool.GetStats().created, 1);
  EXPECT_FALSE(pool.health()->is_poisoned(0));
}

TEST_F(StreamPoolSimTest, StickyCreateFailurePoisonsTheDevice) {
  StreamPool pool(sim_);
  sim_.FailNext(SimOp::kStreamCreate,
                FaultError(Fault::kDevice, absl::StatusCode::kInternal,
                           "cudaErrorECCUncorrectable"));
  EXPECT_THAT(pool.Acquire(0), StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(pool.Acquire(0),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cudaErrorECCUncorrectable")));
}

TEST_F(StreamPoolSimTest, MaxLiveTimesOutWithResourceExhausted) {
  StreamPool pool(sim_, StreamPoolOptions{.max_live_per_key = 2});
  absl::StatusOr<PooledStream> a = pool.Acquire(0);
  absl::StatusOr<PooledStream> b = pool.Acquire(0);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  const absl::Time start = absl::Now();
  EXPECT_THAT(pool.Acquire(0, {}, absl::Milliseconds(50)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("max_live_per_key=2")));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_EQ(pool.GetStats().acquire_timeouts, 1);
  // Another key is not bounded by this one.
  EXPECT_THAT(pool.Acquire(0, {.priority = -1}), IsOk());
}

TEST_F(StreamPoolSimTest, WaiterGetsTheReturnedStream) {
  StreamPool pool(sim_, StreamPoolOptions{.max_live_per_key = 1});
  absl::StatusOr<PooledStream> held = pool.Acquire(0);
  ASSERT_THAT(held, IsOk());
  const NativeStream handle = held->get();
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(20));
    held->Release();
  });
  absl::StatusOr<PooledStream> waited = pool.Acquire(0, {}, absl::Seconds(5));
  releaser.join();
  ASSERT_THAT(waited, IsOk());
  EXPECT_EQ(waited->get(), handle);
}

TEST_F(StreamPoolSimTest, DroppedFaultyStreamDoesNotShrinkCapacity) {
  StreamPool pool(sim_, StreamPoolOptions{.max_live_per_key = 2});
  for (int round = 0; round < 5; ++round) {
    absl::StatusOr<PooledStream> a = pool.Acquire(0, {}, absl::Seconds(1));
    absl::StatusOr<PooledStream> b = pool.Acquire(0, {}, absl::Seconds(1));
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    sim_.FaultStream(a->get(), absl::InternalError("bad"));
    b->Discard();
  }
  EXPECT_EQ(pool.GetStats().discarded_faulty, 10);
  EXPECT_EQ(pool.GetStats().acquire_timeouts, 0);
}

TEST_F(StreamPoolSimTest, ShutdownFaultLeaksQuietly) {
  StreamPool pool(sim_);
  absl::StatusOr<PooledStream> stream = pool.Acquire(0);
  ASSERT_THAT(stream, IsOk());
  const NativeStream handle = stream->get();
  sim_.FailNext(SimOp::kStreamQuery,
                FaultError(Fault::kShutdown, absl::StatusCode::kUnavailable,
                           "cudaErrorCudartUnloading"));
  stream->Release();
  EXPECT_EQ(pool.GetStats().leaked, 1);
  EXPECT_EQ(pool.GetStats().destroyed, 0);
  // The sim still has it: clean it up so the leak check stays quiet.
  ASSERT_THAT(sim_.DestroyStream(0, handle), IsOk());
}

TEST_F(StreamPoolSimTest, LeaseOutlivingThePoolIsLeakedWithoutRuntimeCalls) {
  absl::StatusOr<PooledStream> orphan;
  NativeStream handle;
  {
    StreamPool pool(sim_);
    ASSERT_THAT(pool.Prewarm(0, {}, 2), IsOk());
    orphan = pool.Acquire(0);
    ASSERT_THAT(orphan, IsOk());
    handle = orphan->get();
  }
  EXPECT_EQ(sim_.live_streams(0), 1);  // idle one destroyed with the pool
  const int64_t calls = sim_.total_calls();
  orphan->Release();
  EXPECT_EQ(sim_.total_calls(), calls);
  ASSERT_THAT(sim_.DestroyStream(0, handle), IsOk());
}

TEST_F(StreamPoolSimTest, OutstandingLeasesNameTheirAcquireSite) {
  StreamPool pool(sim_);
  absl::StatusOr<PooledStream> stream = pool.Acquire(3, {.priority = -1});
  const int line = __LINE__ - 1;
  ASSERT_THAT(stream, IsOk());
  std::vector<OutstandingLease> leases = pool.GetOutstandingLeases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].device, 3);
  EXPECT_EQ(leases[0].lease_id, stream->lease_id());
  EXPECT_THAT(leases[0].where.file_name(),
              HasSubstr("stream_pool_sim_test.cc"));
  EXPECT_EQ(leases[0].where.line(), static_cast<uint32_t>(line));
  EXPECT_THAT(leases[0].ToString(), HasSubstr("priority=-1"));
  stream->Release();
  EXPECT_TRUE(pool.GetOutstandingLeases().empty());
}

TEST_F(StreamPoolSimTest, DebugStringShowsKeysAndPoison) {
  StreamPool pool(sim_);
  ASSERT_THAT(pool.Prewarm(1, {.priority = -1}, 1), IsOk());
  sim_.PoisonDevice(1, absl::InternalError("sticky"));
  pool.health()->Poison(1, absl::InternalError("sticky"));
  const std::string debug = pool.DebugString();
  EXPECT_THAT(debug, HasSubstr("stream pool over sim (4 devices)"));
  EXPECT_THAT(debug, HasSubstr("dev1 {priority=-1,non_blocking=1} POISONED"));
}

TEST_F(StreamPoolSimTest, RocmProfilePoolHidesCreationLatency) {
  SimBackend rocm(StrictSimOptions(1, SimProfile::RocmMi300x()));
  StreamPool pool(rocm);
  ASSERT_THAT(pool.Prewarm(0, {}, 2), IsOk());
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_THAT(stream, IsOk());
  }
  // 20 raw create+destroy pairs would sleep 134 ms; the pool creates none.
  EXPECT_EQ(pool.GetStats().created, 2);
  EXPECT_EQ(rocm.streams_created(), 2);
}

}  // namespace
}  // namespace gpupool
