// TakeSnapshot over an AllocationCache on SimBackend: every block state a
// cache can hold, its fields, the per-kind totals, the JSON form, and that
// taking a snapshot makes no runtime call.

#include "gpupool/snapshot.h"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/graph_pool.h"
#include "gpupool/stable_buffers.h"
#include "gtest/gtest.h"
#include "tests/allocation/sim_fixture.h"
#include "tests/allocation/snapshot_blocks.h"
#include "tests/util/checking_backend.h"

namespace gpupool {
namespace {

using ::gpupool::testing::CountBlocks;
using ::gpupool::testing::IsOk;
using ::gpupool::testing::SnapshotBlocks;
using ::gpupool::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

class SnapshotTest : public AllocationCacheSimTest {
 protected:
  // The blocks of `device`'s kind, flattened, in address order.
  static const MemoryKindSnapshot& Memory(const MemorySnapshot& snapshot,
                                          int device, MemoryKind kind) {
    for (const MemoryKindSnapshot& memory : snapshot.devices[device].memory) {
      if (memory.kind == kind) return memory;
    }
    ADD_FAILURE() << "no such kind";
    return snapshot.devices[device].memory[0];
  }
};

TEST_F(SnapshotTest, EveryBlockStateWithItsFields) {
  AllocationCacheOptions options;
  options.detect_unregistered_captures = true;
  // Every segment stays (no give-back before a miss): one block per state.
  options.give_back_above_percent = -1;
  auto cache = NewCache(options);
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  // Leased, with its call site.
  const int site_line = __LINE__ + 2;
  absl::StatusOr<PooledAllocation> leased =
      cache->Allocate(0, 3000, MemoryKind::kDevice, a);
  ASSERT_THAT(leased, IsOk());
  // Free (released with no stream: nothing to fence).
  {
    absl::StatusOr<PooledAllocation> free_block =
        cache->Allocate(0, 64 * kKiB, MemoryKind::kDevice);
    ASSERT_THAT(free_block, IsOk());
  }
  // Pending: released on b while b's work never completes.
  {
    absl::StatusOr<PooledAllocation> pending =
        cache->Allocate(0, 256 * kKiB, MemoryKind::kDevice, b);
    ASSERT_THAT(pending, IsOk());
    sim_.SubmitWork(b, absl::InfiniteDuration());
  }
  // Pinned host, leased.
  absl::StatusOr<PooledAllocation> pinned =
      cache->Allocate(0, 8 * kKiB, MemoryKind::kPinnedHost, a);
  ASSERT_THAT(pinned, IsOk());
  // Held for an unregistered capture on device 1.
  NativeStream c = NewStream(1);
  sim_.BeginCapture(c);
  // A stable buffer.
  StableBuffers stable(*cache);
  absl::StatusOr<void*> weights = stable.Acquire("weights", 1, 2 * kMiB);
  ASSERT_THAT(weights, IsOk());
  // A graph pool's block (free inside the pool after its capture).
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 1);
  ASSERT_THAT(pool, IsOk());
  NativeStream g = NewStream(1);
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(g);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(g, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    absl::StatusOr<PooledAllocation> captured =
        cache->Allocate(1, kMiB, MemoryKind::kDevice, g);
    ASSERT_THAT(captured, IsOk());
  }
  absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(g);
  ASSERT_THAT(graph, IsOk());
  // Released while `c` captures with no pool for it: held.
  {
    absl::StatusOr<PooledAllocation> held =
        cache->Allocate(1, 128 * kKiB, MemoryKind::kDevice, c);
    ASSERT_THAT(held, IsOk());
  }

  const int64_t calls = sim_.total_calls();
  const MemorySnapshot snapshot = TakeSnapshot(*cache);
  EXPECT_EQ(sim_.total_calls(), calls) << "a snapshot makes no runtime call";
  EXPECT_EQ(snapshot.backend, std::string(sim_.name()));
  EXPECT_GT(snapshot.taken_at_unix_ns, 0);
  ASSERT_EQ(snapshot.devices.size(), 2u);
  EXPECT_FALSE(snapshot.devices[0].poisoned);

  const std::vector<BlockSnapshot> dev0 = SnapshotBlocks(snapshot, 0);
  ASSERT_EQ(dev0.size(), 3u);
  EXPECT_EQ(CountBlocks(dev0, BlockUse::kLeased), 1);
  EXPECT_EQ(CountBlocks(dev0, BlockUse::kFree), 1);
  EXPECT_EQ(CountBlocks(dev0, BlockUse::kPending), 1);
  for (const BlockSnapshot& block : dev0) {
    EXPECT_EQ(block.offset, 0u);
    switch (block.use) {
      case BlockUse::kLeased:
        EXPECT_EQ(block.requested_bytes, 3000u);
        EXPECT_EQ(block.bytes, 3 * kKiB);  // its size class
        EXPECT_EQ(block.lease_id, leased->lease_id());
        EXPECT_EQ(block.stream, a);
        EXPECT_THAT(block.site.file_name(), HasSubstr("snapshot_test.cc"));
        EXPECT_EQ(block.site.line(), static_cast<uint32_t>(site_line));
        break;
      case BlockUse::kFree:
        EXPECT_EQ(block.bytes, 64 * kKiB);
        EXPECT_EQ(block.pending_events, 0);
        break;
      case BlockUse::kPending:
        EXPECT_EQ(block.bytes, 256 * kKiB);
        EXPECT_EQ(block.pending_events, 1);
        EXPECT_EQ(block.stream, b);
        break;
      default:
        ADD_FAILURE() << BlockUseName(block.use);
    }
  }
  const MemoryKindSnapshot& device0 = Memory(snapshot, 0, MemoryKind::kDevice);
  EXPECT_EQ(device0.reserved_bytes, 3 * kKiB + 64 * kKiB + 256 * kKiB);
  EXPECT_EQ(device0.in_use_bytes, 3 * kKiB);
  EXPECT_EQ(device0.largest_free_block_bytes, 64 * kKiB);
  const std::vector<BlockSnapshot> pinned0 =
      SnapshotBlocks(snapshot, 0, MemoryKind::kPinnedHost);
  ASSERT_EQ(pinned0.size(), 1u);
  EXPECT_EQ(pinned0[0].use, BlockUse::kLeased);
  EXPECT_EQ(pinned0[0].lease_id, pinned->lease_id());

  const std::vector<BlockSnapshot> dev1 = SnapshotBlocks(snapshot, 1);
  ASSERT_EQ(dev1.size(), 3u);
  EXPECT_EQ(CountBlocks(dev1, BlockUse::kStable), 1);
  EXPECT_EQ(CountBlocks(dev1, BlockUse::kGraphPool), 1);
  EXPECT_EQ(CountBlocks(dev1, BlockUse::kHeldForCapture), 1);
  for (const BlockSnapshot& block : dev1) {
    if (block.use == BlockUse::kStable) {
      EXPECT_EQ(block.name, "weights");
      EXPECT_EQ(block.bytes, 2 * kMiB);
    } else if (block.use == BlockUse::kGraphPool) {
      EXPECT_EQ(block.graph_pool, static_cast<int64_t>(pool->id()));
      EXPECT_EQ(block.bytes, kMiB);
      EXPECT_EQ(block.lease_id, 0u);
    } else {
      EXPECT_EQ(block.bytes, 128 * kKiB);
    }
  }
  EXPECT_EQ(Memory(snapshot, 1, MemoryKind::kDevice).in_use_bytes, 0u);

  // The JSON form carries the same facts.
  const std::string json = SnapshotToJson(snapshot);
  EXPECT_THAT(json, HasSubstr("\"format\":\"gpupool.snapshot\",\"version\":1"));
  EXPECT_THAT(json, HasSubstr(absl::StrCat(
                        "\"state\":\"leased\",\"requested_bytes\":3000,"
                        "\"lease_id\":",
                        leased->lease_id(), ",\"site\":{\"file\":")));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"line\":", site_line, "}")));
  EXPECT_THAT(json, HasSubstr("\"state\":\"pending\""));
  EXPECT_THAT(json, HasSubstr("\"pending_events\":1"));
  EXPECT_THAT(json, HasSubstr("\"state\":\"stable\""));
  EXPECT_THAT(json, HasSubstr("\"name\":\"weights\""));
  EXPECT_THAT(json, HasSubstr("\"state\":\"graph_pool\""));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"graph_pool\":", pool->id())));
  EXPECT_THAT(json, HasSubstr("\"state\":\"held_for_capture\""));
  EXPECT_THAT(json, HasSubstr("\"kind\":\"pinned_host\""));

  // Clean up: end the unregistered capture, drop the graph.
  absl::StatusOr<SimGraph> ended = sim_.EndCaptureToGraph(c);
  ASSERT_THAT(ended, IsOk());
  ASSERT_THAT(sim_.DestroyGraph(*ended), IsOk());
  ASSERT_THAT(sim_.DestroyGraph(*graph), IsOk());
  EXPECT_THAT(pool->Release({g}), IsOk());
  leased->Release();
  pinned->Release();
  EXPECT_THAT(stable.Release("weights", 1), IsOk());
  sim_.CompleteAllWork();
}

// Under deferred fences a parked block another stream wants has its fence
// recorded outside the shard's lock. A snapshot taken meanwhile (here from
// inside that very record, as another thread could) shows the pending block
// it is becoming, one event on the stream it was released on, and reads
// nothing the fencer is writing (the threaded release-slot test runs this
// under ThreadSanitizer).
TEST_F(SnapshotTest, ABlockBeingFencedIsShownPendingOnItsStream) {
  ::gpupool::testing::CheckingBackend checked(sim_);
  AllocationCacheOptions options;
  options.defer_same_stream_fences = true;
  AllocationCache cache(checked, *events_, health_, options);
  NativeStream a = NewStream();
  NativeStream b = NewStream();
  {
    absl::StatusOr<PooledAllocation> first =
        cache.Allocate(0, kMiB, MemoryKind::kDevice, a);
    ASSERT_THAT(first, IsOk());
  }  // parked on `a`, its fence deferred
  const std::vector<BlockSnapshot> parked =
      SnapshotBlocks(TakeSnapshot(cache), 0);
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].use, BlockUse::kPending);
  const uint64_t bytes = parked[0].bytes;

  std::vector<BlockSnapshot> seen;
  int records = 0;
  checked.BeforeEachCall([&](SimOp op, int) {
    if (op != SimOp::kEventRecord) return;
    ++records;
    seen = SnapshotBlocks(TakeSnapshot(cache), 0);
  });
  absl::StatusOr<PooledAllocation> second =
      cache.Allocate(0, kMiB, MemoryKind::kDevice, b);
  checked.BeforeEachCall(nullptr);
  ASSERT_THAT(second, IsOk());
  ASSERT_EQ(records, 1);  // the parked block's fence, and nothing else
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].use, BlockUse::kPending);
  EXPECT_EQ(seen[0].bytes, bytes);
  EXPECT_EQ(seen[0].pending_events, 1);
  EXPECT_EQ(seen[0].stream, a);
  EXPECT_EQ(seen[0].lease_id, 0u);
}

TEST_F(SnapshotTest, TraceKeepsTheLastEventsWithTotals) {
  AllocationCacheOptions options;
  options.trace_capacity = 6;
  auto cache = NewCache(options);
  NativeStream a = NewStream();
  const int64_t calls_before = sim_.total_calls();
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<PooledAllocation> block =
        cache->Allocate(0, 64 * kKiB, MemoryKind::kDevice, a);
    ASSERT_THAT(block, IsOk());
  }
  // The trace makes no runtime call of its own: a miss (malloc) and two
  // same-stream cycles (one event record each).
  EXPECT_EQ(sim_.total_calls() - calls_before, 1 + 1 + 1 + 1);
  sim_.CompleteAllWork();
  ASSERT_THAT(cache->Trim(0), IsOk());
  const MemorySnapshot snapshot = TakeSnapshot(*cache);
  EXPECT_EQ(snapshot.trace_capacity, 6u);
  // 7 events happened (malloc, allocate, release, reuse, release, trim,
  // free): the ring kept the last 6.
  ASSERT_EQ(snapshot.trace.size(), 6u);
  const TraceOp expected[] = {TraceOp::kAllocate, TraceOp::kRelease,
                              TraceOp::kReuse,    TraceOp::kRelease,
                              TraceOp::kTrim,     TraceOp::kRuntimeFree};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(snapshot.trace[i].op, expected[i]) << i;
    if (i > 0) {
      EXPECT_GE(snapshot.trace[i].t_ns, snapshot.trace[i - 1].t_ns);
    }
  }
  EXPECT_EQ(snapshot.trace[0].bytes, 64 * kKiB);
  EXPECT_EQ(snapshot.trace[0].reserved_bytes, 64 * kKiB);
  EXPECT_EQ(snapshot.trace[0].in_use_bytes, 64 * kKiB);
  EXPECT_THAT(snapshot.trace[0].site.file_name(),
              HasSubstr("snapshot_test.cc"));
  EXPECT_EQ(snapshot.trace[1].in_use_bytes, 0u);
  EXPECT_EQ(snapshot.trace[2].lease_id, snapshot.trace[3].lease_id);
  EXPECT_EQ(snapshot.trace[5].bytes, 64 * kKiB);
  EXPECT_EQ(snapshot.trace[5].reserved_bytes, 0u);
  const std::string json = SnapshotToJson(snapshot);
  EXPECT_THAT(json, HasSubstr("\"trace_capacity\":6"));
  EXPECT_THAT(json, HasSubstr("\"op\":\"reuse\""));
  EXPECT_THAT(json, HasSubstr("\"op\":\"runtime_free\""));
}

// Graph pools and IPC write their transitions into the trace: a pool's
// release (with its id and bytes), a buffer's export and import.
TEST_F(SnapshotTest, GraphPoolAndIpcTransitionsAreTraced) {
  AllocationCacheOptions options;
  options.trace_capacity = 64;
  auto cache = NewCache(options);
  NativeStream g = NewStream();
  absl::StatusOr<GraphPool> pool = GraphPool::Create(*cache, 0);
  ASSERT_THAT(pool, IsOk());
  {
    absl::StatusOr<CaptureScope> scope = pool->BeginCapture(g);
    ASSERT_THAT(scope, IsOk());
    ASSERT_THAT(sim_.BeginCapture(g, SimCaptureMode::kGlobal, pool->id()),
                IsOk());
    absl::StatusOr<PooledAllocation> captured =
        cache->Allocate(0, kMiB, MemoryKind::kDevice, g);
    ASSERT_THAT(captured, IsOk());
  }
  absl::StatusOr<SimGraph> graph = sim_.EndCaptureToGraph(g);
  ASSERT_THAT(graph, IsOk());
  ASSERT_THAT(pool->Release({g}), IsOk());
  StableBuffers buffers(*cache);
  absl::StatusOr<IpcHandle> handle = buffers.Export("ring", 0, 64 * kKiB);
  ASSERT_THAT(handle, IsOk());
  absl::StatusOr<ImportedBuffer> imported = buffers.Import(*handle, 0);
  ASSERT_THAT(imported, IsOk());

  const MemorySnapshot snapshot = TakeSnapshot(*cache);
  std::vector<TraceEvent> features;
  for (const TraceEvent& event : snapshot.trace) {
    if (event.op == TraceOp::kGraphPool || event.op == TraceOp::kIpc) {
      features.push_back(event);
    }
  }
  ASSERT_EQ(features.size(), 3u);
  EXPECT_EQ(features[0].op, TraceOp::kGraphPool);
  EXPECT_EQ(features[0].what, "released");
  EXPECT_EQ(features[0].graph_pool, static_cast<int64_t>(pool->id()));
  EXPECT_EQ(features[0].bytes, kMiB);
  EXPECT_EQ(features[1].op, TraceOp::kIpc);
  EXPECT_EQ(features[1].what, "export");
  EXPECT_EQ(features[1].bytes, 64 * kKiB);
  EXPECT_NE(features[1].address, 0u);
  EXPECT_EQ(features[2].what, "import");
  EXPECT_EQ(features[2].address, reinterpret_cast<uintptr_t>(imported->data()));
  const std::string json = SnapshotToJson(snapshot);
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"op\":\"graph_pool\"")));
  EXPECT_THAT(json, HasSubstr(absl::StrCat(
                        "\"what\":\"released\",\"graph_pool\":", pool->id())));
  EXPECT_THAT(json, HasSubstr("\"op\":\"ipc\""));
  EXPECT_THAT(json, HasSubstr("\"what\":\"import\""));
  imported->Release();
  ASSERT_THAT(sim_.DestroyGraph(*graph), IsOk());
}

TEST_F(SnapshotTest, TraceIsOffByDefaultAndOutOfMemoryIsTraced) {
  {
    auto cache = NewCache();
    ASSERT_THAT(cache->Allocate(0, kKiB), IsOk());
    const MemorySnapshot snapshot = TakeSnapshot(*cache);
    EXPECT_EQ(snapshot.trace_capacity, 0u);
    EXPECT_TRUE(snapshot.trace.empty());
    EXPECT_THAT(SnapshotToJson(snapshot), HasSubstr("\"trace_capacity\":0"));
  }
  AllocationCacheOptions options;
  options.trace_capacity = 100;
  int observed = 0;
  options.on_out_of_memory = [&observed](const absl::Status& status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
    ++observed;
  };
  auto cache = NewCache(options);
  EXPECT_THAT(cache->Allocate(0, size_t{1} << 60),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(observed, 1);
  const MemorySnapshot snapshot = TakeSnapshot(*cache);
  ASSERT_EQ(snapshot.trace.size(), 1u);
  EXPECT_EQ(snapshot.trace[0].op, TraceOp::kOom);
  EXPECT_EQ(snapshot.trace[0].bytes, size_t{1} << 60);
}

TEST_F(SnapshotTest, ASplitSegmentListsEachOfItsBlocks) {
  auto cache = NewCache();
  { ASSERT_THAT(cache->Allocate(0, kMiB), IsOk()); }  // one segment, free
  absl::StatusOr<PooledAllocation> part = cache->Allocate(0, 256 * kKiB);
  ASSERT_THAT(part, IsOk());
  const MemorySnapshot snapshot = TakeSnapshot(*cache);
  const MemoryKindSnapshot& memory = Memory(snapshot, 0, MemoryKind::kDevice);
  ASSERT_EQ(memory.segments.size(), 1u);
  const SegmentSnapshot& segment = memory.segments[0];
  EXPECT_EQ(segment.bytes, kMiB);
  EXPECT_EQ(segment.address, reinterpret_cast<uintptr_t>(part->data()));
  ASSERT_EQ(segment.blocks.size(), 2u);
  EXPECT_EQ(segment.blocks[0].use, BlockUse::kLeased);
  EXPECT_EQ(segment.blocks[0].offset, 0u);
  EXPECT_EQ(segment.blocks[0].bytes, 256 * kKiB);
  EXPECT_EQ(segment.blocks[1].use, BlockUse::kFree);
  EXPECT_EQ(segment.blocks[1].offset, 256 * kKiB);
  EXPECT_EQ(segment.blocks[1].bytes, 768 * kKiB);
  EXPECT_EQ(memory.reserved_bytes, kMiB);
  EXPECT_EQ(memory.in_use_bytes, 256 * kKiB);
  EXPECT_EQ(memory.largest_free_block_bytes, 768 * kKiB);
}

// A lease's age is in the snapshot when the cache records lease times (an
// option, or the trace), and absent (-1, no JSON field) when it does not.
TEST_F(SnapshotTest, LeaseAgeIsRecordedOnlyWhenAsked) {
  NativeStream stream = NewStream();
  for (const bool record : {false, true}) {
    AllocationCacheOptions options;
    options.record_lease_times = record;
    auto cache = NewCache(options);
    const int64_t before = absl::GetCurrentTimeNanos();
    absl::StatusOr<PooledAllocation> leased =
        cache->Allocate(0, 4 * kKiB, MemoryKind::kDevice, stream);
    ASSERT_THAT(leased, IsOk());
    absl::SleepFor(absl::Milliseconds(20));
    const MemorySnapshot snapshot = TakeSnapshot(*cache);
    const int64_t elapsed = absl::GetCurrentTimeNanos() - before;
    const std::vector<BlockSnapshot> blocks = SnapshotBlocks(snapshot, 0);
    ASSERT_EQ(blocks.size(), 1u);
    ASSERT_EQ(blocks[0].use, BlockUse::kLeased);
    const std::string json = SnapshotToJson(snapshot);
    if (!record) {
      EXPECT_EQ(blocks[0].age_ns, -1);
      EXPECT_THAT(json, Not(HasSubstr("\"age_ns\"")));
      continue;
    }
    EXPECT_GE(blocks[0].age_ns,
              absl::ToInt64Nanoseconds(absl::Milliseconds(20)));
    EXPECT_LE(blocks[0].age_ns, elapsed);
    EXPECT_THAT(json, HasSubstr(absl::StrCat("\"age_ns\":", blocks[0].age_ns)));
  }
  // The trace implies it.
  AllocationCacheOptions traced;
  traced.trace_capacity = 16;
  auto cache = NewCache(traced);
  absl::StatusOr<PooledAllocation> leased =
      cache->Allocate(0, 4 * kKiB, MemoryKind::kDevice, stream);
  ASSERT_THAT(leased, IsOk());
  const std::vector<BlockSnapshot> blocks =
      SnapshotBlocks(TakeSnapshot(*cache), 0);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_GE(blocks[0].age_ns, 0);
}

TEST_F(SnapshotTest, StringsAreEscapedInJson) {
  auto cache = NewCache();
  StableBuffers stable(*cache);
  ASSERT_THAT(stable.Acquire("a\"b\\c\nd", 0, kKiB), IsOk());
  const std::string json = SnapshotToJson(TakeSnapshot(*cache));
  EXPECT_THAT(json, HasSubstr(R"("name":"a\"b\\c\nd")"));
  EXPECT_THAT(stable.Release("a\"b\\c\nd", 0), IsOk());
}

TEST_F(SnapshotTest, WriteSnapshotReplacesTheFileAndNamesIoErrors) {
  auto cache = NewCache();
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/snapshot_", getpid(), ".json");
  ASSERT_THAT(WriteSnapshot(TakeSnapshot(*cache), path), IsOk());
  ASSERT_THAT(WriteSnapshot(TakeSnapshot(*cache), path), IsOk());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("\"format\":\"gpupool.snapshot\""));
  EXPECT_THAT(text.str(), Not(HasSubstr("\n")));
  unlink(path.c_str());
  EXPECT_THAT(WriteSnapshot(TakeSnapshot(*cache), "/nonexistent-dir/s.json"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("/nonexistent-dir/s.json")));
}

}  // namespace
}  // namespace gpupool
