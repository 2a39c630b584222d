// gpupool/snapshot.h — where the memory went: a snapshot of everything an
// allocation cache holds (and, through Pools, the stream and event pools'
// counts per key), and its JSON form.
//
// A snapshot lists, per device and memory kind, every runtime allocation
// (segment) the cache holds with its blocks and what each block is doing:
// leased (by which call site, on which stream, for how many bytes), free,
// pending (its ready events not yet complete), retiring, held for a graph
// pool or a capture, a stable buffer, or exported to other processes. It also
// lists the mappings of other processes' buffers open here. Taking one makes
// no runtime call and holds each shard lock only as long as it takes to copy
// that shard's records.
//
// The JSON form is stable and versioned ("format": "gpupool.snapshot",
// "version": 1); docs/snapshot.schema.json is its schema and
// docs/memory_snapshots.md describes it. GPUPOOL_SNAPSHOT=path writes the
// process-wide bundle's snapshot at exit and at its first out-of-memory.
//
// Example:
//
//   gpupool::MemorySnapshot snapshot = gpupool::TakeSnapshot(pools);
//   absl::Status written = gpupool::WriteSnapshot(snapshot, "/tmp/mem.json");

#ifndef GPUPOOL_SNAPSHOT_H_
#define GPUPOOL_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/export.h"
#include "gpupool/source_location.h"

namespace gpupool {

class AllocationCache;
class Pools;

// What a block of a segment is doing.
enum class BlockUse {
  kLeased,          // a PooledAllocation holds it
  kFree,            // cached, reusable at once on any stream
  kPending,         // cached, its ready events not yet complete
  kRetiring,        // over the cache's cap, freed once its events complete
  kGraphPool,       // a graph pool's (leased or free inside the pool)
  kHeldForCapture,  // released inside a capture no pool claims: kept
  kStable,          // a named stable buffer
  kExported,        // a stable buffer exported to other processes
  kLeaked,          // its last use was never proven complete: kept, never
                    // reused, its segment never freed
};
GPUPOOL_EXPORT absl::string_view BlockUseName(BlockUse use);

struct GPUPOOL_EXPORT BlockSnapshot {
  uint64_t offset = 0;  // from the segment's address
  uint64_t bytes = 0;   // the block's size (rounded)
  BlockUse use = BlockUse::kFree;
  // kLeased (and graph-pool blocks that are leased):
  uint64_t requested_bytes = 0;
  uint64_t lease_id = 0;
  NativeStream stream = nullptr;  // Allocate's stream; kPending: the one
                                  // stream its events were recorded on
  SourceLocation site;
  // Time since the lease began, when the cache records lease times
  // (AllocationCacheOptions::record_lease_times, or its trace is on); -1:
  // not recorded.
  int64_t age_ns = -1;
  // kPending, kRetiring: ready events not yet known complete.
  int pending_events = 0;
  int64_t graph_pool = -1;  // kGraphPool: the pool's id
  std::string name;         // kStable, kExported
  int importers = -1;       // kExported: importers of its current version
                            // (-1: not known)
};

// One runtime allocation.
struct GPUPOOL_EXPORT SegmentSnapshot {
  uintptr_t address = 0;
  uint64_t bytes = 0;
  std::vector<BlockSnapshot> blocks;
};

struct GPUPOOL_EXPORT MemoryKindSnapshot {
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t reserved_bytes = 0;  // the segments' bytes
  uint64_t in_use_bytes = 0;    // leased blocks' bytes
  uint64_t largest_free_block_bytes = 0;
  std::vector<SegmentSnapshot> segments;
};

// One (device, config) key of a stream or event pool.
struct GPUPOOL_EXPORT PoolKeySnapshot {
  std::string config;
  int64_t idle = 0;
  int64_t in_use = 0;
  int64_t draining = 0;
};

struct GPUPOOL_EXPORT DeviceSnapshot {
  int device = 0;
  bool poisoned = false;
  std::vector<MemoryKindSnapshot> memory;
  std::vector<PoolKeySnapshot> stream_pools;  // TakeSnapshot(Pools) only
  std::vector<PoolKeySnapshot> event_pools;   // TakeSnapshot(Pools) only
};

// A mapping of another process's stable buffer open in this process.
struct GPUPOOL_EXPORT ImportSnapshot {
  int device = 0;
  uintptr_t address = 0;
  uint64_t bytes = 0;
  std::string exporter;  // the exporting process's id (hex)
  std::string name;
  int64_t leases = 0;
};

// What a trace event records (AllocationCacheOptions::trace_capacity).
enum class TraceOp {
  kAllocate,       // a lease of memory just obtained from the runtime
  kReuse,          // a lease of memory the cache held
  kRelease,        // a lease given back
  kRuntimeMalloc,  // memory obtained from the runtime
  kRuntimeFree,    // memory given back to the runtime
  kTrim,           // Trim of the device
  kOomRetry,       // the runtime ran out: cached blocks freed, retrying
  kOom,            // the allocation failed with ResourceExhausted
  kGraphPool,      // a graph pool's memory changed hands (TraceEvent::what)
  kIpc,            // a buffer was exported to or imported from a process
};
GPUPOOL_EXPORT absl::string_view TraceOpName(TraceOp op);

struct GPUPOOL_EXPORT TraceEvent {
  int64_t t_ns = 0;  // since the cache was made
  TraceOp op = TraceOp::kAllocate;
  int device = 0;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t bytes = 0;
  uintptr_t address = 0;  // 0 where none
  uint64_t lease_id = 0;  // 0 where none
  SourceLocation site;    // kAllocate, kReuse
  // kGraphPool: "released" (its blocks given back to the cache, fenced),
  // "awaits_graphs" (the handle let go; the graphs retaining the pool give
  // it back), "held" (the handle went without a release: kept until the
  // cache goes), "released_by_graphs" (its graphs and their launches are
  // gone: given back). kIpc: "export", "import". Empty for other ops. A
  // static string.
  absl::string_view what;
  int64_t graph_pool = -1;  // kGraphPool: the pool's id
  // The (device, kind)'s runtime memory and leased bytes after the event.
  uint64_t reserved_bytes = 0;
  uint64_t in_use_bytes = 0;
};

struct GPUPOOL_EXPORT MemorySnapshot {
  int64_t taken_at_unix_ns = 0;
  std::string backend;
  std::vector<DeviceSnapshot> devices;
  std::vector<ImportSnapshot> imported;
  // The cache's trace, oldest first; empty with trace_capacity 0 (off).
  size_t trace_capacity = 0;
  std::vector<TraceEvent> trace;
};

// The cache's memory. No runtime call; an empty device list in a forked
// child.
GPUPOOL_EXPORT MemorySnapshot TakeSnapshot(const AllocationCache& cache);
// The bundle's cache plus its stream and event pools' counts per key.
GPUPOOL_EXPORT MemorySnapshot TakeSnapshot(const Pools& pools);

// The versioned JSON form (one object, no trailing newline).
GPUPOOL_EXPORT std::string SnapshotToJson(const MemorySnapshot& snapshot);
// Writes SnapshotToJson to `path` (created 0600, replaced atomically through
// a temporary file in the same directory). The I/O error's words otherwise.
GPUPOOL_EXPORT absl::Status WriteSnapshot(const MemorySnapshot& snapshot,
                                          absl::string_view path);

}  // namespace gpupool

#endif  // GPUPOOL_SNAPSHOT_H_
