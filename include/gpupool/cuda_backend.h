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

// Builds the CUDA backend after asking the runtime for its device count.
// Fails, rather than returning a backend that cannot work, with
//  * Unavailable "gpupool was built without the CUDA backend ..." when
//    CudaBackendBuilt() is false;
//  * the runtime's own error when it cannot be used in this process:
//    Unavailable with fault kCaller and a message naming the call and the
//    error, e.g. "cudaGetDeviceCount: cudaErrorInsufficientDriver (35): CUDA
//    driver version is insufficient for CUDA runtime version" on a machine
//    without a driver, cudaErrorNoDevice (100) without a GPU. Tests GTEST_SKIP
//    with this message.
// The backend never leaves the calling thread's current device changed.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend();

}  // namespace gpupool

#endif  // GPUPOOL_CUDA_BACKEND_H_
