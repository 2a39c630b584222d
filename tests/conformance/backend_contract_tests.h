// The Backend contract (include/gpupool/backend.h, docs/backends.md) as one
// value-parameterized suite, in the manner of RMM's mr_ref_test: every
// backend must pass it. A test binary instantiates it with the harnesses it
// can build:
//
//   tests/conformance/backend_contract_test.cc          SimBackend (three
//   profiles), and
//                                           cuda/hip on a real device (skip
//                                           with the runtime's reason without)
//   tests/conformance/backend_contract_fake_runtime_test.cc
//                                           the CUDA or HIP backend over the
//                                           scripted fake runtime, loaded
//                                           through the real loader
//
// A harness makes the backend and scripts what the contract needs to
// observe (pending work, a capture, a faulty stream, a dead device, an
// exhausted memory). Where a harness cannot script something (a real device
// without a kernel), it returns Unimplemented and the test skips saying so;
// the runtime's own typed suite (tests/backends/runtime_device_tests.h) drives
// those cases on a real device with the runtime's API.

#ifndef GPUPOOL_TESTS_BACKENDS_BACKEND_CONTRACT_TESTS_H_
#define GPUPOOL_TESTS_BACKENDS_BACKEND_CONTRACT_TESTS_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gtest/gtest.h"

namespace gpupool::testing {

class ContractHarness {
 public:
  virtual ~ContractHarness() = default;

  // The backend under test, or why there is none here (the test skips).
  virtual absl::StatusOr<Backend*> backend() = 0;
  // What backend()->name() must say.
  virtual std::string expected_name() const = 0;

  // Leaves work pending on `stream` until CompletePending.
  virtual absl::Status MakePending(NativeStream stream) = 0;
  virtual absl::Status CompletePending(NativeStream stream) = 0;
  // Starts a graph capture on `stream`.
  virtual absl::Status BeginCapture(NativeStream stream) = 0;
  // Makes later queries of `stream` fail as a bad handle (kResource).
  virtual absl::Status FaultStream(NativeStream stream) = 0;
  // Makes `device` report a sticky error (kDevice) naming `cause`.
  virtual absl::Status KillDevice(int device, const std::string& cause) = 0;
  // Undoes FaultStream/KillDevice and disposes of `stream` (which the
  // backend may have destroyed with the device).
  virtual void Heal(int device, NativeStream stream) = 0;
  // Scripts an out-of-memory for the next allocation on `device`; returns
  // the size to request.
  virtual absl::StatusOr<size_t> ExhaustMemory(int device) = 0;
  // Checks at the end of a test: nothing leaked, nothing misused.
  virtual void ExpectClean() {}
};

// A harness over a backend a factory made (MakeBackend and friends): it holds
// the backend, or the factory's reason for making none, which backend()
// reports so that the test skips.
class MadeBackendHarness : public ContractHarness {
 public:
  explicit MadeBackendHarness(absl::StatusOr<std::unique_ptr<Backend>> made)
      : made_(std::move(made)) {}
  absl::StatusOr<Backend*> backend() override {
    if (!made_.ok()) return made_.status();
    return made_->get();
  }

 private:
  absl::StatusOr<std::unique_ptr<Backend>> made_;
};

struct ContractParam {
  std::string name;
  std::function<std::unique_ptr<ContractHarness>()> make;
};

inline void PrintTo(const ContractParam& param, std::ostream* os) {
  *os << param.name;
}

inline std::string ContractParamName(
    const ::testing::TestParamInfo<ContractParam>& info) {
  return info.param.name;
}

class BackendContractTest : public ::testing::TestWithParam<ContractParam> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    absl::StatusOr<Backend*> backend = harness_->backend();
    if (!backend.ok()) {
      GTEST_SKIP() << GetParam().name
                   << " backend unavailable: " << backend.status();
    }
    backend_ = *backend;
    absl::StatusOr<int> count = backend_->DeviceCount();
    ASSERT_TRUE(count.ok()) << count.status();
    device_count_ = *count;
  }

  void TearDown() override {
    if (backend_ != nullptr) harness_->ExpectClean();
  }

  NativeStream MustCreateStream(int device = 0, StreamConfig config = {}) {
    absl::StatusOr<NativeStream> stream =
        backend_->CreateStream(device, config);
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? *stream : nullptr;
  }

  // Skips the test when the harness cannot script `status`'s step.
  static bool Unscriptable(const absl::Status& status) {
    return absl::IsUnimplemented(status);
  }

  std::unique_ptr<ContractHarness> harness_;
  Backend* backend_ = nullptr;
  int device_count_ = 0;
};

#define GPUPOOL_CONTRACT_SCRIPT(expr)                                     \
  do {                                                                    \
    const absl::Status script_status = (expr);                            \
    if (Unscriptable(script_status)) {                                    \
      GTEST_SKIP() << GetParam().name                                     \
                   << " cannot script this: " << script_status.message(); \
    }                                                                     \
    ASSERT_TRUE(script_status.ok()) << script_status;                     \
  } while (false)

TEST_P(BackendContractTest, NameAndDeviceCount) {
  EXPECT_EQ(backend_->name(), harness_->expected_name());
  EXPECT_GE(device_count_, 1);
}

TEST_P(BackendContractTest, NewStreamIsIdleNotCapturingAndResettable) {
  for (const StreamConfig& config :
       {StreamConfig{}, StreamConfig{.non_blocking = false}}) {
    const NativeStream stream = MustCreateStream(0, config);
    ASSERT_NE(stream, nullptr) << config.ToString();
    EXPECT_TRUE(backend_->QueryStream(0, stream).ok());
    EXPECT_TRUE(backend_->SynchronizeStream(0, stream).ok());
    const absl::StatusOr<CaptureStatus> capture =
        backend_->GetCaptureStatus(0, stream);
    // Unimplemented is the documented default: pools treat it as kNone.
    if (!absl::IsUnimplemented(capture.status())) {
      ASSERT_TRUE(capture.ok()) << capture.status();
      EXPECT_EQ(*capture, CaptureStatus::kNone);
    }
    const absl::Status reset = backend_->ResetStreamAttributes(0, stream);
    EXPECT_TRUE(reset.ok() || absl::IsUnimplemented(reset)) << reset;
    EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
  }
}

TEST_P(BackendContractTest, PendingWorkIsNotReadyUntilItCompletes) {
  const NativeStream stream = MustCreateStream();
  ASSERT_NE(stream, nullptr);
  absl::StatusOr<NativeEvent> event = backend_->CreateEvent(0, {});
  ASSERT_TRUE(event.ok()) << event.status();
  const absl::Status pending = harness_->MakePending(stream);
  if (Unscriptable(pending)) {
    EXPECT_TRUE(backend_->DestroyEvent(0, *event).ok());
    EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
    GTEST_SKIP() << pending.message();
  }
  ASSERT_TRUE(pending.ok()) << pending;
  const absl::Status query = backend_->QueryStream(0, stream);
  EXPECT_EQ(query.code(), absl::StatusCode::kUnavailable) << query;
  EXPECT_EQ(FaultOf(query), Fault::kNotReady);
  ASSERT_TRUE(backend_->RecordEvent(0, *event, stream).ok());
  const absl::Status event_query = backend_->QueryEvent(0, *event);
  EXPECT_EQ(event_query.code(), absl::StatusCode::kUnavailable) << event_query;
  EXPECT_EQ(FaultOf(event_query), Fault::kNotReady);
  ASSERT_TRUE(harness_->CompletePending(stream).ok());
  EXPECT_TRUE(backend_->QueryStream(0, stream).ok());
  EXPECT_TRUE(backend_->QueryEvent(0, *event).ok());
  EXPECT_TRUE(backend_->SynchronizeEvent(0, *event).ok());
  EXPECT_TRUE(backend_->DestroyEvent(0, *event).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_P(BackendContractTest, EndCaptureLeavesTheStreamNotCapturing) {
  const NativeStream stream = MustCreateStream();
  ASSERT_NE(stream, nullptr);
  const absl::StatusOr<CaptureStatus> before =
      backend_->GetCaptureStatus(0, stream);
  const absl::Status begin = harness_->BeginCapture(stream);
  if (absl::IsUnimplemented(before.status()) || Unscriptable(begin)) {
    EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
    GTEST_SKIP() << "no capture here: " << before.status() << " / " << begin;
  }
  ASSERT_TRUE(begin.ok()) << begin;
  absl::StatusOr<CaptureStatus> during = backend_->GetCaptureStatus(0, stream);
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(*during, CaptureStatus::kActive);
  EXPECT_TRUE(backend_->EndCapture(0, stream).ok());
  absl::StatusOr<CaptureStatus> after = backend_->GetCaptureStatus(0, stream);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, CaptureStatus::kNone);
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

// Each capture sequence has its own id while active; none after it ended.
TEST_P(BackendContractTest, CaptureInfoNamesEachCaptureByItsOwnId) {
  const NativeStream stream = MustCreateStream();
  ASSERT_NE(stream, nullptr);
  const absl::StatusOr<CaptureInfo> idle = backend_->GetCaptureInfo(0, stream);
  const absl::Status begin = harness_->BeginCapture(stream);
  if (absl::IsUnimplemented(idle.status()) || Unscriptable(begin)) {
    EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
    GTEST_SKIP() << "no capture ids here: " << idle.status() << " / " << begin;
  }
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(*idle, (CaptureInfo{CaptureStatus::kNone, 0}));
  ASSERT_TRUE(begin.ok()) << begin;
  const absl::StatusOr<CaptureInfo> first = backend_->GetCaptureInfo(0, stream);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->status, CaptureStatus::kActive);
  EXPECT_NE(first->id, 0u);
  ASSERT_TRUE(backend_->EndCapture(0, stream).ok());
  const absl::StatusOr<CaptureInfo> ended = backend_->GetCaptureInfo(0, stream);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(*ended, (CaptureInfo{CaptureStatus::kNone, 0}));
  ASSERT_TRUE(harness_->BeginCapture(stream).ok());
  const absl::StatusOr<CaptureInfo> second =
      backend_->GetCaptureInfo(0, stream);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->status, CaptureStatus::kActive);
  EXPECT_NE(second->id, 0u);
  EXPECT_NE(second->id, first->id);
  EXPECT_TRUE(backend_->EndCapture(0, stream).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_P(BackendContractTest, EventsRecordQueryWaitAndFollowTheirConfig) {
  const NativeStream stream = MustCreateStream();
  ASSERT_NE(stream, nullptr);
  for (const EventConfig& config :
       {EventConfig{}, EventConfig{.disable_timing = false},
        EventConfig{.disable_timing = true, .blocking_sync = true}}) {
    absl::StatusOr<NativeEvent> event = backend_->CreateEvent(0, config);
    ASSERT_TRUE(event.ok()) << config.ToString() << ": " << event.status();
    EXPECT_TRUE(backend_->QueryEvent(0, *event).ok());  // never recorded
    EXPECT_TRUE(backend_->RecordEvent(0, *event, stream).ok());
    EXPECT_TRUE(backend_->SynchronizeEvent(0, *event).ok());
    EXPECT_TRUE(backend_->QueryEvent(0, *event).ok());
    const absl::Status wait = backend_->StreamWaitEvent(0, stream, *event);
    EXPECT_TRUE(wait.ok() || absl::IsUnimplemented(wait)) << wait;
    EXPECT_TRUE(backend_->DestroyEvent(0, *event).ok());
  }
  // Interprocess requires disable_timing (the runtimes' rule).
  const absl::StatusOr<NativeEvent> refused = backend_->CreateEvent(
      0, EventConfig{.disable_timing = false, .interprocess = true});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
      << refused.status();
  EXPECT_EQ(FaultOf(refused.status()), Fault::kCaller);
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_P(BackendContractTest, EveryMemoryKindAllocatesAndFrees) {
  for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
    absl::StatusOr<void*> a = backend_->Allocate(0, 1 << 20, kind);
    absl::StatusOr<void*> b = backend_->Allocate(0, 1 << 20, kind);
    ASSERT_TRUE(a.ok()) << MemoryKindName(kind) << ": " << a.status();
    ASSERT_TRUE(b.ok()) << MemoryKindName(kind) << ": " << b.status();
    EXPECT_NE(*a, nullptr);
    EXPECT_NE(*a, *b);
    EXPECT_TRUE(backend_->Free(0, *a, kind).ok());
    EXPECT_TRUE(backend_->Free(0, *b, kind).ok());
    const absl::StatusOr<void*> zero = backend_->Allocate(0, 0, kind);
    EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument)
        << zero.status();
    EXPECT_EQ(FaultOf(zero.status()), Fault::kCaller);
  }
}

TEST_P(BackendContractTest, OutOfMemoryIsResourceExhausted) {
  absl::StatusOr<size_t> bytes = harness_->ExhaustMemory(0);
  if (Unscriptable(bytes.status())) GTEST_SKIP() << bytes.status().message();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const absl::StatusOr<void*> ptr =
      backend_->Allocate(0, *bytes, MemoryKind::kDevice);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kResourceExhausted)
      << ptr.status();
  EXPECT_EQ(FaultOf(ptr.status()), Fault::kOutOfMemory);
}

TEST_P(BackendContractTest, MemoryInfoIsConsistent) {
  for (int device = 0; device < device_count_; ++device) {
    absl::StatusOr<MemoryInfo> info = backend_->GetMemoryInfo(device);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_GT(info->total_bytes, 0u);
    EXPECT_LE(info->free_bytes, info->total_bytes);
  }
}

TEST_P(BackendContractTest, OutOfRangeDeviceIsTheCallersAndChangesNothing) {
  const NativeStream stream = MustCreateStream();
  ASSERT_NE(stream, nullptr);
  for (int device : {-1, device_count_}) {
    auto expect_caller = [device](const absl::Status& status,
                                  const char* what) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
          << what << " on device " << device << ": " << status;
      EXPECT_EQ(FaultOf(status), Fault::kCaller) << what << ": " << status;
    };
    expect_caller(backend_->CreateStream(device, {}).status(), "CreateStream");
    expect_caller(backend_->CreateEvent(device, {}).status(), "CreateEvent");
    expect_caller(
        backend_->Allocate(device, 4096, MemoryKind::kDevice).status(),
        "Allocate");
    expect_caller(backend_->GetMemoryInfo(device).status(), "GetMemoryInfo");
    expect_caller(backend_->SetCurrentDevice(device), "SetCurrentDevice");
    expect_caller(backend_->QueryStream(device, stream), "QueryStream");
  }
  // Nothing happened to device 0's stream.
  EXPECT_TRUE(backend_->QueryStream(0, stream).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_P(BackendContractTest, CallsLeaveTheCallersCurrentDevice) {
  if (device_count_ < 2) GTEST_SKIP() << "needs 2 devices";
  const int last = device_count_ - 1;
  ASSERT_TRUE(backend_->SetCurrentDevice(last).ok());
  auto expect_current = [&](const char* after) {
    absl::StatusOr<int> current = backend_->GetCurrentDevice();
    ASSERT_TRUE(current.ok()) << current.status();
    EXPECT_EQ(*current, last) << "after " << after;
  };
  const NativeStream stream = MustCreateStream(0);
  ASSERT_NE(stream, nullptr);
  expect_current("CreateStream");
  absl::StatusOr<NativeEvent> event = backend_->CreateEvent(0, {});
  ASSERT_TRUE(event.ok()) << event.status();
  expect_current("CreateEvent");
  EXPECT_TRUE(backend_->RecordEvent(0, *event, stream).ok());
  EXPECT_TRUE(backend_->QueryEvent(0, *event).ok());
  EXPECT_TRUE(backend_->QueryStream(0, stream).ok());
  expect_current("queries");
  absl::StatusOr<void*> ptr = backend_->Allocate(0, 4096, MemoryKind::kDevice);
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  expect_current("Allocate");
  EXPECT_TRUE(backend_->Free(0, *ptr, MemoryKind::kDevice).ok());
  EXPECT_TRUE(backend_->GetMemoryInfo(0).ok());
  EXPECT_TRUE(backend_->DestroyEvent(0, *event).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
  expect_current("Free, GetMemoryInfo and the destroys");
  // A failed call restores it too.
  EXPECT_FALSE(backend_->CreateStream(0, {.priority = 1000}).ok());
  expect_current("a refused CreateStream");
  ASSERT_TRUE(backend_->SetCurrentDevice(0).ok());
}

TEST_P(BackendContractTest, AFaultyStreamIsAResourceFault) {
  const NativeStream stream = MustCreateStream();
  ASSERT_NE(stream, nullptr);
  const absl::Status fault = harness_->FaultStream(stream);
  if (Unscriptable(fault)) {
    EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
    GTEST_SKIP() << fault.message();
  }
  ASSERT_TRUE(fault.ok()) << fault;
  const absl::Status query = backend_->QueryStream(0, stream);
  EXPECT_FALSE(query.ok());
  EXPECT_EQ(FaultOf(query), Fault::kResource) << query;
  harness_->Heal(0, stream);
}

TEST_P(BackendContractTest, AStickyErrorIsADeviceFaultNamingTheCause) {
  const int device = device_count_ - 1;
  const NativeStream stream = MustCreateStream(device);
  ASSERT_NE(stream, nullptr);
  const absl::Status kill = harness_->KillDevice(device, "IllegalAddress");
  if (Unscriptable(kill)) {
    EXPECT_TRUE(backend_->DestroyStream(device, stream).ok());
    GTEST_SKIP() << kill.message();
  }
  ASSERT_TRUE(kill.ok()) << kill;
  const absl::Status query = backend_->QueryStream(device, stream);
  EXPECT_EQ(query.code(), absl::StatusCode::kInternal) << query;
  EXPECT_EQ(FaultOf(query), Fault::kDevice);
  EXPECT_THAT(std::string(query.message()),
              ::testing::HasSubstr("IllegalAddress"));
  harness_->Heal(device, stream);
}

}  // namespace gpupool::testing

#endif  // GPUPOOL_TESTS_BACKENDS_BACKEND_CONTRACT_TESTS_H_
