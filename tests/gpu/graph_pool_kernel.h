// Kernels for the graph-pool GPU test: compiled by nvcc
// (graph_pool_kernel.cu), called from plain C++.

#ifndef GPUPOOL_TESTS_GPU_GRAPH_POOL_KERNEL_H_
#define GPUPOOL_TESTS_GPU_GRAPH_POOL_KERNEL_H_

#include <cuda_runtime_api.h>

namespace gpupool::gpu_test {

// Enqueues on `stream`: data[i] = value for i in [0, count).
cudaError_t LaunchFill(cudaStream_t stream, int* data, int count, int value);
// Enqueues on `stream`: out[i] += in[i] for i in [0, count).
cudaError_t LaunchAccumulate(cudaStream_t stream, const int* in, int* out,
                             int count);

}  // namespace gpupool::gpu_test

#endif  // GPUPOOL_TESTS_GPU_GRAPH_POOL_KERNEL_H_
