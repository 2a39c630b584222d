// gpupool/cuda_backend.h — factory of the CUDA runtime backend.
//
// Always declared; returns Unavailable with the reason when gpupool was built
// without CUDA, when the runtime library cannot be loaded, or when the runtime
// cannot be used here (no driver, no device). Thread-safe. gpupool links no
// CUDA library: the runtime is loaded at run time.

#ifndef GPUPOOL_CUDA_BACKEND_H_
#define GPUPOOL_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/export.h"

namespace gpupool {

// True when this build of gpupool contains the CUDA backend.
GPUPOOL_EXPORT bool CudaBackendBuilt();

// Builds the CUDA backend: loads the CUDA runtime library (GPUPOOL_CUDA_RUNTIME
// when set, else libcudart.so.13 / libcudart.so.12; docs/backends.md,
// "Loading the runtime") on first use, then asks it for its device count.
// Fails, rather than returning a backend that cannot work, with
//  * Unavailable "gpupool was built without the CUDA backend ..." when
//    CudaBackendBuilt() is false;
//  * Unavailable, fault kCaller, when no runtime library loads or one lacks an
//    entry point: the message names what was looked for and the variable;
//  * Unavailable, fault kCaller, when the runtime cannot be used in this
//    process, naming the call, the error and the runtime file, e.g.
//    "cudaGetDeviceCount: cudaErrorInsufficientDriver (35): no NVIDIA driver
//    was found ..." on a machine without a driver, cudaErrorNoDevice (100)
//    without a GPU. Tests GTEST_SKIP with this message.
// The backend never leaves the calling thread's current device changed.
GPUPOOL_EXPORT absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend();

}  // namespace gpupool

#endif  // GPUPOOL_CUDA_BACKEND_H_
