// gpupool/hip_backend.h — factory of the HIP runtime backend.
//
// Always declared; returns Unavailable with the reason when gpupool was built
// without HIP, or the runtime's own status (e.g. hipErrorNoDevice) when
// it cannot be used here. Thread-safe.

#ifndef GPUPOOL_HIP_BACKEND_H_
#define GPUPOOL_HIP_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "gpupool/backend.h"

namespace gpupool {

// True when this build of gpupool contains the HIP backend.
bool HipBackendBuilt();

// Builds the HIP backend after asking the runtime for its device count.
// Fails, rather than returning a backend that cannot work, with
//  * Unavailable "gpupool was built without the HIP backend ..." when
//    HipBackendBuilt() is false;
//  * the runtime's own error when it cannot be used in this process:
//    Unavailable with fault kCaller and a message naming the call and the
//    error, e.g. "hipGetDeviceCount: hipErrorNoDevice (100)" without a GPU.
//    Tests GTEST_SKIP with this message.
// The backend never leaves the calling thread's current device changed.
absl::StatusOr<std::unique_ptr<Backend>> MakeHipBackend();

}  // namespace gpupool

#endif  // GPUPOOL_HIP_BACKEND_H_
