// Reading and replaying allocation traces (see trace_replay.h).

#include "benchmarks/peers/trace_replay.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gpupool::bench {

absl::StatusOr<Trace> ReadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  Trace trace;
  const size_t slash = path.find_last_of('/');
  trace.name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  const size_t dot = trace.name.find('.');
  if (dot != std::string::npos) trace.name.resize(dot);

  std::unordered_map<int64_t, size_t> live;  // id -> bytes
  int64_t live_bytes = 0;
  std::string line;
  int line_number = 0;
  auto bad = [&](const char* why) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", line_number, ": ", why, ": ", line));
  };
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    if (line.rfind("streams ", 0) == 0) {
      std::string word;
      fields >> word >> trace.streams;
      if (!fields || trace.streams < 1) return bad("bad stream count");
      continue;
    }
    TraceEvent event;
    std::string op;
    fields >> event.time_us >> op >> event.id;
    if (!fields) return bad("malformed event");
    if (op == "a") {
      fields >> event.bytes >> event.stream;
      if (!fields || event.stream < 0 || event.stream >= trace.streams) {
        return bad("malformed allocation");
      }
      event.allocate = true;
      if (!live.emplace(event.id, event.bytes).second) {
        return bad("id already live");
      }
      live_bytes += static_cast<int64_t>(event.bytes);
      trace.peak_live_bytes = std::max(trace.peak_live_bytes, live_bytes);
      ++trace.allocations;
    } else if (op == "f") {
      auto it = live.find(event.id);
      if (it == live.end()) return bad("release of an id not live");
      live_bytes -= static_cast<int64_t>(it->second);
      live.erase(it);
    } else {
      return bad("unknown operation");
    }
    trace.events.push_back(event);
  }
  if (!live.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", live.size(), " allocations never released"));
  }
  if (trace.events.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no events"));
  }
  return trace;
}

absl::Status Replay(const Trace& trace, const std::vector<void*>& streams,
                    ReplayAllocator& allocator) {
  std::unordered_map<int64_t, void*> live;
  live.reserve(1024);
  for (const TraceEvent& event : trace.events) {
    if (event.allocate) {
      absl::StatusOr<void*> ptr =
          allocator.Allocate(event.bytes, streams[event.stream]);
      if (!ptr.ok()) return ptr.status();
      live[event.id] = *ptr;
    } else {
      auto it = live.find(event.id);
      absl::Status released = allocator.Release(it->second);
      live.erase(it);
      if (!released.ok()) return released;
    }
  }
  return absl::OkStatus();
}

}  // namespace gpupool::bench
