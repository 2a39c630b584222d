// The simulator's user objects against the CUDA Programming Guide ("CUDA
// User Objects"): an executable graph holds its own copy of the template's
// references, taken at instantiation, so the object outlives the template
// while an executable graph (or a launch of one) exists; and ResetDevice
// drops the device's objects, running each destructor once (the choice
// docs/backends.md records: cudaDeviceReset documents nothing about them).

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;

void CountRun(void* data) { ++*static_cast<int*>(data); }

class SimUserObjectsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<NativeStream> stream = sim_.CreateStream(0, {});
    ASSERT_THAT(stream, IsOk());
    stream_ = *stream;
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_THAT(sim_.DestroyStream(0, stream_), IsOk());
    }
    EXPECT_EQ(sim_.misuse_count(), 0);
  }

  // A graph whose every launch runs until CompleteAllWork.
  SimGraph Capture() {
    EXPECT_THAT(sim_.BeginCapture(stream_, SimCaptureMode::kGlobal), IsOk());
    sim_.SubmitWork(stream_, absl::InfiniteDuration());
    absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(stream_);
    EXPECT_THAT(graph, IsOk());
    return graph.ok() ? *graph : SimGraph{};
  }

  // A user object counting its destructor's runs in `runs`, moved into
  // `graph`.
  void RetainNew(SimGraph graph, int* runs) {
    absl::StatusOr<NativeUserObject> object =
        sim_.CreateUserObject(0, &CountRun, runs);
    ASSERT_THAT(object, IsOk());
    ASSERT_THAT(sim_.RetainUserObjectByGraph(0, NativeGraphOf(graph), *object),
                IsOk());
  }

  SimBackend sim_{StrictSimOptions(/*devices=*/2)};
  NativeStream stream_ = nullptr;
};

// The Programming Guide's own sequence: retain (move), instantiate, destroy
// the graph, launch, destroy the executable graph, synchronize.
TEST_F(SimUserObjectsTest, AnExecutableGraphHoldsItsOwnReferences) {
  SimGraph graph = Capture();
  int runs = 0;
  RetainNew(graph, &runs);
  ASSERT_THAT(sim_.InstantiateGraph(graph), IsOk());  // a new reference
  ASSERT_THAT(sim_.DestroyGraphTemplate(graph), IsOk());
  EXPECT_EQ(runs, 0);  // the executable graph still owns one
  EXPECT_EQ(sim_.live_user_objects(), 1);
  EXPECT_THAT(sim_.RetainUserObjectByGraph(0, NativeGraphOf(graph), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sim_.InstantiateGraph(graph),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(sim_.LaunchGraph(graph, stream_), IsOk());
  ASSERT_THAT(sim_.DestroyGraphExec(graph), IsOk());
  EXPECT_EQ(runs, 0);  // the launch still runs: the release is deferred
  EXPECT_EQ(sim_.live_graphs(0), 0);
  sim_.CompleteAllWork();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(sim_.live_user_objects(), 0);
}

TEST_F(SimUserObjectsTest, TheTemplateOutlivesItsExecutableGraphToo) {
  SimGraph graph = Capture();
  int runs = 0;
  RetainNew(graph, &runs);
  ASSERT_THAT(sim_.InstantiateGraph(graph), IsOk());
  ASSERT_THAT(sim_.DestroyGraphExec(graph), IsOk());
  EXPECT_EQ(runs, 0);  // the template still holds its reference
  EXPECT_THAT(sim_.LaunchGraph(graph, stream_),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(sim_.DestroyGraphTemplate(graph), IsOk());
  EXPECT_EQ(runs, 1);
  EXPECT_THAT(sim_.DestroyGraphExec(graph),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// An executable graph copies the references the template holds when it is
// instantiated: one retained afterwards is the template's alone, and does
// not wait for the executable graph's launches.
TEST_F(SimUserObjectsTest, AReferenceRetainedAfterInstantiationIsNotCopied) {
  SimGraph graph = Capture();
  ASSERT_THAT(sim_.InstantiateGraph(graph), IsOk());
  int runs = 0;
  RetainNew(graph, &runs);
  ASSERT_THAT(sim_.LaunchGraph(graph, stream_), IsOk());
  ASSERT_THAT(sim_.DestroyGraphTemplate(graph), IsOk());
  EXPECT_EQ(runs, 1);  // nothing held it for the launch
  EXPECT_TRUE(sim_.graph_launch_pending(graph));
  ASSERT_THAT(sim_.DestroyGraphExec(graph), IsOk());
  sim_.CompleteAllWork();
  EXPECT_EQ(runs, 1);
}

TEST_F(SimUserObjectsTest, ResetDeviceDropsTheDevicesUserObjects) {
  SimGraph graph = Capture();
  int graph_held = 0;
  RetainNew(graph, &graph_held);
  ASSERT_THAT(sim_.InstantiateGraph(graph), IsOk());
  ASSERT_THAT(sim_.LaunchGraph(graph, stream_), IsOk());
  int caller_held = 0;
  absl::StatusOr<NativeUserObject> caller =
      sim_.CreateUserObject(0, &CountRun, &caller_held);
  ASSERT_THAT(caller, IsOk());
  int other_device = 0;
  absl::StatusOr<NativeUserObject> other =
      sim_.CreateUserObject(1, &CountRun, &other_device);
  ASSERT_THAT(other, IsOk());

  sim_.ResetDevice(0);  // the stream, the graph and its launch go too
  stream_ = nullptr;
  EXPECT_EQ(graph_held, 1);
  EXPECT_EQ(caller_held, 1);
  EXPECT_EQ(other_device, 0);
  EXPECT_EQ(sim_.live_user_objects(), 1);
  // Nothing runs twice when the work the launch left is completed.
  sim_.CompleteAllWork();
  EXPECT_EQ(graph_held, 1);

  // The dropped handle is unknown now: releasing it is misuse.
  SimOptions options = StrictSimOptions(/*devices=*/1);
  int misuses = 0;
  options.on_misuse = [&misuses](absl::string_view) { ++misuses; };
  SimBackend observed(options);
  absl::StatusOr<NativeUserObject> dropped =
      observed.CreateUserObject(0, &CountRun, &caller_held);
  ASSERT_THAT(dropped, IsOk());
  observed.ResetDevice(0);
  EXPECT_EQ(caller_held, 2);
  EXPECT_THAT(observed.ReleaseUserObject(0, *dropped),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(misuses, 1);

  EXPECT_THAT(sim_.ReleaseUserObject(1, *other), IsOk());
  EXPECT_EQ(other_device, 1);
}

}  // namespace
}  // namespace gpupool
