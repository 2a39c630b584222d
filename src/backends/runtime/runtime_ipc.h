// RuntimeIpc<Api>: the interprocess-memory calls (legacy cudaIpc* /
// hipIpc*, and the address-range lookup) that RuntimeBackend<Api>'s IPC
// overrides make once they have checked the device.
//
// The Api traits struct must also provide:
//   IpcMemHandle (cudaIpcMemHandle_t / hipIpcMemHandle_t, 64 bytes),
//   kIpcMemLazyEnablePeerAccess, IpcGetMemHandle(IpcMemHandle*, void*),
//   IpcOpenMemHandle(void**, IpcMemHandle, unsigned flags),
//   IpcCloseMemHandle(void*),
//   HasMemGetAddressRange() (false when the runtime lacks the optional
//   entry point) and MemGetAddressRange(void** base, size_t* bytes, void*)
//   (cuMemGetAddressRange / hipMemGetAddressRange: the allocation holding an
//   address, an IPC mapping included).
// The IPC calls are an optional feature (runtime_features.h, Feature::kIpc):
// on a runtime without them each call is Unimplemented naming what is
// missing.
//
// Runtime semantics (docs/backends.md, "IPC", has the sources): a handle
// names the allocation's base; a re-open in one context returns the same
// pointer and counts a reference on CUDA >= 11.1 (HIP need not return the
// same pointer); opening one's own handle fails; freeing an exported
// allocation before every importer closed it is undefined behaviour.
//
// Thread safety: stateless.

#ifndef GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_IPC_H_
#define GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_IPC_H_

#include <cstring>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "src/backends/runtime/runtime_features.h"
#include "src/backends/runtime/runtime_guards.h"
#include "src/backends/runtime/runtime_status.h"

namespace gpupool {
namespace runtime_internal {

template <typename Api>
struct RuntimeIpc {
  static_assert(sizeof(typename Api::IpcMemHandle) == kIpcMemHandleBytes,
                "the runtime's IPC handle must fit gpupool::IpcMemHandle");

  // Backend::GetIpcHandle of `ptr` on `device` (already range-checked).
  static absl::StatusOr<IpcMemHandle> GetHandle(int device, void* ptr) {
    if (absl::Status has =
            RequireFeature<Api>(Feature::kIpc, "IpcGetMemHandle", device);
        !has.ok()) {
      return has;
    }
    if (ptr == nullptr) return NullPointer("IpcGetMemHandle", device);
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    typename Api::IpcMemHandle native;
    std::memset(&native, 0, sizeof(native));
    absl::Status status = RuntimeStatus<Api>::ToStatus(
        Api::IpcGetMemHandle(&native, ptr), "IpcGetMemHandle", device);
    if (!status.ok()) return status;
    IpcMemHandle handle;
    std::memcpy(handle.bytes.data(), &native, sizeof(native));
    return handle;
  }

  // Backend::OpenIpcHandle on `device` (already range-checked).
  static absl::StatusOr<void*> OpenHandle(int device,
                                          const IpcMemHandle& handle) {
    if (absl::Status has =
            RequireFeature<Api>(Feature::kIpc, "IpcOpenMemHandle", device);
        !has.ok()) {
      return has;
    }
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    typename Api::IpcMemHandle native;
    std::memcpy(&native, handle.bytes.data(), sizeof(native));
    void* ptr = nullptr;
    absl::Status status = RuntimeStatus<Api>::ToStatus(
        Api::IpcOpenMemHandle(&ptr, native, Api::kIpcMemLazyEnablePeerAccess),
        "IpcOpenMemHandle", device);
    if (!status.ok()) return status;
    return ptr;
  }

  // Backend::GetAddressRange of `ptr` on `device` (already range-checked).
  static absl::StatusOr<AddressRange> GetAddressRange(int device, void* ptr) {
    if (ptr == nullptr) return NullPointer("MemGetAddressRange", device);
    if (!Api::HasMemGetAddressRange()) {
      return absl::UnimplementedError(
          absl::StrCat(Api::kCallPrefix,
                       "MemGetAddressRange: not available in this runtime"));
    }
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    AddressRange range;
    absl::Status status = RuntimeStatus<Api>::ToStatus(
        Api::MemGetAddressRange(&range.base, &range.bytes, ptr),
        "MemGetAddressRange", device);
    if (!status.ok()) return status;
    return range;
  }

  // Backend::CloseIpcHandle of `ptr` on `device` (already range-checked).
  static absl::Status CloseHandle(int device, void* ptr) {
    if (absl::Status has =
            RequireFeature<Api>(Feature::kIpc, "IpcCloseMemHandle", device);
        !has.ok()) {
      return has;
    }
    if (ptr == nullptr) return NullPointer("IpcCloseMemHandle", device);
    CurrentDeviceGuard<Api> guard(device);
    if (!guard.status().ok()) return guard.status();
    RelaxedCaptureMode<Api> relaxed(device);
    if (!relaxed.status().ok()) return relaxed.status();
    return RuntimeStatus<Api>::ToStatus(Api::IpcCloseMemHandle(ptr),
                                        "IpcCloseMemHandle", device);
  }

 private:
  static absl::Status NullPointer(absl::string_view call, int device) {
    return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                      absl::StrCat(Api::kCallPrefix, call, " on device ",
                                   device, ": null pointer"));
  }
};

}  // namespace runtime_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_RUNTIME_RUNTIME_IPC_H_
