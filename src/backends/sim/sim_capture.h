// SimBackend's graph-capture model: the state of open captures, of graphs
// made from them, and of the test's memory claims the graph oracle checks
// replays against. The runtime behaviour modelled, with its sources, is in
// docs/backends.md ("Graph capture in the simulator").
//
// Only sim_*.cc include this. The state lives in each DeviceState (a capture
// and its graph belong to the device of the stream that began it) and is
// guarded by that device's mutex.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_CAPTURE_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_CAPTURE_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "gpupool/sim_backend.h"

namespace gpupool {
namespace sim_internal {

// Part of one allocation that a piece of work reads or writes.
struct TouchedRange {
  uintptr_t base = 0;  // the allocation's address (never reused by the sim)
  uintptr_t begin = 0;
  uintptr_t end = 0;  // exclusive
};

// One piece of work recorded into a capture (SubmitWork or TouchMemory on a
// capturing stream): not run, replayed by every launch of the graph.
struct CapturedWork {
  absl::Duration duration = absl::ZeroDuration();
  std::vector<TouchedRange> touched;
};

struct CaptureState {
  uintptr_t origin = 0;  // the stream BeginCapture named
  SimCaptureMode mode = SimCaptureMode::kGlobal;
  std::thread::id thread;  // the thread that began it
  uint64_t owner = 0;      // the graph oracle's owner of the graph it makes
  bool invalidated = false;
  // The origin and every stream joined through a wait on a captured event.
  std::vector<uintptr_t> streams;
  std::vector<CapturedWork> work;
};

struct GraphState {
  uint64_t capture_id = 0;
  uint64_t owner = 0;
  std::vector<CapturedWork> work;
  bool instantiated = false;
  int64_t launches = 0;
  // Tickets of the latest launch: pending while its replay runs.
  std::vector<uint64_t> last_launch;
};

// "This range holds `owner`'s data" (ClaimMemory), until released.
struct MemoryClaim {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  uint64_t owner = 0;
};

struct CaptureModel {
  absl::flat_hash_map<uint64_t, CaptureState> captures;  // by capture id
  absl::flat_hash_map<uint64_t, GraphState> graphs;      // by graph id
  std::vector<MemoryClaim> claims;
};

// Process-wide, never reused (cudaStreamGetCaptureInfo: "unique over the
// lifetime of the process"): ids for captures and graphs.
uint64_t NextCaptureId();
uint64_t NextGraphId();

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_CAPTURE_H_
