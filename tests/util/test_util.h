// Shared helpers for gpupool tests: status matchers and backend factories.

#ifndef GPUPOOL_TESTS_UTIL_TEST_UTIL_H_
#define GPUPOOL_TESTS_UTIL_TEST_UTIL_H_

#include <memory>
#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"

namespace gpupool::testing {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument,
//                              HasSubstr("device")));
MATCHER_P2(StatusIs, code, message_matcher,
           "status code " + ::testing::PrintToString(code)) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code &&
         ::testing::Matches(message_matcher)(std::string(status.message()));
}
MATCHER_P(StatusIs, code, "status code " + ::testing::PrintToString(code)) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code;
}
MATCHER(IsOk, "is OK") {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.ok();
}

// A SimBackend whose misuse detection fails the running test.
inline SimOptions StrictSimOptions(int devices = 4,
                                   SimProfile profile = SimProfile::Instant()) {
  SimOptions options;
  options.device_count = devices;
  options.profile = std::move(profile);
  options.on_misuse = [](absl::string_view message) {
    ADD_FAILURE() << "SimBackend misuse: " << message;
  };
  return options;
}

// MakeBackend(name); sim gets strict misuse checking. Real backends return
// the runtime's own reason when no device is present.
inline absl::StatusOr<std::unique_ptr<Backend>> MakeTestBackend(
    absl::string_view name, int sim_devices = 4) {
  if (name == "sim") {
    return std::unique_ptr<Backend>(
        std::make_unique<SimBackend>(StrictSimOptions(sim_devices)));
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      MakeBackend(std::string(name));
  if (!backend.ok()) return backend.status();
  absl::StatusOr<int> count = (*backend)->DeviceCount();
  if (!count.ok()) return count.status();
  return backend;
}

// A suite run once per backend name ("sim", "cuda", "hip"): SetUp makes
// `backend_`, or skips with the runtime's reason when it has no device here.
// A subclass that extends SetUp calls this one first and returns if
// IsSkipped().
class BackendParamTest : public ::testing::TestWithParam<std::string> {
 protected:
  explicit BackendParamTest(int sim_devices = 4) : sim_devices_(sim_devices) {}

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        MakeTestBackend(GetParam(), sim_devices_);
    if (!backend.ok()) {
      GTEST_SKIP() << GetParam()
                   << " backend unavailable: " << backend.status();
    }
    backend_ = *std::move(backend);
  }

  std::unique_ptr<Backend> backend_;

 private:
  const int sim_devices_;
};

}  // namespace gpupool::testing

#endif  // GPUPOOL_TESTS_UTIL_TEST_UTIL_H_
