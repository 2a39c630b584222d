// gpupool_cuda_probe: says whether gpupool's CUDA backend can run here and
// on what. The GPU bundle (tools/gpu-bundle.sh) runs it first so that its
// summary names the device, driver and runtime, and so that a machine where
// every GPU test skipped is told apart from one where they ran.
//
// Prints one "key: value" line per fact; exits 0 when MakeCudaBackend()
// returns a backend, 1 (with the runtime's own reason) when it does not.

#include <cuda_runtime_api.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/cuda_backend.h"

namespace {

// "13.0" from CUDA's 1000 * major + 10 * minor encoding.
std::string VersionString(int version) {
  return std::to_string(version / 1000) + "." +
         std::to_string((version % 1000) / 10);
}

void PrintDevice(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    std::printf("device %d: properties unavailable\n", device);
    return;
  }
  int least = 0;
  int greatest = 0;
  int window = 0;
  (void)cudaSetDevice(device);
  (void)cudaDeviceGetStreamPriorityRange(&least, &greatest);
  (void)cudaDeviceGetAttribute(&window, cudaDevAttrMaxAccessPolicyWindowSize,
                               device);
  std::printf(
      "device %d: %s, compute capability %d.%d, %d SMs, %.1f GiB, stream "
      "priorities [%d, %d], max access-policy window %d bytes\n",
      device, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
      static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
      greatest, least, window);
}

}  // namespace

int main() {
  int runtime = 0;
  int driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  std::printf("cuda runtime (cudart): %s\n", VersionString(runtime).c_str());
  std::printf("cuda driver API: %s\n",
              driver > 0 ? VersionString(driver).c_str() : "none");

  absl::StatusOr<std::unique_ptr<gpupool::Backend>> backend =
      gpupool::MakeCudaBackend();
  if (!backend.ok()) {
    std::printf("gpupool cuda backend: unusable: %s\n",
                std::string(backend.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<int> count = (*backend)->DeviceCount();
  const int devices = count.ok() ? *count : 0;
  std::printf("devices: %d\n", devices);
  for (int device = 0; device < devices; ++device) PrintDevice(device);
  std::printf("gpupool cuda backend: usable\n");
  return 0;
}
