// gpupool/cuda_backend.h — factory of the CUDA runtime backend.
//
// Always declared; returns Unavailable with the reason when gpupool was built
// without CUDA, or the runtime's own status (e.g. no driver / no device) when
// it cannot be used here. Thread-safe.

#ifndef GPUPOOL_CUDA_BACKEND_H_
#define GPUPOOL_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "gpupool/backend.h"

namespace gpupool {

// True when this build of gpupool contains the CUDA backend.
bool CudaBackendBuilt();
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend();

}  // namespace gpupool

#endif  // GPUPOOL_CUDA_BACKEND_H_
