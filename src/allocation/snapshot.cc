// TakeSnapshot over an allocation cache (gpupool/snapshot.h): each shard's
// blocks copied under its lock, then the blocks the features keep, through
// the hooks. Today every runtime allocation holds one block, so each block
// is a segment of its own.

#include "gpupool/snapshot.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gpupool/allocation_cache.h"
#include "src/allocation/block.h"
#include "src/allocation/cache_core.h"
#include "src/allocation/hooks.h"
#include "src/allocation/shard.h"

namespace gpupool {
namespace {

using internal::AllocationBlock;
using internal::AllocationCacheCore;
using internal::CaptureRouter;
using internal::FreeGate;

constexpr absl::string_view kBlockUseNames[] = {
    "leased",           "free",   "pending", "retiring", "graph_pool",
    "held_for_capture", "stable", "exported"};

constexpr absl::string_view kTraceOpNames[] = {
    "allocate",     "reuse", "release",   "runtime_malloc",
    "runtime_free", "trim",  "oom_retry", "oom"};

constexpr MemoryKind kKinds[] = {MemoryKind::kDevice, MemoryKind::kPinnedHost};

int KindIndex(MemoryKind kind) { return kind == MemoryKind::kDevice ? 0 : 1; }

SegmentSnapshot OneBlockSegment(uintptr_t address, uint64_t bytes,
                                BlockSnapshot block) {
  SegmentSnapshot segment;
  segment.address = address;
  segment.bytes = bytes;
  block.offset = 0;
  block.bytes = bytes;
  segment.blocks.push_back(std::move(block));
  return segment;
}

BlockSnapshot Describe(const AllocationBlock& block, BlockUse use) {
  BlockSnapshot out;
  out.use = use;
  if (use == BlockUse::kLeased) {
    out.requested_bytes = block.requested;
    out.lease_id = block.lease_id;
    out.stream = block.stream;
    out.site = block.where;
  } else {
    out.pending_events = static_cast<int>(block.events.size());
    out.stream = block.release_stream;
  }
  return out;
}

void Add(DeviceSnapshot& device, const AllocationBlock& block,
         BlockSnapshot described) {
  MemoryKindSnapshot& memory = device.memory[KindIndex(block.kind)];
  memory.segments.push_back(
      OneBlockSegment(reinterpret_cast<uintptr_t>(block.ptr), block.size,
                      std::move(described)));
}

void Summarize(MemoryKindSnapshot& memory) {
  std::sort(memory.segments.begin(), memory.segments.end(),
            [](const SegmentSnapshot& a, const SegmentSnapshot& b) {
              return a.address < b.address;
            });
  for (const SegmentSnapshot& segment : memory.segments) {
    memory.reserved_bytes += segment.bytes;
    for (const BlockSnapshot& block : segment.blocks) {
      if (block.use == BlockUse::kLeased ||
          (block.use == BlockUse::kGraphPool && block.lease_id != 0)) {
        memory.in_use_bytes += block.bytes;
      }
      if (block.use == BlockUse::kFree) {
        memory.largest_free_block_bytes =
            std::max(memory.largest_free_block_bytes, block.bytes);
      }
    }
  }
}

}  // namespace

absl::string_view BlockUseName(BlockUse use) {
  const int index = static_cast<int>(use);
  if (index < 0 || index >= static_cast<int>(std::size(kBlockUseNames))) {
    return "unknown";
  }
  return kBlockUseNames[index];
}

absl::string_view TraceOpName(TraceOp op) {
  const int index = static_cast<int>(op);
  if (index < 0 || index >= static_cast<int>(std::size(kTraceOpNames))) {
    return "unknown";
  }
  return kTraceOpNames[index];
}

MemorySnapshot TakeSnapshot(const AllocationCache& cache) {
  MemorySnapshot snapshot;
  snapshot.taken_at_unix_ns = absl::GetCurrentTimeNanos();
  snapshot.backend = std::string(cache.backend().name());
  const std::shared_ptr<AllocationCacheCore>& core =
      internal::AllocationCacheAccess::Core(cache);
  if (core == nullptr || core->Forked()) return snapshot;
  const int devices = core->lifetime().device_count();
  for (int device = 0; device < devices; ++device) {
    DeviceSnapshot& out = snapshot.devices.emplace_back();
    out.device = device;
    out.poisoned = core->poisoned(device);
    for (MemoryKind kind : kKinds) out.memory.emplace_back().kind = kind;
  }
  const CaptureRouter* router = core->capture_router();
  const FreeGate* gate = core->free_gate();
  for (const auto& shard : core->shards()) {
    DeviceSnapshot& device = snapshot.devices[shard->device()];
    shard->ForEachBlock(
        [&](const AllocationBlock& block, BlockUse use) {
          BlockSnapshot described = Describe(block, use);
          if (block.owner != nullptr && router != nullptr) {
            described.use = BlockUse::kGraphPool;
            described.graph_pool = router->PoolIdOf(block.owner.get());
          }
          Add(device, block, std::move(described));
        },
        [&](absl::string_view name, const internal::StableBuffer& buffer) {
          BlockSnapshot block;
          block.use = BlockUse::kStable;
          block.name = std::string(name);
          int importers = -1;
          if (gate != nullptr &&
              gate->IsExported(shard->device(), buffer.ptr, &importers)) {
            block.use = BlockUse::kExported;
            block.importers = importers;
          }
          device.memory[KindIndex(shard->kind())].segments.push_back(
              OneBlockSegment(reinterpret_cast<uintptr_t>(buffer.ptr),
                              buffer.capacity, std::move(block)));
        });
  }
  core->ForEachHeld([&](const AllocationBlock& block) {
    if (block.device < 0 || block.device >= devices) return;
    Add(snapshot.devices[block.device], block,
        Describe(block, BlockUse::kHeldForCapture));
  });
  if (router != nullptr) {
    router->ForEachUnleased([&](const AllocationBlock& block, int64_t pool) {
      if (block.device < 0 || block.device >= devices) return;
      BlockSnapshot described = Describe(block, BlockUse::kGraphPool);
      described.graph_pool = pool;
      Add(snapshot.devices[block.device], block, std::move(described));
    });
  }
  if (gate != nullptr) gate->AppendImports(&snapshot.imported);
  if (const internal::TraceRing* trace = core->trace()) {
    snapshot.trace_capacity = trace->capacity();
    snapshot.trace = trace->Events();
  }
  for (DeviceSnapshot& device : snapshot.devices) {
    for (MemoryKindSnapshot& memory : device.memory) Summarize(memory);
  }
  return snapshot;
}

}  // namespace gpupool
