// The other process of stable_buffers_test.cc, ipc_trust_test.cc and
// ipc_liveness_test.cc: an AllocationCache over a SimBackend in the IPC
// namespace argv[1], driven one command per line on stdin, one answer line
// per command on stdout. Serialized handles travel as hex.
//
//   export NAME BYTES FILL  StableBuffers::Export + fill -> HANDLE | err CODE
//   release NAME            StableBuffers::Release       -> ok | err CODE
//   import HANDLE           Import, keep the lease       -> ok BYTE | err CODE
//                           (ok local: its own handle, the local buffer,
//                           whose simulated device memory is not readable)
//   drop                    release every lease kept     -> ok
//   trim                    Trim()                       -> ok
//   stats    -> EXPORTS OPENS CLOSES HITS MAPPINGS LEASES WAITING
//   pid      -> this process's pid (as its PID namespace sees it)
//   sim      -> GETHANDLE OPEN CLOSE FREE MISUSES
//   quit

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/event_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  gpupool::SimOptions options;
  options.ipc_namespace = argv[1];
  options.on_misuse = [](absl::string_view message) {
    std::cerr << "peer misuse: " << message << std::endl;
  };
  gpupool::SimBackend sim(options);
  std::vector<gpupool::ImportedBuffer> leases;
  {
    gpupool::EventPool events(sim);
    gpupool::AllocationCache cache(sim, events);
    std::string command;
    while (std::cin >> command) {
      if (command == "export") {
        std::string name;
        size_t bytes = 0;
        int fill = 0;
        std::cin >> name >> bytes >> fill;
        absl::StatusOr<gpupool::IpcHandle> handle =
            gpupool::StableBuffers(cache).Export(name, 0, bytes);
        if (!handle.ok()) {
          std::cout << "err " << handle.status().raw_code() << std::endl;
          continue;
        }
        void* ptr = *gpupool::StableBuffers(cache).Acquire(name, 0, bytes);
        std::memset(sim.ExportedBytes(ptr), fill, bytes);
        std::cout << absl::BytesToHexString(handle->Serialize()) << std::endl;
      } else if (command == "release") {
        std::string name;
        std::cin >> name;
        absl::Status status = gpupool::StableBuffers(cache).Release(name, 0);
        std::cout << (status.ok() ? "ok"
                                  : "err " + std::to_string(status.raw_code()))
                  << std::endl;
      } else if (command == "import") {
        std::string hex;
        std::cin >> hex;
        absl::StatusOr<gpupool::IpcHandle> handle =
            gpupool::IpcHandle::Parse(absl::HexStringToBytes(hex));
        absl::StatusOr<gpupool::ImportedBuffer> lease =
            handle.ok()
                ? gpupool::StableBuffers(cache).Import(*handle, 0)
                : absl::StatusOr<gpupool::ImportedBuffer>(handle.status());
        if (lease.ok() && lease->local()) {
          std::cout << "ok local" << std::endl;
          leases.push_back(*std::move(lease));
        } else if (lease.ok()) {
          std::cout << "ok " << int{*static_cast<unsigned char*>(lease->data())}
                    << std::endl;
          leases.push_back(*std::move(lease));
        } else {
          std::cout << "err " << lease.status().raw_code() << std::endl;
        }
      } else if (command == "drop") {
        leases.clear();
        std::cout << "ok" << std::endl;
      } else if (command == "trim") {
        (void)cache.Trim();
        std::cout << "ok" << std::endl;
      } else if (command == "stats") {
        const gpupool::IpcStats s = gpupool::StableBuffers(cache).GetIpcStats();
        std::cout << s.exports << " " << s.opens << " " << s.closes << " "
                  << s.import_hits << " " << s.mappings_live << " "
                  << s.import_leases << " " << s.versions_waiting << std::endl;
      } else if (command == "pid") {
        std::cout << getpid() << std::endl;
      } else if (command == "sim") {
        std::cout << sim.calls(gpupool::SimOp::kIpcGetHandle) << " "
                  << sim.calls(gpupool::SimOp::kIpcOpenHandle) << " "
                  << sim.calls(gpupool::SimOp::kIpcCloseHandle) << " "
                  << sim.calls(gpupool::SimOp::kFree) << " "
                  << sim.misuse_count() << std::endl;
      } else if (command == "quit") {
        leases.clear();
        break;
      } else {
        return 4;
      }
    }
  }
  return 0;
}
