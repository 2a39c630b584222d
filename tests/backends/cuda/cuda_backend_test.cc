// Tests of the CUDA backend: every row of the CUDA error table and the
// messages of the error choke point (no GPU needed), the factory's answer on
// a machine without a GPU, and basic primitive checks that run on a GPU and
// skip elsewhere with the runtime's own reason. The shared RuntimeBackend
// template itself is tested over a fake runtime in
// tests/backends/runtime/runtime_backend_test.cc, which builds without CUDA,
// and end to end through the loader over a fake libcudart in
// tests/backends/loader/runtime_loader_test.cc.
//
// Nothing here links libcudart: the runtime's functions come from the library
// the backend loaded, so without one every check that needs it skips with
// the loader's reason.

#include "gpupool/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gtest/gtest.h"
#include "src/backends/cuda/cuda_api.h"
#include "src/backends/cuda/cuda_entry_points.h"
#include "src/backends/cuda/cuda_errors.h"
#include "src/backends/loader/runtime_library.h"
#include "src/backends/runtime/error_class.h"
#include "src/backends/runtime/runtime_backend.h"
#include "tests/backends/runtime_device_tests.h"
#include "tests/backends/runtime_factory_tests.h"

namespace gpupool {
namespace {

using ::gpupool::cuda_internal::ClassifyCudaError;
using ::gpupool::cuda_internal::CudaApi;
using ::gpupool::cuda_internal::CudaErrorClass;
using ::gpupool::cuda_internal::CudaErrorDescription;
using ::gpupool::cuda_internal::CudaErrorName;
using ::gpupool::cuda_internal::Cudart;
using ::gpupool::cuda_internal::CudaRuntime;
using ::gpupool::cuda_internal::CudaRuntimeSearch;
using ::gpupool::cuda_internal::ProcessCudaRuntime;
using ::gpupool::loader_internal::RuntimeLibrary;
using ::gpupool::runtime_internal::CallKind;
using ::gpupool::runtime_internal::ErrorClass;
using ::testing::HasSubstr;
using Runtime = ::gpupool::runtime_internal::RuntimeBackend<CudaApi>;
using Code = absl::StatusCode;

// The process's CUDA runtime, or the loader's reason to skip.
#define REQUIRE_CUDA_RUNTIME()                                        \
  do {                                                                \
    absl::StatusOr<const CudaRuntime*> loaded = ProcessCudaRuntime(); \
    if (!loaded.ok()) GTEST_SKIP() << loaded.status().message();      \
  } while (0)

// A CUDA function the backend does not use, from the library it loaded; null
// when there is none.
template <typename Fn>
Fn RuntimeFunction(const char* name) {
  absl::StatusOr<RuntimeLibrary> library =
      RuntimeLibrary::Open(CudaRuntimeSearch());
  if (!library.ok()) return nullptr;
  return reinterpret_cast<Fn>(library->FindSymbol(name));
}

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
  REQUIRE_CUDA_RUNTIME();
  EXPECT_EQ(CudaErrorName(cudaErrorNoDevice), "cudaErrorNoDevice");
  EXPECT_EQ(CudaErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress");
  EXPECT_EQ(CudaErrorDescription(cudaErrorIllegalAddress),
            Cudart().cudaGetErrorString(cudaErrorIllegalAddress));
  EXPECT_FALSE(CudaErrorDescription(cudaErrorNoDevice).empty());
}

// --- The choke point's messages ----------------------------------------------

TEST(CudaToStatusTest, SuccessIsOk) {
  EXPECT_TRUE(Runtime::ToStatus(cudaSuccess, "StreamQuery", 0).ok());
}

TEST(CudaToStatusTest, MessageNamesCallDeviceErrorNumberAndDescription) {
  REQUIRE_CUDA_RUNTIME();
  const absl::Status status = Runtime::ToStatus(
      cudaErrorIllegalAddress, "StreamSynchronize", 3, CallKind::kCompletion);
  EXPECT_EQ(status.code(), Code::kInternal);
  EXPECT_EQ(FaultOf(status), Fault::kDevice);
  EXPECT_EQ(status.message(),
            absl::StrCat("cudaStreamSynchronize on device 3: "
                         "cudaErrorIllegalAddress (700): ",
                         Cudart().cudaGetErrorString(cudaErrorIllegalAddress),
                         " (device fault)"));
}

TEST(CudaToStatusTest, DeviceIndependentCallsNameNoDevice) {
  REQUIRE_CUDA_RUNTIME();
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

struct CudaFactory {
  using RuntimeTable = CudaRuntime;
  static constexpr const char* kName = "cuda";
  static constexpr const char* kRuntimeVariable = "GPUPOOL_CUDA_RUNTIME";
  static constexpr const char* kDeviceCountCall = "cudaGetDeviceCount";

  static bool Built() { return CudaBackendBuilt(); }
  static absl::StatusOr<const CudaRuntime*> Process() {
    return ProcessCudaRuntime();
  }
  static absl::StatusOr<std::unique_ptr<Backend>> Make() {
    return MakeCudaBackend();
  }
  static bool DeviceCount(const CudaRuntime& runtime, int* count,
                          std::string* error_name) {
    const cudaError_t error = runtime.cudaGetDeviceCount(count);
    *error_name = runtime.cudaGetErrorName(error);
    return error == cudaSuccess;
  }
  // No driver at all: say so, and do not send the user to upgrade one.
  static void CheckUnusableMessage(const CudaRuntime& runtime,
                                   const std::string& error_name,
                                   const std::string& message) {
    int driver = -1;
    ASSERT_EQ(runtime.cudaDriverGetVersion(&driver), cudaSuccess);
    if (error_name == "cudaErrorInsufficientDriver" && driver == 0) {
      EXPECT_THAT(message, HasSubstr("no NVIDIA driver was found"));
      EXPECT_THAT(message, ::testing::Not(HasSubstr("insufficient")));
      EXPECT_THAT(message, ::testing::Not(HasSubstr("update")));
    }
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, RuntimeFactoryTest, CudaFactory);

// --- On a device -------------------------------------------------------------

struct CudaDevice {
  using Api = CudaApi;
  static constexpr cudaStreamCaptureMode kCaptureModeGlobal =
      cudaStreamCaptureModeGlobal;
  static constexpr const char* kOutOfMemoryName = "cudaErrorMemoryAllocation";
  static constexpr bool kInterprocessEvents = true;

  static absl::StatusOr<std::unique_ptr<Backend>> Make() {
    return MakeCudaBackend();
  }
  static cudaError_t EnqueueHostCall(cudaStream_t stream, void (*fn)(void*),
                                     void* arg) {
    static const auto launch =
        RuntimeFunction<decltype(&::cudaLaunchHostFunc)>("cudaLaunchHostFunc");
    return launch != nullptr ? launch(stream, fn, arg)
                             : cudaErrorSymbolNotFound;
  }
  static cudaError_t BeginCapture(cudaStream_t stream,
                                  cudaStreamCaptureMode mode) {
    const auto begin = BeginCaptureFn();
    return begin != nullptr ? begin(stream, mode) : cudaErrorSymbolNotFound;
  }
  static cudaError_t StreamGetPriority(cudaStream_t stream, int* priority) {
    static const auto get = RuntimeFunction<decltype(&::cudaStreamGetPriority)>(
        "cudaStreamGetPriority");
    return get != nullptr ? get(stream, priority) : cudaErrorSymbolNotFound;
  }
  static decltype(&::cudaStreamBeginCapture) BeginCaptureFn() {
    static const auto begin =
        RuntimeFunction<decltype(&::cudaStreamBeginCapture)>(
            "cudaStreamBeginCapture");
    return begin;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, RuntimeDeviceTest, CudaDevice);

// CUDA-only device checks, on the shared fixture.
using CudaDeviceTest = RuntimeDeviceTest<CudaDevice>;

// cudaStreamEndCapture must come from the thread that began a global or
// thread-local capture. A lease returned on another thread therefore cannot
// have its capture ended there: the backend reports the runtime's error as a
// resource fault. What the refused call leaves behind depends on the runtime:
// CUDA 13.0 (driver 580, H100) terminates the capture anyway (the stream
// reports no capture, is idle, and the owner's own EndCapture then fails with
// cudaErrorIllegalState); a runtime that leaves it capturing must still let
// the owning thread end it. Either way the stream is left in a state the
// engine can tell by asking GetCaptureStatus again.
TEST_F(CudaDeviceTest, EndCaptureFromAnotherThreadIsRefused) {
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_NE(CudaDevice::BeginCaptureFn(), nullptr);
  ASSERT_EQ(CudaDevice::BeginCaptureFn()(static_cast<cudaStream_t>(*stream),
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
  if (*capture == CaptureStatus::kNone) {
    EXPECT_TRUE(backend_->QueryStream(0, *stream).ok());
  } else {
    EXPECT_EQ(*capture, CaptureStatus::kActive);
    EXPECT_TRUE(backend_->EndCapture(0, *stream).ok());
  }
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}

// A capture begun in Relaxed mode may be ended by any thread (the pool's
// return path on a worker thread ends it and gets the graph to discard).
TEST_F(CudaDeviceTest, RelaxedCaptureCanBeEndedFromAnotherThread) {
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_NE(CudaDevice::BeginCaptureFn(), nullptr);
  ASSERT_EQ(CudaDevice::BeginCaptureFn()(static_cast<cudaStream_t>(*stream),
                                         cudaStreamCaptureModeRelaxed),
            cudaSuccess);
  absl::Status ended;
  std::thread([&] { ended = backend_->EndCapture(0, *stream); }).join();
  EXPECT_TRUE(ended.ok()) << ended;
  absl::StatusOr<CaptureStatus> capture =
      backend_->GetCaptureStatus(0, *stream);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(*capture, CaptureStatus::kNone);
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}

TEST_F(CudaDeviceTest, InterprocessEventNeedsDisableTiming) {
  const absl::StatusOr<NativeEvent> event =
      backend_->CreateEvent(0, EventConfig{false, false, true});
  EXPECT_EQ(event.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(event.status()), Fault::kCaller);
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
