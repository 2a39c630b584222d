// Small helpers every model of the simulator uses: charging latency, naming
// values in messages, and the statuses the simulated runtime returns.
//
// Thread safety: pure functions (ChargeLatency only sleeps or spins).

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_SUPPORT_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_SUPPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpupool {
namespace sim_internal {

// Sleeps (or, below the timer slack, spins) for `latency`. Never call it
// while holding an internal lock.
void ChargeLatency(absl::Duration latency);

// "0x1000000000015".
std::string Hex(uintptr_t value);

// kCaller error with `code` and a "sim: " prefixed message.
absl::Status CallerError(absl::StatusCode code, absl::string_view message);

// kNotReady (Unavailable) for the stream or event `handle`.
absl::Status NotReady(absl::string_view what, uintptr_t handle);

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_SUPPORT_H_
