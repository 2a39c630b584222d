// The exporting process of ipc_gpu_test.cc: an AllocationCache over the CUDA
// backend, driven one command per line on stdin, one answer per line.
//
//   export NAME BYTES FILL   StableBuffers::Export, cudaMemset the buffer to
//   FILL,
//                            synchronize -> HANDLE (hex) | err MESSAGE
//   quit

#include <cuda_runtime_api.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/stable_buffers.h"

int main() {
  absl::StatusOr<std::unique_ptr<gpupool::Backend>> backend =
      gpupool::MakeBackend("cuda");
  if (!backend.ok()) {
    std::cout << "err " << backend.status().ToString() << std::endl;
    return 0;
  }
  {
    gpupool::EventPool events(**backend);
    gpupool::AllocationCache cache(**backend, events);
    std::string command;
    while (std::cin >> command && command == "export") {
      std::string name;
      size_t bytes = 0;
      int fill = 0;
      std::cin >> name >> bytes >> fill;
      absl::StatusOr<gpupool::IpcHandle> handle =
          gpupool::StableBuffers(cache).Export(name, 0, bytes);
      absl::StatusOr<void*> ptr =
          gpupool::StableBuffers(cache).Acquire(name, 0, bytes);
      if (!handle.ok() || !ptr.ok() ||
          cudaMemset(*ptr, fill, bytes) != cudaSuccess ||
          cudaDeviceSynchronize() != cudaSuccess) {
        std::cout << "err "
                  << (handle.ok() ? std::string("memset")
                                  : handle.status().ToString())
                  << std::endl;
        continue;
      }
      std::cout << absl::BytesToHexString(handle->Serialize()) << std::endl;
    }
  }
  return 0;
}
