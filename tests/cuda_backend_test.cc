// Tests of the CUDA backend: every row of the CUDA error table and the
// messages of the error choke point (no GPU needed), the shared
// RuntimeBackend template over a scripted fake runtime (no GPU needed; it
// runs the logic HIP shares), the factory's answer on a machine without a
// GPU, and basic primitive checks that run on a GPU and skip elsewhere with
// the runtime's own reason.

#include "gpupool/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
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

// --- The shared template over a fake runtime ---------------------------------
//
// RuntimeBackend<Api> holds all the CUDA/HIP logic. These tests drive it over
// a scripted fake runtime so that the logic is checked on machines without a
// GPU (CI): device guard, Relaxed capture mode, priority validation, capture
// teardown, OOM last-error clearing, attribute reset, CU masks.

struct FakeStream {
  int device;
};
struct FakeEvent {
  int device;
};
struct FakeGraph {};

enum FakeError {
  kFakeSuccess = 0,
  kFakeOutOfMemory = 2,
  kFakeInvalidValue = 11,
  kFakeNoDevice = 100,
  kFakeBadHandle = 400,
  kFakeNotReady = 600,
  kFakeIllegalAddress = 700,
  kFakeCaptureInvalidated = 901,
};
enum FakeCaptureMode { kFakeGlobal, kFakeThreadLocal, kFakeRelaxed };
enum FakeCaptureStatus { kFakeNone, kFakeActive, kFakeInvalidated };

// The fake runtime's state, reset by each test. Single-threaded tests only.
struct FakeRuntime {
  static inline int device_count = 2;
  static inline FakeError device_count_error = kFakeSuccess;
  static inline int current_device = 0;
  static inline int set_device_calls = 0;
  static inline FakeCaptureMode mode = kFakeGlobal;
  static inline int exchange_calls = 0;
  static inline int least_priority = 1;
  static inline int greatest_priority = -1;

  static inline FakeError create_error = kFakeSuccess;
  static inline FakeError query_error = kFakeSuccess;
  static inline FakeError malloc_error = kFakeSuccess;
  static inline FakeError end_capture_error = kFakeSuccess;
  static inline bool end_capture_yields_graph = false;
  static inline FakeCaptureStatus capture_status = kFakeNone;
  static inline FakeCaptureStatus capture_status_after_end = kFakeNone;
  static inline FakeError last_error = kFakeSuccess;
  static inline int max_window_bytes = 0;

  // What the runtime observed.
  static inline int streams_created = 0;
  static inline int cu_mask_streams_created = 0;
  static inline int events_created = 0;
  static inline int graphs_destroyed = 0;
  static inline int attribute_queries = 0;
  static inline int windows_cleared = 0;
  static inline int device_at_last_call = -1;
  static inline FakeCaptureMode mode_at_last_query = kFakeGlobal;
  static inline unsigned last_flags = 0;
  static inline int last_priority = 0;

  static void Reset() {
    device_count = 2;
    device_count_error = kFakeSuccess;
    current_device = 0;
    set_device_calls = 0;
    mode = kFakeGlobal;
    exchange_calls = 0;
    least_priority = 1;
    greatest_priority = -1;
    create_error = query_error = malloc_error = end_capture_error =
        kFakeSuccess;
    end_capture_yields_graph = false;
    capture_status = capture_status_after_end = kFakeNone;
    last_error = kFakeSuccess;
    max_window_bytes = 0;
    streams_created = cu_mask_streams_created = events_created = 0;
    graphs_destroyed = attribute_queries = windows_cleared = 0;
    device_at_last_call = -1;
    mode_at_last_query = kFakeGlobal;
    last_flags = 0;
    last_priority = 0;
  }
};

// A CUDA-shaped traits struct over FakeRuntime.
struct FakeApi {
  using Error = FakeError;
  using Stream = FakeStream*;
  using Event = FakeEvent*;
  using Graph = FakeGraph*;
  using CaptureMode = FakeCaptureMode;
  using CaptureStatus = FakeCaptureStatus;
  using R = FakeRuntime;

  static constexpr std::string_view kName = "fake";
  static constexpr absl::string_view kCallPrefix = "fake";
  static constexpr absl::string_view kHostAllocCall = "HostAlloc";
  static constexpr absl::string_view kHostFreeCall = "FreeHost";
  static constexpr Error kSuccess = kFakeSuccess;
  static constexpr Error kErrorNotReady = kFakeNotReady;
  static constexpr Error kErrorCaptureInvalidated = kFakeCaptureInvalidated;
  static constexpr unsigned kStreamDefault = 0;
  static constexpr unsigned kStreamNonBlocking = 1;
  static constexpr unsigned kEventDefault = 0;
  static constexpr unsigned kEventBlockingSync = 1;
  static constexpr unsigned kEventDisableTiming = 2;
  static constexpr unsigned kEventInterprocess = 4;
  static constexpr unsigned kHostAllocDefault = 0;
  static constexpr CaptureMode kCaptureModeRelaxed = kFakeRelaxed;
  static constexpr CaptureStatus kCaptureStatusNone = kFakeNone;
  static constexpr CaptureStatus kCaptureStatusActive = kFakeActive;
  static constexpr CaptureStatus kCaptureStatusInvalidated = kFakeInvalidated;
  static constexpr bool kSupportsCuMask = false;
  static constexpr bool kHasAccessPolicyWindow = true;

  static ErrorClass Classify(Error error, CallKind) {
    switch (error) {
      case kFakeSuccess:
        return {Fault::kNone, Code::kOk};
      case kFakeOutOfMemory:
        return {Fault::kOutOfMemory, Code::kResourceExhausted};
      case kFakeInvalidValue:
        return {Fault::kCaller, Code::kInvalidArgument};
      case kFakeNoDevice:
        return {Fault::kCaller, Code::kUnavailable};
      case kFakeNotReady:
        return {Fault::kNotReady, Code::kUnavailable};
      case kFakeIllegalAddress:
        return {Fault::kDevice, Code::kInternal};
      default:
        return {Fault::kResource, Code::kInternal};
    }
  }
  static const char* ErrorName(Error error) {
    switch (error) {
      case kFakeOutOfMemory:
        return "fakeErrorOutOfMemory";
      case kFakeNoDevice:
        return "fakeErrorNoDevice";
      case kFakeNotReady:
        return "fakeErrorNotReady";
      case kFakeIllegalAddress:
        return "fakeErrorIllegalAddress";
      default:
        return "fakeErrorOther";
    }
  }
  static const char* ErrorString(Error error) {
    return error == kFakeNoDevice ? "no fake device" : ErrorName(error);
  }
  static Error GetLastError() { return std::exchange(R::last_error, kSuccess); }

  static Error GetDeviceCount(int* count) {
    *count = R::device_count;
    return R::device_count_error;
  }
  static Error GetDevice(int* device) {
    *device = R::current_device;
    return kSuccess;
  }
  static Error SetDevice(int device) {
    ++R::set_device_calls;
    R::current_device = device;
    return kSuccess;
  }
  static Error DeviceGetStreamPriorityRange(int* least, int* greatest) {
    *least = R::least_priority;
    *greatest = R::greatest_priority;
    return kSuccess;
  }
  static Error MaxAccessPolicyWindowBytes(int, int* bytes) {
    ++R::attribute_queries;
    *bytes = R::max_window_bytes;
    return kSuccess;
  }

  static Error StreamCreateWithPriority(Stream* stream, unsigned flags,
                                        int priority) {
    R::device_at_last_call = R::current_device;
    R::last_flags = flags;
    R::last_priority = priority;
    if (R::create_error != kSuccess) return R::create_error;
    ++R::streams_created;
    *stream = new FakeStream{R::current_device};
    return kSuccess;
  }
  static Error StreamDestroy(Stream stream) {
    R::device_at_last_call = R::current_device;
    delete stream;
    return kSuccess;
  }
  static Error StreamQuery(Stream) {
    R::mode_at_last_query = R::mode;
    R::device_at_last_call = R::current_device;
    return R::query_error;
  }
  static Error StreamSynchronize(Stream stream) { return StreamQuery(stream); }
  static Error StreamIsCapturing(Stream, CaptureStatus* status) {
    *status = R::capture_status;
    return kSuccess;
  }
  static Error StreamEndCapture(Stream, Graph* graph) {
    *graph = R::end_capture_yields_graph ? new FakeGraph : nullptr;
    R::capture_status = R::capture_status_after_end;
    return R::end_capture_error;
  }
  static Error GraphDestroy(Graph graph) {
    ++R::graphs_destroyed;
    delete graph;
    return kSuccess;
  }
  static Error StreamWaitEvent(Stream, Event) { return kSuccess; }
  static Error ThreadExchangeStreamCaptureMode(CaptureMode* mode) {
    ++R::exchange_calls;
    std::swap(*mode, R::mode);
    return kSuccess;
  }
  static Error ClearAccessPolicyWindow(Stream) {
    ++R::windows_cleared;
    return kSuccess;
  }

  static Error EventCreateWithFlags(Event* event, unsigned flags) {
    R::last_flags = flags;
    ++R::events_created;
    *event = new FakeEvent{R::current_device};
    return kSuccess;
  }
  static Error EventDestroy(Event event) {
    delete event;
    return kSuccess;
  }
  static Error EventRecord(Event, Stream) {
    R::device_at_last_call = R::current_device;
    return kSuccess;
  }
  static Error EventQuery(Event) {
    R::mode_at_last_query = R::mode;
    return R::query_error;
  }
  static Error EventSynchronize(Event event) { return EventQuery(event); }

  static Error Malloc(void** ptr, size_t bytes) {
    R::device_at_last_call = R::current_device;
    R::mode_at_last_query = R::mode;
    if (R::malloc_error != kSuccess) {
      R::last_error = R::malloc_error;  // as the runtimes do
      return R::malloc_error;
    }
    *ptr = ::operator new(bytes);
    return kSuccess;
  }
  static Error Free(void* ptr) {
    R::device_at_last_call = R::current_device;
    ::operator delete(ptr);
    return kSuccess;
  }
  static Error HostAlloc(void** ptr, size_t bytes, unsigned) {
    return Malloc(ptr, bytes);
  }
  static Error FreeHost(void* ptr) { return Free(ptr); }
  static Error MemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    R::device_at_last_call = R::current_device;
    *free_bytes = 1 << 20;
    *total_bytes = 1 << 30;
    return kSuccess;
  }
};

// A HIP-shaped variant: CU masks (blocking, priority 0 only), no
// access-policy window.
struct FakeHipApi : FakeApi {
  static constexpr std::string_view kName = "fakehip";
  static constexpr bool kSupportsCuMask = true;
  static constexpr int kCuMaskStreamPriority = 0;
  static constexpr bool kCuMaskStreamNonBlocking = false;
  static constexpr bool kHasAccessPolicyWindow = false;
  static Error ExtStreamCreateWithCuMask(Stream* stream, uint32_t words,
                                         const uint32_t*) {
    EXPECT_GT(words, 0u);
    ++R::cu_mask_streams_created;
    *stream = new FakeStream{R::current_device};
    return kSuccess;
  }
};

using FakeBackend = ::gpupool::runtime_internal::RuntimeBackend<FakeApi>;
using FakeHipBackend = ::gpupool::runtime_internal::RuntimeBackend<FakeHipApi>;

class RuntimeTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeRuntime::Reset();
    absl::StatusOr<std::unique_ptr<Backend>> backend = FakeBackend::Create();
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }

  // Creates a default stream on `device`, failing the test on error.
  NativeStream NewStream(int device) {
    absl::StatusOr<NativeStream> stream = backend_->CreateStream(device, {});
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? *stream : nullptr;
  }

  std::unique_ptr<Backend> backend_;
};

TEST(RuntimeTemplateCreateTest, ReportsTheRuntimesReasonForNoDevice) {
  FakeRuntime::Reset();
  FakeRuntime::device_count_error = kFakeNoDevice;
  absl::StatusOr<std::unique_ptr<Backend>> backend = FakeBackend::Create();
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), Code::kUnavailable);
  EXPECT_EQ(FaultOf(backend.status()), Fault::kCaller);
  EXPECT_EQ(backend.status().message(),
            "fakeGetDeviceCount: fakeErrorNoDevice (100): no fake device");
}

TEST(RuntimeTemplateCreateTest, ZeroDevicesIsUnavailable) {
  FakeRuntime::Reset();
  FakeRuntime::device_count = 0;
  absl::StatusOr<std::unique_ptr<Backend>> backend = FakeBackend::Create();
  EXPECT_EQ(backend.status().code(), Code::kUnavailable);
  EXPECT_EQ(FaultOf(backend.status()), Fault::kCaller);
}

TEST_F(RuntimeTemplateTest, NameAndDeviceCount) {
  EXPECT_EQ(backend_->name(), "fake");
  absl::StatusOr<int> count = backend_->DeviceCount();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 2);
}

TEST_F(RuntimeTemplateTest, OutOfRangeDeviceChangesNothing) {
  for (int device : {-1, 2, 100}) {
    EXPECT_EQ(FaultOf(backend_->CreateStream(device, {}).status()),
              Fault::kCaller);
    EXPECT_EQ(FaultOf(backend_->QueryStream(device, nullptr)), Fault::kCaller);
    EXPECT_EQ(
        FaultOf(backend_->Allocate(device, 8, MemoryKind::kDevice).status()),
        Fault::kCaller);
    EXPECT_EQ(FaultOf(backend_->SetCurrentDevice(device)), Fault::kCaller);
  }
  EXPECT_EQ(FakeRuntime::set_device_calls, 0);
  EXPECT_EQ(FakeRuntime::streams_created, 0);
}

TEST_F(RuntimeTemplateTest, CallsRunOnTheirDeviceAndRestoreTheCallers) {
  FakeRuntime::current_device = 0;
  NativeStream stream = NewStream(1);
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_EQ(static_cast<FakeStream*>(stream)->device, 1);
  EXPECT_EQ(FakeRuntime::current_device, 0);
  EXPECT_EQ(FakeRuntime::set_device_calls, 2);  // there and back

  absl::StatusOr<void*> ptr = backend_->Allocate(1, 64, MemoryKind::kDevice);
  ASSERT_TRUE(ptr.ok());
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_EQ(FakeRuntime::current_device, 0);
  EXPECT_TRUE(backend_->Free(1, *ptr, MemoryKind::kDevice).ok());
  EXPECT_TRUE(backend_->GetMemoryInfo(1).ok());
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_TRUE(backend_->DestroyStream(1, stream).ok());
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_EQ(FakeRuntime::current_device, 0);
}

TEST_F(RuntimeTemplateTest, DeviceIsSetOnlyWhenDifferent) {
  FakeRuntime::current_device = 1;
  NativeStream stream = NewStream(1);
  EXPECT_EQ(FakeRuntime::set_device_calls, 0);
  EXPECT_TRUE(backend_->DestroyStream(1, stream).ok());
  EXPECT_EQ(FakeRuntime::set_device_calls, 0);
}

TEST_F(RuntimeTemplateTest, QueriesOfAStreamNeedNoDeviceSwitch) {
  NativeStream stream = NewStream(1);
  FakeRuntime::set_device_calls = 0;
  EXPECT_TRUE(backend_->QueryStream(1, stream).ok());
  EXPECT_EQ(FakeRuntime::set_device_calls, 0);
  // The null stream is the current device's: that one needs the switch.
  EXPECT_TRUE(backend_->QueryStream(1, nullptr).ok());
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_EQ(FakeRuntime::current_device, 0);
  EXPECT_TRUE(backend_->RecordEvent(1, nullptr, nullptr).ok());
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_EQ(FakeRuntime::current_device, 0);
  EXPECT_TRUE(backend_->DestroyStream(1, stream).ok());
}

TEST_F(RuntimeTemplateTest, QueriesRunInRelaxedModeAndRestoreIt) {
  NativeStream stream = NewStream(0);
  FakeRuntime::mode = kFakeThreadLocal;
  EXPECT_TRUE(backend_->QueryStream(0, stream).ok());
  EXPECT_EQ(FakeRuntime::mode_at_last_query, kFakeRelaxed);
  EXPECT_EQ(FakeRuntime::mode, kFakeThreadLocal);
  EXPECT_TRUE(backend_->QueryEvent(0, nullptr).ok());
  EXPECT_EQ(FakeRuntime::mode_at_last_query, kFakeRelaxed);
  EXPECT_TRUE(backend_->SynchronizeStream(0, stream).ok());
  EXPECT_EQ(FakeRuntime::mode_at_last_query, kFakeRelaxed);
  EXPECT_TRUE(backend_->SynchronizeEvent(0, nullptr).ok());
  EXPECT_EQ(FakeRuntime::mode_at_last_query, kFakeRelaxed);
  EXPECT_EQ(FakeRuntime::mode, kFakeThreadLocal);
  // Allocation is "potentially unsafe" during capture too.
  absl::StatusOr<void*> ptr = backend_->Allocate(0, 8, MemoryKind::kDevice);
  ASSERT_TRUE(ptr.ok());
  EXPECT_EQ(FakeRuntime::mode_at_last_query, kFakeRelaxed);
  EXPECT_EQ(FakeRuntime::mode, kFakeThreadLocal);
  EXPECT_TRUE(backend_->Free(0, *ptr, MemoryKind::kDevice).ok());
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_F(RuntimeTemplateTest, AlreadyRelaxedThreadNeedsNoRestore) {
  FakeRuntime::mode = kFakeRelaxed;
  EXPECT_TRUE(backend_->QueryEvent(0, nullptr).ok());
  EXPECT_EQ(FakeRuntime::exchange_calls, 1);
  EXPECT_EQ(FakeRuntime::mode, kFakeRelaxed);
}

TEST_F(RuntimeTemplateTest, QueryFaultsKeepTheirClass) {
  NativeStream stream = NewStream(0);
  FakeRuntime::query_error = kFakeNotReady;
  const absl::Status pending = backend_->QueryStream(0, stream);
  EXPECT_EQ(FaultOf(pending), Fault::kNotReady);
  EXPECT_EQ(pending.code(), Code::kUnavailable);
  EXPECT_EQ(pending.message(), "fakeStreamQuery: fakeErrorNotReady (600)");
  EXPECT_EQ(FaultOf(backend_->QueryEvent(0, nullptr)), Fault::kNotReady);
  FakeRuntime::query_error = kFakeIllegalAddress;
  const absl::Status dead = backend_->QueryStream(0, stream);
  EXPECT_EQ(FaultOf(dead), Fault::kDevice);
  EXPECT_THAT(
      std::string(dead.message()),
      HasSubstr("fakeStreamQuery on device 0: fakeErrorIllegalAddress"));
  FakeRuntime::query_error = kFakeSuccess;
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_F(RuntimeTemplateTest, PrioritiesOutsideTheRuntimesRangeAreRefused) {
  for (int priority : {-1, 0, 1}) {
    StreamConfig config;
    config.priority = priority;
    absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, config);
    ASSERT_TRUE(stream.ok()) << stream.status();
    EXPECT_EQ(FakeRuntime::last_priority, priority);
    EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
  }
  const int created = FakeRuntime::streams_created;
  for (int priority : {-2, 2}) {
    StreamConfig config;
    config.priority = priority;
    const absl::StatusOr<NativeStream> stream =
        backend_->CreateStream(1, config);
    EXPECT_EQ(stream.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(FaultOf(stream.status()), Fault::kCaller);
    EXPECT_THAT(std::string(stream.status().message()),
                HasSubstr("outside [-1, 1]"));
  }
  EXPECT_EQ(FakeRuntime::streams_created, created);
  EXPECT_EQ(FakeRuntime::current_device, 0);
}

TEST_F(RuntimeTemplateTest, StreamFlagsFollowTheConfig) {
  StreamConfig config;
  config.non_blocking = false;
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, config);
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(FakeRuntime::last_flags, FakeApi::kStreamDefault);
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
  config.non_blocking = true;
  stream = backend_->CreateStream(0, config);
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(FakeRuntime::last_flags, FakeApi::kStreamNonBlocking);
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}

TEST_F(RuntimeTemplateTest, CuMaskWithoutRuntimeSupportIsRefused) {
  StreamConfig config;
  config.cu_mask = {0xf};
  const absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, config);
  EXPECT_EQ(stream.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(stream.status()), Fault::kCaller);
  EXPECT_EQ(FakeRuntime::streams_created, 0);
}

TEST(RuntimeTemplateCuMaskTest, CuMaskStreamsOnlyWithWhatTheCallCreates) {
  FakeRuntime::Reset();
  absl::StatusOr<std::unique_ptr<Backend>> backend = FakeHipBackend::Create();
  ASSERT_TRUE(backend.ok());
  StreamConfig config;
  config.cu_mask = {0xf, 0x0};
  config.non_blocking = true;  // the default, which the call cannot honour
  EXPECT_EQ(FaultOf((*backend)->CreateStream(0, config).status()),
            Fault::kCaller);
  config.non_blocking = false;
  config.priority = -1;
  EXPECT_EQ(FaultOf((*backend)->CreateStream(0, config).status()),
            Fault::kCaller);
  EXPECT_EQ(FakeRuntime::cu_mask_streams_created, 0);
  config.priority = 0;
  absl::StatusOr<NativeStream> stream = (*backend)->CreateStream(1, config);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(FakeRuntime::cu_mask_streams_created, 1);
  EXPECT_EQ(FakeRuntime::streams_created, 0);
  EXPECT_EQ(static_cast<FakeStream*>(*stream)->device, 1);
  // No access-policy window on this runtime: nothing to query or clear.
  EXPECT_TRUE((*backend)->ResetStreamAttributes(1, *stream).ok());
  EXPECT_EQ(FakeRuntime::attribute_queries, 0);
  EXPECT_TRUE((*backend)->DestroyStream(1, *stream).ok());
}

TEST_F(RuntimeTemplateTest, EndCaptureDestroysTheGraph) {
  NativeStream stream = NewStream(0);
  FakeRuntime::capture_status = kFakeActive;
  absl::StatusOr<CaptureStatus> capture = backend_->GetCaptureStatus(0, stream);
  ASSERT_TRUE(capture.ok());
  EXPECT_EQ(*capture, CaptureStatus::kActive);
  FakeRuntime::end_capture_yields_graph = true;
  EXPECT_TRUE(backend_->EndCapture(0, stream).ok());
  EXPECT_EQ(FakeRuntime::graphs_destroyed, 1);
  capture = backend_->GetCaptureStatus(0, stream);
  ASSERT_TRUE(capture.ok());
  EXPECT_EQ(*capture, CaptureStatus::kNone);
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_F(RuntimeTemplateTest, EndingAnInvalidatedCaptureSucceeds) {
  NativeStream stream = NewStream(0);
  FakeRuntime::capture_status = kFakeInvalidated;
  absl::StatusOr<CaptureStatus> capture = backend_->GetCaptureStatus(0, stream);
  ASSERT_TRUE(capture.ok());
  EXPECT_EQ(*capture, CaptureStatus::kInvalidated);
  FakeRuntime::end_capture_error = kFakeCaptureInvalidated;
  EXPECT_TRUE(backend_->EndCapture(0, stream).ok());
  EXPECT_EQ(FakeRuntime::graphs_destroyed, 0);
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_F(RuntimeTemplateTest, EndCaptureThatLeavesTheStreamCapturingFails) {
  NativeStream stream = NewStream(0);
  FakeRuntime::capture_status = kFakeActive;
  FakeRuntime::capture_status_after_end = kFakeActive;
  FakeRuntime::end_capture_error = kFakeBadHandle;
  EXPECT_EQ(FaultOf(backend_->EndCapture(0, stream)), Fault::kResource);
  FakeRuntime::end_capture_error = kFakeSuccess;
  EXPECT_EQ(FaultOf(backend_->EndCapture(0, stream)), Fault::kResource);
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_F(RuntimeTemplateTest, AccessPolicyWindowResetOnlyWhereSupported) {
  NativeStream stream = NewStream(0);
  FakeRuntime::max_window_bytes = 0;
  EXPECT_TRUE(backend_->ResetStreamAttributes(0, stream).ok());
  EXPECT_TRUE(backend_->ResetStreamAttributes(0, stream).ok());
  EXPECT_EQ(FakeRuntime::attribute_queries, 1);  // cached per device
  EXPECT_EQ(FakeRuntime::windows_cleared, 0);

  FakeRuntime::max_window_bytes = 1 << 20;
  NativeStream other = NewStream(1);
  EXPECT_TRUE(backend_->ResetStreamAttributes(1, other).ok());
  EXPECT_TRUE(backend_->ResetStreamAttributes(1, other).ok());
  EXPECT_EQ(FakeRuntime::attribute_queries, 2);
  EXPECT_EQ(FakeRuntime::windows_cleared, 2);
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
  EXPECT_TRUE(backend_->DestroyStream(1, other).ok());
}

TEST_F(RuntimeTemplateTest, EventFlagsAndInterprocessRule) {
  absl::StatusOr<NativeEvent> event =
      backend_->CreateEvent(0, EventConfig{true, true, true});
  ASSERT_TRUE(event.ok());
  EXPECT_EQ(FakeRuntime::last_flags, FakeApi::kEventDisableTiming |
                                         FakeApi::kEventBlockingSync |
                                         FakeApi::kEventInterprocess);
  EXPECT_TRUE(backend_->DestroyEvent(0, *event).ok());
  const absl::StatusOr<NativeEvent> bad =
      backend_->CreateEvent(0, EventConfig{false, false, true});
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(bad.status()), Fault::kCaller);
  EXPECT_EQ(FakeRuntime::events_created, 1);
}

TEST_F(RuntimeTemplateTest, OutOfMemoryClearsTheLastErrorAndNamesTheSize) {
  FakeRuntime::malloc_error = kFakeOutOfMemory;
  const absl::StatusOr<void*> ptr =
      backend_->Allocate(1, 12345, MemoryKind::kPinnedHost);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(FaultOf(ptr.status()), Fault::kOutOfMemory);
  EXPECT_THAT(std::string(ptr.status().message()),
              HasSubstr("fakeHostAlloc on device 1: fakeErrorOutOfMemory"));
  EXPECT_THAT(std::string(ptr.status().message()),
              HasSubstr("12345 bytes of pinned_host memory"));
  EXPECT_EQ(FakeRuntime::last_error, kFakeSuccess);
  EXPECT_EQ(FakeRuntime::current_device, 0);
}

TEST_F(RuntimeTemplateTest, OtherAllocationFailuresLeaveTheLastError) {
  FakeRuntime::malloc_error = kFakeInvalidValue;
  const absl::StatusOr<void*> ptr =
      backend_->Allocate(0, 8, MemoryKind::kDevice);
  EXPECT_EQ(FaultOf(ptr.status()), Fault::kCaller);
  EXPECT_EQ(FakeRuntime::last_error, kFakeInvalidValue);
}

TEST_F(RuntimeTemplateTest, ZeroBytesAndNullFreeTouchNoRuntime) {
  EXPECT_EQ(FaultOf(backend_->Allocate(0, 0, MemoryKind::kDevice).status()),
            Fault::kCaller);
  EXPECT_TRUE(backend_->Free(1, nullptr, MemoryKind::kDevice).ok());
  EXPECT_EQ(FakeRuntime::set_device_calls, 0);
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
