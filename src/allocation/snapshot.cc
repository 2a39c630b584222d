// TakeSnapshot over an allocation cache (gpupool/snapshot.h): the blocks the
// features keep (through the hooks), then each shard's blocks and the layout
// of their segments, copied under the shard's lock; segments are assembled
// outside it.

#include "gpupool/snapshot.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
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
    "leased",           "free",   "pending",  "retiring", "graph_pool",
    "held_for_capture", "stable", "exported", "leaked"};

constexpr absl::string_view kTraceOpNames[] = {
    "allocate", "reuse",     "release", "runtime_malloc", "runtime_free",
    "trim",     "oom_retry", "oom",     "graph_pool",     "ipc"};

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

BlockSnapshot Describe(const AllocationBlock& block, BlockUse use,
                       int64_t now_unix_ns) {
  BlockSnapshot out;
  out.use = use;
  if (use == BlockUse::kLeased) {
    out.requested_bytes = block.requested;
    out.lease_id = block.lease_id;
    out.stream = block.stream;
    out.site = block.where;
    if (block.leased_unix_ns != 0) {
      out.age_ns = std::max<int64_t>(0, now_unix_ns - block.leased_unix_ns);
    }
  } else if (block.fencing) {
    // Its fence is being recorded outside the shard's lock: its events and
    // release stream are the fencer's now. It will wait for one event per
    // stream that used it (read only while it is fenced).
    out.pending_events = static_cast<int>(block.uses.size());
    if (block.uses.size() == 1) out.stream = block.uses.front();
  } else {
    out.pending_events = static_cast<int>(block.events.size());
    out.stream = block.release_stream;
  }
  return out;
}

uintptr_t Address(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); }

// A block a feature keeps (held for a capture, a graph pool's).
struct Kept {
  int device = -1;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t bytes = 0;
  BlockSnapshot block;
};

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
  const int64_t now = snapshot.taken_at_unix_ns;
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

  // First the blocks the features keep outside the shards' lists, by
  // address: their segments are found through the shards below, or they are
  // whole segments of their own.
  absl::flat_hash_map<uintptr_t, Kept> kept;
  core->ForEachHeld([&](const AllocationBlock& block) {
    kept[Address(block.ptr)] = {
        block.device, block.kind, block.size,
        Describe(block, BlockUse::kHeldForCapture, now)};
  });
  if (router != nullptr) {
    router->ForEachUnleased([&](const AllocationBlock& block, int64_t pool) {
      BlockSnapshot described = Describe(block, BlockUse::kGraphPool, now);
      described.graph_pool = pool;
      kept[Address(block.ptr)] = {block.device, block.kind, block.size,
                                  std::move(described)};
    });
  }

  for (const auto& shard : core->shards()) {
    MemoryKindSnapshot& memory =
        snapshot.devices[shard->device()].memory[KindIndex(shard->kind())];
    // Under the shard's lock: each listed block's description, and the
    // layout (address, size of each block) of every segment they are in.
    absl::flat_hash_map<uintptr_t, BlockSnapshot> listed;
    std::vector<std::vector<std::pair<uintptr_t, uint64_t>>> layouts;
    absl::flat_hash_set<uintptr_t> heads;
    shard->ForEachBlock(
        [&](const AllocationBlock& block, BlockUse use) {
          BlockSnapshot described = Describe(block, use, now);
          if (block.owner != nullptr && router != nullptr) {
            described.use = BlockUse::kGraphPool;
            described.graph_pool = router->PoolIdOf(block.owner.get());
          }
          listed[Address(block.ptr)] = std::move(described);
          const AllocationBlock* head = &block;
          while (head->prev_in_segment != nullptr) {
            head = head->prev_in_segment;
          }
          if (!heads.insert(Address(head->ptr)).second) return;
          auto& layout = layouts.emplace_back();
          for (const AllocationBlock* part = head; part != nullptr;
               part = part->next_in_segment) {
            layout.push_back({Address(part->ptr), part->size});
          }
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
          memory.segments.push_back(OneBlockSegment(
              Address(buffer.ptr), buffer.capacity, std::move(block)));
        });
    // Outside the lock: the segments, each block described by the list it
    // was in or the feature that keeps it. A block in neither was between
    // two lists in another thread's hands: left out.
    for (const auto& layout : layouts) {
      SegmentSnapshot segment;
      segment.address = layout.front().first;
      for (const auto& [address, bytes] : layout) {
        segment.bytes += bytes;
        BlockSnapshot block;
        if (auto it = listed.find(address); it != listed.end()) {
          block = std::move(it->second);
        } else if (auto held = kept.find(address); held != kept.end()) {
          block = std::move(held->second.block);
          kept.erase(held);
        } else {
          continue;
        }
        block.offset = address - segment.address;
        block.bytes = bytes;
        segment.blocks.push_back(std::move(block));
      }
      memory.segments.push_back(std::move(segment));
    }
  }
  // Kept blocks none of whose segment's blocks is listed: segments of their
  // own.
  for (auto& [address, block] : kept) {
    if (block.device < 0 || block.device >= devices) continue;
    snapshot.devices[block.device]
        .memory[KindIndex(block.kind)]
        .segments.push_back(
            OneBlockSegment(address, block.bytes, std::move(block.block)));
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
