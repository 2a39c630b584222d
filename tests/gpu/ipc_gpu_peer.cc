// The exporting process of ipc_gpu_test.cc: an AllocationCache over the CUDA
// backend, driven one command per line on stdin, one answer per line.
//
//   export NAME BYTES FILL   StableBuffers::Export, cudaMemset the buffer to
//   FILL,
//                            synchronize -> HANDLE (hex) | err MESSAGE
//   import HANDLE            Import, keep the lease -> ok | err CODE
//   quit

#include <cuda_runtime_api.h>

#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
    std::vector<gpupool::ImportedBuffer> leases;
    std::string command;
    while (std::cin >> command && command != "quit") {
      if (command == "import") {
        std::string hex;
        std::cin >> hex;
        absl::StatusOr<gpupool::IpcHandle> handle =
            gpupool::IpcHandle::Parse(absl::HexStringToBytes(hex));
        absl::StatusOr<gpupool::ImportedBuffer> lease =
            handle.ok()
                ? gpupool::StableBuffers(cache).Import(*handle, 0)
                : absl::StatusOr<gpupool::ImportedBuffer>(handle.status());
        if (lease.ok()) leases.push_back(*std::move(lease));
        std::cout << (lease.ok()
                          ? std::string("ok")
                          : "err " + std::to_string(lease.status().raw_code()))
                  << std::endl;
        continue;
      }
      if (command != "export") return 4;
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
