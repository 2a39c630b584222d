// The JSON form of a MemorySnapshot ("format": "gpupool.snapshot",
// "version": 1; docs/snapshot.schema.json) and WriteSnapshot.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "gpupool/snapshot.h"

namespace gpupool {
namespace {

constexpr int kSnapshotVersion = 1;

void AppendString(std::string* out, absl::string_view text) {
  out->push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<int>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

std::string Hex(uintptr_t value) { return absl::StrFormat("0x%x", value); }

void AppendSite(std::string* out, const SourceLocation& site) {
  absl::StrAppend(out, ",\"site\":{\"file\":");
  AppendString(out, site.file_name() != nullptr ? site.file_name() : "");
  absl::StrAppend(out, ",\"line\":", site.line(), "}");
}

void AppendBlock(std::string* out, const BlockSnapshot& block) {
  absl::StrAppend(out, "{\"offset\":", block.offset, ",\"bytes\":", block.bytes,
                  ",\"state\":");
  AppendString(out, BlockUseName(block.use));
  const bool leased =
      block.lease_id != 0 &&
      (block.use == BlockUse::kLeased || block.use == BlockUse::kGraphPool);
  if (leased) {
    absl::StrAppend(out, ",\"requested_bytes\":", block.requested_bytes,
                    ",\"lease_id\":", block.lease_id);
    AppendSite(out, block.site);
    if (block.age_ns >= 0) absl::StrAppend(out, ",\"age_ns\":", block.age_ns);
  }
  if (block.stream != nullptr) {
    absl::StrAppend(out, ",\"stream\":");
    AppendString(out, Hex(reinterpret_cast<uintptr_t>(block.stream)));
  }
  if (block.use == BlockUse::kPending || block.use == BlockUse::kRetiring ||
      block.pending_events > 0) {
    absl::StrAppend(out, ",\"pending_events\":", block.pending_events);
  }
  if (block.use == BlockUse::kGraphPool && block.graph_pool >= 0) {
    absl::StrAppend(out, ",\"graph_pool\":", block.graph_pool);
  }
  if (!block.name.empty()) {
    absl::StrAppend(out, ",\"name\":");
    AppendString(out, block.name);
  }
  if (block.use == BlockUse::kExported && block.importers >= 0) {
    absl::StrAppend(out, ",\"importers\":", block.importers);
  }
  out->push_back('}');
}

void AppendPools(std::string* out, absl::string_view key,
                 const std::vector<PoolKeySnapshot>& pools) {
  absl::StrAppend(out, ",\"", key, "\":[");
  for (size_t i = 0; i < pools.size(); ++i) {
    if (i > 0) out->push_back(',');
    absl::StrAppend(out, "{\"config\":");
    AppendString(out, pools[i].config);
    absl::StrAppend(out, ",\"idle\":", pools[i].idle,
                    ",\"in_use\":", pools[i].in_use,
                    ",\"draining\":", pools[i].draining, "}");
  }
  out->push_back(']');
}

absl::Status FileError(absl::string_view what, const std::string& path,
                       int error) {
  const std::string message = absl::StrCat("WriteSnapshot: cannot ", what, " ",
                                           path, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace

std::string SnapshotToJson(const MemorySnapshot& snapshot) {
  std::string out;
  absl::StrAppend(
      &out, "{\"format\":\"gpupool.snapshot\",\"version\":", kSnapshotVersion,
      ",\"taken_at_unix_ns\":", snapshot.taken_at_unix_ns, ",\"backend\":");
  AppendString(&out, snapshot.backend);
  absl::StrAppend(&out, ",\"trace_capacity\":", snapshot.trace_capacity,
                  ",\"devices\":[");
  for (size_t d = 0; d < snapshot.devices.size(); ++d) {
    const DeviceSnapshot& device = snapshot.devices[d];
    if (d > 0) out.push_back(',');
    absl::StrAppend(&out, "{\"device\":", device.device,
                    ",\"poisoned\":", device.poisoned ? "true" : "false",
                    ",\"memory\":[");
    for (size_t m = 0; m < device.memory.size(); ++m) {
      const MemoryKindSnapshot& memory = device.memory[m];
      if (m > 0) out.push_back(',');
      absl::StrAppend(
          &out, "{\"kind\":\"",
          memory.kind == MemoryKind::kDevice ? "device" : "pinned_host",
          "\",\"reserved_bytes\":", memory.reserved_bytes,
          ",\"in_use_bytes\":", memory.in_use_bytes,
          ",\"largest_free_block_bytes\":", memory.largest_free_block_bytes,
          ",\"segments\":[");
      for (size_t s = 0; s < memory.segments.size(); ++s) {
        const SegmentSnapshot& segment = memory.segments[s];
        if (s > 0) out.push_back(',');
        absl::StrAppend(&out, "{\"address\":");
        AppendString(&out, Hex(segment.address));
        absl::StrAppend(&out, ",\"bytes\":", segment.bytes, ",\"blocks\":[");
        for (size_t b = 0; b < segment.blocks.size(); ++b) {
          if (b > 0) out.push_back(',');
          AppendBlock(&out, segment.blocks[b]);
        }
        out.append("]}");
      }
      out.append("]}");
    }
    out.push_back(']');
    AppendPools(&out, "stream_pools", device.stream_pools);
    AppendPools(&out, "event_pools", device.event_pools);
    out.push_back('}');
  }
  out.append("],\"imported\":[");
  for (size_t i = 0; i < snapshot.imported.size(); ++i) {
    const ImportSnapshot& import = snapshot.imported[i];
    if (i > 0) out.push_back(',');
    absl::StrAppend(&out, "{\"device\":", import.device, ",\"address\":");
    AppendString(&out, Hex(import.address));
    absl::StrAppend(&out, ",\"bytes\":", import.bytes, ",\"exporter\":");
    AppendString(&out, import.exporter);
    absl::StrAppend(&out, ",\"name\":");
    AppendString(&out, import.name);
    absl::StrAppend(&out, ",\"leases\":", import.leases, "}");
  }
  out.append("],\"trace\":[");
  for (size_t i = 0; i < snapshot.trace.size(); ++i) {
    const TraceEvent& event = snapshot.trace[i];
    if (i > 0) out.push_back(',');
    absl::StrAppend(&out, "{\"t_ns\":", event.t_ns, ",\"op\":");
    AppendString(&out, TraceOpName(event.op));
    absl::StrAppend(
        &out, ",\"device\":", event.device, ",\"kind\":\"",
        event.kind == MemoryKind::kDevice ? "device" : "pinned_host",
        "\",\"bytes\":", event.bytes);
    if (event.address != 0) {
      absl::StrAppend(&out, ",\"address\":");
      AppendString(&out, Hex(event.address));
    }
    if (event.lease_id != 0) {
      absl::StrAppend(&out, ",\"lease_id\":", event.lease_id);
    }
    if (event.op == TraceOp::kAllocate || event.op == TraceOp::kReuse) {
      AppendSite(&out, event.site);
    }
    if (!event.what.empty()) {
      absl::StrAppend(&out, ",\"what\":");
      AppendString(&out, event.what);
    }
    if (event.graph_pool >= 0) {
      absl::StrAppend(&out, ",\"graph_pool\":", event.graph_pool);
    }
    absl::StrAppend(&out, ",\"reserved_bytes\":", event.reserved_bytes,
                    ",\"in_use_bytes\":", event.in_use_bytes, "}");
  }
  out.append("]}");
  return out;
}

absl::Status WriteSnapshot(const MemorySnapshot& snapshot,
                           absl::string_view path) {
  const std::string target(path);
  const std::string temporary = absl::StrCat(target, ".tmp.", getpid());
  const int fd =
      open(temporary.c_str(),
           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return FileError("create", temporary, errno);
  }
  const std::string json = SnapshotToJson(snapshot);
  size_t written = 0;
  while (written < json.size()) {
    const ssize_t n = write(fd, json.data() + written, json.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      close(fd);
      unlink(temporary.c_str());
      return FileError("write", temporary, error);
    }
    written += static_cast<size_t>(n);
  }
  if (close(fd) != 0 || rename(temporary.c_str(), target.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return FileError("write", target, error);
  }
  return absl::OkStatus();
}

}  // namespace gpupool
