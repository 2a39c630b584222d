// Device checks shared by the CUDA and HIP backends: a typed test suite over
// a small per-runtime "device traits" struct, instantiated once in
// tests/backends/cuda/cuda_backend_test.cc and once in
// tests/backends/hip/hip_backend_test.cc. Each test runs on device 0 of the
// real runtime and skips with the runtime's own reason where there is none.
// What every backend must do is checked by the Backend contract suite
// (tests/conformance/backend_contract_tests.h); the checks here need the
// runtime's own API (host calls to hold a stream busy, captures, the runtime's
// last error and priorities).
//
// A Device traits struct provides:
//   using Api = ...;                  // the backend's traits table
//   static constexpr typename Api::CaptureMode kCaptureModeGlobal;
//   static constexpr const char* kOutOfMemoryName;   // the runtime's OOM code
//   static constexpr bool kInterprocessEvents;       // supported by the
//   runtime static absl::StatusOr<std::unique_ptr<Backend>> Make();
//   // Runs fn(arg) in stream order on a runtime thread.
//   static typename Api::Error EnqueueHostCall(typename Api::Stream,
//                                              void (*fn)(void*), void* arg);
//   static typename Api::Error BeginCapture(typename Api::Stream,
//                                           typename Api::CaptureMode);
//   static typename Api::Error StreamGetPriority(typename Api::Stream, int*);
//
// Runtime-specific checks stay in the runtime's own file, on the same fixture
// (`using CudaDeviceTest = RuntimeDeviceTest<CudaDevice>;`).

#ifndef GPUPOOL_TESTS_BACKENDS_RUNTIME_DEVICE_TESTS_H_
#define GPUPOOL_TESTS_BACKENDS_RUNTIME_DEVICE_TESTS_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gtest/gtest.h"

namespace gpupool {

template <typename Device>
class RuntimeDeviceTest : public ::testing::Test {
 protected:
  using Api = typename Device::Api;
  using Stream = typename Api::Stream;

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> backend = Device::Make();
    if (!backend.ok()) GTEST_SKIP() << backend.status().message();
    backend_ = *std::move(backend);
    absl::StatusOr<int> count = backend_->DeviceCount();
    ASSERT_TRUE(count.ok()) << count.status();
    device_count_ = *count;
  }

  static int CurrentDevice() {
    int device = -1;
    EXPECT_EQ(Api::GetDevice(&device), Api::kSuccess);
    return device;
  }

  static Stream Native(NativeStream stream) {
    return static_cast<Stream>(stream);
  }

  std::unique_ptr<Backend> backend_;
  int device_count_ = 0;
};

// Holds a stream busy until released, without a kernel (host calls run in
// stream order). The flag is shared with the host call so that a test
// failing early cannot leave it reading a destroyed blocker.
template <typename Device>
class StreamBlocker {
 public:
  explicit StreamBlocker(typename Device::Api::Stream stream)
      : released_(std::make_shared<std::atomic<bool>>(false)) {
    auto* flag = new std::shared_ptr<std::atomic<bool>>(released_);
    EXPECT_EQ(Device::EnqueueHostCall(stream, &StreamBlocker::Wait, flag),
              Device::Api::kSuccess);
  }
  StreamBlocker(const StreamBlocker&) = delete;
  StreamBlocker& operator=(const StreamBlocker&) = delete;
  ~StreamBlocker() { Release(); }
  void Release() { released_->store(true); }

 private:
  static void Wait(void* arg) {
    std::unique_ptr<std::shared_ptr<std::atomic<bool>>> flag(
        static_cast<std::shared_ptr<std::atomic<bool>>*>(arg));
    while (!(*flag)->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::shared_ptr<std::atomic<bool>> released_;
};

TYPED_TEST_SUITE_P(RuntimeDeviceTest);

TYPED_TEST_P(RuntimeDeviceTest, PendingWorkIsNotReady) {
  Backend& backend = *this->backend_;
  absl::StatusOr<NativeStream> stream = backend.CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  {
    StreamBlocker<TypeParam> blocker(this->Native(*stream));
    const absl::Status pending = backend.QueryStream(0, *stream);
    EXPECT_EQ(FaultOf(pending), Fault::kNotReady) << pending;
    EXPECT_EQ(pending.code(), absl::StatusCode::kUnavailable);
    blocker.Release();
    EXPECT_TRUE(backend.SynchronizeStream(0, *stream).ok());
  }
  EXPECT_TRUE(backend.QueryStream(0, *stream).ok());
  EXPECT_TRUE(backend.DestroyStream(0, *stream).ok());
}

TYPED_TEST_P(RuntimeDeviceTest, EndCaptureEndsItAndQueriesNeverBreakACapture) {
  using Api = typename TypeParam::Api;
  Backend& backend = *this->backend_;
  absl::StatusOr<NativeStream> capturing = backend.CreateStream(0, {});
  absl::StatusOr<NativeStream> other = backend.CreateStream(0, {});
  ASSERT_TRUE(capturing.ok() && other.ok());
  ASSERT_EQ(TypeParam::BeginCapture(this->Native(*capturing),
                                    TypeParam::kCaptureModeGlobal),
            Api::kSuccess);
  // In global mode a plain stream query here would be prohibited and
  // invalidate the capture; the backend switches to Relaxed around it.
  EXPECT_TRUE(backend.QueryStream(0, *other).ok());
  absl::StatusOr<CaptureStatus> capture =
      backend.GetCaptureStatus(0, *capturing);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(*capture, CaptureStatus::kActive);
  // ... and restores the thread's mode afterwards.
  typename Api::CaptureMode mode = Api::kCaptureModeRelaxed;
  ASSERT_EQ(Api::ThreadExchangeStreamCaptureMode(&mode), Api::kSuccess);
  EXPECT_EQ(mode, TypeParam::kCaptureModeGlobal);
  ASSERT_EQ(Api::ThreadExchangeStreamCaptureMode(&mode), Api::kSuccess);

  EXPECT_TRUE(backend.EndCapture(0, *capturing).ok());
  capture = backend.GetCaptureStatus(0, *capturing);
  ASSERT_TRUE(capture.ok());
  EXPECT_EQ(*capture, CaptureStatus::kNone);
  EXPECT_TRUE(backend.DestroyStream(0, *capturing).ok());
  EXPECT_TRUE(backend.DestroyStream(0, *other).ok());
}

// Every call a pool makes outside stream order, issued while a global-mode
// capture is under way: on the capturing thread itself (the strictest case)
// and on another thread (a pool returning or creating on a worker). None may
// fail or invalidate the capture.
TYPED_TEST_P(RuntimeDeviceTest, PoolCallsNeverBreakAGlobalCapture) {
  using Api = typename TypeParam::Api;
  Backend& backend = *this->backend_;
  absl::StatusOr<NativeStream> capturing = backend.CreateStream(0, {});
  ASSERT_TRUE(capturing.ok()) << capturing.status();
  ASSERT_EQ(TypeParam::BeginCapture(this->Native(*capturing),
                                    TypeParam::kCaptureModeGlobal),
            Api::kSuccess);
  // Runs the calls; returns the first failure, naming the call.
  auto pool_calls = [&backend]() -> std::string {
    absl::StatusOr<NativeStream> stream = backend.CreateStream(0, {});
    if (!stream.ok()) return "CreateStream: " + stream.status().ToString();
    std::vector<std::pair<const char*, absl::Status>> calls;
    calls.emplace_back("QueryStream", backend.QueryStream(0, *stream));
    calls.emplace_back("GetCaptureStatus",
                       backend.GetCaptureStatus(0, *stream).status());
    calls.emplace_back("ResetStreamAttributes",
                       backend.ResetStreamAttributes(0, *stream));
    calls.emplace_back("SynchronizeStream",
                       backend.SynchronizeStream(0, *stream));
    absl::StatusOr<NativeEvent> event = backend.CreateEvent(0, {});
    calls.emplace_back("CreateEvent", event.status());
    if (event.ok()) {
      calls.emplace_back("QueryEvent", backend.QueryEvent(0, *event));
      calls.emplace_back("SynchronizeEvent",
                         backend.SynchronizeEvent(0, *event));
      calls.emplace_back("DestroyEvent", backend.DestroyEvent(0, *event));
    }
    for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
      absl::StatusOr<void*> ptr = backend.Allocate(0, 1 << 20, kind);
      calls.emplace_back("Allocate", ptr.status());
      if (ptr.ok()) calls.emplace_back("Free", backend.Free(0, *ptr, kind));
    }
    calls.emplace_back("GetMemoryInfo", backend.GetMemoryInfo(0).status());
    calls.emplace_back("DestroyStream", backend.DestroyStream(0, *stream));
    for (const auto& [name, status] : calls) {
      if (!status.ok()) return std::string(name) + ": " + status.ToString();
    }
    return "";
  };
  auto still_capturing = [&]() {
    absl::StatusOr<CaptureStatus> capture =
        backend.GetCaptureStatus(0, *capturing);
    return capture.ok() && *capture == CaptureStatus::kActive;
  };

  EXPECT_EQ(pool_calls(), "") << "on the capturing thread";
  EXPECT_TRUE(still_capturing()) << "broken by a call on the capturing thread";
  std::string other_thread;
  std::thread([&] { other_thread = pool_calls(); }).join();
  EXPECT_EQ(other_thread, "") << "on another thread";
  EXPECT_TRUE(still_capturing()) << "broken by a call on another thread";

  EXPECT_TRUE(backend.EndCapture(0, *capturing).ok());
  EXPECT_TRUE(backend.DestroyStream(0, *capturing).ok());
}

TYPED_TEST_P(RuntimeDeviceTest, EventsRecordQueryWait) {
  Backend& backend = *this->backend_;
  absl::StatusOr<NativeStream> stream = backend.CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<NativeEvent> event = backend.CreateEvent(0, {});
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE(backend.QueryEvent(0, *event).ok());  // never recorded
  {
    StreamBlocker<TypeParam> blocker(this->Native(*stream));
    EXPECT_TRUE(backend.RecordEvent(0, *event, *stream).ok());
    EXPECT_EQ(FaultOf(backend.QueryEvent(0, *event)), Fault::kNotReady);
    blocker.Release();
    EXPECT_TRUE(backend.SynchronizeEvent(0, *event).ok());
  }
  EXPECT_TRUE(backend.QueryEvent(0, *event).ok());
  EXPECT_TRUE(backend.StreamWaitEvent(0, *stream, *event).ok());
  EXPECT_TRUE(backend.DestroyEvent(0, *event).ok());
  EXPECT_TRUE(backend.DestroyStream(0, *stream).ok());
}

TYPED_TEST_P(RuntimeDeviceTest, EventConfigs) {
  std::vector<EventConfig> configs = {EventConfig{true, false, false},
                                      EventConfig{false, true, false}};
  if (TypeParam::kInterprocessEvents) {
    configs.push_back(EventConfig{true, false, true});
  }
  for (const EventConfig& config : configs) {
    absl::StatusOr<NativeEvent> event = this->backend_->CreateEvent(0, config);
    ASSERT_TRUE(event.ok()) << config.ToString() << ": " << event.status();
    EXPECT_TRUE(this->backend_->DestroyEvent(0, *event).ok());
  }
}

TYPED_TEST_P(RuntimeDeviceTest, OutOfMemoryIsClassifiedAndClearsTheLastError) {
  using Api = typename TypeParam::Api;
  const absl::StatusOr<void*> ptr =
      this->backend_->Allocate(0, size_t{1} << 60, MemoryKind::kDevice);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kResourceExhausted)
      << ptr.status();
  EXPECT_EQ(FaultOf(ptr.status()), Fault::kOutOfMemory);
  EXPECT_THAT(std::string(ptr.status().message()),
              ::testing::HasSubstr(TypeParam::kOutOfMemoryName));
  EXPECT_EQ(Api::GetLastError(), Api::kSuccess);
}

TYPED_TEST_P(RuntimeDeviceTest, PriorityOutsideTheRuntimesRangeIsRefused) {
  using Api = typename TypeParam::Api;
  Backend& backend = *this->backend_;
  int least = 0;
  int greatest = 0;
  ASSERT_EQ(Api::DeviceGetStreamPriorityRange(&least, &greatest),
            Api::kSuccess);
  for (int priority : {greatest, least}) {
    StreamConfig config;
    config.priority = priority;
    absl::StatusOr<NativeStream> stream = backend.CreateStream(0, config);
    ASSERT_TRUE(stream.ok()) << priority << ": " << stream.status();
    int actual = 99;
    EXPECT_EQ(TypeParam::StreamGetPriority(this->Native(*stream), &actual),
              Api::kSuccess);
    EXPECT_EQ(actual, priority);
    EXPECT_TRUE(backend.DestroyStream(0, *stream).ok());
  }
  for (int priority : {greatest - 1, least + 1}) {
    StreamConfig config;
    config.priority = priority;
    const absl::StatusOr<NativeStream> stream = backend.CreateStream(0, config);
    EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument)
        << priority;
    EXPECT_EQ(FaultOf(stream.status()), Fault::kCaller);
  }
}

REGISTER_TYPED_TEST_SUITE_P(RuntimeDeviceTest, PendingWorkIsNotReady,
                            EndCaptureEndsItAndQueriesNeverBreakACapture,
                            PoolCallsNeverBreakAGlobalCapture,
                            EventsRecordQueryWait, EventConfigs,
                            OutOfMemoryIsClassifiedAndClearsTheLastError,
                            PriorityOutsideTheRuntimesRangeIsRefused);

}  // namespace gpupool

#endif  // GPUPOOL_TESTS_BACKENDS_RUNTIME_DEVICE_TESTS_H_
