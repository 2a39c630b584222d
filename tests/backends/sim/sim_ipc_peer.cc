// The other process of the sim IPC tests (sim_ipc_test.cc): a SimBackend in
// the namespace argv[1], driven one command per line on stdin, answering one
// line per command on stdout. Handles travel as 128 hex digits.
//
//   export BYTES FILL   allocate, export, fill the bytes  -> HANDLE
//   export_again        GetIpcHandle of the same allocation -> HANDLE
//   fill FILL           overwrite the exported bytes       -> ok
//   free                free the allocation                -> ok MISUSES
//   importers           processes mapping it now           -> N
//   open HANDLE         OpenIpcHandle                      -> ok FIRSTBYTE |
//   err CODE close               close the last opened mapping      -> ok | err
//   CODE counts              -> OPENCALLS MAPS UNMAPS LIVE die exit at once, no
//   cleanup (like a crash) quit                clean exit

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"

namespace {

std::string Hex(const gpupool::IpcMemHandle& handle) {
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(handle.bytes.data()), handle.bytes.size()));
}

bool FromHex(const std::string& hex, gpupool::IpcMemHandle* handle) {
  if (hex.size() != 2 * gpupool::kIpcMemHandleBytes) return false;
  const std::string bytes = absl::HexStringToBytes(hex);
  std::memcpy(handle->bytes.data(), bytes.data(), handle->bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  gpupool::SimOptions options;
  options.ipc_namespace = argv[1];
  options.on_misuse = [](absl::string_view) {};
  gpupool::SimBackend sim(options);
  void* allocation = nullptr;
  size_t bytes = 0;
  void* opened = nullptr;
  std::string command;
  while (std::cin >> command) {
    if (command == "export" || command == "export_again") {
      if (command == "export") {
        int fill = 0;
        std::cin >> bytes >> fill;
        allocation = *sim.Allocate(0, bytes, gpupool::MemoryKind::kDevice);
        absl::StatusOr<gpupool::IpcMemHandle> handle =
            sim.GetIpcHandle(0, allocation);
        std::memset(sim.ExportedBytes(allocation), fill, bytes);
        std::cout << Hex(*handle) << std::endl;
      } else {
        std::cout << Hex(*sim.GetIpcHandle(0, allocation)) << std::endl;
      }
    } else if (command == "fill") {
      int fill = 0;
      std::cin >> fill;
      std::memset(sim.ExportedBytes(allocation), fill, bytes);
      std::cout << "ok" << std::endl;
    } else if (command == "free") {
      (void)sim.Free(0, allocation, gpupool::MemoryKind::kDevice);
      allocation = nullptr;
      std::cout << "ok " << sim.misuse_count() << std::endl;
    } else if (command == "importers") {
      std::cout << sim.ipc_importers(allocation) << std::endl;
    } else if (command == "open") {
      std::string hex;
      std::cin >> hex;
      gpupool::IpcMemHandle handle;
      if (!FromHex(hex, &handle)) return 3;
      absl::StatusOr<void*> ptr = sim.OpenIpcHandle(0, handle);
      if (ptr.ok()) {
        opened = *ptr;
        std::cout << "ok " << int{*static_cast<unsigned char*>(opened)}
                  << std::endl;
      } else {
        std::cout << "err " << static_cast<int>(ptr.status().code())
                  << std::endl;
      }
    } else if (command == "close") {
      absl::Status closed = sim.CloseIpcHandle(0, opened);
      std::cout << (closed.ok() ? "ok" : "err ")
                << (closed.ok() ? "" : std::to_string(closed.raw_code()))
                << std::endl;
    } else if (command == "counts") {
      std::cout << sim.calls(gpupool::SimOp::kIpcOpenHandle) << " "
                << sim.ipc_maps() << " " << sim.ipc_unmaps() << " "
                << sim.ipc_mappings_live() << std::endl;
    } else if (command == "die") {
      std::cout.flush();
      _exit(0);
    } else if (command == "quit") {
      if (allocation != nullptr) {
        (void)sim.Free(0, allocation, gpupool::MemoryKind::kDevice);
      }
      return 0;
    } else {
      return 4;
    }
  }
  return 0;
}
