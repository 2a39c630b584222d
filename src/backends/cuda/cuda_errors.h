// The CUDA error table: how each cudaError_t is reported (fault class and
// status code), and its name and description. Pure lookups that need no GPU,
// so tests can check every row on any machine. See docs/backends.md.

#ifndef GPUPOOL_SRC_BACKENDS_CUDA_CUDA_ERRORS_H_
#define GPUPOOL_SRC_BACKENDS_CUDA_CUDA_ERRORS_H_

#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/runtime/error_class.h"

namespace gpupool {
namespace cuda_internal {

// How cudaError_t `code` is reported. CUDA names every device fault with its
// own code, so the call kind does not matter; codes not in the table
// (including cudaErrorUnknown) are kResource.
runtime_internal::ErrorClass CudaErrorClass(int code);

// The fault class alone: CudaErrorClass(code).fault.
Fault ClassifyCudaError(int code);

// cudaGetErrorName / cudaGetErrorString of the loaded runtime; safe without a
// device or driver. Without a runtime library: "unnamed cudaError" and "".
absl::string_view CudaErrorName(int code);
absl::string_view CudaErrorDescription(int code);

}  // namespace cuda_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_CUDA_CUDA_ERRORS_H_
