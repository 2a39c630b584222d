// Kernels of graph_pool_kernel.h.

#include "tests/gpu/graph_pool_kernel.h"

namespace gpupool::gpu_test {
namespace {

__global__ void Fill(int* data, int count, int value) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) data[i] = value;
}

__global__ void Accumulate(const int* in, int* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] += in[i];
}

constexpr int kThreads = 256;

int Blocks(int count) { return (count + kThreads - 1) / kThreads; }

}  // namespace

cudaError_t LaunchFill(cudaStream_t stream, int* data, int count, int value) {
  Fill<<<Blocks(count), kThreads, 0, stream>>>(data, count, value);
  return cudaGetLastError();
}

cudaError_t LaunchAccumulate(cudaStream_t stream, const int* in, int* out,
                             int count) {
  Accumulate<<<Blocks(count), kThreads, 0, stream>>>(in, out, count);
  return cudaGetLastError();
}

}  // namespace gpupool::gpu_test
