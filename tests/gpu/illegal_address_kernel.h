// A kernel that faults on purpose, for the illegal-address test: compiled by
// nvcc (illegal_address_kernel.cu), called from plain C++.

#ifndef GPUPOOL_TESTS_GPU_ILLEGAL_ADDRESS_KERNEL_H_
#define GPUPOOL_TESTS_GPU_ILLEGAL_ADDRESS_KERNEL_H_

#include <cuda_runtime_api.h>

namespace gpupool::gpu_test {

// Launches one thread on `stream` that spins for `spin_cycles` GPU clock
// cycles and then stores to `target`. With `target` = nullptr the store is an
// illegal address: the context dies with cudaErrorIllegalAddress (700), which
// the next call that waits for the stream reports. Returns the launch's own
// error (cudaGetLastError), e.g. cudaErrorNoKernelImageForDevice when the
// binary has no code for this GPU.
cudaError_t LaunchStore(cudaStream_t stream, int* target,
                        long long spin_cycles);

}  // namespace gpupool::gpu_test

#endif  // GPUPOOL_TESTS_GPU_ILLEGAL_ADDRESS_KERNEL_H_
