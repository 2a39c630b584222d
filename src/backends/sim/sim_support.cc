// Helpers shared by the simulator's models (sim_support.h).

#include "src/backends/sim/sim_support.h"

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"

namespace gpupool {
namespace sim_internal {
namespace {

// Sleeping overshoots by the kernel's timer slack (~50 µs on Linux), which
// would turn the Cuda profile's 1.5 µs into 50 µs; shorter latencies are spun.
constexpr absl::Duration kSpinBelow = absl::Microseconds(100);

}  // namespace

void ChargeLatency(absl::Duration latency) {
  if (latency <= absl::ZeroDuration()) return;
  if (latency >= kSpinBelow) {
    absl::SleepFor(latency);
    return;
  }
  auto until =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(latency);
  while (std::chrono::steady_clock::now() < until) {
  }
}

std::string Hex(uintptr_t value) {
  return absl::StrCat("0x", absl::Hex(value));
}

absl::Status CallerError(absl::StatusCode code, absl::string_view message) {
  return FaultError(Fault::kCaller, code, absl::StrCat("sim: ", message));
}

absl::Status NotReady(absl::string_view what, uintptr_t handle) {
  return FaultError(
      Fault::kNotReady, absl::StatusCode::kUnavailable,
      absl::StrCat("sim: ", what, " ", Hex(handle), " not ready"));
}

}  // namespace sim_internal
}  // namespace gpupool
