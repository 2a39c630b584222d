// The Backend contract (tests/conformance/backend_contract_tests.h) on
// SimBackend, with each of its profiles, and on the CUDA and HIP runtimes when
// a device is present (skipped with the runtime's own reason otherwise). The
// fake runtime runs it through the loader in
// backend_contract_fake_runtime_test.cc.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/conformance/backend_contract_tests.h"
#include "tests/util/test_util.h"

namespace gpupool::testing {
namespace {

class SimHarness : public ContractHarness {
 public:
  explicit SimHarness(SimProfile profile)
      : sim_(StrictSimOptions(/*devices=*/2, std::move(profile))) {}
  absl::StatusOr<Backend*> backend() override { return &sim_; }
  std::string expected_name() const override { return "sim"; }
  absl::Status MakePending(NativeStream stream) override {
    sim_.SubmitWork(stream, absl::InfiniteDuration());
    return absl::OkStatus();
  }
  absl::Status CompletePending(NativeStream stream) override {
    sim_.CompleteWork(stream);
    return absl::OkStatus();
  }
  absl::Status BeginCapture(NativeStream stream) override {
    sim_.BeginCapture(stream);
    return absl::OkStatus();
  }
  absl::Status FaultStream(NativeStream stream) override {
    sim_.FaultStream(stream, absl::InternalError("simulated bad handle"));
    return absl::OkStatus();
  }
  absl::Status KillDevice(int device, const std::string& cause) override {
    sim_.PoisonDevice(device,
                      absl::InternalError("simErrorIllegalAddress: " + cause));
    return absl::OkStatus();
  }
  void Heal(int device, NativeStream stream) override {
    if (sim_.is_poisoned(device)) {
      sim_.ResetDevice(device);  // destroys the stream with the device
    } else {
      EXPECT_TRUE(sim_.DestroyStream(device, stream).ok());
    }
  }
  absl::StatusOr<size_t> ExhaustMemory(int device) override {
    sim_.SetMemoryLimit(device, size_t{1} << 20);
    return size_t{2} << 20;
  }
  void ExpectClean() override {
    EXPECT_EQ(sim_.misuse_count(), 0);
    EXPECT_TRUE(sim_.CheckNoLeaks().ok()) << sim_.CheckNoLeaks();
  }

 private:
  SimBackend sim_;
};

// A real runtime: nothing can be scripted without its own API (the
// runtime's typed suite, tests/backends/runtime_device_tests.h, does that),
// except an allocation no device can satisfy.
class RuntimeHarness : public MadeBackendHarness {
 public:
  explicit RuntimeHarness(std::string name)
      : MadeBackendHarness(MakeTestBackend(name)), name_(std::move(name)) {}
  std::string expected_name() const override { return name_; }
  absl::Status MakePending(NativeStream) override { return Unscripted(); }
  absl::Status CompletePending(NativeStream) override { return Unscripted(); }
  absl::Status BeginCapture(NativeStream) override { return Unscripted(); }
  absl::Status FaultStream(NativeStream) override { return Unscripted(); }
  absl::Status KillDevice(int, const std::string&) override {
    return Unscripted();
  }
  void Heal(int, NativeStream) override {}
  absl::StatusOr<size_t> ExhaustMemory(int) override { return size_t{1} << 60; }

 private:
  static absl::Status Unscripted() {
    return absl::UnimplementedError(
        "a real device is scripted only by the runtime's own suite "
        "(tests/backends/runtime_device_tests.h)");
  }
  std::string name_;
};

std::vector<ContractParam> Harnesses() {
  return {
      {"sim_instant",
       [] { return std::make_unique<SimHarness>(SimProfile::Instant()); }},
      {"sim_cuda",
       [] { return std::make_unique<SimHarness>(SimProfile::Cuda()); }},
      {"sim_rocm",
       [] { return std::make_unique<SimHarness>(SimProfile::RocmMi300x()); }},
      {"cuda", [] { return std::make_unique<RuntimeHarness>("cuda"); }},
      {"hip", [] { return std::make_unique<RuntimeHarness>("hip"); }},
  };
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendContractTest,
                         ::testing::ValuesIn(Harnesses()), ContractParamName);

}  // namespace
}  // namespace gpupool::testing
