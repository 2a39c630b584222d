// See illegal_address_kernel.h.

#include "tests/gpu/illegal_address_kernel.h"

namespace gpupool::gpu_test {
namespace {

__global__ void SpinThenStore(int* target, long long spin_cycles) {
  const long long start = clock64();
  while (clock64() - start < spin_cycles) {
  }
  // `target` is a kernel argument, so the compiler cannot prove it null and
  // drop the store.
  *reinterpret_cast<volatile int*>(target) = 42;
}

}  // namespace

cudaError_t LaunchStore(cudaStream_t stream, int* target,
                        long long spin_cycles) {
  (void)cudaGetLastError();  // report this launch's error, not an older one
  SpinThenStore<<<1, 1, 0, stream>>>(target, spin_cycles);
  return cudaGetLastError();
}

}  // namespace gpupool::gpu_test
