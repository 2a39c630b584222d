// The IPC model: stable buffers exported and imported back in the same
// process (local imports), imports of earlier handles with one field forged
// (refused when the field names what to map), the release of import leases;
// and the check that the IPC stats agree (local imports, leases out, never a
// mapping in one process).

#ifndef GPUPOOL_TESTS_FUZZ_IPC_MODEL_H_
#define GPUPOOL_TESTS_FUZZ_IPC_MODEL_H_

#include <cstdint>
#include <vector>

#include "gpupool/ipc_handle.h"
#include "tests/fuzz/allocation_model.h"
#include "tests/fuzz/harness.h"

namespace gpupool::fuzz {

class IpcModel {
 public:
  IpcModel(Harness& harness, AllocationModel& allocations)
      : harness_(harness), allocations_(allocations) {}
  IpcModel(const IpcModel&) = delete;
  IpcModel& operator=(const IpcModel&) = delete;

  // Export + self-import, import of an earlier handle, or release of an
  // import lease.
  void Step();

  void CheckStats();

  // The end of an input: every import lease goes.
  void ReleaseImports() { imports_.clear(); }

 private:
  // Changes one field of `handle` (or none). True when the field changed is
  // one that names what to map (runtime bytes, slot, buffer id, device,
  // version): an import must then be refused.
  bool ForgeHandleField(IpcHandle* handle);

  Harness& harness_;
  AllocationModel& allocations_;
  FuzzedDataProvider& input_ = harness_.input();
  std::vector<IpcHandle> handles_;
  std::vector<ImportedBuffer> imports_;
  int64_t local_imports_ = 0;
};

}  // namespace gpupool::fuzz

#endif  // GPUPOOL_TESTS_FUZZ_IPC_MODEL_H_
