// Tests of SimBackend: the simulated runtime every CI pool test runs on, so
// its handle tracking, misuse detection, fault injection, work model and
// latency profiles are checked here directly.

#include "gpupool/sim_backend.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gtest/gtest.h"

namespace gpupool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// The status of a Status or StatusOr, for the matcher below.
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}
absl::Status StatusOf(const absl::Status& s) { return s; }

// Asserts the code and the fault class of a status.
MATCHER_P2(IsFault, code, fault, "") {
  absl::Status status = StatusOf(arg);
  *result_listener << "status " << status << " (fault "
                   << FaultName(FaultOf(status)) << ")";
  return status.code() == code && FaultOf(status) == fault;
}

// Misuse messages seen by the on_misuse hook, shared with the test body.
class MisuseLog {
 public:
  std::function<void(absl::string_view)> Hook() {
    return [this](absl::string_view message) {
      absl::MutexLock lock(&mu_);
      messages_.emplace_back(message);
    };
  }
  std::vector<std::string> messages() const {
    absl::MutexLock lock(&mu_);
    return messages_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

// Options whose hook fails the test on any misuse: the default for tests
// that expect none.
SimOptions StrictOptions(int device_count = 1,
                         SimProfile profile = SimProfile::Instant()) {
  SimOptions options;
  options.device_count = device_count;
  options.profile = std::move(profile);
  options.on_misuse = [](absl::string_view message) {
    ADD_FAILURE() << "unexpected misuse: " << message;
  };
  return options;
}

SimOptions LoggingOptions(MisuseLog& log, int device_count = 1,
                          SimProfile profile = SimProfile::Instant()) {
  SimOptions options = StrictOptions(device_count, std::move(profile));
  options.on_misuse = log.Hook();
  return options;
}

// --- Lifecycle and counters -------------------------------------------------

TEST(SimBackendTest, CreateDestroyCounters) {
  SimBackend sim(StrictOptions(2));
  EXPECT_EQ(sim.name(), "sim");
  EXPECT_EQ(*sim.DeviceCount(), 2);

  absl::StatusOr<NativeStream> s0 = sim.CreateStream(0, {});
  absl::StatusOr<NativeStream> s1 = sim.CreateStream(1, {});
  absl::StatusOr<NativeEvent> e0 = sim.CreateEvent(0, {});
  absl::StatusOr<void*> m0 = sim.Allocate(0, 1000, MemoryKind::kDevice);
  ASSERT_TRUE(s0.ok() && s1.ok() && e0.ok() && m0.ok());
  EXPECT_NE(*s0, nullptr);
  EXPECT_EQ(sim.live_streams(0), 1);
  EXPECT_EQ(sim.live_streams(1), 1);
  EXPECT_EQ(sim.live_events(0), 1);
  EXPECT_EQ(sim.live_allocations(0), 1);
  EXPECT_EQ(sim.bytes_allocated(0), 1000u);
  EXPECT_TRUE(sim.is_live_stream(*s0));
  EXPECT_TRUE(sim.is_live_event(*e0));
  EXPECT_EQ(sim.CheckNoLeaks().code(), absl::StatusCode::kFailedPrecondition);

  EXPECT_TRUE(sim.DestroyStream(0, *s0).ok());
  EXPECT_TRUE(sim.DestroyStream(1, *s1).ok());
  EXPECT_TRUE(sim.DestroyEvent(0, *e0).ok());
  EXPECT_TRUE(sim.Free(0, *m0, MemoryKind::kDevice).ok());

  EXPECT_EQ(sim.streams_created(), 2);
  EXPECT_EQ(sim.streams_destroyed(), 2);
  EXPECT_EQ(sim.events_created(), 1);
  EXPECT_EQ(sim.events_destroyed(), 1);
  EXPECT_EQ(sim.allocations_made(), 1);
  EXPECT_EQ(sim.allocations_freed(), 1);
  EXPECT_EQ(sim.live_streams(0), 0);
  EXPECT_EQ(sim.bytes_allocated(0), 0u);
  EXPECT_FALSE(sim.is_live_stream(*s0));
  EXPECT_TRUE(sim.CheckNoLeaks().ok());

  EXPECT_EQ(sim.calls(SimOp::kStreamCreate), 2);
  EXPECT_EQ(sim.calls(SimOp::kStreamDestroy), 2);
  EXPECT_EQ(sim.calls(SimOp::kDeviceCount), 1);
  EXPECT_EQ(sim.calls_on_device(1), 2);
  EXPECT_EQ(sim.total_calls(), 9);
  EXPECT_EQ(sim.misuse_count(), 0);
}

TEST(SimBackendTest, HandlesAndAddressesAreNeverReused) {
  SimBackend sim(StrictOptions(2));
  absl::flat_hash_set<void*> seen;
  for (int i = 0; i < 500; ++i) {
    int device = i % 2;
    NativeStream stream = *sim.CreateStream(device, {});
    NativeEvent event = *sim.CreateEvent(device, {});
    void* ptr = *sim.Allocate(device, 300, MemoryKind::kDevice);
    void* host = *sim.Allocate(device, 300, MemoryKind::kPinnedHost);
    EXPECT_TRUE(seen.insert(stream).second);
    EXPECT_TRUE(seen.insert(event).second);
    EXPECT_TRUE(seen.insert(ptr).second);
    EXPECT_TRUE(seen.insert(host).second);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 256, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(host) % 256, 0u);
    ASSERT_TRUE(sim.DestroyStream(device, stream).ok());
    ASSERT_TRUE(sim.DestroyEvent(device, event).ok());
    ASSERT_TRUE(sim.Free(device, ptr, MemoryKind::kDevice).ok());
    ASSERT_TRUE(sim.Free(device, host, MemoryKind::kPinnedHost).ok());
  }
  // A reset device does not start its numbering again either.
  NativeStream before = *sim.CreateStream(0, {});
  sim.ResetDevice(0);
  NativeStream after = *sim.CreateStream(0, {});
  EXPECT_FALSE(seen.contains(after));
  EXPECT_NE(before, after);
  EXPECT_TRUE(sim.DestroyStream(0, after).ok());
}

TEST(SimBackendTest, AllocationRangesAreDisjointPerDeviceAndKind) {
  SimBackend sim(StrictOptions(2));
  struct Block {
    uintptr_t begin;
    size_t bytes;
  };
  std::vector<std::pair<Block, std::pair<int, MemoryKind>>> blocks;
  for (int device = 0; device < 2; ++device) {
    for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
      for (size_t bytes : {1, 255, 256, 257, 4096}) {
        void* ptr = *sim.Allocate(device, bytes, kind);
        blocks.push_back(
            {{reinterpret_cast<uintptr_t>(ptr), bytes}, {device, kind}});
      }
    }
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      const Block& a = blocks[i].first;
      const Block& b = blocks[j].first;
      EXPECT_TRUE(a.begin + a.bytes <= b.begin || b.begin + b.bytes <= a.begin)
          << i << " overlaps " << j;
    }
  }
  EXPECT_EQ(sim.bytes_allocated(1, MemoryKind::kPinnedHost),
            1u + 255 + 256 + 257 + 4096);
  for (auto& [block, where] : blocks) {
    EXPECT_TRUE(sim.Free(where.first, reinterpret_cast<void*>(block.begin),
                         where.second)
                    .ok());
  }
}

// --- Misuse detection -------------------------------------------------------

TEST(SimBackendTest, UseAfterDestroyAndDoubleDestroyAreMisuse) {
  MisuseLog log;
  SimBackend sim(LoggingOptions(log));
  NativeStream stream = *sim.CreateStream(0, {});
  NativeEvent event = *sim.CreateEvent(0, {});
  ASSERT_TRUE(sim.DestroyStream(0, stream).ok());
  ASSERT_TRUE(sim.DestroyEvent(0, event).ok());

  EXPECT_THAT(sim.QueryStream(0, stream),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.RecordEvent(0, event, nullptr),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.DestroyStream(0, stream),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.DestroyEvent(0, event),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));

  std::vector<std::string> messages = log.messages();
  ASSERT_THAT(messages, SizeIs(4));
  EXPECT_THAT(messages[0], HasSubstr("QueryStream: use after destroy"));
  EXPECT_THAT(messages[1], HasSubstr("RecordEvent: use after destroy"));
  EXPECT_THAT(messages[2], HasSubstr("DestroyStream: double destroy"));
  EXPECT_THAT(messages[3], HasSubstr("DestroyEvent: double destroy"));
  EXPECT_EQ(sim.misuse_count(), 4);
  EXPECT_EQ(sim.misuse_messages(), messages);
  // Misuse changes nothing.
  EXPECT_EQ(sim.streams_destroyed(), 1);
  EXPECT_EQ(sim.events_destroyed(), 1);
}

TEST(SimBackendTest, WrongDeviceIsMisuse) {
  MisuseLog log;
  SimBackend sim(LoggingOptions(log, 2));
  NativeStream stream = *sim.CreateStream(1, {});
  NativeEvent event = *sim.CreateEvent(1, {});
  void* ptr = *sim.Allocate(1, 64, MemoryKind::kDevice);

  EXPECT_THAT(sim.QueryStream(0, stream),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.DestroyEvent(0, event),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.Free(0, ptr, MemoryKind::kDevice),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  std::vector<std::string> messages = log.messages();
  ASSERT_THAT(messages, SizeIs(3));
  for (const std::string& message : messages) {
    EXPECT_THAT(message, HasSubstr("wrong device"));
    EXPECT_THAT(message, HasSubstr("belongs to device 1"));
  }
  // Nothing changed: everything is still live and can be released properly.
  EXPECT_TRUE(sim.is_live_stream(stream));
  EXPECT_TRUE(sim.DestroyStream(1, stream).ok());
  EXPECT_TRUE(sim.DestroyEvent(1, event).ok());
  EXPECT_TRUE(sim.Free(1, ptr, MemoryKind::kDevice).ok());
  EXPECT_EQ(sim.misuse_count(), 3);
}

TEST(SimBackendTest, ForeignAndUnknownHandlesAreMisuse) {
  MisuseLog log;
  SimBackend sim(LoggingOptions(log));
  SimBackend other(StrictOptions());
  NativeStream foreign = *other.CreateStream(0, {});
  NativeEvent event = *sim.CreateEvent(0, {});
  int local = 0;

  EXPECT_THAT(sim.QueryStream(0, foreign),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.DestroyStream(0, &local),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.QueryStream(0, static_cast<NativeStream>(event)),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.DestroyStream(0, nullptr),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));

  EXPECT_THAT(
      log.messages(),
      ElementsAre(HasSubstr("created by another SimBackend"),
                  HasSubstr("not a handle of any SimBackend"),
                  HasSubstr("passed as a stream"), HasSubstr("null stream")));
  EXPECT_TRUE(other.DestroyStream(0, foreign).ok());
  EXPECT_TRUE(sim.DestroyEvent(0, event).ok());
}

TEST(SimBackendTest, BadFreesAreMisuse) {
  MisuseLog log;
  SimBackend sim(LoggingOptions(log, 2));
  void* ptr = *sim.Allocate(0, 512, MemoryKind::kDevice);
  void* host = *sim.Allocate(0, 512, MemoryKind::kPinnedHost);
  int local = 0;

  EXPECT_THAT(sim.Free(0, &local, MemoryKind::kDevice),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.Free(0, ptr, MemoryKind::kPinnedHost),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.Free(0, host, MemoryKind::kDevice),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.Free(0, static_cast<char*>(ptr) + 8, MemoryKind::kDevice),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  ASSERT_TRUE(sim.Free(0, ptr, MemoryKind::kDevice).ok());
  EXPECT_THAT(sim.Free(0, ptr, MemoryKind::kDevice),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  // cudaFree(nullptr) is legal and a no-op.
  EXPECT_TRUE(sim.Free(0, nullptr, MemoryKind::kDevice).ok());

  EXPECT_THAT(
      log.messages(),
      ElementsAre(HasSubstr("unknown pointer"), HasSubstr("wrong memory kind"),
                  HasSubstr("wrong memory kind"), HasSubstr("interior pointer"),
                  HasSubstr("double free")));
  EXPECT_EQ(sim.bytes_allocated(0, MemoryKind::kPinnedHost), 512u);
  EXPECT_TRUE(sim.Free(0, host, MemoryKind::kPinnedHost).ok());
}

TEST(SimBackendTest, LeaksAreReportedAtDestruction) {
  MisuseLog log;
  {
    SimBackend sim(LoggingOptions(log, 2));
    ASSERT_TRUE(sim.CreateStream(0, {}).ok());
    ASSERT_TRUE(sim.CreateEvent(0, {}).ok());
    ASSERT_TRUE(sim.Allocate(0, 128, MemoryKind::kPinnedHost).ok());
    // Handles of a poisoned device are not leaks: its context is dead.
    ASSERT_TRUE(sim.CreateStream(1, {}).ok());
    sim.PoisonDevice(1, absl::InternalError("cudaErrorIllegalAddress"));
    absl::Status leaks = sim.CheckNoLeaks();
    EXPECT_EQ(leaks.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(leaks.message(), HasSubstr("3 handle(s) still live"));
    EXPECT_THAT(log.messages(), IsEmpty());
  }
  std::vector<std::string> messages = log.messages();
  ASSERT_THAT(messages, SizeIs(3));
  for (const std::string& message : messages) {
    EXPECT_THAT(message, HasSubstr("leaked at destruction"));
    EXPECT_THAT(message, HasSubstr("on device 0"));
  }
  EXPECT_THAT(messages, testing::Contains(HasSubstr("stream 0x")));
  EXPECT_THAT(messages, testing::Contains(HasSubstr("event 0x")));
  EXPECT_THAT(messages,
              testing::Contains(HasSubstr("128 bytes of pinned_host")));
}

TEST(SimBackendTest, InvalidDeviceIsCallerErrorWithoutMisuse) {
  SimBackend sim(StrictOptions(2));
  EXPECT_THAT(sim.CreateStream(2, {}),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.CreateEvent(-1, {}),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.Allocate(7, 16, MemoryKind::kDevice),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.GetMemoryInfo(2),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(sim.SetCurrentDevice(2),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_EQ(sim.calls(SimOp::kStreamCreate), 1);
  EXPECT_EQ(sim.calls_on_device(0) + sim.calls_on_device(1), 0);
}

TEST(SimBackendTest, NoDeviceIsAnError) {
  SimBackend sim(StrictOptions(0));
  EXPECT_THAT(sim.DeviceCount(),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));
  EXPECT_THAT(sim.CreateStream(0, {}),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
}

// --- Configuration rules per profile ----------------------------------------

TEST(SimBackendTest, PriorityRangeAndCuMaskFollowTheProfile) {
  SimBackend cuda(StrictOptions(1, SimProfile::Cuda()));
  for (int priority : {-5, -1, 0}) {
    StreamConfig config;
    config.priority = priority;
    absl::StatusOr<NativeStream> stream = cuda.CreateStream(0, config);
    ASSERT_TRUE(stream.ok()) << priority << ": " << stream.status();
    EXPECT_TRUE(cuda.DestroyStream(0, *stream).ok());
  }
  for (int priority : {-6, 1}) {
    StreamConfig config;
    config.priority = priority;
    EXPECT_THAT(cuda.CreateStream(0, config),
                IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller))
        << priority;
  }
  StreamConfig masked;
  masked.cu_mask = {0xff, 0x0f};
  EXPECT_THAT(cuda.CreateStream(0, masked),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_EQ(cuda.streams_created(), 3);

  SimProfile rocm_rules = SimProfile::RocmMi300x();
  rocm_rules.stream_create = rocm_rules.stream_destroy = absl::ZeroDuration();
  SimBackend rocm(StrictOptions(1, rocm_rules));
  masked.priority = 1;
  absl::StatusOr<NativeStream> stream = rocm.CreateStream(0, masked);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_TRUE(rocm.DestroyStream(0, *stream).ok());
  StreamConfig too_high;
  too_high.priority = -2;
  EXPECT_THAT(rocm.CreateStream(0, too_high),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
}

TEST(SimBackendTest, EventAndAllocationArgumentRules) {
  SimBackend sim(StrictOptions());
  EventConfig bad;
  bad.interprocess = true;
  bad.disable_timing = false;
  EXPECT_THAT(sim.CreateEvent(0, bad),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EventConfig ipc;
  ipc.interprocess = true;
  absl::StatusOr<NativeEvent> event = sim.CreateEvent(0, ipc);
  ASSERT_TRUE(event.ok());
  EXPECT_TRUE(sim.QueryEvent(0, *event).ok());  // Created complete.
  EXPECT_TRUE(sim.DestroyEvent(0, *event).ok());
  EXPECT_THAT(sim.Allocate(0, 0, MemoryKind::kDevice),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_EQ(sim.events_created(), 1);
  EXPECT_EQ(sim.allocations_made(), 0);
}

// --- Fault injection --------------------------------------------------------

TEST(SimBackendTest, FailNextIsFifoAndConsumedOnce) {
  SimBackend sim(StrictOptions());
  sim.FailNext(SimOp::kStreamCreate, absl::InternalError("first"));
  sim.FailNext(SimOp::kStreamCreate,
               FaultError(Fault::kOutOfMemory,
                          absl::StatusCode::kResourceExhausted, "second"));
  absl::StatusOr<NativeStream> first = sim.CreateStream(0, {});
  EXPECT_EQ(first.status().message(), "first");
  EXPECT_THAT(first, IsFault(absl::StatusCode::kInternal, Fault::kResource));
  absl::StatusOr<NativeStream> second = sim.CreateStream(0, {});
  EXPECT_EQ(second.status().message(), "second (out-of-memory fault)");
  EXPECT_THAT(second, IsFault(absl::StatusCode::kResourceExhausted,
                              Fault::kOutOfMemory));
  // The failed calls were counted but did nothing.
  EXPECT_EQ(sim.calls(SimOp::kStreamCreate), 2);
  EXPECT_EQ(sim.streams_created(), 0);

  absl::StatusOr<NativeStream> third = sim.CreateStream(0, {});
  ASSERT_TRUE(third.ok());
  // An injection for one op leaves the others alone and is used up once.
  sim.FailNext(SimOp::kStreamQuery,
               FaultError(Fault::kDevice, absl::StatusCode::kInternal, "dead"));
  EXPECT_TRUE(sim.DestroyStream(0, *third).ok());
  EXPECT_EQ(sim.streams_destroyed(), 1);
  EXPECT_THAT(sim.QueryStream(0, nullptr),
              IsFault(absl::StatusCode::kInternal, Fault::kDevice));
  EXPECT_TRUE(sim.QueryStream(0, nullptr).ok());
}

TEST(SimBackendTest, FailedDestroyStillInvalidatesTheHandle) {
  SimBackend sim(StrictOptions());
  absl::StatusOr<NativeStream> stream = sim.CreateStream(0, {});
  absl::StatusOr<NativeEvent> event = sim.CreateEvent(0, {});
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(event.ok());
  sim.FailNext(SimOp::kStreamDestroy, absl::InternalError("destroy failed"));
  sim.FailNext(SimOp::kEventDestroy, absl::InternalError("destroy failed"));
  EXPECT_THAT(sim.DestroyStream(0, *stream),
              IsFault(absl::StatusCode::kInternal, Fault::kResource));
  EXPECT_THAT(sim.DestroyEvent(0, *event),
              IsFault(absl::StatusCode::kInternal, Fault::kResource));
  EXPECT_FALSE(sim.is_live_stream(*stream));
  EXPECT_FALSE(sim.is_live_event(*event));
  EXPECT_EQ(sim.streams_destroyed(), 1);
  EXPECT_EQ(sim.events_destroyed(), 1);
  EXPECT_TRUE(sim.CheckNoLeaks().ok());
}

TEST(SimBackendTest, FailNextHonoursTheDeviceFilter) {
  SimBackend sim(StrictOptions(2));
  sim.FailNext(SimOp::kAllocate,
               FaultError(Fault::kOutOfMemory,
                          absl::StatusCode::kResourceExhausted, "oom on 1"),
               /*device=*/1);
  absl::StatusOr<void*> on0 = sim.Allocate(0, 64, MemoryKind::kDevice);
  ASSERT_TRUE(on0.ok());
  EXPECT_THAT(
      sim.Allocate(1, 64, MemoryKind::kDevice),
      IsFault(absl::StatusCode::kResourceExhausted, Fault::kOutOfMemory));
  absl::StatusOr<void*> on1 = sim.Allocate(1, 64, MemoryKind::kDevice);
  ASSERT_TRUE(on1.ok());
  EXPECT_EQ(sim.calls_on_device(1), 2);
  EXPECT_TRUE(sim.Free(0, *on0, MemoryKind::kDevice).ok());
  EXPECT_TRUE(sim.Free(1, *on1, MemoryKind::kDevice).ok());
}

TEST(SimBackendTest, FaultStreamFailsQueriesButNotDestroy) {
  SimBackend sim(StrictOptions());
  NativeStream stream = *sim.CreateStream(0, {});
  sim.FaultStream(stream, absl::InternalError("cudaErrorLaunchFailure"));
  EXPECT_THAT(sim.QueryStream(0, stream),
              IsFault(absl::StatusCode::kInternal, Fault::kResource));
  EXPECT_THAT(sim.SynchronizeStream(0, stream),
              IsFault(absl::StatusCode::kInternal, Fault::kResource));
  // An explicit fault class is kept.
  sim.FaultStream(stream, FaultError(Fault::kShutdown,
                                     absl::StatusCode::kUnavailable, "unload"));
  EXPECT_THAT(sim.QueryStream(0, stream),
              IsFault(absl::StatusCode::kUnavailable, Fault::kShutdown));
  EXPECT_TRUE(sim.DestroyStream(0, stream).ok());
}

TEST(SimBackendTest, PoisonedDeviceFailsEveryCallWithoutChangingState) {
  SimBackend sim(StrictOptions(2));
  NativeStream stream = *sim.CreateStream(0, {});
  NativeEvent event = *sim.CreateEvent(0, {});
  void* ptr = *sim.Allocate(0, 256, MemoryKind::kDevice);
  NativeStream healthy = *sim.CreateStream(1, {});
  sim.PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  EXPECT_TRUE(sim.is_poisoned(0));
  EXPECT_FALSE(sim.is_poisoned(1));
  int64_t calls_before = sim.calls_on_device(0);

  const auto kDead = absl::StatusCode::kInternal;
  EXPECT_THAT(sim.CreateStream(0, {}), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.DestroyStream(0, stream), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.QueryStream(0, stream), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.SynchronizeStream(0, stream), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.GetCaptureStatus(0, stream), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.EndCapture(0, stream), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.ResetStreamAttributes(0, stream),
              IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.StreamWaitEvent(0, stream, event),
              IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.CreateEvent(0, {}), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.DestroyEvent(0, event), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.RecordEvent(0, event, stream),
              IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.QueryEvent(0, event), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.SynchronizeEvent(0, event), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.Allocate(0, 16, MemoryKind::kDevice),
              IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.Free(0, ptr, MemoryKind::kDevice),
              IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.GetMemoryInfo(0), IsFault(kDead, Fault::kDevice));
  EXPECT_THAT(sim.SetCurrentDevice(0), IsFault(kDead, Fault::kDevice));
  absl::Status sticky = sim.QueryStream(0, stream);
  EXPECT_EQ(sticky.message(), "cudaErrorIllegalAddress (device fault)");

  // Every call was counted against the device, and none changed anything.
  EXPECT_EQ(sim.calls_on_device(0) - calls_before, 18);
  EXPECT_EQ(sim.live_streams(0), 1);
  EXPECT_EQ(sim.live_events(0), 1);
  EXPECT_EQ(sim.live_allocations(0), 1);
  EXPECT_EQ(sim.streams_destroyed(), 0);
  // The other device is unaffected; poisoned handles are not leaks.
  EXPECT_TRUE(sim.QueryStream(1, healthy).ok());
  EXPECT_TRUE(sim.DestroyStream(1, healthy).ok());
  EXPECT_TRUE(sim.CheckNoLeaks().ok());
}

TEST(SimBackendTest, ResetDeviceDestroysEverythingAndClearsPoison) {
  MisuseLog log;
  SimBackend sim(LoggingOptions(log, 2));
  NativeStream stream = *sim.CreateStream(0, {});
  ASSERT_TRUE(sim.CreateEvent(0, {}).ok());
  ASSERT_TRUE(sim.Allocate(0, 1 << 20, MemoryKind::kDevice).ok());
  NativeStream other = *sim.CreateStream(1, {});
  sim.SubmitWork(stream, absl::InfiniteDuration());
  sim.PoisonDevice(0, absl::InternalError("dead"));

  sim.ResetDevice(0);
  EXPECT_FALSE(sim.is_poisoned(0));
  EXPECT_EQ(sim.live_streams(0), 0);
  EXPECT_EQ(sim.live_events(0), 0);
  EXPECT_EQ(sim.live_allocations(0), 0);
  EXPECT_EQ(sim.bytes_allocated(0), 0u);
  EXPECT_EQ(sim.streams_destroyed(), 1);
  EXPECT_EQ(sim.GetMemoryInfo(0)->free_bytes, size_t{80} << 30);
  EXPECT_EQ(sim.live_streams(1), 1);

  // The device works again; old handles are detected as destroyed.
  absl::StatusOr<NativeStream> fresh = sim.CreateStream(0, {});
  ASSERT_TRUE(fresh.ok());
  EXPECT_THAT(sim.QueryStream(0, stream),
              IsFault(absl::StatusCode::kInvalidArgument, Fault::kCaller));
  EXPECT_THAT(log.messages(), ElementsAre(HasSubstr("use after destroy")));
  EXPECT_TRUE(sim.DestroyStream(0, *fresh).ok());
  EXPECT_TRUE(sim.DestroyStream(1, other).ok());
}

// --- Work model
// ---------------------------------------------------------------

TEST(SimBackendTest, FiniteWorkCompletesOnItsOwn) {
  SimBackend sim(StrictOptions());
  NativeStream stream = *sim.CreateStream(0, {});
  absl::Time start = absl::Now();
  sim.SubmitWork(stream, absl::Milliseconds(20));
  EXPECT_TRUE(sim.has_pending_work(stream));
  absl::Status pending = sim.QueryStream(0, stream);
  EXPECT_THAT(pending,
              IsFault(absl::StatusCode::kUnavailable, Fault::kNotReady));
  EXPECT_THAT(pending.message(), HasSubstr("not ready"));
  EXPECT_TRUE(sim.SynchronizeStream(0, stream).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
  EXPECT_TRUE(sim.QueryStream(0, stream).ok());
  EXPECT_FALSE(sim.has_pending_work(stream));

  sim.SubmitWork(stream, absl::Milliseconds(5));
  absl::SleepFor(absl::Milliseconds(10));
  EXPECT_TRUE(sim.QueryStream(0, stream).ok());
  EXPECT_TRUE(sim.DestroyStream(0, stream).ok());
}

TEST(SimBackendTest, InfiniteWorkWaitsForCompletion) {
  SimBackend sim(StrictOptions());
  NativeStream a = *sim.CreateStream(0, {});
  NativeStream b = *sim.CreateStream(0, {});
  sim.SubmitWork(a, absl::InfiniteDuration());
  sim.SubmitWork(b, absl::InfiniteDuration());
  absl::SleepFor(absl::Milliseconds(2));
  EXPECT_THAT(sim.QueryStream(0, a),
              IsFault(absl::StatusCode::kUnavailable, Fault::kNotReady));

  sim.CompleteWork(a);
  EXPECT_TRUE(sim.QueryStream(0, a).ok());
  EXPECT_THAT(sim.QueryStream(0, b),
              IsFault(absl::StatusCode::kUnavailable, Fault::kNotReady));

  // A synchronize blocks until another thread completes the work.
  // `start` before the completer starts sleeping: the wait lasts at least
  // its 20 ms from here.
  absl::Time start = absl::Now();
  std::thread completer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    sim.CompleteAllWork();
  });
  EXPECT_TRUE(sim.SynchronizeStream(0, b).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
  completer.join();
  EXPECT_TRUE(sim.DestroyStream(0, a).ok());
  EXPECT_TRUE(sim.DestroyStream(0, b).ok());
}

TEST(SimBackendTest, EventRecordedOnBusyStreamIsPendingUntilItsWorkCompletes) {
  SimBackend sim(StrictOptions());
  NativeStream stream = *sim.CreateStream(0, {});
  NativeEvent idle_event = *sim.CreateEvent(0, {});
  NativeEvent busy_event = *sim.CreateEvent(0, {});
  ASSERT_TRUE(sim.RecordEvent(0, idle_event, stream).ok());
  sim.SubmitWork(stream, absl::InfiniteDuration());
  ASSERT_TRUE(sim.RecordEvent(0, busy_event, stream).ok());
  EXPECT_TRUE(sim.QueryEvent(0, idle_event).ok());
  EXPECT_THAT(sim.QueryEvent(0, busy_event),
              IsFault(absl::StatusCode::kUnavailable, Fault::kNotReady));

  // The event captured the work, not the stream: on CUDA the stream may be
  // destroyed while its work runs, and the event stays pending.
  ASSERT_TRUE(sim.DestroyStream(0, stream).ok());
  EXPECT_THAT(sim.QueryEvent(0, busy_event),
              IsFault(absl::StatusCode::kUnavailable, Fault::kNotReady));

  // `start` before the completer starts sleeping: the wait lasts at least
  // its 20 ms from here.
  absl::Time start = absl::Now();
  std::thread completer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    sim.CompleteAllWork();
  });
  EXPECT_TRUE(sim.SynchronizeEvent(0, busy_event).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
  completer.join();
  EXPECT_TRUE(sim.QueryEvent(0, busy_event).ok());
  EXPECT_TRUE(sim.DestroyEvent(0, idle_event).ok());
  EXPECT_TRUE(sim.DestroyEvent(0, busy_event).ok());
}

TEST(SimBackendTest, StreamWaitEventCountsEdgesAndInheritsPendingWork) {
  SimBackend sim(StrictOptions());
  NativeStream producer = *sim.CreateStream(0, {});
  NativeStream consumer = *sim.CreateStream(0, {});
  NativeEvent event = *sim.CreateEvent(0, {});

  // Waiting on a complete event adds an edge but no work.
  ASSERT_TRUE(sim.StreamWaitEvent(0, consumer, event).ok());
  EXPECT_EQ(sim.stream_wait_edges(), 1);
  EXPECT_TRUE(sim.QueryStream(0, consumer).ok());

  sim.SubmitWork(producer, absl::InfiniteDuration());
  ASSERT_TRUE(sim.RecordEvent(0, event, producer).ok());
  ASSERT_TRUE(sim.StreamWaitEvent(0, consumer, event).ok());
  EXPECT_EQ(sim.stream_wait_edges(), 2);
  EXPECT_TRUE(sim.has_pending_work(consumer));
  EXPECT_THAT(sim.QueryStream(0, consumer),
              IsFault(absl::StatusCode::kUnavailable, Fault::kNotReady));

  // Completing the producer completes the dependency.
  sim.CompleteWork(producer);
  EXPECT_TRUE(sim.QueryStream(0, consumer).ok());
  EXPECT_TRUE(sim.QueryEvent(0, event).ok());
  EXPECT_EQ(sim.calls(SimOp::kStreamWaitEvent), 2);
  EXPECT_TRUE(sim.DestroyEvent(0, event).ok());
  EXPECT_TRUE(sim.DestroyStream(0, producer).ok());
  EXPECT_TRUE(sim.DestroyStream(0, consumer).ok());
}

// --- Capture and attributes
// ---------------------------------------------------

TEST(SimBackendTest, QueryingACapturingStreamInvalidatesTheCapture) {
  SimBackend sim(StrictOptions());
  NativeStream stream = *sim.CreateStream(0, {});
  EXPECT_EQ(*sim.GetCaptureStatus(0, stream), CaptureStatus::kNone);
  EXPECT_THAT(sim.EndCapture(0, stream),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));

  sim.BeginCapture(stream);
  EXPECT_EQ(*sim.GetCaptureStatus(0, stream), CaptureStatus::kActive);
  EXPECT_THAT(sim.QueryStream(0, stream),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));
  EXPECT_EQ(*sim.GetCaptureStatus(0, stream), CaptureStatus::kInvalidated);
  EXPECT_THAT(sim.QueryStream(0, stream),
              IsFault(absl::StatusCode::kFailedPrecondition, Fault::kCaller));

  EXPECT_TRUE(sim.EndCapture(0, stream).ok());
  EXPECT_EQ(*sim.GetCaptureStatus(0, stream), CaptureStatus::kNone);
  EXPECT_TRUE(sim.QueryStream(0, stream).ok());

  // An active capture can be ended directly too.
  sim.BeginCapture(stream);
  EXPECT_TRUE(sim.EndCapture(0, stream).ok());
  EXPECT_EQ(*sim.GetCaptureStatus(0, stream), CaptureStatus::kNone);
  EXPECT_EQ(sim.calls(SimOp::kCaptureStatus), 5);
  EXPECT_TRUE(sim.DestroyStream(0, stream).ok());
}

TEST(SimBackendTest, AttributesAreDirtyUntilReset) {
  SimBackend sim(StrictOptions());
  NativeStream stream = *sim.CreateStream(0, {});
  EXPECT_FALSE(sim.attributes_dirty(stream));
  sim.SetStreamAttribute(stream);
  EXPECT_TRUE(sim.attributes_dirty(stream));
  EXPECT_TRUE(sim.ResetStreamAttributes(0, stream).ok());
  EXPECT_FALSE(sim.attributes_dirty(stream));
  EXPECT_EQ(sim.calls(SimOp::kResetAttributes), 1);
  EXPECT_TRUE(sim.DestroyStream(0, stream).ok());
}

// --- Memory
// -------------------------------------------------------------------

TEST(SimBackendTest, MemoryLimitAndInfo) {
  SimOptions options = StrictOptions(2);
  options.memory_per_device = 1 << 20;
  SimBackend sim(options);
  absl::StatusOr<MemoryInfo> info = sim.GetMemoryInfo(0);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->total_bytes, 1u << 20);
  EXPECT_EQ(info->free_bytes, 1u << 20);

  void* big = *sim.Allocate(0, 768 << 10, MemoryKind::kDevice);
  EXPECT_EQ(sim.GetMemoryInfo(0)->free_bytes, 256u << 10);
  absl::StatusOr<void*> too_much =
      sim.Allocate(0, 512 << 10, MemoryKind::kDevice);
  EXPECT_THAT(too_much, IsFault(absl::StatusCode::kResourceExhausted,
                                Fault::kOutOfMemory));
  EXPECT_THAT(too_much.status().message(), HasSubstr("requested 524288"));

  // A lower limit applies on top of live allocations; other devices keep
  // theirs.
  sim.SetMemoryLimit(0, 800 << 10);
  EXPECT_EQ(sim.GetMemoryInfo(0)->total_bytes, 800u << 10);
  EXPECT_THAT(
      sim.Allocate(0, 64 << 10, MemoryKind::kDevice),
      IsFault(absl::StatusCode::kResourceExhausted, Fault::kOutOfMemory));
  void* small = *sim.Allocate(0, 32 << 10, MemoryKind::kDevice);
  EXPECT_EQ(sim.GetMemoryInfo(1)->total_bytes, 1u << 20);

  // Pinned host memory is unlimited until limited.
  void* host = *sim.Allocate(0, size_t{4} << 30, MemoryKind::kPinnedHost);
  sim.SetMemoryLimit(0, 1024, MemoryKind::kPinnedHost);
  EXPECT_THAT(
      sim.Allocate(0, 1, MemoryKind::kPinnedHost),
      IsFault(absl::StatusCode::kResourceExhausted, Fault::kOutOfMemory));
  EXPECT_EQ(sim.calls(SimOp::kMemoryInfo), 4);

  EXPECT_TRUE(sim.Free(0, big, MemoryKind::kDevice).ok());
  EXPECT_TRUE(sim.Free(0, small, MemoryKind::kDevice).ok());
  EXPECT_TRUE(sim.Free(0, host, MemoryKind::kPinnedHost).ok());
  EXPECT_EQ(sim.GetMemoryInfo(0)->free_bytes, 800u << 10);
}

// --- Current device
// -----------------------------------------------------------

TEST(SimBackendTest, CurrentDeviceIsPerThreadAndPerInstance) {
  SimBackend sim(StrictOptions(4));
  SimBackend other(StrictOptions(4));
  EXPECT_EQ(*sim.GetCurrentDevice(), 0);
  ASSERT_TRUE(sim.SetCurrentDevice(3).ok());
  EXPECT_EQ(*sim.GetCurrentDevice(), 3);
  EXPECT_EQ(*other.GetCurrentDevice(), 0);

  std::thread([&] {
    EXPECT_EQ(*sim.GetCurrentDevice(), 0);
    ASSERT_TRUE(sim.SetCurrentDevice(1).ok());
    EXPECT_EQ(*sim.GetCurrentDevice(), 1);
  }).join();
  EXPECT_EQ(*sim.GetCurrentDevice(), 3);

  {
    absl::StatusOr<ScopedDevice> scoped = ScopedDevice::Create(sim, 2);
    ASSERT_TRUE(scoped.ok());
    EXPECT_EQ(*sim.GetCurrentDevice(), 2);
  }
  EXPECT_EQ(*sim.GetCurrentDevice(), 3);
  // Set: 3 here, 1 on the other thread, 2 by ScopedDevice (set, restore).
  EXPECT_EQ(sim.calls(SimOp::kSetCurrentDevice), 4);
}

// --- Latency profiles
// ---------------------------------------------------------

TEST(SimBackendTest, ProfilesCarryTheSeedFigures) {
  SimProfile cuda = SimProfile::Cuda();
  EXPECT_EQ(cuda.stream_create, absl::Nanoseconds(1500));
  EXPECT_EQ(cuda.query, absl::Nanoseconds(100));
  EXPECT_EQ(cuda.capture_query, absl::Nanoseconds(65));  // H100, measured
  EXPECT_FALSE(cuda.destroy_blocks_until_idle);
  EXPECT_FALSE(cuda.supports_cu_mask);
  SimProfile rocm = SimProfile::RocmMi300x();
  EXPECT_EQ(rocm.stream_create, absl::Microseconds(3400));
  EXPECT_EQ(rocm.stream_destroy, absl::Microseconds(3300));
  EXPECT_EQ(rocm.capture_query, rocm.query);
  EXPECT_TRUE(rocm.destroy_blocks_until_idle);
  EXPECT_TRUE(rocm.supports_cu_mask);
  EXPECT_EQ(rocm.greatest_priority, -1);
  EXPECT_EQ(rocm.least_priority, 1);
  EXPECT_EQ(SimProfile::Instant().stream_create, absl::ZeroDuration());
  SimBackend sim(StrictOptions(1, rocm));
  EXPECT_EQ(sim.profile().name, "rocm-mi300x");
}

TEST(SimBackendTest, RocmLatenciesAreCharged) {
  SimBackend sim(StrictOptions(1, SimProfile::RocmMi300x()));
  absl::Time start = absl::Now();
  NativeStream stream = *sim.CreateStream(0, {});
  EXPECT_GE(absl::Now() - start, absl::Microseconds(3400));
  start = absl::Now();
  ASSERT_TRUE(sim.DestroyStream(0, stream).ok());
  EXPECT_GE(absl::Now() - start, absl::Microseconds(3300));
}

TEST(SimBackendTest, RocmDestroyBlocksUntilWorkCompletesAndEndsCapture) {
  SimBackend sim(StrictOptions(1, SimProfile::RocmMi300x()));
  NativeStream stream = *sim.CreateStream(0, {});
  sim.SubmitWork(stream, absl::InfiniteDuration());
  sim.BeginCapture(stream);
  std::thread completer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    sim.CompleteWork(stream);
  });
  absl::Time start = absl::Now();
  EXPECT_TRUE(sim.DestroyStream(0, stream).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
  completer.join();
  EXPECT_FALSE(sim.is_live_stream(stream));
  EXPECT_EQ(sim.streams_destroyed(), 1);
}

TEST(SimBackendTest, CudaDestroyDoesNotWaitForWork) {
  SimBackend sim(StrictOptions(1, SimProfile::Cuda()));
  NativeStream stream = *sim.CreateStream(0, {});
  sim.SubmitWork(stream, absl::InfiniteDuration());
  absl::Time start = absl::Now();
  EXPECT_TRUE(sim.DestroyStream(0, stream).ok());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
}

// --- Concurrency
// --------------------------------------------------------------

TEST(SimBackendTest, ConcurrentCallersOnSeveralDevicesBalance) {
  constexpr int kDevices = 4;
  constexpr int kThreads = 8;
  constexpr int kRounds = 300;
  SimBackend sim(StrictOptions(kDevices, SimProfile::Cuda()));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&sim, t] {
      int device = t % kDevices;
      for (int i = 0; i < kRounds; ++i) {
        absl::StatusOr<NativeStream> stream = sim.CreateStream(device, {});
        absl::StatusOr<NativeEvent> event = sim.CreateEvent(device, {});
        absl::StatusOr<void*> ptr =
            sim.Allocate(device, 4096, MemoryKind::kDevice);
        ASSERT_TRUE(stream.ok() && event.ok() && ptr.ok());
        if (i % 16 == 0) sim.SubmitWork(*stream, absl::Microseconds(50));
        EXPECT_TRUE(sim.RecordEvent(device, *event, *stream).ok());
        EXPECT_TRUE(sim.StreamWaitEvent(device, *stream, *event).ok());
        EXPECT_TRUE(sim.SynchronizeEvent(device, *event).ok());
        EXPECT_TRUE(sim.QueryStream(device, *stream).ok());
        EXPECT_TRUE(sim.Free(device, *ptr, MemoryKind::kDevice).ok());
        EXPECT_TRUE(sim.DestroyEvent(device, *event).ok());
        EXPECT_TRUE(sim.DestroyStream(device, *stream).ok());
      }
    });
  }
  // Inspection runs concurrently with the callers.
  for (int i = 0; i < 50; ++i) {
    EXPECT_GE(sim.live_streams(i % kDevices), 0);
    EXPECT_GE(sim.total_calls(), 0);
  }
  for (std::thread& thread : threads) thread.join();

  constexpr int64_t kTotal = kThreads * kRounds;
  EXPECT_EQ(sim.streams_created(), kTotal);
  EXPECT_EQ(sim.streams_destroyed(), kTotal);
  EXPECT_EQ(sim.events_created(), kTotal);
  EXPECT_EQ(sim.events_destroyed(), kTotal);
  EXPECT_EQ(sim.allocations_made(), kTotal);
  EXPECT_EQ(sim.allocations_freed(), kTotal);
  EXPECT_EQ(sim.stream_wait_edges(), kTotal);
  for (int device = 0; device < kDevices; ++device) {
    EXPECT_EQ(sim.live_streams(device), 0);
    EXPECT_EQ(sim.calls_on_device(device),
              10 * kRounds * (kThreads / kDevices));
  }
  EXPECT_EQ(sim.misuse_count(), 0);
  EXPECT_TRUE(sim.CheckNoLeaks().ok());
}

TEST(SimBackendTest, SimOpNamesAreReadable) {
  EXPECT_EQ(SimOpName(SimOp::kStreamCreate), "CreateStream");
  EXPECT_EQ(SimOpName(SimOp::kMemoryInfo), "GetMemoryInfo");
  EXPECT_EQ(SimOpName(SimOp::kEventSynchronize), "SynchronizeEvent");
}

}  // namespace
}  // namespace gpupool
