// The Backend contract (tests/conformance/backend_contract_tests.h) on the CUDA
// backend (or, built with GPUPOOL_CONTRACT_HIP, the HIP backend) over the
// scripted fake runtime (tests/fake_runtime), loaded through the real loader
// from the library GPUPOOL_CUDA_RUNTIME / GPUPOOL_HIP_RUNTIME names. The
// process's runtime is chosen once, so each runtime is its own binary.

#include <dlfcn.h>
#include <stdlib.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gtest/gtest.h"
#include "tests/backends/fake_runtime/fake_runtime_state.h"
#include "tests/conformance/backend_contract_tests.h"

namespace gpupool::testing {
namespace {

#ifdef GPUPOOL_CONTRACT_HIP
constexpr char kName[] = "hip";
constexpr char kEnvVar[] = "GPUPOOL_HIP_RUNTIME";
constexpr char kFake[] = GPUPOOL_FAKE_AMDHIP64;
#else
constexpr char kName[] = "cuda";
constexpr char kEnvVar[] = "GPUPOOL_CUDA_RUNTIME";
constexpr char kFake[] = GPUPOOL_FAKE_CUDART;
#endif

// The fake's exported entry points, from the library the backend loaded.
template <typename Fn>
Fn FakeSymbol(const char* name) {
  void* handle = dlopen(kFake, RTLD_NOW | RTLD_LOCAL);
  return reinterpret_cast<Fn>(dlsym(handle, name));
}
gpupool_fake::State& Fake() {
  return *FakeSymbol<gpupool_fake::State* (*)()>(
      "gpupool_fake_runtime_state")();
}

// The fake is built beside the test: a binary copied elsewhere without it
// fails here, naming the file, instead of crashing in a helper.
class FakeRuntimeEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_NE(dlopen(kFake, RTLD_NOW | RTLD_LOCAL), nullptr)
        << "the stand-in runtime this test loads is missing: " << dlerror();
  }
};
::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new FakeRuntimeEnvironment);

class FakeRuntimeHarness : public MadeBackendHarness {
 public:
  FakeRuntimeHarness() : MadeBackendHarness(MakeOverTheFake()) {}
  std::string expected_name() const override { return kName; }
  // The fake scripts the next results of every query, not one stream's.
  absl::Status MakePending(NativeStream) override {
    Fake().stream_query_error = gpupool_fake::kNotReady;
    Fake().event_query_error = gpupool_fake::kNotReady;
    return absl::OkStatus();
  }
  absl::Status CompletePending(NativeStream) override {
    Fake().stream_query_error = gpupool_fake::kSuccess;
    Fake().event_query_error = gpupool_fake::kSuccess;
    return absl::OkStatus();
  }
  absl::Status BeginCapture(NativeStream) override {
    Fake().capture_status = gpupool_fake::kStatusActive;
    Fake().capture_id += 1;  // a fresh id per capture, as the runtimes do
    Fake().end_capture_yields_graph = true;
    return absl::OkStatus();
  }
  absl::Status FaultStream(NativeStream) override {
    Fake().stream_query_error = gpupool_fake::kInvalidHandle;
    return absl::OkStatus();
  }
  absl::Status KillDevice(int, const std::string&) override {
    // The fake names the error itself: ...ErrorIllegalAddress (700).
    Fake().stream_query_error = gpupool_fake::kIllegalAddress;
    return absl::OkStatus();
  }
  void Heal(int device, NativeStream stream) override {
    Fake().stream_query_error = gpupool_fake::kSuccess;
    absl::StatusOr<Backend*> made = backend();
    ASSERT_TRUE(made.ok()) << made.status();
    EXPECT_TRUE((*made)->DestroyStream(device, stream).ok());
  }
  absl::StatusOr<size_t> ExhaustMemory(int) override {
    Fake().malloc_error = gpupool_fake::kOutOfMemory;
    return size_t{64};
  }
  void ExpectClean() override {
    const gpupool_fake::State& fake = Fake();
    EXPECT_EQ(fake.live_streams, 0);
    EXPECT_EQ(fake.live_events, 0);
    EXPECT_EQ(fake.live_device_allocations, 0);
    EXPECT_EQ(fake.live_host_allocations, 0);
    EXPECT_EQ(fake.live_graphs, 0);
  }

 private:
  // Points the loader at the fake and resets its script first.
  static absl::StatusOr<std::unique_ptr<Backend>> MakeOverTheFake() {
    setenv(kEnvVar, kFake, /*overwrite=*/1);
    FakeSymbol<void (*)()>("gpupool_fake_runtime_reset")();
    return MakeBackend(kName);
  }
};

INSTANTIATE_TEST_SUITE_P(FakeRuntime, BackendContractTest,
                         ::testing::Values(ContractParam{
                             std::string("fake_") + kName,
                             [] {
                               return std::make_unique<FakeRuntimeHarness>();
                             }}),
                         ContractParamName);

// The IPC primitives reach the fake runtime's entry points through the loader:
// one runtime call each, the lazy-peer-access flag on open, the runtime's
// error for bytes it did not make.
TEST(FakeRuntimeIpcTest, ExportOpenCloseThroughTheLoader) {
  setenv(kEnvVar, kFake, /*overwrite=*/1);
  FakeSymbol<void (*)()>("gpupool_fake_runtime_reset")();
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(kName);
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<void*> ptr = (*backend)->Allocate(0, 256, MemoryKind::kDevice);
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  absl::StatusOr<IpcMemHandle> handle = (*backend)->GetIpcHandle(0, *ptr);
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_EQ(Fake().ipc_handles_made, 1);
  absl::StatusOr<void*> opened = (*backend)->OpenIpcHandle(0, *handle);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, *ptr);
  EXPECT_EQ(Fake().ipc_opens, 1);
#ifdef GPUPOOL_CONTRACT_HIP
  EXPECT_EQ(Fake().last_ipc_open_flags, 0u);  // hipIpcMemLazyEnablePeerAccess
#else
  EXPECT_EQ(Fake().last_ipc_open_flags, 1u);  // cudaIpcMemLazyEnablePeerAccess
#endif
  EXPECT_TRUE((*backend)->CloseIpcHandle(0, *opened).ok());
  EXPECT_EQ(Fake().ipc_closes, 1);

  IpcMemHandle forged;
  absl::StatusOr<void*> refused = (*backend)->OpenIpcHandle(0, forged);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FaultOf(refused.status()), Fault::kCaller);
  EXPECT_EQ(Fake().ipc_opens, 1);
  EXPECT_TRUE((*backend)->Free(0, *ptr, MemoryKind::kDevice).ok());
}

}  // namespace
}  // namespace gpupool::testing
