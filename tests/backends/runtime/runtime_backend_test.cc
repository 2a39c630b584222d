// Tests of RuntimeBackend<Api> (src/backends/runtime/runtime_backend.h), the
// one implementation of gpupool::Backend that the CUDA and HIP backends share,
// driven over a scripted fake runtime defined here. No vendor header and no
// GPU: this binary builds and runs whether or not CUDA or HIP was built, so
// the logic both runtimes run is checked everywhere (CI included). The
// runtimes' own error tables and device checks are in
// tests/{cuda,hip}_backend_test.cc.

#include "src/backends/runtime/runtime_backend.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "src/backends/runtime/error_class.h"
#include "src/backends/runtime/runtime_features.h"

namespace gpupool {
namespace {

using ::gpupool::runtime_internal::CallKind;
using ::gpupool::runtime_internal::ErrorClass;
using ::gpupool::runtime_internal::Feature;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Code = absl::StatusCode;

// --- A scripted fake runtime ------------------------------------------------
//
// Checks the template's logic: device guard, Relaxed capture mode, priority
// validation, capture teardown, OOM last-error clearing, attribute reset, CU
// masks, and the error choke point.

struct FakeStream {
  int device;
};
struct FakeEvent {
  int device;
};
struct FakeGraph {};
// A user object: the reference count and destructor the fake keeps.
struct FakeUserObject {
  int refs;
  void (*destroy)(void*);
  void* data;
};

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
// A fixed underlying type: CaptureStatusNewerThanTheCodeCountsAsInvalidated
// stores a value beyond the enumerators (a newer runtime's), which without
// one is undefined behaviour (UBSan: "not a valid value for type").
enum FakeCaptureStatus : int { kFakeNone, kFakeActive, kFakeInvalidated };

// The fake runtime's state, reset by each test. Single-threaded tests only.
struct FakeRuntime {
  static inline int device_count = 2;
  static inline FakeError device_count_error = kFakeSuccess;
  static inline int current_device = 0;
  static inline int set_device_calls = 0;
  static inline FakeError set_device_error = kFakeSuccess;
  static inline FakeCaptureMode mode = kFakeGlobal;
  static inline FakeError exchange_error = kFakeSuccess;
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
  static inline unsigned long long capture_id = 0;  // NOLINT(runtime/int)
  static inline FakeError last_error = kFakeSuccess;
  static inline int max_window_bytes = 0;
  // Per optional feature (runtime_features.h), the entry point the fake
  // runtime lacks; null when it has them all.
  static inline const char*
      missing[static_cast<int>(Feature::kUserObjects) + 1] = {};
  static inline FakeError user_object_error = kFakeSuccess;

  // What the runtime observed.
  static inline int streams_created = 0;
  static inline int cu_mask_streams_created = 0;
  static inline int events_created = 0;
  static inline int graphs_destroyed = 0;
  static inline int attribute_queries = 0;
  static inline int windows_cleared = 0;
  static inline int is_capturing_calls = 0;
  static inline int device_at_last_call = -1;
  static inline int device_at_priority_query = -1;
  static inline int queries = 0;
  static inline FakeCaptureMode mode_at_last_query = kFakeGlobal;
  static inline FakeCaptureMode mode_at_last_create_or_destroy = kFakeGlobal;
  static inline unsigned last_flags = 0;
  static inline int last_priority = 0;
  static inline int user_object_calls = 0;

  static void Reset() {
    device_count = 2;
    device_count_error = kFakeSuccess;
    current_device = 0;
    set_device_calls = 0;
    set_device_error = kFakeSuccess;
    mode = kFakeGlobal;
    exchange_error = kFakeSuccess;
    exchange_calls = 0;
    least_priority = 1;
    greatest_priority = -1;
    create_error = query_error = malloc_error = end_capture_error =
        kFakeSuccess;
    end_capture_yields_graph = false;
    capture_status = capture_status_after_end = kFakeNone;
    capture_id = 0;
    last_error = kFakeSuccess;
    max_window_bytes = 0;
    for (const char*& name : missing) name = nullptr;
    streams_created = cu_mask_streams_created = events_created = 0;
    graphs_destroyed = attribute_queries = windows_cleared = 0;
    is_capturing_calls = 0;
    device_at_last_call = -1;
    device_at_priority_query = -1;
    queries = 0;
    mode_at_last_query = kFakeGlobal;
    mode_at_last_create_or_destroy = kFakeGlobal;
    last_flags = 0;
    last_priority = 0;
    user_object_error = kFakeSuccess;
    user_object_calls = 0;
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

  static std::string MissingEntryPoints(Feature feature) {
    const char* name = R::missing[static_cast<int>(feature)];
    return name != nullptr ? name : "";
  }
  static const std::string& RuntimeSource() {
    static const std::string* const source =
        new std::string("the fake runtime libfake.so");
    return *source;
  }

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
    if (R::set_device_error != kSuccess) return R::set_device_error;
    R::current_device = device;
    return kSuccess;
  }
  static Error DeviceGetStreamPriorityRange(int* least, int* greatest) {
    R::device_at_priority_query = R::current_device;
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
    R::mode_at_last_create_or_destroy = R::mode;
    R::last_flags = flags;
    R::last_priority = priority;
    if (R::create_error != kSuccess) return R::create_error;
    ++R::streams_created;
    *stream = new FakeStream{R::current_device};
    return kSuccess;
  }
  static Error StreamDestroy(Stream stream) {
    R::device_at_last_call = R::current_device;
    R::mode_at_last_create_or_destroy = R::mode;
    delete stream;
    return kSuccess;
  }
  static Error StreamQuery(Stream) {
    ++R::queries;
    R::mode_at_last_query = R::mode;
    R::device_at_last_call = R::current_device;
    return R::query_error;
  }
  static Error StreamSynchronize(Stream stream) { return StreamQuery(stream); }
  static Error StreamIsCapturing(Stream, CaptureStatus* status) {
    ++R::is_capturing_calls;
    *status = R::capture_status;
    return kSuccess;
  }
  static Error StreamGetCaptureInfo(Stream, CaptureStatus* status,
                                    unsigned long long* id) {  // NOLINT
    ++R::is_capturing_calls;
    *status = R::capture_status;
    *id = R::capture_id;
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
    if (R::exchange_error != kSuccess) return R::exchange_error;
    std::swap(*mode, R::mode);
    return kSuccess;
  }
  static Error ClearAccessPolicyWindow(Stream) {
    ++R::windows_cleared;
    return kSuccess;
  }

  static Error EventCreateWithFlags(Event* event, unsigned flags) {
    R::mode_at_last_create_or_destroy = R::mode;
    R::last_flags = flags;
    ++R::events_created;
    *event = new FakeEvent{R::current_device};
    return kSuccess;
  }
  static Error EventDestroy(Event event) {
    R::mode_at_last_create_or_destroy = R::mode;
    delete event;
    return kSuccess;
  }
  static Error EventRecord(Event, Stream) {
    R::device_at_last_call = R::current_device;
    return kSuccess;
  }
  static Error EventQuery(Event) {
    ++R::queries;
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

  // IPC: the handle carries the pointer and the device it was taken on.
  struct IpcMemHandle {
    char reserved[64];
  };
  static constexpr unsigned kIpcMemLazyEnablePeerAccess = 1;
  static inline unsigned last_ipc_open_flags = 0;
  static Error IpcGetMemHandle(IpcMemHandle* handle, void* ptr) {
    R::device_at_last_call = R::current_device;
    std::memset(handle->reserved, 0, sizeof(handle->reserved));
    std::memcpy(handle->reserved, &ptr, sizeof(ptr));
    handle->reserved[sizeof(ptr)] = static_cast<char>(R::current_device);
    return kSuccess;
  }
  static Error IpcOpenMemHandle(void** ptr, IpcMemHandle handle,
                                unsigned flags) {
    R::device_at_last_call = R::current_device;
    last_ipc_open_flags = flags;
    if (handle.reserved[sizeof(void*)] == 'X') return kFakeInvalidValue;
    std::memcpy(ptr, handle.reserved, sizeof(*ptr));
    return kSuccess;
  }
  static Error IpcCloseMemHandle(void*) {
    R::device_at_last_call = R::current_device;
    return kSuccess;
  }
  // Address ranges: every address lies in a 4096-byte allocation aligned to
  // 4096, except null's page (an error, as for a foreign pointer); the
  // query can be switched off (a runtime without the entry point).
  static inline bool has_address_range = true;
  static bool HasMemGetAddressRange() { return has_address_range; }
  static Error MemGetAddressRange(void** base, size_t* bytes, void* ptr) {
    R::device_at_last_call = R::current_device;
    const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
    if (address < 4096) return kFakeInvalidValue;
    *base = reinterpret_cast<void*>(address & ~uintptr_t{4095});
    *bytes = 4096;
    return kSuccess;
  }

  // Graph user objects: counted references; the "graph" is only checked.
  using UserObject = FakeUserObject*;
  static constexpr unsigned kUserObjectNoDestructorSync = 1;
  static constexpr unsigned kGraphUserObjectMove = 1;
  static Error UserObjectCall(unsigned flags) {
    ++R::user_object_calls;
    R::device_at_last_call = R::current_device;
    R::mode_at_last_create_or_destroy = R::mode;
    R::last_flags = flags;
    return R::user_object_error;
  }
  static Error UserObjectCreate(UserObject* object, void* data,
                                void (*destroy)(void*), unsigned refs,
                                unsigned flags) {
    if (Error error = UserObjectCall(flags); error != kSuccess) return error;
    *object = new FakeUserObject{static_cast<int>(refs), destroy, data};
    return kSuccess;
  }
  static Error GraphRetainUserObject(Graph, UserObject, unsigned count,
                                     unsigned flags) {
    EXPECT_EQ(count, 1u);
    return UserObjectCall(flags);
  }
  static Error UserObjectRelease(UserObject object, unsigned count) {
    if (Error error = UserObjectCall(0); error != kSuccess) return error;
    object->refs -= static_cast<int>(count);
    if (object->refs == 0) {
      object->destroy(object->data);
      delete object;
    }
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
    R::mode_at_last_create_or_destroy = R::mode;
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
            "fakeGetDeviceCount: fakeErrorNoDevice (100): no fake device "
            "(caller fault)");
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

TEST_F(RuntimeTemplateTest, CreationAndDestructionRunInRelaxedMode) {
  FakeRuntime::mode = kFakeGlobal;
  NativeStream stream = NewStream(1);
  EXPECT_EQ(FakeRuntime::mode_at_last_create_or_destroy, kFakeRelaxed);
  EXPECT_EQ(FakeRuntime::mode, kFakeGlobal);
  FakeRuntime::mode_at_last_create_or_destroy = kFakeGlobal;
  EXPECT_TRUE(backend_->DestroyStream(1, stream).ok());
  EXPECT_EQ(FakeRuntime::mode_at_last_create_or_destroy, kFakeRelaxed);
  absl::StatusOr<NativeEvent> event = backend_->CreateEvent(1, {});
  ASSERT_TRUE(event.ok());
  EXPECT_EQ(FakeRuntime::mode_at_last_create_or_destroy, kFakeRelaxed);
  FakeRuntime::mode_at_last_create_or_destroy = kFakeGlobal;
  EXPECT_TRUE(backend_->DestroyEvent(1, *event).ok());
  EXPECT_EQ(FakeRuntime::mode_at_last_create_or_destroy, kFakeRelaxed);
  EXPECT_EQ(FakeRuntime::mode, kFakeGlobal);
  EXPECT_EQ(FakeRuntime::exchange_calls, 8);  // there and back, four times
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
  EXPECT_EQ(pending.message(),
            "fakeStreamQuery: fakeErrorNotReady (600) (not-ready fault)");
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

TEST_F(RuntimeTemplateTest, CaptureInfoCarriesTheIdOnlyWhileActive) {
  NativeStream stream = NewStream(0);
  FakeRuntime::capture_status = kFakeActive;
  FakeRuntime::capture_id = 42;
  absl::StatusOr<CaptureInfo> info = backend_->GetCaptureInfo(0, stream);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->status, CaptureStatus::kActive);
  EXPECT_EQ(info->id, 42u);
  // The runtimes' id is valid only while Active: an invalidated capture
  // reports 0 whatever the runtime wrote.
  FakeRuntime::capture_status = kFakeInvalidated;
  info = backend_->GetCaptureInfo(0, stream);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(*info, (CaptureInfo{CaptureStatus::kInvalidated, 0}));
  const absl::StatusOr<CaptureInfo> bad = backend_->GetCaptureInfo(7, stream);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FaultOf(bad.status()), Fault::kCaller);
  FakeRuntime::capture_status = kFakeNone;
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

// --- Restoring what the template changed, on error paths too ---------------

TEST_F(RuntimeTemplateTest, FailedCreationStillRestoresTheCallersDevice) {
  FakeRuntime::current_device = 0;
  FakeRuntime::create_error = kFakeOutOfMemory;
  const absl::StatusOr<NativeStream> stream = backend_->CreateStream(1, {});
  EXPECT_EQ(stream.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(FaultOf(stream.status()), Fault::kOutOfMemory);
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_EQ(FakeRuntime::current_device, 0);
  EXPECT_EQ(FakeRuntime::set_device_calls, 2);
}

TEST_F(RuntimeTemplateTest, RefusedPriorityStillRestoresTheCallersDevice) {
  StreamConfig config;
  config.priority = 5;
  EXPECT_EQ(backend_->CreateStream(1, config).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(FakeRuntime::current_device, 0);
  EXPECT_EQ(FakeRuntime::streams_created, 0);
}

TEST_F(RuntimeTemplateTest, PriorityRangeIsReadOnTheTargetDevice) {
  FakeRuntime::current_device = 0;
  NativeStream stream = NewStream(1);
  EXPECT_EQ(FakeRuntime::device_at_priority_query, 1);
  EXPECT_TRUE(backend_->DestroyStream(1, stream).ok());
}

TEST_F(RuntimeTemplateTest, FailedDeviceSwitchCallsNothingAndRestoresNothing) {
  FakeRuntime::current_device = 0;
  FakeRuntime::set_device_error = kFakeInvalidValue;
  const absl::StatusOr<NativeStream> stream = backend_->CreateStream(1, {});
  EXPECT_EQ(stream.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(stream.status()), Fault::kCaller);
  EXPECT_THAT(std::string(stream.status().message()),
              HasSubstr("fakeSetDevice on device 1"));
  EXPECT_EQ(FakeRuntime::streams_created, 0);
  EXPECT_EQ(FakeRuntime::set_device_calls, 1);  // no restore of a non-change
  EXPECT_EQ(FakeRuntime::current_device, 0);
}

TEST_F(RuntimeTemplateTest, FaultingQueryStillRestoresTheCaptureMode) {
  NativeStream stream = NewStream(0);
  FakeRuntime::mode = kFakeGlobal;
  FakeRuntime::exchange_calls = 0;
  FakeRuntime::query_error = kFakeIllegalAddress;
  EXPECT_EQ(FaultOf(backend_->QueryStream(0, stream)), Fault::kDevice);
  EXPECT_EQ(FakeRuntime::mode_at_last_query, kFakeRelaxed);
  EXPECT_EQ(FakeRuntime::mode, kFakeGlobal);
  EXPECT_EQ(FaultOf(backend_->SynchronizeEvent(0, nullptr)), Fault::kDevice);
  EXPECT_EQ(FakeRuntime::mode, kFakeGlobal);
  EXPECT_EQ(FakeRuntime::exchange_calls, 4);  // to Relaxed and back, twice
  FakeRuntime::query_error = kFakeSuccess;
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_F(RuntimeTemplateTest, QueryIsNotIssuedWhenTheModeCannotBeRelaxed) {
  NativeStream stream = NewStream(0);
  FakeRuntime::exchange_error = kFakeInvalidValue;
  const absl::Status status = backend_->QueryStream(0, stream);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("fakeThreadExchangeStreamCaptureMode on device 0"));
  EXPECT_EQ(FakeRuntime::queries, 0);
  EXPECT_EQ(FakeRuntime::mode, kFakeGlobal);
  FakeRuntime::exchange_error = kFakeSuccess;
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

TEST_F(RuntimeTemplateTest, CaptureStatusNewerThanTheCodeCountsAsInvalidated) {
  NativeStream stream = NewStream(0);
  FakeRuntime::capture_status = static_cast<FakeCaptureStatus>(7);
  const absl::StatusOr<CaptureStatus> capture =
      backend_->GetCaptureStatus(0, stream);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(*capture, CaptureStatus::kInvalidated);
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
}

// The pool's stream cycle over the runtime template, as on CUDA: nothing at
// acquire; at return one query, in Relaxed mode (two thread-local
// exchanges), and no capture-status or attribute call on a device without
// an access-policy window.
TEST_F(RuntimeTemplateTest, PooledStreamCycleMakesOneGuardedQuery) {
  FakeRuntime::max_window_bytes = 0;
  {
    StreamPool pool(*backend_);
    ASSERT_TRUE(pool.Prewarm(0, {}, 1).ok());
    FakeRuntime::exchange_calls = 0;
    FakeRuntime::queries = 0;
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<PooledStream> stream = pool.Acquire(0);
      ASSERT_TRUE(stream.ok()) << stream.status();
      EXPECT_EQ(FakeRuntime::queries, i);
      EXPECT_EQ(FakeRuntime::exchange_calls, 2 * i);
    }
    EXPECT_EQ(FakeRuntime::queries, 3);
    EXPECT_EQ(FakeRuntime::exchange_calls, 6);
    EXPECT_EQ(FakeRuntime::mode_at_last_query, kFakeRelaxed);
    EXPECT_EQ(FakeRuntime::mode, kFakeGlobal);
    EXPECT_EQ(FakeRuntime::is_capturing_calls, 0);
    EXPECT_EQ(FakeRuntime::windows_cleared, 0);
    EXPECT_EQ(pool.GetStats().created, 1);
  }
}

// Where the device has a window, the cycle's second call clears it; the
// device attribute is read once, not per cycle.
TEST_F(RuntimeTemplateTest, PooledStreamCycleClearsAnExistingWindow) {
  FakeRuntime::max_window_bytes = 1 << 20;
  EXPECT_TRUE(backend_->HasResettableStreamAttributes(0));
  StreamPool pool(*backend_);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_TRUE(stream.ok()) << stream.status();
  }
  EXPECT_EQ(FakeRuntime::windows_cleared, 3);
  EXPECT_EQ(FakeRuntime::attribute_queries, 1);
  EXPECT_EQ(FakeRuntime::is_capturing_calls, 0);
}

TEST_F(RuntimeTemplateTest, NoResettableAttributesWithoutAWindow) {
  FakeRuntime::max_window_bytes = 0;
  EXPECT_FALSE(backend_->HasResettableStreamAttributes(0));
  EXPECT_FALSE(backend_->HasResettableStreamAttributes(-1));
  absl::StatusOr<std::unique_ptr<Backend>> hip = FakeHipBackend::Create();
  ASSERT_TRUE(hip.ok()) << hip.status();
  EXPECT_FALSE((*hip)->HasResettableStreamAttributes(0));
}

// A capturing stream's query is refused (a capture error, kResource): only
// then does the pool ask the capture status, end the capture and destroy
// the stream.
TEST_F(RuntimeTemplateTest, RefusedQueryRevealsACaptureAtReturn) {
  StreamPool pool(*backend_);
  {
    absl::StatusOr<PooledStream> stream = pool.Acquire(0);
    ASSERT_TRUE(stream.ok()) << stream.status();
    FakeRuntime::capture_status = kFakeActive;
    FakeRuntime::query_error = kFakeCaptureInvalidated;
    FakeRuntime::end_capture_yields_graph = true;
  }
  EXPECT_EQ(FakeRuntime::queries, 1);
  // Once to learn the capture, once to confirm EndCapture ended it.
  EXPECT_EQ(FakeRuntime::is_capturing_calls, 2);
  EXPECT_EQ(FakeRuntime::graphs_destroyed, 1);
  EXPECT_EQ(pool.GetStats().discarded_faulty, 1);
  EXPECT_EQ(pool.GetStats().idle, 0);
  FakeRuntime::query_error = kFakeSuccess;
}

TEST_F(RuntimeTemplateTest, IpcCallsRunOnTheirDeviceAndCarryTheHandleBytes) {
  FakeRuntime::current_device = 0;
  int storage = 0;
  absl::StatusOr<IpcMemHandle> handle = backend_->GetIpcHandle(1, &storage);
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_EQ(FakeRuntime::current_device, 0);
  EXPECT_EQ(handle->bytes[sizeof(void*)], 1);  // the device byte the fake set

  absl::StatusOr<void*> opened = backend_->OpenIpcHandle(1, *handle);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, &storage);
  EXPECT_EQ(FakeApi::last_ipc_open_flags, FakeApi::kIpcMemLazyEnablePeerAccess);
  EXPECT_TRUE(backend_->CloseIpcHandle(1, *opened).ok());
  EXPECT_EQ(FakeRuntime::current_device, 0);
}

TEST_F(RuntimeTemplateTest, AddressRangeRunsOnItsDeviceOrIsUnimplemented) {
  void* inside = reinterpret_cast<void*>(uintptr_t{0x10000 + 100});
  absl::StatusOr<AddressRange> range = backend_->GetAddressRange(1, inside);
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->base, reinterpret_cast<void*>(uintptr_t{0x10000}));
  EXPECT_EQ(range->bytes, 4096u);
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_EQ(FakeRuntime::current_device, 0);  // restored
  EXPECT_EQ(backend_->GetAddressRange(0, reinterpret_cast<void*>(uintptr_t{8}))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->GetAddressRange(0, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->GetAddressRange(7, inside).status().code(),
            absl::StatusCode::kInvalidArgument);
  FakeApi::has_address_range = false;
  EXPECT_EQ(backend_->GetAddressRange(1, inside).status().code(),
            absl::StatusCode::kUnimplemented);
  FakeApi::has_address_range = true;
}

TEST_F(RuntimeTemplateTest, IpcErrorsGoThroughTheChokePoint) {
  IpcMemHandle forged;
  forged.bytes[sizeof(void*)] = 'X';
  absl::StatusOr<void*> opened = backend_->OpenIpcHandle(0, forged);
  EXPECT_EQ(opened.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(opened.status()), Fault::kCaller);
  EXPECT_EQ(backend_->GetIpcHandle(0, nullptr).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(backend_->CloseIpcHandle(2, &forged).code(),
            Code::kInvalidArgument);
}

// --- Optional features: a runtime lacking their entry points ---------------

void SetMissing(Feature feature, const char* entry_point) {
  FakeRuntime::missing[static_cast<int>(feature)] = entry_point;
}

// Unimplemented, fault kCaller, naming the runtime and `entry_point`.
void ExpectMissing(const absl::Status& status, const char* entry_point) {
  EXPECT_EQ(status.code(), Code::kUnimplemented) << status;
  EXPECT_EQ(FaultOf(status), Fault::kCaller);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("the fake runtime libfake.so lacks"),
                    HasSubstr(entry_point)));
}

// Streams, events and memory through the backend and a pool over it: what
// pooling needs, whatever optional feature is missing.
void ExpectPoolingWorks(Backend& backend) {
  absl::StatusOr<NativeStream> stream = backend.CreateStream(1, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_TRUE(backend.QueryStream(1, *stream).ok());
  absl::StatusOr<NativeEvent> event = backend.CreateEvent(1, {});
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE(backend.RecordEvent(1, *event, *stream).ok());
  EXPECT_TRUE(backend.QueryEvent(1, *event).ok());
  EXPECT_TRUE(backend.DestroyEvent(1, *event).ok());
  EXPECT_TRUE(backend.DestroyStream(1, *stream).ok());
  absl::StatusOr<void*> memory = backend.Allocate(1, 64, MemoryKind::kDevice);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_TRUE(backend.Free(1, *memory, MemoryKind::kDevice).ok());
  StreamPool pool(backend);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<PooledStream> pooled = pool.Acquire(0);
    ASSERT_TRUE(pooled.ok()) << pooled.status();
  }
  const PoolStats stats = pool.GetStats();
  EXPECT_EQ(stats.created, 1);
  EXPECT_EQ(stats.reused, 2);
}

TEST_F(RuntimeTemplateTest, WithoutIpcEntryPointsOnlyIpcIsUnimplemented) {
  SetMissing(Feature::kIpc, "fakeIpcOpenMemHandle");
  int storage = 0;
  ExpectMissing(backend_->GetIpcHandle(0, &storage).status(),
                "fakeIpcOpenMemHandle");
  ExpectMissing(backend_->OpenIpcHandle(0, IpcMemHandle{}).status(),
                "fakeIpcOpenMemHandle");
  ExpectMissing(backend_->CloseIpcHandle(0, &storage), "fakeIpcOpenMemHandle");
  EXPECT_EQ(FakeRuntime::device_at_last_call, -1);  // no runtime call made
  // The device range is still checked first.
  EXPECT_EQ(backend_->GetIpcHandle(5, &storage).status().code(),
            Code::kInvalidArgument);
  ExpectPoolingWorks(*backend_);
}

TEST_F(RuntimeTemplateTest, WithoutCaptureInfoTheCaptureStatusStillAnswers) {
  SetMissing(Feature::kCaptureInfo, "fakeStreamGetCaptureInfo");
  NativeStream stream = NewStream(0);
  FakeRuntime::capture_status = kFakeActive;
  ExpectMissing(backend_->GetCaptureInfo(0, stream).status(),
                "fakeStreamGetCaptureInfo");
  EXPECT_EQ(FakeRuntime::is_capturing_calls, 0);
  absl::StatusOr<CaptureStatus> capture = backend_->GetCaptureStatus(0, stream);
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(*capture, CaptureStatus::kActive);
  FakeRuntime::capture_status = kFakeNone;
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
  ExpectPoolingWorks(*backend_);
}

TEST_F(RuntimeTemplateTest, WithoutWindowEntryPointsNoResetIsAsked) {
  SetMissing(Feature::kAccessPolicyWindow, "fakeStreamSetAttribute");
  FakeRuntime::max_window_bytes = 1 << 20;  // the device would have one
  EXPECT_FALSE(backend_->HasResettableStreamAttributes(0));
  NativeStream stream = NewStream(0);
  ExpectMissing(backend_->ResetStreamAttributes(0, stream),
                "fakeStreamSetAttribute");
  EXPECT_EQ(FakeRuntime::attribute_queries, 0);
  EXPECT_TRUE(backend_->DestroyStream(0, stream).ok());
  ExpectPoolingWorks(*backend_);
  EXPECT_EQ(FakeRuntime::windows_cleared, 0);
  EXPECT_EQ(FakeRuntime::attribute_queries, 0);
}

// --- Graph user objects ----------------------------------------------------

void CountDestroyed(void* data) { ++*static_cast<int*>(data); }

TEST_F(RuntimeTemplateTest, UserObjectCallsRunOnTheirDeviceInRelaxedMode) {
  int destroyed = 0;
  absl::StatusOr<NativeUserObject> object =
      backend_->CreateUserObject(1, &CountDestroyed, &destroyed);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  EXPECT_EQ(FakeRuntime::mode_at_last_create_or_destroy, kFakeRelaxed);
  EXPECT_EQ(FakeRuntime::last_flags, FakeApi::kUserObjectNoDestructorSync);
  EXPECT_EQ(FakeRuntime::current_device, 0);  // restored
  EXPECT_EQ(FakeRuntime::mode, kFakeGlobal);  // restored

  FakeGraph graph;
  EXPECT_TRUE(backend_->RetainUserObjectByGraph(1, &graph, *object).ok());
  EXPECT_EQ(FakeRuntime::last_flags, FakeApi::kGraphUserObjectMove);
  EXPECT_EQ(FakeRuntime::device_at_last_call, 1);
  // The fake's graph took no reference; release the caller's own.
  EXPECT_TRUE(backend_->ReleaseUserObject(1, *object).ok());
  EXPECT_EQ(destroyed, 1);
}

TEST_F(RuntimeTemplateTest, UserObjectErrorsGoThroughTheChokePoint) {
  int destroyed = 0;
  FakeRuntime::user_object_error = kFakeInvalidValue;
  absl::StatusOr<NativeUserObject> refused =
      backend_->CreateUserObject(0, &CountDestroyed, &destroyed);
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(refused.status()), Fault::kCaller);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("fakeUserObjectCreate"));
  FakeRuntime::user_object_error = kFakeIllegalAddress;
  FakeUserObject object{1, &CountDestroyed, &destroyed};
  FakeGraph graph;
  const absl::Status sticky =
      backend_->RetainUserObjectByGraph(0, &graph, &object);
  EXPECT_EQ(FaultOf(sticky), Fault::kDevice);
  EXPECT_THAT(std::string(sticky.message()),
              HasSubstr("fakeGraphRetainUserObject"));
  EXPECT_EQ(FaultOf(backend_->ReleaseUserObject(0, &object)), Fault::kDevice);
  EXPECT_EQ(destroyed, 0);
  // Refused before the runtime: a bad device, a null destructor or handle.
  const int calls = FakeRuntime::user_object_calls;
  EXPECT_EQ(
      backend_->CreateUserObject(2, &CountDestroyed, nullptr).status().code(),
      Code::kInvalidArgument);
  EXPECT_EQ(FaultOf(backend_->CreateUserObject(0, nullptr, nullptr).status()),
            Fault::kCaller);
  EXPECT_EQ(backend_->RetainUserObjectByGraph(0, nullptr, &object).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(backend_->ReleaseUserObject(0, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(FakeRuntime::user_object_calls, calls);
}

TEST_F(RuntimeTemplateTest, WithoutUserObjectEntryPointsOnlyTheyAreRefused) {
  SetMissing(Feature::kUserObjects,
             "fakeUserObjectCreate, fakeGraphRetainUserObject, "
             "fakeUserObjectRelease");
  int destroyed = 0;
  FakeUserObject object{1, &CountDestroyed, &destroyed};
  FakeGraph graph;
  ExpectMissing(
      backend_->CreateUserObject(0, &CountDestroyed, &destroyed).status(),
      "fakeUserObjectCreate");
  ExpectMissing(backend_->RetainUserObjectByGraph(0, &graph, &object),
                "fakeGraphRetainUserObject");
  ExpectMissing(backend_->ReleaseUserObject(0, &object),
                "fakeUserObjectRelease");
  EXPECT_EQ(FakeRuntime::user_object_calls, 0);
  EXPECT_EQ(FakeRuntime::set_device_calls, 0);  // nothing called at all
  EXPECT_EQ(destroyed, 0);
  ExpectPoolingWorks(*backend_);
}

TEST(RuntimeTemplateCuMaskTest, WithoutTheCuMaskEntryPointOnlyMasksAreRefused) {
  FakeRuntime::Reset();
  SetMissing(Feature::kCuMask, "fakeExtStreamCreateWithCUMask");
  absl::StatusOr<std::unique_ptr<Backend>> backend = FakeHipBackend::Create();
  ASSERT_TRUE(backend.ok()) << backend.status();
  StreamConfig config;
  config.cu_mask = {0xf};
  config.non_blocking = false;  // what the CU-mask call creates
  ExpectMissing((*backend)->CreateStream(0, config).status(),
                "fakeExtStreamCreateWithCUMask");
  EXPECT_EQ(FakeRuntime::cu_mask_streams_created, 0);
  // A config the call could never honour is still the caller's error.
  config.priority = -1;
  EXPECT_EQ((*backend)->CreateStream(0, config).status().code(),
            Code::kInvalidArgument);
  ExpectPoolingWorks(**backend);
}

}  // namespace
}  // namespace gpupool
