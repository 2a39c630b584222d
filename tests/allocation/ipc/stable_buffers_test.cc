// Sharing stable buffers across processes (StableBuffers::Export /
// Import) on SimBackend: this test and a peer process (ipc_cache_peer.cc,
// fork + exec, serialized handles over a pipe) in one IPC namespace.

#include "gpupool/stable_buffers.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/event_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/sim_backend.h"
#include "gpupool/snapshot.h"
#include "gtest/gtest.h"
#include "tests/util/peer_process.h"

namespace gpupool {
namespace {

using ::gpupool::testing::PeerProcess;

std::string Wire(const IpcHandle& handle) {
  return absl::BytesToHexString(handle.Serialize());
}

IpcHandle FromWire(const std::string& hex) {
  absl::StatusOr<IpcHandle> handle =
      IpcHandle::Parse(absl::HexStringToBytes(hex));
  EXPECT_TRUE(handle.ok()) << handle.status() << " for \"" << hex << "\"";
  return handle.ok() ? *handle : IpcHandle();
}

std::string Err(absl::StatusCode code) {
  return absl::StrCat("err ", static_cast<int>(code));
}

class CacheIpcTest : public ::testing::Test {
 protected:
  CacheIpcTest()
      : namespace_(absl::StrCat(
            "cacheipc-", getpid(), "-",
            ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        sim_(Options(namespace_, &misuses_)),
        events_(sim_),
        cache_(std::make_unique<AllocationCache>(sim_, events_)) {}

  static SimOptions Options(const std::string& ipc_namespace,
                            std::vector<std::string>* misuses) {
    SimOptions options;
    options.ipc_namespace = ipc_namespace;
    options.on_misuse = [misuses](absl::string_view message) {
      misuses->push_back(std::string(message));
    };
    return options;
  }

  std::unique_ptr<PeerProcess> StartPeer() {
    auto peer = std::make_unique<PeerProcess>(
        GPUPOOL_IPC_CACHE_PEER, std::vector<std::string>{namespace_});
    EXPECT_TRUE(peer->started());
    return peer;
  }

  std::string namespace_;
  std::vector<std::string> misuses_;
  SimBackend sim_;
  EventPool events_;
  std::unique_ptr<AllocationCache> cache_;
};

TEST(IpcHandleTest, SerializesToVersionedBytesAndBack) {
  IpcHandle handle;
  for (size_t i = 0; i < kIpcMemHandleBytes; ++i) {
    handle.runtime.bytes[i] = static_cast<uint8_t>(i + 1);
  }
  handle.device = 3;
  handle.offset = 256;
  handle.bytes = 1 << 20;
  handle.buffer_id = 0x1234567890abcdef;
  handle.version = 42;
  handle.exporter_pid = 4242;
  handle.exporter_id = 0xfedcba9876543210;
  handle.slot = 17;
  const std::string wire = handle.Serialize();
  ASSERT_EQ(wire.size(), IpcHandle::kSerializedBytes);
  EXPECT_EQ(wire.substr(0, 4), "gpIH");
  absl::StatusOr<IpcHandle> back = IpcHandle::Parse(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, handle);

  EXPECT_EQ(IpcHandle::Parse(wire.substr(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (size_t i = 0; i < wire.size(); ++i) {
    std::string corrupt = wire;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x10);
    EXPECT_EQ(IpcHandle::Parse(corrupt).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "byte " << i;
  }
  std::string newer = wire;
  newer[4] = 2;  // format version 2: refused by name, not as corrupt
  absl::Status refused = IpcHandle::Parse(newer).status();
  EXPECT_NE(refused.message().find("format version 2"), absl::string_view::npos)
      << refused;
}

// Open MPI issue 12849 (close rarely called, mappings leaked) and PyTorch
// issue 149187 (a reference count underflow kept a block forever): opens and
// closes are counted exactly and the last close happens.
TEST_F(CacheIpcTest, ThousandExportImportRoundsCostOneHandleAndOneOpen) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  void* ptr = *gpupool::StableBuffers(*cache_).Acquire("ring0", 0, 4096);
  IpcHandle first;
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<IpcHandle> handle =
        gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096);
    ASSERT_TRUE(handle.ok()) << handle.status();
    if (i == 0) {
      first = *handle;
      std::memset(sim_.ExportedBytes(ptr), 7, 4096);
    }
    ASSERT_EQ(*handle, first);
    ASSERT_EQ(peer->Ask(absl::StrCat("import ", Wire(*handle))), "ok 7");
  }
  EXPECT_EQ(sim_.calls(SimOp::kIpcGetHandle), 1);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().exports, 1);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().export_calls, 1000);
  // exports opens closes hits mappings leases waiting
  EXPECT_EQ(peer->Ask("stats"), "0 1 0 999 1 1000 0");
  EXPECT_EQ(peer->Ask("sim"), "0 1 0 0 0");
  EXPECT_EQ(sim_.ipc_importers(ptr), 1);
  EXPECT_EQ(peer->Ask("drop"), "ok");
  EXPECT_EQ(peer->Ask("stats"), "0 1 0 999 1 0 0");  // kept open for reuse
  EXPECT_EQ(peer->Ask("trim"), "ok");
  EXPECT_EQ(peer->Ask("stats"), "0 1 1 999 0 0 0");
  EXPECT_EQ(sim_.ipc_importers(ptr), 0);
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
  EXPECT_TRUE(misuses_.empty());
}

// A snapshot lists an exported stable buffer as exported (by name) and a
// mapping of another process's buffer as imported, with its leases.
TEST_F(CacheIpcTest, SnapshotShowsExportedAndImportedBuffers) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  ASSERT_TRUE(gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096).ok());
  const IpcHandle theirs = FromWire(peer->Ask("export halo 8192 5"));
  absl::StatusOr<ImportedBuffer> imported =
      gpupool::StableBuffers(*cache_).Import(theirs, 0);
  ASSERT_TRUE(imported.ok()) << imported.status();
  const MemorySnapshot snapshot = TakeSnapshot(*cache_);
  int exported = 0;
  for (const MemoryKindSnapshot& memory : snapshot.devices[0].memory) {
    for (const SegmentSnapshot& segment : memory.segments) {
      for (const BlockSnapshot& block : segment.blocks) {
        if (block.use != BlockUse::kExported) continue;
        ++exported;
        EXPECT_EQ(block.name, "ring0");
      }
    }
  }
  EXPECT_EQ(exported, 1);
  ASSERT_EQ(snapshot.imported.size(), 1u);
  EXPECT_EQ(snapshot.imported[0].device, 0);
  EXPECT_EQ(snapshot.imported[0].bytes, 8192u);
  EXPECT_EQ(snapshot.imported[0].leases, 1);
  EXPECT_EQ(snapshot.imported[0].exporter,
            absl::StrFormat("%016x", theirs.exporter_id));
  EXPECT_THAT(SnapshotToJson(snapshot),
              ::testing::HasSubstr("\"state\":\"exported\""));
  imported = absl::CancelledError("released");  // drops the lease
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

// MPICH issues 7947 and 7977: evicting an entry still in use corrupted data.
TEST_F(CacheIpcTest, GrowthMakesANewVersionAndKeepsTheOldUntilUnmapped) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  absl::StatusOr<IpcHandle> v1 =
      gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096);
  ASSERT_TRUE(v1.ok()) << v1.status();
  void* old_ptr = *gpupool::StableBuffers(*cache_).Acquire("ring0", 0, 4096);
  std::memset(sim_.ExportedBytes(old_ptr), 1, 4096);
  ASSERT_EQ(peer->Ask(absl::StrCat("import ", Wire(*v1))), "ok 1");

  const int64_t frees_before = sim_.calls(SimOp::kFree);
  absl::StatusOr<IpcHandle> v2 =
      gpupool::StableBuffers(*cache_).Export("ring0", 0, 1 << 20);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_NE(v2->version, v1->version);
  EXPECT_NE(v2->runtime, v1->runtime);
  EXPECT_EQ(v2->buffer_id, v1->buffer_id);
  EXPECT_EQ(sim_.calls(SimOp::kIpcGetHandle), 2);
  // The old version is still mapped by the peer: not freed, waiting.
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting, 1);
  EXPECT_EQ(sim_.calls(SimOp::kFree), frees_before);
  std::memset(sim_.ExportedBytes(*gpupool::StableBuffers(*cache_).Acquire(
                  "ring0", 0, 1 << 20)),
              2, 1 << 20);

  ASSERT_EQ(peer->Ask(absl::StrCat("import ", Wire(*v2))), "ok 2");
  // The superseded mapping stays while its lease is out...
  EXPECT_EQ(peer->Ask("stats"), "0 2 0 0 2 2 0");
  // ...and an import of the old version is now stale.
  EXPECT_EQ(peer->Ask(absl::StrCat("import ", Wire(*v1))),
            Err(absl::StatusCode::kNotFound));
  EXPECT_EQ(peer->Ask("drop"), "ok");
  EXPECT_EQ(peer->Ask("stats"), "0 2 1 0 1 0 0");
  // Unmapped: the exporter frees the old version at its next export or trim.
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting, 0);
  EXPECT_EQ(sim_.calls(SimOp::kFree), frees_before + 1);
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
  EXPECT_TRUE(misuses_.empty()) << misuses_.front();
}

TEST_F(CacheIpcTest, SameCallsOnTwoRanksReallocateAtTheSameStep) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  IpcHandle last_local;
  IpcHandle last_peer;
  int local_versions = 0;
  int peer_versions = 0;
  for (size_t bytes : {4096, 2048, 8192, 8192, 65536, 1024}) {
    absl::StatusOr<IpcHandle> mine =
        gpupool::StableBuffers(*cache_).Export("ring0", 0, bytes);
    ASSERT_TRUE(mine.ok()) << mine.status();
    const IpcHandle theirs =
        FromWire(peer->Ask(absl::StrCat("export ring0 ", bytes, " 5")));
    const bool mine_new = mine->version != last_local.version;
    const bool theirs_new = theirs.version != last_peer.version;
    EXPECT_EQ(mine_new, theirs_new) << "at " << bytes << " bytes";
    local_versions += mine_new;
    peer_versions += theirs_new;
    last_local = *mine;
    last_peer = theirs;
  }
  EXPECT_EQ(local_versions, 3);  // 4096, then growth to 8192 and 65536
  EXPECT_EQ(peer_versions, 3);
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

// UCX issue 2738 (a recycled address served a stale mapping) and the handle
// caches with no staleness check at all (nvFuser, PyTorch).
TEST_F(CacheIpcTest, StaleHandlesAreNotFoundNeverAMapping) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  // Released by the exporter before anyone mapped it.
  const IpcHandle released = FromWire(peer->Ask("export gone 4096 3"));
  EXPECT_EQ(peer->Ask("release gone"), "ok");
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(released, 0);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kNotFound)
      << lease.status();
  // The exporter exited.
  const IpcHandle orphan = FromWire(peer->Ask("export ring0 4096 3"));
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
  lease = gpupool::StableBuffers(*cache_).Import(orphan, 0);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kNotFound)
      << lease.status();
  EXPECT_EQ(sim_.calls(SimOp::kIpcOpenHandle), 0);
  EXPECT_EQ(sim_.ipc_maps(), 0);
}

TEST_F(CacheIpcTest, ForgedHandlesAreInvalidArguments) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle real = FromWire(peer->Ask("export ring0 4096 3"));
  IpcHandle forged = real;
  forged.runtime.bytes[20] ^= 0x55;  // a well-formed wire, forged runtime bytes
  absl::StatusOr<IpcHandle> parsed = IpcHandle::Parse(forged.Serialize());
  ASSERT_TRUE(parsed.ok());
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(*parsed, 0);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kInvalidArgument)
      << lease.status();
  EXPECT_EQ(sim_.ipc_maps(), 0);
  // The failed open released its pin: the real handle still opens.
  lease = gpupool::StableBuffers(*cache_).Import(real, 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(*static_cast<unsigned char*>(lease->data()), 3);
  // Forged bytes for the version already mapped never replace the mapping.
  EXPECT_EQ(gpupool::StableBuffers(*cache_).Import(*parsed, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().mappings_live, 1);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().closes, 0);
  lease->Release();
  EXPECT_TRUE(cache_->Trim().ok());  // unmapped before the exporter goes
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

TEST_F(CacheIpcTest, RuntimeFailuresLeaveNothingBehindAndRetriesWork) {
  // A failed export: the error, no handle kept; the next call makes one.
  sim_.FailNext(SimOp::kIpcGetHandle,
                FaultError(Fault::kResource, absl::StatusCode::kInternal,
                           "injected GetIpcHandle failure"));
  EXPECT_EQ(
      gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096).status().code(),
      absl::StatusCode::kInternal);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().exports, 0);
  EXPECT_TRUE(gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096).ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().exports, 1);

  // A failed open: the error, the pin released, no mapping; a retry opens.
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle handle = FromWire(peer->Ask("export ring0 4096 4"));
  sim_.FailNext(
      SimOp::kIpcOpenHandle,
      FaultError(Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted,
                 "injected OpenIpcHandle failure"));
  EXPECT_EQ(gpupool::StableBuffers(*cache_).Import(handle, 0).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().mappings_live, 0);
  EXPECT_EQ(peer->Ask("release ring0"), "ok");  // unpinned: freed at once
  EXPECT_EQ(peer->Ask("stats"), "1 0 0 0 0 0 0");
  EXPECT_EQ(gpupool::StableBuffers(*cache_).Import(handle, 0).status().code(),
            absl::StatusCode::kNotFound);  // and now stale
  const IpcHandle again = FromWire(peer->Ask("export ring0 4096 5"));
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(again, 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(*static_cast<unsigned char*>(lease->data()), 5);
  lease->Release();
  EXPECT_TRUE(cache_->Trim().ok());
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

TEST_F(CacheIpcTest, ImportingOwnHandleReturnsTheLocalBuffer) {
  absl::StatusOr<IpcHandle> handle =
      gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096);
  ASSERT_TRUE(handle.ok()) << handle.status();
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(*handle, 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(lease->local());
  EXPECT_EQ(lease->data(),
            *gpupool::StableBuffers(*cache_).Acquire("ring0", 0, 4096));
  EXPECT_EQ(sim_.calls(SimOp::kIpcOpenHandle), 0);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().local_imports, 1);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().import_leases, 1);
  lease->Release();
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().import_leases, 0);

  // Another cache of this process: the runtime would refuse the open.
  AllocationCache other(sim_, events_);
  EXPECT_EQ(gpupool::StableBuffers(other).Import(*handle, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CacheIpcTest, EightThreadsImportingOneHandleOpenItOnce) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle handle = FromWire(peer->Ask("export ring0 4096 9"));
  std::vector<std::thread> threads;
  std::vector<ImportedBuffer> leases(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<ImportedBuffer> lease =
          gpupool::StableBuffers(*cache_).Import(handle, 0);
      if (lease.ok()) leases[t] = *std::move(lease);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const ImportedBuffer& lease : leases) {
    ASSERT_TRUE(lease);
    EXPECT_EQ(*static_cast<unsigned char*>(lease.data()), 9);
  }
  EXPECT_EQ(sim_.calls(SimOp::kIpcOpenHandle), 1);
  const IpcStats stats = gpupool::StableBuffers(*cache_).GetIpcStats();
  EXPECT_EQ(stats.opens, 1);
  EXPECT_EQ(stats.import_hits, 7);
  EXPECT_EQ(stats.import_leases, 8);

  // The leak report lists the import leases.
  int listed = 0;
  for (const OutstandingLease& lease : cache_->GetOutstandingLeases()) {
    listed += lease.resource == "ipc import";
  }
  EXPECT_EQ(listed, 8);
  leases.clear();
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(sim_.calls(SimOp::kIpcCloseHandle), 1);
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

TEST_F(CacheIpcTest, APoisonedDeviceDropsItsMappingsWithoutARuntimeCall) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle handle = FromWire(peer->Ask("export ring0 4096 9"));
  {
    absl::StatusOr<ImportedBuffer> lease =
        gpupool::StableBuffers(*cache_).Import(handle, 0);
    ASSERT_TRUE(lease.ok()) << lease.status();
  }
  // A sticky error seen by any pool sharing the cache's health.
  const absl::Status sticky = absl::InternalError("cudaErrorIllegalAddress");
  sim_.PoisonDevice(0, sticky);
  cache_->health()->Poison(0, sticky);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).Import(handle, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sim_.calls(SimOp::kIpcCloseHandle), 0);
  const IpcStats stats = gpupool::StableBuffers(*cache_).GetIpcStats();
  EXPECT_EQ(stats.dropped, 1);
  EXPECT_EQ(stats.mappings_live, 0);
  // The dropped mapping keeps its pin: the exporter keeps the version rather
  // than free memory this process may still have mapped.
  EXPECT_EQ(peer->Ask("release ring0"), "ok");
  EXPECT_EQ(peer->Ask("stats"), "1 0 0 0 0 0 1");
  EXPECT_EQ(peer->Ask("sim"), "1 0 0 0 0");
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

}  // namespace
}  // namespace gpupool
