// What the preload makes of the GPUPOOL_* environment, and the one line it
// prints when the library loads for a value it cannot use (as jemalloc does
// for a bad MALLOC_CONF): the variable, the value, and what the preload does
// instead. A program run under the preload otherwise has no way to learn
// that pooling is off.

#ifndef GPUPOOL_SRC_PRELOAD_ENVIRONMENT_CHECK_H_
#define GPUPOOL_SRC_PRELOAD_ENVIRONMENT_CHECK_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"

namespace gpupool::preload_internal {

// GPUPOOL_STATS as ProcessPools() reads it (src/process/environment.h);
// unset, blank or not a switch is off.
bool StatsRequested();

// One line per GPUPOOL_* value the preload cannot use, each starting with
// "gpupool preload: " and ending in a newline; empty when all is well.
// `read_env` reads the environment (secure_getenv in the preload).
std::vector<std::string> EnvironmentComplaints(
    absl::FunctionRef<const char*(const char* name)> read_env);

}  // namespace gpupool::preload_internal

#endif  // GPUPOOL_SRC_PRELOAD_ENVIRONMENT_CHECK_H_
