// How ProcessPools() reads its switches from the environment: GPUPOOL_STATS
// (a switch) and GPUPOOL_BACKEND (a backend name). GPUPOOL_CONF has its own
// grammar (gpupool/config.h). Pure functions over the variable's value, so
// tests need not set the process environment.

#ifndef GPUPOOL_SRC_PROCESS_ENVIRONMENT_H_
#define GPUPOOL_SRC_PROCESS_ENVIRONMENT_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpupool::internal {

// A switch's value, any case, surrounding ASCII whitespace ignored: 1, true,
// yes or on is true; 0, false, no or off is false; anything else (the empty
// string included) is nullopt.
std::optional<bool> ParseSwitch(absl::string_view value);

// GPUPOOL_STATS given its value (nullptr: unset). Unset or blank: false. A
// switch: its value. Anything else: InvalidArgument naming the variable and
// the value, never a guess.
absl::StatusOr<bool> StatsRequested(const char* value);

// GPUPOOL_BACKEND given its value (nullptr: unset), with surrounding ASCII
// whitespace removed; "" (choose the first runtime with a device) when unset
// or blank.
absl::string_view BackendName(const char* value);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_PROCESS_ENVIRONMENT_H_
