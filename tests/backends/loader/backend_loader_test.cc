// The CUDA backend (or, built with GPUPOOL_LOADER_TEST_HIP, the HIP backend)
// end to end through the runtime loader, over the fake runtime library
// (tests/fake_runtime) named by GPUPOOL_CUDA_RUNTIME / GPUPOOL_HIP_RUNTIME:
// the same path a real libcudart or libamdhip64 takes (dlopen, entry-point
// resolution, the factory's checks, every Backend primitive, the error choke
// point, the pools on top). No GPU and no vendor library needed.
//
// The process's runtime is chosen once, so the cases that need another
// choice (a missing library, a runtime lacking an entry point, a table handed
// over by UseCudaRuntime) run in a fresh process: a "threadsafe" death test
// re-executes this binary for just that test.

#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "src/backends/loader/runtime_library.h"
#include "tests/backends/fake_runtime/fake_runtime_state.h"

#ifdef GPUPOOL_LOADER_TEST_HIP
#include "gpupool/hip_backend.h"
#include "src/backends/hip/hip_api.h"
#include "src/backends/hip/hip_entry_points.h"
#else
#include "gpupool/cuda_backend.h"
#include "src/backends/cuda/cuda_api.h"
#include "src/backends/cuda/cuda_entry_points.h"
#endif

namespace gpupool {
namespace {

using ::gpupool::loader_internal::RuntimeLibrary;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using Code = absl::StatusCode;

#ifdef GPUPOOL_LOADER_TEST_HIP
using Api = hip_internal::HipApi;
using Runtime = hip_internal::HipRuntime;
constexpr char kEnvVar[] = "GPUPOOL_HIP_RUNTIME";
constexpr char kFake[] = GPUPOOL_FAKE_AMDHIP64;
constexpr char kFakeOld[] = GPUPOOL_FAKE_AMDHIP64_OLD;
constexpr char kFakeMinimal[] = GPUPOOL_FAKE_AMDHIP64_MINIMAL;
constexpr char kPrefix[] = "hip";
absl::StatusOr<std::unique_ptr<Backend>> Make() { return MakeHipBackend(); }
absl::StatusOr<const Runtime*> Process() {
  return hip_internal::ProcessHipRuntime();
}
absl::Status Use(Runtime runtime) {
  return hip_internal::UseHipRuntime(std::move(runtime));
}
absl::StatusOr<Runtime> Resolve(const RuntimeLibrary& library) {
  return hip_internal::LoadHipRuntime(library);
}
static_assert(static_cast<int>(gpupool_fake::kIllegalAddress) ==
              static_cast<int>(hipErrorIllegalAddress));
static_assert(static_cast<int>(gpupool_fake::kNotReady) ==
              static_cast<int>(hipErrorNotReady));
static_assert(static_cast<int>(gpupool_fake::kOutOfMemory) ==
              static_cast<int>(hipErrorOutOfMemory));
static_assert(static_cast<int>(gpupool_fake::kNoDevice) ==
              static_cast<int>(hipErrorNoDevice));
static_assert(static_cast<int>(gpupool_fake::kInvalidHandle) ==
              static_cast<int>(hipErrorInvalidHandle));
static_assert(static_cast<int>(gpupool_fake::kModeRelaxed) ==
              static_cast<int>(hipStreamCaptureModeRelaxed));
#else
using Api = cuda_internal::CudaApi;
using Runtime = cuda_internal::CudaRuntime;
constexpr char kEnvVar[] = "GPUPOOL_CUDA_RUNTIME";
constexpr char kFake[] = GPUPOOL_FAKE_CUDART;
constexpr char kFakeOld[] = GPUPOOL_FAKE_CUDART_OLD;
constexpr char kFakeMinimal[] = GPUPOOL_FAKE_CUDART_MINIMAL;
constexpr char kPrefix[] = "cuda";
absl::StatusOr<std::unique_ptr<Backend>> Make() { return MakeCudaBackend(); }
absl::StatusOr<const Runtime*> Process() {
  return cuda_internal::ProcessCudaRuntime();
}
absl::Status Use(Runtime runtime) {
  return cuda_internal::UseCudaRuntime(std::move(runtime));
}
absl::StatusOr<Runtime> Resolve(const RuntimeLibrary& library) {
  return cuda_internal::LoadCudaRuntime(library);
}
static_assert(static_cast<int>(gpupool_fake::kIllegalAddress) ==
              static_cast<int>(cudaErrorIllegalAddress));
static_assert(static_cast<int>(gpupool_fake::kNotReady) ==
              static_cast<int>(cudaErrorNotReady));
static_assert(static_cast<int>(gpupool_fake::kOutOfMemory) ==
              static_cast<int>(cudaErrorMemoryAllocation));
static_assert(static_cast<int>(gpupool_fake::kNoDevice) ==
              static_cast<int>(cudaErrorNoDevice));
static_assert(static_cast<int>(gpupool_fake::kInsufficientDriver) ==
              static_cast<int>(cudaErrorInsufficientDriver));
static_assert(static_cast<int>(gpupool_fake::kInvalidHandle) ==
              static_cast<int>(cudaErrorInvalidResourceHandle));
static_assert(static_cast<int>(gpupool_fake::kModeRelaxed) ==
              static_cast<int>(cudaStreamCaptureModeRelaxed));
#endif

std::string Name(const char* suffix) { return std::string(kPrefix) + suffix; }

runtime_internal::ErrorClass Classify(typename Api::Error error) {
  return Api::Classify(error, runtime_internal::CallKind::kOther);
}

// Every test process loads the fake through the variable, before any test.
// The fake is built beside the test: a binary copied elsewhere without it
// fails here, naming the file, instead of crashing in a helper.
class FakeRuntimeEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_NE(dlopen(kFake, RTLD_NOW | RTLD_LOCAL), nullptr)
        << "the stand-in runtime this test loads is missing: " << dlerror();
    setenv(kEnvVar, kFake, /*overwrite=*/1);
  }
};
::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new FakeRuntimeEnvironment);

// The fake's state, through the library the backend loaded.
gpupool_fake::State& Fake() {
  void* handle = dlopen(kFake, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen(kFake, RTLD_NOW | RTLD_LOCAL);
  auto* state = reinterpret_cast<gpupool_fake::State* (*)()>(
      dlsym(handle, "gpupool_fake_runtime_state"));
  return *state();
}
void ResetFake() {
  void* handle = dlopen(kFake, RTLD_NOW | RTLD_LOCAL);
  reinterpret_cast<void (*)()>(dlsym(handle, "gpupool_fake_runtime_reset"))();
}

class BackendLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ResetFake();
    absl::StatusOr<std::unique_ptr<Backend>> backend = Make();
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }
  std::unique_ptr<Backend> backend_;
};

TEST_F(BackendLoaderTest, LoadsTheLibraryTheVariableNames) {
  absl::StatusOr<const Runtime*> runtime = Process();
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_THAT((*runtime)->source, HasSubstr(kFake));
  EXPECT_EQ(backend_->name(), kPrefix);
  absl::StatusOr<int> count = backend_->DeviceCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 2);
  // A second choice of runtime is refused once the process has one.
  const absl::Status again = Use(**runtime);
  EXPECT_EQ(again.code(), Code::kFailedPrecondition);
  EXPECT_THAT(std::string(again.message()), HasSubstr("already chosen"));
}

TEST_F(BackendLoaderTest, StreamPrimitivesReachTheRuntime) {
  gpupool_fake::State& fake = Fake();
  StreamConfig config;
  config.non_blocking = true;
  config.priority = -1;
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(1, config);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(fake.streams_created, 1);
  EXPECT_EQ(fake.live_streams, 1);
  EXPECT_EQ(fake.last_stream_flags, Api::kStreamNonBlocking);
  EXPECT_EQ(fake.last_stream_priority, -1);
  // Created on device 1, and the caller's device 0 restored.
  EXPECT_EQ(fake.set_device_calls, 2);
  EXPECT_EQ(fake.current_device, 0);

  EXPECT_TRUE(backend_->QueryStream(1, *stream).ok());
  // Queried in Relaxed capture mode, and the thread's mode restored.
  EXPECT_EQ(fake.mode_at_last_query, gpupool_fake::kModeRelaxed);
  typename Api::CaptureMode mode = Api::kCaptureModeRelaxed;
  ASSERT_EQ(Api::ThreadExchangeStreamCaptureMode(&mode), Api::kSuccess);
  EXPECT_EQ(static_cast<int>(mode), gpupool_fake::kModeGlobal);
  ASSERT_EQ(Api::ThreadExchangeStreamCaptureMode(&mode), Api::kSuccess);

  EXPECT_TRUE(backend_->SynchronizeStream(1, *stream).ok());
  absl::StatusOr<CaptureStatus> capture =
      backend_->GetCaptureStatus(1, *stream);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(*capture, CaptureStatus::kNone);
  fake.capture_status = gpupool_fake::kStatusActive;
  fake.end_capture_yields_graph = true;
  EXPECT_TRUE(backend_->EndCapture(1, *stream).ok());
  EXPECT_EQ(fake.live_graphs, 0);  // the captured graph was destroyed
  EXPECT_TRUE(backend_->ResetStreamAttributes(1, *stream).ok());
  EXPECT_EQ(fake.windows_cleared, 0);  // no persisting L2 on the fake
  EXPECT_TRUE(backend_->DestroyStream(1, *stream).ok());
  EXPECT_EQ(fake.live_streams, 0);
}

// The destructor the user-object tests hand over: counts, calls nothing.
void CountDestroyed(void* data) { ++*static_cast<int*>(data); }

TEST_F(BackendLoaderTest, UserObjectsReachTheRuntimeAndGraphsReleaseThem) {
  gpupool_fake::State& fake = Fake();
  int destroyed = 0;
  absl::StatusOr<NativeUserObject> object =
      backend_->CreateUserObject(1, &CountDestroyed, &destroyed);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(fake.live_user_objects, 1);
  EXPECT_EQ(fake.last_user_object_flags, Api::kUserObjectNoDestructorSync);
  EXPECT_EQ(fake.current_device, 0);  // the caller's device restored

  // A graph, as a capture ends: the backend moves its reference there.
  fake.end_capture_yields_graph = true;
  typename Api::Graph graph = nullptr;
  ASSERT_EQ(Api::StreamEndCapture(nullptr, &graph), Api::kSuccess);
  ASSERT_NE(graph, nullptr);
  ASSERT_TRUE(backend_->RetainUserObjectByGraph(1, graph, *object).ok());
  EXPECT_EQ(fake.last_retain_flags, Api::kGraphUserObjectMove);
  EXPECT_EQ(destroyed, 0);
  // The caller's reference moved: destroying the graph drops the last one.
  ASSERT_EQ(Api::GraphDestroy(graph), Api::kSuccess);
  EXPECT_EQ(destroyed, 1);
  EXPECT_EQ(fake.live_user_objects, 0);

  // Released by the caller instead.
  absl::StatusOr<NativeUserObject> other =
      backend_->CreateUserObject(0, &CountDestroyed, &destroyed);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE(backend_->ReleaseUserObject(0, *other).ok());
  EXPECT_EQ(destroyed, 2);
  EXPECT_EQ(fake.live_user_objects, 0);

  // Refused arguments never reach the runtime.
  const int calls = fake.calls;
  const absl::Status null_destroy =
      backend_->CreateUserObject(0, nullptr, nullptr).status();
  EXPECT_EQ(null_destroy.code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(null_destroy), Fault::kCaller);
  EXPECT_EQ(backend_->ReleaseUserObject(0, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(backend_->ReleaseUserObject(9, &destroyed).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(fake.calls, calls);
}

TEST_F(BackendLoaderTest, EventAndMemoryPrimitivesReachTheRuntime) {
  gpupool_fake::State& fake = Fake();
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  EventConfig config;
  config.disable_timing = true;
  absl::StatusOr<NativeEvent> event = backend_->CreateEvent(0, config);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(fake.live_events, 1);
  EXPECT_EQ(fake.last_event_flags, Api::kEventDisableTiming);
  EXPECT_TRUE(backend_->RecordEvent(0, *event, *stream).ok());
  EXPECT_EQ(fake.events_recorded, 1);
  EXPECT_TRUE(backend_->QueryEvent(0, *event).ok());
  EXPECT_TRUE(backend_->SynchronizeEvent(0, *event).ok());
  EXPECT_TRUE(backend_->StreamWaitEvent(0, *stream, *event).ok());
  EXPECT_EQ(fake.waits, 1);
  EXPECT_TRUE(backend_->DestroyEvent(0, *event).ok());
  EXPECT_EQ(fake.live_events, 0);

  absl::StatusOr<void*> device =
      backend_->Allocate(0, 256, MemoryKind::kDevice);
  absl::StatusOr<void*> host =
      backend_->Allocate(0, 256, MemoryKind::kPinnedHost);
  ASSERT_TRUE(device.ok()) << device.status();
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(fake.live_device_allocations, 1);
  EXPECT_EQ(fake.live_host_allocations, 1);
  EXPECT_TRUE(backend_->Free(0, *device, MemoryKind::kDevice).ok());
  EXPECT_TRUE(backend_->Free(0, *host, MemoryKind::kPinnedHost).ok());
  EXPECT_EQ(fake.live_device_allocations, 0);
  EXPECT_EQ(fake.live_host_allocations, 0);
  absl::StatusOr<MemoryInfo> info = backend_->GetMemoryInfo(0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->free_bytes, fake.free_bytes);
  EXPECT_EQ(info->total_bytes, fake.total_bytes);
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}

TEST_F(BackendLoaderTest, RuntimeErrorsAreClassifiedAndNamed) {
  gpupool_fake::State& fake = Fake();
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, {});
  ASSERT_TRUE(stream.ok()) << stream.status();

  fake.stream_query_error = gpupool_fake::kNotReady;
  absl::Status status = backend_->QueryStream(0, *stream);
  EXPECT_EQ(status.code(), Code::kUnavailable);
  EXPECT_EQ(FaultOf(status), Fault::kNotReady);

  fake.stream_query_error = gpupool_fake::kIllegalAddress;
  status = backend_->QueryStream(0, *stream);
  EXPECT_EQ(status.code(), Code::kInternal);
  EXPECT_EQ(FaultOf(status), Fault::kDevice);
  EXPECT_EQ(status.message(),
            Name("StreamQuery on device 0: ") + Name("ErrorIllegalAddress") +
                " (700): fake: illegal address (device fault)");
  fake.stream_query_error = gpupool_fake::kSuccess;

  fake.malloc_error = gpupool_fake::kOutOfMemory;
  absl::StatusOr<void*> ptr = backend_->Allocate(0, 64, MemoryKind::kDevice);
  EXPECT_EQ(ptr.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(FaultOf(ptr.status()), Fault::kOutOfMemory);
  EXPECT_THAT(std::string(ptr.status().message()),
              HasSubstr("(requested 64 bytes of device memory)"));
  // The OOM the caches handle is not left as the thread's last error.
  EXPECT_EQ(fake.last_error, gpupool_fake::kSuccess);

  fake.stream_create_error = gpupool_fake::kInvalidHandle;
  absl::StatusOr<NativeStream> failed = backend_->CreateStream(0, {});
  EXPECT_EQ(failed.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(failed.status()), Fault::kResource);
  EXPECT_EQ(fake.live_streams, 1);
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}

TEST_F(BackendLoaderTest, APoolOverTheLoadedRuntimeReusesStreams) {
  {
    StreamPool pool(*backend_);
    for (int i = 0; i < 5; ++i) {
      absl::StatusOr<PooledStream> stream = pool.Acquire(0);
      ASSERT_TRUE(stream.ok()) << stream.status();
    }
    const StreamPoolStats stats = pool.GetStats();
    EXPECT_EQ(stats.created, 1);
    EXPECT_EQ(stats.reused, 4);
    EXPECT_EQ(Fake().streams_created, 1);
  }
  EXPECT_EQ(Fake().live_streams, 0);  // the pool's destructor drained it
}

#ifdef GPUPOOL_LOADER_TEST_HIP
TEST_F(BackendLoaderTest, CuMaskStreamsUseTheExtensionEntryPoint) {
  StreamConfig config;
  config.cu_mask = {0x3u};
  config.non_blocking = false;  // what the CU-mask call creates
  config.priority = 0;
  absl::StatusOr<NativeStream> stream = backend_->CreateStream(0, config);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(Fake().cu_mask_streams_created, 1);
  EXPECT_TRUE(backend_->DestroyStream(0, *stream).ok());
}
#endif

// --- The factory's answers when the runtime cannot be used -----------------

absl::Status MakeStatus() {
  absl::StatusOr<std::unique_ptr<Backend>> backend = Make();
  return backend.ok() ? absl::OkStatus() : backend.status();
}

TEST(BackendLoaderFactoryTest, NoDeviceIsUnavailableNamingTheRuntime) {
  ResetFake();
  Fake().device_count_error = gpupool_fake::kNoDevice;
  const absl::Status status = MakeStatus();
  EXPECT_EQ(status.code(), Code::kUnavailable);
  EXPECT_EQ(FaultOf(status), Fault::kCaller);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr(Name("GetDeviceCount: ")),
                    HasSubstr(Name("ErrorNoDevice") + " (100)"),
                    HasSubstr(kFake), HasSubstr(kEnvVar)));
}

TEST(BackendLoaderFactoryTest, ZeroDevicesIsUnavailable) {
  ResetFake();
  Fake().device_count = 0;
  const absl::Status status = MakeStatus();
  EXPECT_EQ(status.code(), Code::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("no device"));
}

#ifndef GPUPOOL_LOADER_TEST_HIP
TEST(BackendLoaderFactoryTest, NoDriverSaysSoAndNeverSuggestsAnUpgrade) {
  ResetFake();
  Fake().device_count_error = gpupool_fake::kInsufficientDriver;
  Fake().driver_version = 0;  // what cudaDriverGetVersion says with no driver
  const absl::Status status = MakeStatus();
  EXPECT_EQ(status.code(), Code::kUnavailable);
  EXPECT_EQ(FaultOf(status), Fault::kCaller);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("cudaErrorInsufficientDriver (35)"),
                    HasSubstr("no NVIDIA driver was found"),
                    Not(HasSubstr("update")), Not(HasSubstr("insufficient"))));
}

TEST(BackendLoaderFactoryTest, AnOldDriverNamesBothVersions) {
  ResetFake();
  Fake().device_count_error = gpupool_fake::kInsufficientDriver;
  Fake().driver_version = 12040;
  Fake().runtime_version = 13000;
  const absl::Status status = MakeStatus();
  EXPECT_EQ(status.code(), Code::kUnavailable);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("the NVIDIA driver supports CUDA 12.4"),
                    HasSubstr("the runtime is CUDA 13.0"),
                    HasSubstr("update the driver"), HasSubstr(kEnvVar)));
}
#endif

// --- Other choices of runtime, each in a fresh process ---------------------

class BackendLoaderChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// Prints the factory's status and exits 0 when its code is `code`.
void ExitWithFactoryStatus(Code code) {
  const absl::Status status = MakeStatus();
  std::fprintf(stderr, "status: %s\n", status.ToString().c_str());
  std::fflush(stderr);
  std::_Exit(status.code() == code ? 0 : 1);
}

TEST_F(BackendLoaderChoiceTest, AMissingLibraryIsUnavailableNamingIt) {
  EXPECT_EXIT(
      {
        setenv(kEnvVar, "/nonexistent/gpupool/libruntime.so", 1);
        ExitWithFactoryStatus(Code::kUnavailable);
      },
      ::testing::ExitedWithCode(0),
      "/nonexistent/gpupool/libruntime.so could not be loaded.*named by " +
          std::string(kEnvVar));
}

TEST_F(BackendLoaderChoiceTest, WithoutARuntimeTheForwardsReturnAnError) {
  // A stray call through the traits (none is made before the factory has
  // loaded the runtime) must answer, not crash.
  EXPECT_EXIT(
      {
        setenv(kEnvVar, "/nonexistent/gpupool/libruntime.so", 1);
        int count = -1;
        const bool answered =
            Api::GetDeviceCount(&count) != Api::kSuccess &&
            Api::ErrorName(Api::kErrorNotReady) == nullptr &&
            Classify(Api::GetDeviceCount(&count)).code == Code::kUnavailable;
        std::fprintf(stderr, "answered: %d\n", answered ? 1 : 0);
        std::_Exit(answered ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "answered: 1");
}

TEST_F(BackendLoaderChoiceTest, AMissingEntryPointIsUnavailableNamingIt) {
  EXPECT_EXIT(
      {
        setenv(kEnvVar, kFakeOld, 1);
        ExitWithFactoryStatus(Code::kUnavailable);
      },
      ::testing::ExitedWithCode(0),
      "lacks " + Name("StreamWaitEvent") + ".*set " + std::string(kEnvVar));
}

// What a runtime without the optional entry points gives: "" when pooling
// works and each optional feature alone is Unimplemented naming the entry
// point it lacks; otherwise the first difference.
std::string CheckWithoutOptionalEntryPoints() {
  absl::StatusOr<std::unique_ptr<Backend>> made = Make();
  if (!made.ok()) return "factory: " + made.status().ToString();
  Backend& backend = **made;
  auto missing = [](const absl::Status& status,
                    const std::string& entry_point) -> std::string {
    if (status.code() == Code::kUnimplemented &&
        FaultOf(status) == Fault::kCaller &&
        status.message().find(kFakeMinimal) != absl::string_view::npos &&
        status.message().find("lacks ") != absl::string_view::npos &&
        status.message().find(entry_point) != absl::string_view::npos) {
      return "";
    }
    return "expected Unimplemented naming " + entry_point + ", got " +
           status.ToString();
  };
  StreamPool pool(backend);
  absl::StatusOr<PooledStream> stream = pool.Acquire(0);
  if (!stream.ok()) return "acquire: " + stream.status().ToString();
  absl::StatusOr<NativeEvent> event = backend.CreateEvent(0, {});
  if (!event.ok()) return "event: " + event.status().ToString();
  if (!backend.RecordEvent(0, *event, stream->get()).ok() ||
      !backend.DestroyEvent(0, *event).ok()) {
    return "event use failed";
  }
  absl::StatusOr<void*> memory = backend.Allocate(0, 64, MemoryKind::kDevice);
  if (!memory.ok()) return "allocate: " + memory.status().ToString();
  int local = 0;
  for (const std::string& error :
       {missing(backend.GetIpcHandle(0, *memory).status(),
                Name("IpcGetMemHandle")),
        missing(backend.OpenIpcHandle(0, IpcMemHandle{}).status(),
                Name("IpcGetMemHandle")),
        missing(backend.CloseIpcHandle(0, &local), Name("IpcCloseMemHandle")),
        missing(backend.GetCaptureInfo(0, stream->get()).status(),
                Name("StreamGetCaptureInfo")),
        missing(backend.CreateUserObject(0, &CountDestroyed, &local).status(),
                Name("UserObjectCreate")),
        missing(backend.RetainUserObjectByGraph(0, &local, &local),
                Name("GraphRetainUserObject")),
        missing(backend.ReleaseUserObject(0, &local),
                Name("UserObjectRelease"))}) {
    if (!error.empty()) return error;
  }
  if (!backend.Free(0, *memory, MemoryKind::kDevice).ok()) return "free";
  absl::StatusOr<CaptureStatus> capture =
      backend.GetCaptureStatus(0, stream->get());
  if (!capture.ok() || *capture != CaptureStatus::kNone) {
    return "the capture status no longer answers";
  }
  if (backend.HasResettableStreamAttributes(0)) {
    return "resettable attributes without the entry points";
  }
#ifdef GPUPOOL_LOADER_TEST_HIP
  StreamConfig masked;
  masked.cu_mask = {0x3u};
  masked.non_blocking = false;
  if (std::string error = missing(backend.CreateStream(0, masked).status(),
                                  "hipExtStreamCreateWithCUMask");
      !error.empty()) {
    return error;
  }
#else
  if (std::string error =
          missing(backend.ResetStreamAttributes(0, stream->get()),
                  "cudaDeviceGetAttribute, cudaStreamSetAttribute");
      !error.empty()) {
    return error;
  }
#endif
  stream->Release();
  absl::StatusOr<PooledStream> again = pool.Acquire(0);
  if (!again.ok()) return "second acquire: " + again.status().ToString();
  const StreamPoolStats stats = pool.GetStats();
  if (stats.created != 1 || stats.reused != 1) return "the pool did not reuse";
  return "";
}

TEST_F(BackendLoaderChoiceTest, WithoutOptionalEntryPointsPoolingStillWorks) {
  EXPECT_EXIT(
      {
        setenv(kEnvVar, kFakeMinimal, 1);
        const std::string error = CheckWithoutOptionalEntryPoints();
        std::fprintf(stderr, "optional: %s\n",
                     error.empty() ? "ok" : error.c_str());
        std::fflush(stderr);
        std::_Exit(error.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "optional: ok");
}

TEST_F(BackendLoaderChoiceTest, AHandedOverTableIsUsedInsteadOfTheVariable) {
  // What an interposer does: resolve the real runtime itself, then hand the
  // table over before the first backend. The variable names a missing file,
  // so a backend that works proves the handed-over table was used.
  EXPECT_EXIT(
      {
        setenv(kEnvVar, "/nonexistent/gpupool/libruntime.so", 1);
        absl::StatusOr<RuntimeLibrary> library =
            RuntimeLibrary::OpenFile("fake", kFake, "");
        absl::StatusOr<Runtime> runtime =
            library.ok() ? Resolve(*library) : library.status();
        if (!runtime.ok() || !Use(*std::move(runtime)).ok()) std::_Exit(2);
        ExitWithFactoryStatus(Code::kOk);
      },
      ::testing::ExitedWithCode(0), "status: OK");
}

}  // namespace
}  // namespace gpupool
