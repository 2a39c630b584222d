// gpupool/hip_backend.h — factory of the HIP runtime backend.
//
// Always declared; returns Unavailable with the reason when gpupool was built
// without HIP, when the runtime library cannot be loaded, or when the runtime
// cannot be used here (e.g. hipErrorNoDevice). Thread-safe. gpupool links no
// HIP library: the runtime is loaded at run time.

#ifndef GPUPOOL_HIP_BACKEND_H_
#define GPUPOOL_HIP_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/export.h"

namespace gpupool {

// True when this build of gpupool contains the HIP backend.
GPUPOOL_EXPORT bool HipBackendBuilt();

// Builds the HIP backend: loads the HIP runtime library (GPUPOOL_HIP_RUNTIME
// when set, else libamdhip64.so.6 / libamdhip64.so.5; docs/backends.md,
// "Loading the runtime") on first use, then asks it for its device count.
// Fails, rather than returning a backend that cannot work, with
//  * Unavailable "gpupool was built without the HIP backend ..." when
//    HipBackendBuilt() is false;
//  * Unavailable, fault kCaller, when no runtime library loads or one lacks an
//    entry point: the message names what was looked for and the variable;
//  * Unavailable, fault kCaller, when the runtime cannot be used in this
//    process, naming the call, the error and the runtime file, e.g.
//    "hipGetDeviceCount: hipErrorNoDevice (100): no AMD GPU is visible ..."
//    without a GPU. Tests GTEST_SKIP with this message.
// The backend never leaves the calling thread's current device changed.
GPUPOOL_EXPORT absl::StatusOr<std::unique_ptr<Backend>> MakeHipBackend();

}  // namespace gpupool

#endif  // GPUPOOL_HIP_BACKEND_H_
