// IpcHandle's wire format (include/gpupool/ipc_handle.h). Version 1, 136
// bytes, little-endian:
//
//   0   magic "gpIH"          4   format version (u16)   6  zero (u16)
//   8   device (i32)         12   slot (u32)
//   16  offset   24 bytes   32 buffer_id   40 version   48 exporter_pid
//   56  exporter_id           (u64 each)
//   64  runtime handle (64 bytes)
//   128 FNV-1a checksum of bytes [0, 128) (u64)

#include "gpupool/ipc_handle.h"

#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpupool {
namespace {

constexpr char kMagic[4] = {'g', 'p', 'I', 'H'};
constexpr size_t kRuntimeAt = 64;
constexpr size_t kChecksumAt = 128;
static_assert(kRuntimeAt + kIpcMemHandleBytes == kChecksumAt);
static_assert(kChecksumAt + 8 == IpcHandle::kSerializedBytes);

template <typename T>
void Put(std::string& out, size_t at, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out[at + i] =
        static_cast<char>(static_cast<uint64_t>(value) >> (8 * i) & 0xff);
  }
}

template <typename T>
T Get(absl::string_view in, size_t at) {
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= uint64_t{static_cast<unsigned char>(in[at + i])} << (8 * i);
  }
  return static_cast<T>(value);
}

uint64_t Checksum(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325;
  for (char c : bytes) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3;
  }
  return hash;
}

absl::Status Refuse(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("IpcHandle::Parse: ", why));
}

}  // namespace

std::string IpcHandle::Serialize() const {
  std::string out(kSerializedBytes, '\0');
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  Put<uint16_t>(out, 4, kFormatVersion);
  Put<uint32_t>(out, 8, static_cast<uint32_t>(device));
  Put<uint32_t>(out, 12, slot);
  Put<uint64_t>(out, 16, offset);
  Put<uint64_t>(out, 24, bytes);
  Put<uint64_t>(out, 32, buffer_id);
  Put<uint64_t>(out, 40, version);
  Put<uint64_t>(out, 48, exporter_pid);
  Put<uint64_t>(out, 56, exporter_id);
  std::memcpy(out.data() + kRuntimeAt, runtime.bytes.data(),
              kIpcMemHandleBytes);
  Put<uint64_t>(out, kChecksumAt,
                Checksum(absl::string_view(out.data(), kChecksumAt)));
  return out;
}

absl::StatusOr<IpcHandle> IpcHandle::Parse(absl::string_view wire) {
  if (wire.size() != kSerializedBytes) {
    return Refuse(absl::StrCat("expected ", kSerializedBytes, " bytes, got ",
                               wire.size()));
  }
  if (std::memcmp(wire.data(), kMagic, sizeof(kMagic)) != 0) {
    return Refuse("not a gpupool IPC handle (bad magic)");
  }
  const uint16_t format = Get<uint16_t>(wire, 4);
  if (format != kFormatVersion) {
    return Refuse(absl::StrCat("format version ", format,
                               "; this build reads version ", kFormatVersion));
  }
  if (Get<uint64_t>(wire, kChecksumAt) !=
      Checksum(wire.substr(0, kChecksumAt))) {
    return Refuse("corrupt handle (checksum mismatch)");
  }
  if (Get<uint16_t>(wire, 6) != 0) {
    return Refuse("corrupt handle (reserved bytes set)");
  }
  IpcHandle handle;
  handle.device = static_cast<int>(Get<uint32_t>(wire, 8));
  handle.slot = Get<uint32_t>(wire, 12);
  handle.offset = Get<uint64_t>(wire, 16);
  handle.bytes = Get<uint64_t>(wire, 24);
  handle.buffer_id = Get<uint64_t>(wire, 32);
  handle.version = Get<uint64_t>(wire, 40);
  handle.exporter_pid = Get<uint64_t>(wire, 48);
  handle.exporter_id = Get<uint64_t>(wire, 56);
  std::memcpy(handle.runtime.bytes.data(), wire.data() + kRuntimeAt,
              kIpcMemHandleBytes);
  return handle;
}

std::string IpcStats::ToString() const {
  std::string out = absl::StrFormat(
      "exports=%d (calls %d, waiting %d) imports=%d (hits %d, local %d) "
      "opens=%d closes=%d dropped=%d mappings=%d leases=%d",
      exports, export_calls, versions_waiting, imports, import_hits,
      local_imports, opens, closes, dropped, mappings_live, import_leases);
  for (const IpcWaitingVersion& version : waiting) {
    absl::StrAppendFormat(
        &out, "\n  waiting: \"%s\" device %d version %d on %s%d importers",
        version.name, version.device, version.version,
        version.importers >= kIpcCountedImporters ? "at least " : "",
        version.importers);
  }
  return out;
}

}  // namespace gpupool
