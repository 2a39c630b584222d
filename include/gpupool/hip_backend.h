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
absl::StatusOr<std::unique_ptr<Backend>> MakeHipBackend();

}  // namespace gpupool

#endif  // GPUPOOL_HIP_BACKEND_H_
