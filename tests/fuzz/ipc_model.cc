// IPC exports and imports within one process, and their checks.

#include "tests/fuzz/ipc_model.h"

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/stable_buffers.h"

namespace gpupool::fuzz {
namespace {

constexpr size_t kMaxImports = 4;
// The most bytes a fuzzed stable buffer asks for (exports, so every extent
// an import may reach, stay within it).
constexpr size_t kMaxStableBytes = size_t{1} << 21;

}  // namespace

void IpcModel::Step() {
  switch (input_.ConsumeIntegralInRange(0, 2)) {
    case 0: {  // export a stable buffer and import it here (local)
      const int device = harness_.PickDevice();
      const std::string name =
          absl::StrCat("buf", input_.ConsumeIntegralInRange(0, 2));
      const size_t bytes =
          input_.ConsumeIntegralInRange<size_t>(0, kMaxStableBytes);
      const bool poisoned =
          device < kDevices && harness_.health().is_poisoned(device);
      absl::StatusOr<IpcHandle> handle =
          StableBuffers(harness_.cache()).Export(name, device, bytes);
      if (device >= kDevices || bytes == 0 || poisoned) {
        FUZZ_CHECK(!handle.ok(), "StableBuffers::Export accepted bad input");
        harness_.CheckRefusal(device, handle.status(), "StableBuffers::Export");
        return;
      }
      // The buffer may have moved even when the export failed.
      absl::StatusOr<void*> ptr =
          StableBuffers(harness_.cache()).Acquire(name, device, bytes);
      if (ptr.ok()) allocations_.ModelStable(name, device, bytes, *ptr);
      if (!handle.ok() || !ptr.ok()) return;  // injected faults
      FUZZ_CHECK(handle->device == device && handle->bytes == bytes,
                 "an IPC handle of another buffer");
      if (handles_.size() >= kMaxImports) handles_.erase(handles_.begin());
      handles_.push_back(*handle);
      if (imports_.size() >= kMaxImports) return;
      absl::StatusOr<ImportedBuffer> imported =
          StableBuffers(harness_.cache()).Import(*handle, device);
      FUZZ_CHECK(imported.ok() && imported->local() &&
                     imported->data() == *ptr && imported->size() == bytes,
                 absl::StrCat("Import of our own export: ",
                              imported.status().ToString()));
      ++local_imports_;
      imports_.push_back(*std::move(imported));
      return;
    }
    case 1: {  // import an earlier handle (perhaps forged): local, or not
      if (handles_.empty() || imports_.size() >= kMaxImports) return;
      const IpcHandle& original =
          handles_[input_.ConsumeIntegralInRange<size_t>(0,
                                                         handles_.size() - 1)];
      // A forged field that keeps the checksum valid (Serialize recomputes
      // it), so Parse accepts it and only the semantic checks stand between
      // it and memory.
      IpcHandle forged = original;
      const bool identity_forged = ForgeHandleField(&forged);
      absl::StatusOr<IpcHandle> handle = IpcHandle::Parse(forged.Serialize());
      FUZZ_CHECK(handle.ok() && *handle == forged,
                 "a serialized handle did not parse back");
      absl::StatusOr<ImportedBuffer> imported =
          StableBuffers(harness_.cache()).Import(*handle, original.device);
      if (!imported.ok()) {
        const absl::StatusCode code = imported.status().code();
        FUZZ_CHECK(code == absl::StatusCode::kNotFound ||
                       code == absl::StatusCode::kFailedPrecondition ||
                       (code == absl::StatusCode::kInvalidArgument &&
                        forged != original),
                   absl::StrCat("Import: ", imported.status().ToString()));
        return;
      }
      FUZZ_CHECK(!identity_forged,
                 "an import of a handle with a forged runtime, slot, "
                 "buffer id, device or version field succeeded");
      FUZZ_CHECK(imported->local() && imported->data() != nullptr,
                 "an import of our own handle was not local");
      // Inside what was exported for that version (the extent grows only
      // with larger requests the buffer holds).
      FUZZ_CHECK(handle->offset <= kMaxStableBytes &&
                     imported->size() <= kMaxStableBytes - handle->offset,
                 "an import reached past its buffer");
      ++local_imports_;
      imports_.push_back(*std::move(imported));
      return;
    }
    default: {  // release an import lease
      if (imports_.empty()) return;
      const size_t i =
          input_.ConsumeIntegralInRange<size_t>(0, imports_.size() - 1);
      imports_[i].Release();
      imports_.erase(imports_.begin() + i);
      return;
    }
  }
}

void IpcModel::CheckStats() {
  const IpcStats ipc = StableBuffers(harness_.cache()).GetIpcStats();
  FUZZ_CHECK(ipc.opens == 0 && ipc.closes == 0 && ipc.mappings_live == 0,
             absl::StrCat("a mapping in one process: ", ipc.ToString()));
  FUZZ_CHECK(ipc.local_imports == local_imports_ &&
                 ipc.import_leases == static_cast<int64_t>(imports_.size()),
             absl::StrCat("IPC stats ", ipc.ToString(), " but ", local_imports_,
                          " imports, ", imports_.size(), " leases out"));
}

bool IpcModel::ForgeHandleField(IpcHandle* handle) {
  const IpcHandle before = *handle;
  switch (input_.ConsumeIntegralInRange(0, 7)) {
    case 1:
      handle->bytes = input_.ConsumeIntegral<uint64_t>();
      return false;
    case 2:
      handle->offset = input_.ConsumeIntegral<uint64_t>();
      return false;
    case 3:
      handle->slot = input_.ConsumeIntegral<uint32_t>();
      return handle->slot != before.slot;
    case 4:
      handle->version = input_.ConsumeIntegral<uint64_t>();
      return handle->version != before.version;
    case 5: {
      const size_t at =
          input_.ConsumeIntegralInRange<size_t>(0, kIpcMemHandleBytes - 1);
      handle->runtime.bytes[at] ^= input_.ConsumeIntegralInRange(1, 255);
      return true;
    }
    case 6:
      handle->buffer_id = input_.ConsumeIntegral<uint64_t>();
      return handle->buffer_id != before.buffer_id;
    case 7:
      handle->device = input_.ConsumeIntegralInRange(-1, kDevices);
      return handle->device != before.device;
    default:
      return false;
  }
}

}  // namespace gpupool::fuzz
