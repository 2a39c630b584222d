// Tests of the CUDA backend: every row of the CUDA error table and the
// messages of the error choke point (no GPU needed), the factory's answer on
// a machine without a GPU, and basic primitive checks that run on a GPU and
// skip elsewhere with the runtime's own reason. The shared RuntimeBackend
// template itself is tested over a fake runtime in
// tests/runtime_backend_test.cc, which builds without CUDA.

#include "gpupool/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gtest/gtest.h"
#include "src/backends/cuda/cuda_api.h"
#include "src/backends/cuda/cuda_errors.h"
#include "src/backends/runtime/error_class.h"
#include "src/backends/runtime/runtime_backend.h"

namespace gpupool {
namespace {

using ::gpupool::cuda_internal::ClassifyCudaError;
using ::gpupool::cuda_internal::CudaApi;
using ::gpupool::cuda_internal::CudaErrorClass;
using ::gpupool::cuda_internal::CudaErrorDescription;
using ::gpupool::cuda_internal::CudaErrorName;
using ::gpupool::runtime_internal::CallKind;
using ::gpupool::runtime_internal::ErrorClass;
using ::testing::HasSubstr;
using Runtime = ::gpupool::runtime_internal::RuntimeBackend<CudaApi>;
using Code = absl::StatusCode;

// --- The error table ---------------------------------------------------------

struct TableRow {
  int error;
  Fault fault;
  Code code;
};

std::ostream& operator<<(std::ostream& os, const TableRow& row) {
  return os << CudaErrorName(row.error) << " (" << row.error << ")";
}

// Written from DESIGN.md's fault table and the CUDA documentation of each
// code, independently of the switch in cuda_errors.cc.
const TableRow kCudaTable[] = {
    {cudaSuccess, Fault::kNone, Code::kOk},
    {cudaErrorNotReady, Fault::kNotReady, Code::kUnavailable},
    {cudaErrorMemoryAllocation, Fault::kOutOfMemory, Code::kResourceExhausted},
    {cudaErrorCudartUnloading, Fault::kShutdown, Code::kUnavailable},
    {cudaErrorContextIsDestroyed, Fault::kShutdown, Code::kUnavailable},
    // Sticky: DESIGN.md's 700, 702, 710, 714-719, and the codes CUDA
    // documents as "any further CUDA work will return the same error".
    {cudaErrorIllegalAddress, Fault::kDevice, Code::kInternal},
    {cudaErrorLaunchTimeout, Fault::kDevice, Code::kInternal},
    {cudaErrorAssert, Fault::kDevice, Code::kInternal},
    {cudaErrorHardwareStackError, Fault::kDevice, Code::kInternal},
    {cudaErrorIllegalInstruction, Fault::kDevice, Code::kInternal},
    {cudaErrorMisalignedAddress, Fault::kDevice, Code::kInternal},
    {cudaErrorInvalidAddressSpace, Fault::kDevice, Code::kInternal},
    {cudaErrorInvalidPc, Fault::kDevice, Code::kInternal},
    {cudaErrorLaunchFailure, Fault::kDevice, Code::kInternal},
    {cudaErrorTensorMemoryLeak, Fault::kDevice, Code::kInternal},
    {cudaErrorContained, Fault::kDevice, Code::kInternal},
    {cudaErrorExternalDevice, Fault::kDevice, Code::kInternal},
    {cudaErrorMpsClientTerminated, Fault::kDevice, Code::kInternal},
    {cudaErrorECCUncorrectable, Fault::kDevice, Code::kInternal},
    {cudaErrorNvlinkUncorrectable, Fault::kDevice, Code::kInternal},
    {cudaErrorPriorLaunchFailure, Fault::kDevice, Code::kInternal},
    // CUDA unusable in this process.
    {cudaErrorInitializationError, Fault::kCaller, Code::kUnavailable},
    {cudaErrorStubLibrary, Fault::kCaller, Code::kUnavailable},
    {cudaErrorInsufficientDriver, Fault::kCaller, Code::kUnavailable},
    {cudaErrorCallRequiresNewerDriver, Fault::kCaller, Code::kUnavailable},
    {cudaErrorDevicesUnavailable, Fault::kCaller, Code::kUnavailable},
    {cudaErrorNoDevice, Fault::kCaller, Code::kUnavailable},
    {cudaErrorDeviceNotLicensed, Fault::kCaller, Code::kUnavailable},
    {cudaErrorSoftwareValidityNotEstablished, Fault::kCaller,
     Code::kUnavailable},
    {cudaErrorStartupFailure, Fault::kCaller, Code::kUnavailable},
    {cudaErrorSystemNotReady, Fault::kCaller, Code::kUnavailable},
    {cudaErrorSystemDriverMismatch, Fault::kCaller, Code::kUnavailable},
    {cudaErrorCompatNotSupportedOnDevice, Fault::kCaller, Code::kUnavailable},
    {cudaErrorMpsConnectionFailed, Fault::kCaller, Code::kUnavailable},
    {cudaErrorMpsServerNotReady, Fault::kCaller, Code::kUnavailable},
    {cudaErrorMpsMaxClientsReached, Fault::kCaller, Code::kUnavailable},
    {cudaErrorMpsMaxConnectionsReached, Fault::kCaller, Code::kUnavailable},
    // The caller's mistake.
    {cudaErrorInvalidValue, Fault::kCaller, Code::kInvalidArgument},
    {cudaErrorInvalidDevice, Fault::kCaller, Code::kInvalidArgument},
    {cudaErrorInvalidDevicePointer, Fault::kCaller, Code::kInvalidArgument},
    {cudaErrorInvalidHostPointer, Fault::kCaller, Code::kInvalidArgument},
    {cudaErrorNotSupported, Fault::kCaller, Code::kUnimplemented},
    {cudaErrorNotPermitted, Fault::kCaller, Code::kFailedPrecondition},
    // This handle only.
    {cudaErrorInvalidResourceHandle, Fault::kResource, Code::kInvalidArgument},
    {cudaErrorIllegalState, Fault::kResource, Code::kFailedPrecondition},
    {cudaErrorStreamCaptureUnsupported, Fault::kResource,
     Code::kFailedPrecondition},
    {cudaErrorStreamCaptureInvalidated, Fault::kResource,
     Code::kFailedPrecondition},
    {cudaErrorStreamCaptureMerge, Fault::kResource, Code::kFailedPrecondition},
    {cudaErrorStreamCaptureUnmatched, Fault::kResource,
     Code::kFailedPrecondition},
    {cudaErrorStreamCaptureUnjoined, Fault::kResource,
     Code::kFailedPrecondition},
    {cudaErrorStreamCaptureIsolation, Fault::kResource,
     Code::kFailedPrecondition},
    {cudaErrorStreamCaptureImplicit, Fault::kResource,
     Code::kFailedPrecondition},
    {cudaErrorCapturedEvent, Fault::kResource, Code::kFailedPrecondition},
    {cudaErrorStreamCaptureWrongThread, Fault::kResource,
     Code::kFailedPrecondition},
    {cudaErrorGraphExecUpdateFailure, Fault::kResource,
     Code::kFailedPrecondition},
    // Unknown, or not expected from a pool primitive: this handle only.
    {cudaErrorUnknown, Fault::kResource, Code::kInternal},
    {cudaErrorLaunchOutOfResources, Fault::kResource, Code::kInternal},
    {cudaErrorDeviceUninitialized, Fault::kResource, Code::kInternal},
    {cudaErrorTimeout, Fault::kResource, Code::kInternal},
    {12345, Fault::kResource, Code::kInternal},
};

class CudaErrorTableTest : public ::testing::TestWithParam<TableRow> {};

TEST_P(CudaErrorTableTest, ClassifiesAsDesigned) {
  const TableRow& row = GetParam();
  EXPECT_EQ(ClassifyCudaError(row.error), row.fault)
      << "got " << FaultName(ClassifyCudaError(row.error));
  const ErrorClass error_class = CudaErrorClass(row.error);
  EXPECT_EQ(error_class.fault, row.fault);
  EXPECT_EQ(error_class.code, row.code);
  // CUDA names every device fault with its own code: the call kind never
  // changes the answer.
  const auto error = static_cast<cudaError_t>(row.error);
  EXPECT_EQ(CudaApi::Classify(error, CallKind::kOther), error_class);
  EXPECT_EQ(CudaApi::Classify(error, CallKind::kCompletion), error_class);
}

TEST_P(CudaErrorTableTest, StatusCarriesFaultAndCode) {
  const TableRow& row = GetParam();
  const absl::Status status =
      Runtime::ToStatus(static_cast<cudaError_t>(row.error), "StreamQuery", 0,
                        CallKind::kCompletion);
  EXPECT_EQ(status.code(), row.code) << status;
  EXPECT_EQ(FaultOf(status), row.fault) << status;
}

std::string RowName(const ::testing::TestParamInfo<TableRow>& info) {
  std::string name = absl::StrCat(CudaErrorName(info.param.error));
  if (name.rfind("cuda", 0) != 0) name = absl::StrCat("code", info.param.error);
  return name;
}

INSTANTIATE_TEST_SUITE_P(EveryRow, CudaErrorTableTest,
                         ::testing::ValuesIn(kCudaTable), RowName);

TEST(CudaErrorsTest, NamesAndDescriptionsComeFromTheRuntime) {
  EXPECT_EQ(CudaErrorName(cudaErrorNoDevice), "cudaErrorNoDevice");
  EXPECT_EQ(CudaErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress");
  EXPECT_EQ(CudaErrorDescription(cudaErrorIllegalAddress),
            cudaGetErrorString(cudaErrorIllegalAddress));
  EXPECT_FALSE(CudaErrorDescription(cudaErrorNoDevice).empty());
}

// --- The choke point's messages ----------------------------------------------

TEST(CudaToStatusTest, SuccessIsOk) {
  EXPECT_TRUE(Runtime::ToStatus(cudaSuccess, "StreamQuery", 0).ok());
}

TEST(CudaToStatusTest, MessageNamesCallDeviceErrorNumberAndDescription) {
  const absl::Status status = Runtime::ToStatus(
      cudaErrorIllegalAddress, "StreamSynchronize", 3, CallKind::kCompletion);
  EXPECT_EQ(status.code(), Code::kInternal);
  EXPECT_EQ(FaultOf(status), Fault::kDevice);
  EXPECT_EQ(status.message(),
            absl::StrCat("cudaStreamSynchronize on device 3: "
                         "cudaErrorIllegalAddress (700): ",
                         cudaGetErrorString(cudaErrorIllegalAddress)));
}

TEST(CudaToStatusTest, DeviceIndependentCallsNameNoDevice) {
  const absl::Status status = Runtime::ToStatus(
      cudaErrorNoDevice, "GetDeviceCount", Runtime::kNoDevice);
  EXPECT_EQ(status.code(), Code::kUnavailable);
  EXPECT_EQ(FaultOf(status), Fault::kCaller);
  EXPECT_THAT(
      std::string(status.message()),
      ::testing::StartsWith("cudaGetDeviceCount: cudaErrorNoDevice (100): "));
}

TEST(CudaToStatusTest, UnknownCodeKeepsItsNumber) {
  const absl::Status status =
      Runtime::ToStatus(static_cast<cudaError_t>(12345), "EventRecord", 0);
  EXPECT_EQ(FaultOf(status), Fault::kResource);
  EXPECT_THAT(std::string(status.message()), HasSubstr("(12345)"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("cudaEventRecord"));
}

// --- The factory -------------------------------------------------------------

TEST(CudaFactoryTest, IsBuilt) { EXPECT_TRUE(CudaBackendBuilt()); }

TEST(CudaFactoryTest, WithoutUsableRuntimeReportsTheRuntimesOwnError) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeCudaBackend();
  if (error == cudaSuccess && count > 0) {
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->name(), "cuda");
    GTEST_SKIP() << "this machine has " << count << " CUDA device(s)";
  }
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), Code::kUnavailable) << backend.status();
  EXPECT_EQ(FaultOf(backend.status()), Fault::kCaller);
  const std::string message(backend.status().message());
  EXPECT_THAT(message, HasSubstr("cudaGetDeviceCount"));
  EXPECT_THAT(message, HasSubstr(cudaGetErrorName(error)));
  EXPECT_THAT(message, HasSubstr(cudaGetErrorString(error)));
}

// --- On a device -------------------------------------------------------------

// Runs each test on device 0 of a real CUDA runtime; skips with the
// runtime's reason where there is none.
class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> backend = MakeCudaBackend();
    if (!backend.ok()) GTEST_SKIP() << backend.status().message();
    backend_ = *std::move(backend);
    absl::StatusOr<int> count = backend_->DeviceCount();
    ASSERT_TRUE(count.ok()) << count.status();
    device_count_ = *count;
  }

  static int CurrentDevice() {
    int device = -1;
    EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
    return device;
  }

  std::unique_ptr<Backend> backend_;
  int device_count_ = 0;
};

// Holds a stream busy until released, without a kernel (host functions run
// in stream order). The flag is shared with the callback so that a test
// failing early cannot leave the callback reading a destroyed blocker.
class StreamBlocker {
 public:
  explicit StreamBlocker(cudaStream_t stream)
      : released_(std::make_shared<std::atomic<bool>>(false)) {
    auto* flag = new std::shared_ptr<std::atomic<bool>>(released_);
    EXPECT_EQ(cudaLaunchHostFunc(stream, &StreamBlocker::Wait, flag),
              cudaSuccess);
  }
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

TEST_F(CudaDeviceTest, NameAndCount) {
  EXPECT_EQ(backend_->name(), "cuda");
  EXPECT_GE(device_count_, 1);
}

TEST_F(CudaDeviceTest, StreamCreateQueryResetDestroy) {
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_TRUE(backend_->QueryStream(0, *stream).ok());
  absl::StatusOr<CaptureStatus> capture =
      backend_->GetCaptureStatus(0, *stream);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(*capture, CaptureStatus::kNone);
  EXPECT_TRUE(backend_->ResetStreamAttributes(0, *stream).ok());
  EXPECT_TRUE(backend_->SynchronizeStream(0, *stream).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}

TEST_F(CudaDeviceTest, PendingWorkIsNotReady) {
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  {
    StreamBlocker blocker(static_cast<cudaStream_t>(*stream));
    const absl::Status pending = backend_->QueryStream(0, *stream);
    EXPECT_EQ(FaultOf(pending), Fault::kNotReady) << pending;
    EXPECT_EQ(pending.code(), Code::kUnavailable);
    blocker.Release();
    EXPECT_TRUE(backend_->SynchronizeStream(0, *stream).ok());
  }
  EXPECT_TRUE(backend_->QueryStream(0, *stream).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}

TEST_F(CudaDeviceTest, EndCaptureEndsItAndQueriesNeverBreakACapture) {
  absl::StatusOr<NativeStream> capturing = backend_->CreateStream(0, {});
  absl::StatusOr<NativeStream> other = backend_->CreateStream(0, {});
  ASSERT_TRUE(capturing.ok() && other.ok());
  ASSERT_EQ(cudaStreamBeginCapture(static_cast<cudaStream_t>(*capturing),
                                   cudaStreamCaptureModeGlobal),
            cudaSuccess);
  // In global mode a plain cudaStreamQuery here would be prohibited and
  // invalidate the capture; the backend switches to Relaxed around it.
  EXPECT_TRUE(backend_->QueryStream(0, *other).ok());
  absl::StatusOr<CaptureStatus> capture =
      backend_->GetCaptureStatus(0, *capturing);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(*capture, CaptureStatus::kActive);
  // ... and restores the thread's mode afterwards.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal);
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);

  EXPECT_TRUE(backend_->EndCapture(0, *capturing).ok());
  capture = backend_->GetCaptureStatus(0, *capturing);
  ASSERT_TRUE(capture.ok());
  EXPECT_EQ(*capture, CaptureStatus::kNone);
  EXPECT_TRUE(backend_->DestroyStream(0, *capturing).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, *other).ok());
}

// Every call a pool makes outside stream order, issued while a global-mode
// capture is under way: on the capturing thread itself (the strictest case)
// and on another thread (a pool returning or creating on a worker). None may
// fail or invalidate the capture.
TEST_F(CudaDeviceTest, PoolCallsNeverBreakAGlobalCapture) {
  absl::StatusOr<NativeStream> capturing = backend_->CreateStream(0, {});
  ASSERT_TRUE(capturing.ok()) << capturing.status();
  ASSERT_EQ(cudaStreamBeginCapture(static_cast<cudaStream_t>(*capturing),
                                   cudaStreamCaptureModeGlobal),
            cudaSuccess);
  Backend& backend = *backend_;
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
        backend_->GetCaptureStatus(0, *capturing);
    return capture.ok() && *capture == CaptureStatus::kActive;
  };

  EXPECT_EQ(pool_calls(), "") << "on the capturing thread";
  EXPECT_TRUE(still_capturing()) << "broken by a call on the capturing thread";
  std::string other_thread;
  std::thread([&] { other_thread = pool_calls(); }).join();
  EXPECT_EQ(other_thread, "") << "on another thread";
  EXPECT_TRUE(still_capturing()) << "broken by a call on another thread";

  EXPECT_TRUE(backend_->EndCapture(0, *capturing).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, *capturing).ok());
}

// cudaStreamEndCapture must come from the thread that began a global or
// thread-local capture. A lease returned on another thread therefore cannot
// have its capture ended there: the backend reports the runtime's error as a
// resource fault and the stream is still capturing (what the pool then does
// with it is the engine's choice). The owning thread can still end it.
TEST_F(CudaDeviceTest, EndCaptureFromAnotherThreadIsRefusedAndChangesNothing) {
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_EQ(cudaStreamBeginCapture(static_cast<cudaStream_t>(*stream),
                                   cudaStreamCaptureModeGlobal),
            cudaSuccess);
  absl::Status ended;
  std::thread([&] { ended = backend_->EndCapture(0, *stream); }).join();
  EXPECT_EQ(FaultOf(ended), Fault::kResource) << ended;
  EXPECT_THAT(std::string(ended.message()),
              HasSubstr("cudaErrorStreamCaptureWrongThread"));
  absl::StatusOr<CaptureStatus> capture =
      backend_->GetCaptureStatus(0, *stream);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(*capture, CaptureStatus::kActive);
  EXPECT_TRUE(backend_->EndCapture(0, *stream).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}

TEST_F(CudaDeviceTest, EventsRecordQueryWait) {
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<NativeEvent> event = backend_->CreateEvent(0, {});
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE(backend_->QueryEvent(0, *event).ok());  // never recorded
  {
    StreamBlocker blocker(static_cast<cudaStream_t>(*stream));
    EXPECT_TRUE(backend_->RecordEvent(0, *event, *stream).ok());
    EXPECT_EQ(FaultOf(backend_->QueryEvent(0, *event)), Fault::kNotReady);
    blocker.Release();
    EXPECT_TRUE(backend_->SynchronizeEvent(0, *event).ok());
  }
  EXPECT_TRUE(backend_->QueryEvent(0, *event).ok());
  EXPECT_TRUE(backend_->StreamWaitEvent(0, *stream, *event).ok());
  EXPECT_TRUE(backend_->DestroyEvent(0, *event).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}

TEST_F(CudaDeviceTest, EventConfigs) {
  for (const EventConfig& config :
       {EventConfig{true, false, false}, EventConfig{false, true, false},
        EventConfig{true, false, true}}) {
    absl::StatusOr<NativeEvent> event = backend_->CreateEvent(0, config);
    ASSERT_TRUE(event.ok()) << config.ToString() << ": " << event.status();
    EXPECT_TRUE(backend_->DestroyEvent(0, *event).ok());
  }
}

TEST_F(CudaDeviceTest, InterprocessEventNeedsDisableTiming) {
  const absl::StatusOr<NativeEvent> event =
      backend_->CreateEvent(0, EventConfig{false, false, true});
  EXPECT_EQ(event.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(event.status()), Fault::kCaller);
}

TEST_F(CudaDeviceTest, AllocateAndFree) {
  for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
    absl::StatusOr<void*> ptr = backend_->Allocate(0, 1 << 20, kind);
    ASSERT_TRUE(ptr.ok()) << ptr.status();
    EXPECT_NE(*ptr, nullptr);
    EXPECT_TRUE(backend_->Free(0, *ptr, kind).ok());
  }
  EXPECT_EQ(FaultOf(backend_->Allocate(0, 0, MemoryKind::kDevice).status()),
            Fault::kCaller);
}

TEST_F(CudaDeviceTest, OutOfMemoryIsClassifiedAndClearsTheLastError) {
  const absl::StatusOr<void*> ptr =
      backend_->Allocate(0, size_t{1} << 60, MemoryKind::kDevice);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), Code::kResourceExhausted) << ptr.status();
  EXPECT_EQ(FaultOf(ptr.status()), Fault::kOutOfMemory);
  EXPECT_THAT(std::string(ptr.status().message()),
              HasSubstr("cudaErrorMemoryAllocation"));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CudaDeviceTest, MemoryInfo) {
  absl::StatusOr<MemoryInfo> info = backend_->GetMemoryInfo(0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->total_bytes, 0u);
  EXPECT_LE(info->free_bytes, info->total_bytes);
}

TEST_F(CudaDeviceTest, CurrentDeviceIsRestored) {
  const int last = device_count_ - 1;
  ASSERT_EQ(cudaSetDevice(last), cudaSuccess);
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(CurrentDevice(), last);
  absl::StatusOr<void*> ptr = backend_->Allocate(0, 4096, MemoryKind::kDevice);
  ASSERT_TRUE(ptr.ok());
  EXPECT_EQ(CurrentDevice(), last);
  EXPECT_TRUE(backend_->Free(0, *ptr, MemoryKind::kDevice).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
  EXPECT_EQ(CurrentDevice(), last);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST_F(CudaDeviceTest, OutOfRangeDeviceIsTheCallers) {
  for (int device : {-1, device_count_}) {
    const absl::StatusOr<NativeStream> stream =
        backend_->CreateStream(device, {});
    EXPECT_EQ(stream.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(FaultOf(stream.status()), Fault::kCaller);
    EXPECT_EQ(FaultOf(backend_->SetCurrentDevice(device)), Fault::kCaller);
  }
}

TEST_F(CudaDeviceTest, PriorityOutsideTheRuntimesRangeIsRefused) {
  int least = 0;
  int greatest = 0;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  for (int priority : {greatest, least}) {
    StreamConfig config;
    config.priority = priority;
    absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, config);
    ASSERT_TRUE(stream.ok()) << priority << ": " << stream.status();
    int actual = 99;
    EXPECT_EQ(
        cudaStreamGetPriority(static_cast<cudaStream_t>(*stream), &actual),
        cudaSuccess);
    EXPECT_EQ(actual, priority);
    EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
  }
  for (int priority : {greatest - 1, least + 1}) {
    StreamConfig config;
    config.priority = priority;
    const absl::StatusOr<NativeStream> stream =
        backend_->CreateStream(0, config);
    EXPECT_EQ(stream.status().code(), Code::kInvalidArgument) << priority;
    EXPECT_EQ(FaultOf(stream.status()), Fault::kCaller);
  }
}

TEST_F(CudaDeviceTest, CuMaskIsHipOnly) {
  StreamConfig config;
  config.cu_mask = {0xffu};
  const absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, config);
  EXPECT_EQ(stream.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(stream.status()), Fault::kCaller);
  EXPECT_THAT(std::string(stream.status().message()), HasSubstr("cu_mask"));
}

}  // namespace
}  // namespace gpupool
