// The factory checks shared by the CUDA and HIP backends: a typed test suite
// over a small per-runtime "factory traits" struct, instantiated once in
// tests/backends/cuda/cuda_backend_test.cc and once in
// tests/backends/hip/hip_backend_test.cc. They run on any machine: without a
// runtime library, with one but no device or driver, and on a GPU (where the
// checks about failing skip).
//
// A Factory traits struct provides:
//   using RuntimeTable = ...;          // the loaded runtime's entry points
//   static constexpr const char* kName;            // "cuda", "hip"
//   static constexpr const char* kRuntimeVariable; // GPUPOOL_*_RUNTIME
//   static constexpr const char* kDeviceCountCall; // "cudaGetDeviceCount"
//   static bool Built();               // CudaBackendBuilt() ...
//   static absl::StatusOr<const RuntimeTable*> Process();  // the loader's
//   static absl::StatusOr<std::unique_ptr<Backend>> Make();
//   // The runtime's device count; false (and the error's name) on failure.
//   static bool DeviceCount(const RuntimeTable&, int* count,
//                           std::string* error_name);
//   // Runtime-specific words the unusable-runtime message must carry.
//   static void CheckUnusableMessage(const RuntimeTable&,
//                                    const std::string& error_name,
//                                    const std::string& message);

#ifndef GPUPOOL_TESTS_BACKENDS_RUNTIME_FACTORY_TESTS_H_
#define GPUPOOL_TESTS_BACKENDS_RUNTIME_FACTORY_TESTS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gtest/gtest.h"

namespace gpupool {

template <typename Factory>
class RuntimeFactoryTest : public ::testing::Test {};

TYPED_TEST_SUITE_P(RuntimeFactoryTest);

// MakeBackend(<name>) reaches this factory, and both give the loader's
// verdict unchanged: without a runtime library exactly the loader's status
// (code and message); with one, the same outcome as the factory. A build
// without the backend, or a by-name path that lost the reason, fails here.
TYPED_TEST_P(RuntimeFactoryTest, MakeBackendByNameGivesTheLoadersVerdict) {
  using F = TypeParam;
  EXPECT_TRUE(F::Built());
  absl::StatusOr<const typename F::RuntimeTable*> runtime = F::Process();
  absl::StatusOr<std::unique_ptr<Backend>> direct = F::Make();
  absl::StatusOr<std::unique_ptr<Backend>> by_name = MakeBackend(F::kName);
  if (!runtime.ok()) {
    EXPECT_EQ(direct.status(), runtime.status());
    EXPECT_EQ(by_name.status(), runtime.status());
    EXPECT_EQ(by_name.status().code(), absl::StatusCode::kUnavailable);
    return;
  }
  ASSERT_EQ(by_name.ok(), direct.ok())
      << by_name.status() << " vs " << direct.status();
  if (direct.ok()) {
    EXPECT_EQ((*by_name)->name(), F::kName);
    EXPECT_EQ((*direct)->name(), F::kName);
  } else {
    // Loaded but unusable (no device, no driver): the same reason, naming
    // the runtime that was loaded.
    EXPECT_EQ(by_name.status(), direct.status());
    EXPECT_EQ(by_name.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(by_name.status().message()),
                ::testing::HasSubstr((*runtime)->source));
  }
}

TYPED_TEST_P(RuntimeFactoryTest, WithoutRuntimeLibraryReportsWhatWasLookedFor) {
  using F = TypeParam;
  absl::StatusOr<const typename F::RuntimeTable*> runtime = F::Process();
  if (runtime.ok()) {
    GTEST_SKIP() << "a " << F::kName
                 << " runtime loaded: " << (*runtime)->source;
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = F::Make();
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status(), runtime.status());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FaultOf(backend.status()), Fault::kCaller);
  EXPECT_THAT(std::string(backend.status().message()),
              ::testing::HasSubstr(F::kRuntimeVariable));
}

TYPED_TEST_P(RuntimeFactoryTest, WithoutUsableRuntimeSaysWhyAndWhichRuntime) {
  using F = TypeParam;
  absl::StatusOr<const typename F::RuntimeTable*> loaded = F::Process();
  if (!loaded.ok()) GTEST_SKIP() << loaded.status().message();
  const typename F::RuntimeTable& runtime = **loaded;
  int count = 0;
  std::string error_name;
  const bool counted = F::DeviceCount(runtime, &count, &error_name);
  absl::StatusOr<std::unique_ptr<Backend>> backend = F::Make();
  if (counted && count > 0) {
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->name(), F::kName);
    GTEST_SKIP() << "this machine has " << count << " " << F::kName
                 << " device(s)";
  }
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable)
      << backend.status();
  EXPECT_EQ(FaultOf(backend.status()), Fault::kCaller);
  const std::string message(backend.status().message());
  EXPECT_THAT(message, ::testing::HasSubstr(F::kDeviceCountCall));
  EXPECT_THAT(message, ::testing::HasSubstr(error_name));
  EXPECT_THAT(message, ::testing::HasSubstr(runtime.source));
  EXPECT_THAT(message, ::testing::HasSubstr(F::kRuntimeVariable));
  F::CheckUnusableMessage(runtime, error_name, message);
}

REGISTER_TYPED_TEST_SUITE_P(RuntimeFactoryTest,
                            MakeBackendByNameGivesTheLoadersVerdict,
                            WithoutRuntimeLibraryReportsWhatWasLookedFor,
                            WithoutUsableRuntimeSaysWhyAndWhichRuntime);

}  // namespace gpupool

#endif  // GPUPOOL_TESTS_BACKENDS_RUNTIME_FACTORY_TESTS_H_
