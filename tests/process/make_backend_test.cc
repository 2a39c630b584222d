// Tests of MakeBackend: name dispatch, the unknown-name error, and that the
// runtime names answer exactly as their factories do (a backend where the
// runtime works, its own reason where it does not, "built without" where
// this build lacks it).

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gpupool/cuda_backend.h"
#include "gpupool/hip_backend.h"
#include "gtest/gtest.h"

namespace gpupool {
namespace {

using ::testing::HasSubstr;

TEST(MakeBackendTest, SimIsAlwaysAvailable) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend("sim");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "sim");
  absl::StatusOr<int> count = (*backend)->DeviceCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_GE(*count, 1);
}

TEST(MakeBackendTest, UnknownNameListsTheValidOnes) {
  for (std::string_view name : {"", "CUDA", "rocm", "sim "}) {
    absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(name);
    ASSERT_FALSE(backend.ok()) << "'" << name << "'";
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(FaultOf(backend.status()), Fault::kCaller);
    const std::string message(backend.status().message());
    EXPECT_THAT(message,
                HasSubstr(std::string("\"") + std::string(name) + "\""));
    EXPECT_THAT(message, HasSubstr("cuda, hip, sim"));
  }
}

// `name` through MakeBackend answers as `factory` does.
void ExpectSameAsFactory(
    std::string_view name, bool built,
    absl::StatusOr<std::unique_ptr<Backend>> (*factory)()) {
  absl::StatusOr<std::unique_ptr<Backend>> direct = factory();
  absl::StatusOr<std::unique_ptr<Backend>> by_name = MakeBackend(name);
  ASSERT_EQ(by_name.ok(), direct.ok()) << by_name.status();
  if (by_name.ok()) {
    EXPECT_EQ((*by_name)->name(), name);
    return;
  }
  EXPECT_EQ(by_name.status(), direct.status());
  EXPECT_EQ(by_name.status().code(), absl::StatusCode::kUnavailable)
      << by_name.status();
  EXPECT_EQ(FaultOf(by_name.status()), Fault::kCaller);
  if (!built) {
    EXPECT_THAT(std::string(by_name.status().message()),
                HasSubstr("gpupool was built without"));
  }
}

TEST(MakeBackendTest, CudaAnswersAsItsFactory) {
  ExpectSameAsFactory("cuda", CudaBackendBuilt(), &MakeCudaBackend);
}

TEST(MakeBackendTest, HipAnswersAsItsFactory) {
  ExpectSameAsFactory("hip", HipBackendBuilt(), &MakeHipBackend);
}

}  // namespace
}  // namespace gpupool
