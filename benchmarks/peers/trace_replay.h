// benchmarks/peers/trace_replay.h — replays an allocation trace (allocations
// and releases with sizes, streams and timestamps) through any allocator, to
// measure how much memory it holds from the runtime against what the trace
// ever had live at once.
//
// Trace files (benchmarks/peers/traces/*.trace, written by
// tools/gen_alloc_traces.py) are text, one event a line:
//   # comment
//   streams <n>                      once, before any event
//   <time_us> a <id> <bytes> <stream>  allocate `bytes` on stream index
//   <time_us> f <id>                   release allocation `id`
// Timestamps order the events and are otherwise not replayed (no sleeping):
// the stand-in runtime's device is idle, so a release is complete at once.

#ifndef GPUPOOL_BENCHMARKS_PEERS_TRACE_REPLAY_H_
#define GPUPOOL_BENCHMARKS_PEERS_TRACE_REPLAY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpupool::bench {

struct TraceEvent {
  int64_t time_us = 0;
  bool allocate = false;
  int64_t id = 0;
  size_t bytes = 0;  // allocate only
  int stream = 0;    // allocate only
};

struct Trace {
  std::string name;
  int streams = 1;
  std::vector<TraceEvent> events;
  int64_t peak_live_bytes = 0;  // of the requested sizes
  int64_t allocations = 0;
};

// Reads and checks a trace file: InvalidArgument naming the line for a
// malformed one, an unknown or doubly-allocated id, or an allocation still
// live at the end.
absl::StatusOr<Trace> ReadTrace(const std::string& path);

// What a replay drives: allocate on a stream, release by handle. Handles are
// the allocator's own (an index into its table of leases).
class ReplayAllocator {
 public:
  virtual ~ReplayAllocator() = default;
  // Allocates `bytes` on `stream` and returns a pointer.
  virtual absl::StatusOr<void*> Allocate(size_t bytes, void* stream) = 0;
  // Releases what Allocate returned.
  virtual absl::Status Release(void* ptr) = 0;
};

// Replays `trace` through `allocator` over `streams` (trace.streams of them).
// Stops at the first error.
absl::Status Replay(const Trace& trace, const std::vector<void*>& streams,
                    ReplayAllocator& allocator);

}  // namespace gpupool::bench

#endif  // GPUPOOL_BENCHMARKS_PEERS_TRACE_REPLAY_H_
