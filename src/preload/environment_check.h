// What the preload makes of the GPUPOOL_* environment, and the one line it
// prints when the library loads for a value it cannot use (as jemalloc does
// for a bad MALLOC_CONF): the variable, the value, and what the preload does
// instead. A program run under the preload otherwise has no way to learn
// that pooling is off.

#ifndef GPUPOOL_SRC_PRELOAD_ENVIRONMENT_CHECK_H_
#define GPUPOOL_SRC_PRELOAD_ENVIRONMENT_CHECK_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace gpupool::preload_internal {

// A switch's value: 1/true/yes/on (any case) is on; empty, 0/false/no/off
// is off; anything else is nullopt.
std::optional<bool> ParseSwitch(absl::string_view value);

// GPUPOOL_STATS as a switch; unset or unreadable is off.
bool StatsRequested();

// One line per GPUPOOL_* value the preload cannot use, each starting with
// "gpupool preload: " and ending in a newline; empty when all is well.
// `getenv` reads the environment.
std::vector<std::string> EnvironmentComplaints(
    absl::FunctionRef<const char*(const char* name)> getenv);

}  // namespace gpupool::preload_internal

#endif  // GPUPOOL_SRC_PRELOAD_ENVIRONMENT_CHECK_H_
