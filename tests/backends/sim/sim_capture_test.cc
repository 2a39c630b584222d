// SimBackend's graph-capture model: capture ids, captured-not-run work and
// event records, the calls that invalidate a capture, joined side streams,
// end capture -> graph -> instantiate -> launch (replay) -> destroy, and the
// graph oracle that flags a replay writing freed or foreign memory.

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool::testing {
namespace {

using ::testing::HasSubstr;

// Asserts the code and the fault class of a status.
MATCHER_P2(IsFault, code, fault, "") {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code && FaultOf(status) == fault;
}

class SimCaptureTest : public ::testing::Test {
 protected:
  SimCaptureTest() : sim_(StrictSimOptions(/*devices=*/2)) {}
  ~SimCaptureTest() override {
    for (NativeStream stream : streams_) {
      EXPECT_TRUE(sim_.DestroyStream(0, stream).ok());
    }
    for (NativeEvent event : events_) {
      EXPECT_TRUE(sim_.DestroyEvent(0, event).ok());
    }
  }
  NativeStream Stream() {
    streams_.push_back(*sim_.CreateStream(0, {}));
    return streams_.back();
  }
  NativeEvent Event() {
    events_.push_back(*sim_.CreateEvent(0, {}));
    return events_.back();
  }
  CaptureInfo Info(NativeStream stream) {
    absl::StatusOr<CaptureInfo> info = sim_.GetCaptureInfo(0, stream);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.value_or(CaptureInfo{});
  }

  SimBackend sim_;
  std::vector<NativeStream> streams_;
  std::vector<NativeEvent> events_;
};

TEST_F(SimCaptureTest, EachCaptureHasAProcessUniqueIdWhileActive) {
  NativeStream a = Stream();
  NativeStream b = Stream();
  EXPECT_EQ(Info(a), (CaptureInfo{CaptureStatus::kNone, 0}));
  ASSERT_TRUE(sim_.BeginCapture(a, SimCaptureMode::kGlobal).ok());
  ASSERT_TRUE(sim_.BeginCapture(b, SimCaptureMode::kThreadLocal).ok());
  const CaptureInfo first = Info(a);
  EXPECT_EQ(first.status, CaptureStatus::kActive);
  EXPECT_NE(first.id, 0u);
  EXPECT_NE(Info(b).id, first.id);
  // Another backend in the same process never reuses an id.
  SimBackend other(StrictSimOptions(1));
  NativeStream c = *other.CreateStream(0, {});
  ASSERT_TRUE(other.BeginCapture(c, SimCaptureMode::kRelaxed).ok());
  absl::StatusOr<CaptureInfo> other_info = other.GetCaptureInfo(0, c);
  ASSERT_TRUE(other_info.ok());
  EXPECT_NE(other_info->id, first.id);
  EXPECT_NE(other_info->id, Info(b).id);
  EXPECT_TRUE(other.EndCapture(0, c).ok());
  EXPECT_TRUE(other.DestroyStream(0, c).ok());
  // Capturing twice is refused; the null stream cannot capture.
  EXPECT_THAT(sim_.BeginCapture(a, SimCaptureMode::kGlobal),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));
  EXPECT_THAT(sim_.BeginCapture(nullptr, SimCaptureMode::kGlobal),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_TRUE(sim_.EndCapture(0, a).ok());
  EXPECT_TRUE(sim_.EndCapture(0, b).ok());
  EXPECT_EQ(Info(a), (CaptureInfo{CaptureStatus::kNone, 0}));
  EXPECT_EQ(Info(nullptr), (CaptureInfo{CaptureStatus::kNone, 0}));
}

TEST_F(SimCaptureTest, CapturedWorkRunsOnlyWhenTheGraphIsLaunched) {
  NativeStream capturing = Stream();
  NativeStream replay = Stream();
  ASSERT_TRUE(sim_.BeginCapture(capturing, SimCaptureMode::kGlobal).ok());
  sim_.SubmitWork(capturing, absl::InfiniteDuration());
  EXPECT_FALSE(sim_.has_pending_work(capturing));
  absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(capturing);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(sim_.live_graphs(0), 1);
  EXPECT_FALSE(sim_.has_pending_work(capturing));
  // A graph must be instantiated before it is launched.
  EXPECT_THAT(sim_.LaunchGraph(*graph, replay),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));
  ASSERT_TRUE(sim_.InstantiateGraph(*graph).ok());
  for (int replay_count = 0; replay_count < 3; ++replay_count) {
    ASSERT_TRUE(sim_.LaunchGraph(*graph, replay).ok());
    EXPECT_TRUE(sim_.has_pending_work(replay));
    EXPECT_TRUE(sim_.graph_launch_pending(*graph));
    EXPECT_THAT(sim_.QueryStream(0, replay),
                IsFault(absl::StatusCode::kUnavailable, Fault::kNotReady));
    sim_.CompleteWork(replay);
    EXPECT_FALSE(sim_.graph_launch_pending(*graph));
  }
  ASSERT_TRUE(sim_.DestroyGraph(*graph).ok());
  EXPECT_EQ(sim_.live_graphs(0), 0);
  EXPECT_THAT(sim_.LaunchGraph(*graph, replay),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim_.DestroyGraph(*graph),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_EQ(sim_.graph_misuses(), 0);
}

TEST_F(SimCaptureTest, QueryingACapturedEventFailsAndInvalidatesItsCapture) {
  NativeStream capturing = Stream();
  NativeEvent event = Event();
  ASSERT_TRUE(sim_.BeginCapture(capturing, SimCaptureMode::kRelaxed).ok());
  ASSERT_TRUE(sim_.RecordEvent(0, event, capturing).ok());
  // Illegal even in Relaxed mode: the event is a graph node, not work.
  EXPECT_THAT(sim_.QueryEvent(0, event),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));
  EXPECT_EQ(Info(capturing).status, CaptureStatus::kInvalidated);
  EXPECT_EQ(Info(capturing).id, 0u);
  // Recording on an invalidated capture fails; ending it yields no graph.
  EXPECT_THAT(sim_.RecordEvent(0, event, capturing),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));
  absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(capturing);
  EXPECT_THAT(graph.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                       HasSubstr("invalidated")));
  EXPECT_EQ(Info(capturing).status, CaptureStatus::kNone);
  EXPECT_EQ(sim_.live_graphs(0), 0);
  // Still a captured event after the capture ended, until recorded eagerly.
  EXPECT_THAT(sim_.SynchronizeEvent(0, event),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));
  ASSERT_TRUE(sim_.RecordEvent(0, event, capturing).ok());
  EXPECT_TRUE(sim_.QueryEvent(0, event).ok());
}

TEST_F(SimCaptureTest, AWaitOnACapturedEventJoinsTheSideStreamToTheCapture) {
  NativeStream origin = Stream();
  NativeStream side = Stream();
  NativeEvent fork = Event();
  NativeEvent join = Event();
  ASSERT_TRUE(sim_.BeginCapture(origin, SimCaptureMode::kGlobal).ok());
  ASSERT_TRUE(sim_.RecordEvent(0, fork, origin).ok());
  ASSERT_TRUE(sim_.StreamWaitEvent(0, side, fork).ok());
  EXPECT_EQ(Info(side), Info(origin));
  sim_.SubmitWork(side, absl::InfiniteDuration());
  EXPECT_FALSE(sim_.has_pending_work(side));
  // Only the origin ends a capture (cudaErrorStreamCaptureUnmatched).
  EXPECT_THAT(sim_.EndCaptureToGraph(side).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("did not begin")));
  EXPECT_EQ(Info(origin).status, CaptureStatus::kInvalidated);
  EXPECT_EQ(Info(side).status, CaptureStatus::kInvalidated);
  EXPECT_FALSE(sim_.EndCaptureToGraph(origin).ok());
  EXPECT_EQ(Info(side).status, CaptureStatus::kNone);

  // A second capture: querying the joined side stream kills it for both.
  ASSERT_TRUE(sim_.BeginCapture(origin, SimCaptureMode::kGlobal).ok());
  ASSERT_TRUE(sim_.RecordEvent(0, fork, origin).ok());
  ASSERT_TRUE(sim_.StreamWaitEvent(0, side, fork).ok());
  ASSERT_TRUE(sim_.RecordEvent(0, join, side).ok());
  ASSERT_TRUE(sim_.StreamWaitEvent(0, origin, join).ok());
  EXPECT_THAT(sim_.QueryStream(0, side),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));
  EXPECT_EQ(Info(origin).status, CaptureStatus::kInvalidated);
  EXPECT_TRUE(sim_.EndCapture(0, origin).ok());
  EXPECT_EQ(Info(side).status, CaptureStatus::kNone);
  // Both events were recorded inside a capture: re-record them eagerly so the
  // fixture's teardown leaves them as any pool would find them.
  ASSERT_TRUE(sim_.RecordEvent(0, fork, nullptr).ok());
  ASSERT_TRUE(sim_.RecordEvent(0, join, nullptr).ok());
}

TEST_F(SimCaptureTest, OnlyRelaxedCapturesMayBeEndedByAnotherThread) {
  NativeStream global = Stream();
  NativeStream relaxed = Stream();
  ASSERT_TRUE(sim_.BeginCapture(global, SimCaptureMode::kGlobal).ok());
  ASSERT_TRUE(sim_.BeginCapture(relaxed, SimCaptureMode::kRelaxed).ok());
  absl::Status global_end;
  absl::StatusOr<SimGraph> relaxed_graph;
  std::thread other([&] {
    global_end = sim_.EndCaptureToGraph(global).status();
    relaxed_graph = sim_.EndCaptureToGraph(relaxed);
  });
  other.join();
  EXPECT_THAT(global_end, StatusIs(absl::StatusCode::kFailedPrecondition,
                                   HasSubstr("another thread")));
  EXPECT_EQ(Info(global).status, CaptureStatus::kInvalidated);
  ASSERT_TRUE(relaxed_graph.ok()) << relaxed_graph.status();
  EXPECT_TRUE(sim_.EndCapture(0, global).ok());
  EXPECT_TRUE(sim_.DestroyGraph(*relaxed_graph).ok());
}

TEST_F(SimCaptureTest, TheOracleFlagsReplaysThatWriteFreedOrForeignMemory) {
  NativeStream capturing = Stream();
  void* mine = *sim_.Allocate(0, 4096, MemoryKind::kDevice);
  void* doomed = *sim_.Allocate(0, 4096, MemoryKind::kDevice);
  constexpr uint64_t kGraphPool = 7;
  constexpr uint64_t kSomeoneElse = 8;
  ASSERT_TRUE(
      sim_.BeginCapture(capturing, SimCaptureMode::kGlobal, kGraphPool).ok());
  sim_.TouchMemory(capturing, mine, 4096);
  sim_.TouchMemory(capturing, static_cast<char*>(doomed) + 256, 16);
  absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(capturing);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(sim_.InstantiateGraph(*graph).ok());
  // The graph's own claims are fine.
  sim_.ClaimMemory(mine, 4096, kGraphPool);
  ASSERT_TRUE(sim_.LaunchGraph(*graph, capturing).ok());
  EXPECT_EQ(sim_.graph_misuses(), 0);
  // Someone else's data under the replay: one finding per range.
  sim_.ReleaseClaim(mine);
  sim_.ClaimMemory(static_cast<char*>(mine) + 1024, 64, kSomeoneElse);
  ASSERT_TRUE(sim_.LaunchGraph(*graph, capturing).ok());
  EXPECT_EQ(sim_.graph_misuses(), 1);
  sim_.ReleaseClaim(static_cast<char*>(mine) + 1024);
  // A freed allocation under the replay.
  ASSERT_TRUE(sim_.Free(0, doomed, MemoryKind::kDevice).ok());
  ASSERT_TRUE(sim_.LaunchGraph(*graph, capturing).ok());
  EXPECT_EQ(sim_.graph_misuses(), 2);
  const std::vector<std::string> log = sim_.graph_misuse_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_THAT(log[0], HasSubstr("leased to owner 8"));
  EXPECT_THAT(log[1], HasSubstr("was freed"));
  ASSERT_TRUE(sim_.DestroyGraph(*graph).ok());
  ASSERT_TRUE(sim_.Free(0, mine, MemoryKind::kDevice).ok());
}

TEST(SimCaptureLeakTest, AGraphLeftAliveIsReportedAtDestruction) {
  std::vector<std::string> reported;
  SimOptions options;
  options.on_misuse = [&](absl::string_view message) {
    reported.emplace_back(message);
  };
  {
    SimBackend sim(options);
    NativeStream stream = *sim.CreateStream(0, {});
    ASSERT_TRUE(sim.BeginCapture(stream, SimCaptureMode::kGlobal).ok());
    ASSERT_TRUE(sim.EndCaptureToGraph(stream).ok());
    ASSERT_TRUE(sim.DestroyStream(0, stream).ok());
    EXPECT_THAT(
        sim.CheckNoLeaks(),
        StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("graph")));
  }
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_THAT(reported[0], HasSubstr("leaked at destruction: graph"));
}

TEST(SimCaptureLeakTest, DestroyingTheOriginEndsItsCapture) {
  SimBackend sim(StrictSimOptions(1, SimProfile::RocmMi300x()));
  NativeStream origin = *sim.CreateStream(0, {});
  NativeStream side = *sim.CreateStream(0, {});
  NativeEvent fork = *sim.CreateEvent(0, {});
  ASSERT_TRUE(sim.BeginCapture(origin, SimCaptureMode::kGlobal).ok());
  ASSERT_TRUE(sim.RecordEvent(0, fork, origin).ok());
  ASSERT_TRUE(sim.StreamWaitEvent(0, side, fork).ok());
  ASSERT_TRUE(sim.DestroyStream(0, origin).ok());
  absl::StatusOr<CaptureInfo> info = sim.GetCaptureInfo(0, side);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(*info, (CaptureInfo{CaptureStatus::kNone, 0}));
  EXPECT_TRUE(sim.QueryStream(0, side).ok());
  EXPECT_TRUE(sim.DestroyStream(0, side).ok());
  EXPECT_TRUE(sim.DestroyEvent(0, fork).ok());
}

}  // namespace
}  // namespace gpupool::testing
