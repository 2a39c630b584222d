// Default primitives of Backend, config printing and ScopedDevice.

#include "gpupool/backend.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gpupool {

Backend::~Backend() = default;

absl::StatusOr<CaptureStatus> Backend::GetCaptureStatus(int, NativeStream) {
  return absl::UnimplementedError(
      absl::StrCat(std::string(name()), " backend has no graph-capture query"));
}

absl::Status Backend::EndCapture(int, NativeStream) {
  return absl::UnimplementedError(
      absl::StrCat(std::string(name()), " backend cannot end a graph capture"));
}

// --- Interprocess memory (IPC) ---------------------------------------------

absl::StatusOr<IpcMemHandle> Backend::GetIpcHandle(int, void*) {
  return absl::UnimplementedError(absl::StrCat(
      std::string(name()), " backend cannot export memory to other processes"));
}

absl::StatusOr<void*> Backend::OpenIpcHandle(int, const IpcMemHandle&) {
  return absl::UnimplementedError(absl::StrCat(
      std::string(name()), " backend cannot open another process's memory"));
}

absl::Status Backend::CloseIpcHandle(int, void*) {
  return absl::UnimplementedError(absl::StrCat(
      std::string(name()), " backend cannot close an interprocess mapping"));
}

absl::StatusOr<AddressRange> Backend::GetAddressRange(int, void*) {
  return absl::UnimplementedError(absl::StrCat(
      std::string(name()), " backend cannot query an address range"));
}

// --- User objects ------------------------------------------------------------

absl::StatusOr<NativeUserObject> Backend::CreateUserObject(int,
                                                           UserObjectDestructor,
                                                           void*) {
  return absl::UnimplementedError(
      absl::StrCat(std::string(name()), " backend has no user objects"));
}

absl::Status Backend::RetainUserObjectByGraph(int, NativeGraph,
                                              NativeUserObject) {
  return absl::UnimplementedError(
      absl::StrCat(std::string(name()), " backend has no user objects"));
}

absl::Status Backend::ReleaseUserObject(int, NativeUserObject) {
  return absl::UnimplementedError(
      absl::StrCat(std::string(name()), " backend has no user objects"));
}

absl::Status Backend::ResetStreamAttributes(int, NativeStream) {
  return absl::OkStatus();
}

bool Backend::HasResettableStreamAttributes(int) { return true; }

absl::Status Backend::StreamWaitEvent(int, NativeStream, NativeEvent) {
  return absl::UnimplementedError(
      absl::StrCat(std::string(name()), " backend has no stream-wait-event"));
}

std::string StreamConfig::ToString() const {
  std::string out = absl::StrCat("priority=", priority,
                                 ",non_blocking=", non_blocking ? 1 : 0);
  if (!cu_mask.empty()) {
    absl::StrAppend(&out, ",cu_mask=",
                    absl::StrJoin(cu_mask, ":", [](std::string* s, uint32_t w) {
                      absl::StrAppendFormat(s, "%08x", w);
                    }));
  }
  return out;
}

std::string EventConfig::ToString() const {
  return absl::StrCat("disable_timing=", disable_timing ? 1 : 0,
                      ",blocking_sync=", blocking_sync ? 1 : 0,
                      ",interprocess=", interprocess ? 1 : 0);
}

absl::string_view MemoryKindName(MemoryKind kind) {
  return kind == MemoryKind::kDevice ? "device" : "pinned_host";
}

absl::StatusOr<ScopedDevice> ScopedDevice::Create(Backend& backend,
                                                  int device) {
  absl::StatusOr<int> previous = backend.GetCurrentDevice();
  if (!previous.ok()) return previous.status();
  if (*previous != device) {
    absl::Status set = backend.SetCurrentDevice(device);
    if (!set.ok()) return set;
  }
  return ScopedDevice(&backend, *previous);
}

ScopedDevice::ScopedDevice(ScopedDevice&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      previous_(other.previous_) {}

ScopedDevice::~ScopedDevice() {
  if (backend_ == nullptr) return;
  absl::StatusOr<int> current = backend_->GetCurrentDevice();
  if (!current.ok() || *current != previous_) {
    backend_->SetCurrentDevice(previous_).IgnoreError();
  }
}

}  // namespace gpupool
