// Liveness and release you can see, across real processes (this test and
// ipc_cache_peer.cc on SimBackend): an import of a dead exporter's handle is
// NotFound even while a mapping of it is open here (within the documented
// bound), the exporter's stats say how many importers each waiting version
// waits on, and identity holds across PID namespaces.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/event_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"
#include "gtest/gtest.h"
#include "src/allocation/ipc/exports.h"
#include "src/allocation/ipc/refs.h"
#include "tests/util/peer_process.h"

namespace gpupool {
namespace {

using ::gpupool::testing::PeerBinary;
using ::gpupool::testing::PeerProcess;
using ::testing::HasSubstr;

IpcHandle FromWire(const std::string& hex) {
  absl::StatusOr<IpcHandle> handle =
      IpcHandle::Parse(absl::HexStringToBytes(hex));
  EXPECT_TRUE(handle.ok()) << handle.status() << " for \"" << hex << "\"";
  return handle.ok() ? *handle : IpcHandle();
}

std::string Wire(const IpcHandle& handle) {
  return absl::BytesToHexString(handle.Serialize());
}

class IpcLivenessTest : public ::testing::Test {
 protected:
  IpcLivenessTest()
      : namespace_(absl::StrCat(
            "ipclive-", getpid(), "-",
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

  StableBuffers Buffers() { return StableBuffers(*cache_); }

  std::string namespace_;
  std::vector<std::string> misuses_;
  SimBackend sim_;
  EventPool events_;
  std::unique_ptr<AllocationCache> cache_;
};

// The exporter is SIGKILLed while this process maps its buffer and has hit
// that mapping: every Import that starts kLivenessBoundNs or more after the
// death is NotFound (the hit path re-probes the exporter at most once per
// recheck interval), without a runtime call; the lease already out keeps
// its memory mapped and valid until it is released, then the mapping closes.
TEST_F(IpcLivenessTest, AHitOnADeadExportersHandleIsNotFoundWithinTheBound) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle handle = FromWire(peer->Ask("export ring0 4096 3"));
  absl::StatusOr<ImportedBuffer> held = Buffers().Import(handle, 0);
  ASSERT_TRUE(held.ok()) << held.status();
  {
    absl::StatusOr<ImportedBuffer> hit = Buffers().Import(handle, 0);
    ASSERT_TRUE(hit.ok()) << hit.status();
    EXPECT_EQ(hit->data(), held->data());
  }
  EXPECT_EQ(Buffers().GetIpcStats().import_hits, 1);
  const int64_t opens = sim_.calls(SimOp::kIpcOpenHandle);
  ASSERT_EQ(opens, 1);

  peer->Kill();  // reaped: its locks are gone from here on
  const auto died_by = std::chrono::steady_clock::now();
  const auto bound =
      std::chrono::nanoseconds(internal::IpcRefs::kLivenessBoundNs);
  // Hits may still be served just after the death, never once the bound
  // has passed since it.
  absl::Status status;
  int served_after_death = 0;
  while (true) {
    const auto started = std::chrono::steady_clock::now();
    absl::StatusOr<ImportedBuffer> lease = Buffers().Import(handle, 0);
    status = lease.status();
    if (!lease.ok()) break;
    ++served_after_death;
    ASSERT_LT(started - died_by, bound)
        << "a hit was served " << (started - died_by).count()
        << " ns after the exporter died";
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), HasSubstr("died"));
  // And it stays so; no runtime open was tried.
  std::this_thread::sleep_for(bound);
  EXPECT_EQ(Buffers().Import(handle, 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(sim_.calls(SimOp::kIpcOpenHandle), opens);
  // The lease out keeps its memory mapped and valid.
  EXPECT_EQ(*static_cast<unsigned char*>(held->data()), 3);
  std::memset(held->data(), 9, held->size());
  EXPECT_EQ(static_cast<unsigned char*>(held->data())[4095], 9);
  IpcStats stats = Buffers().GetIpcStats();
  EXPECT_EQ(stats.mappings_live, 1);
  EXPECT_EQ(stats.import_leases, 1);
  EXPECT_EQ(stats.closes, 0);
  // Its last lease closes the dead exporter's mapping.
  held->Release();
  stats = Buffers().GetIpcStats();
  EXPECT_EQ(stats.mappings_live, 0);
  EXPECT_EQ(stats.closes, 1);
  EXPECT_EQ(Buffers().Import(handle, 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(cache_->Trim().ok());
  // Our first export reaps what the dead exporter left.
  ASSERT_TRUE(Buffers().Export("mine", 0, 4096).ok());
  EXPECT_TRUE(misuses_.empty()) << misuses_.front();
  RecordProperty("hits_served_after_death", served_after_death);
}

// Two importers hold a version when the exporter grows the buffer: the
// stats name the waiting version and its importers, 2, then 1 when one
// closes its mapping, then 0 when the other is killed; the next Trim frees
// it. One GetIpcHandle per version, one open per importer and version.
TEST_F(IpcLivenessTest, WaitingVersionsCountTheirImporters) {
  std::unique_ptr<PeerProcess> first = StartPeer();
  std::unique_ptr<PeerProcess> second = StartPeer();
  absl::StatusOr<IpcHandle> v1 = Buffers().Export("ring0", 0, 4096);
  ASSERT_TRUE(v1.ok()) << v1.status();
  ASSERT_EQ(first->Ask(absl::StrCat("import ", Wire(*v1))), "ok 0");
  ASSERT_EQ(second->Ask(absl::StrCat("import ", Wire(*v1))), "ok 0");
  EXPECT_TRUE(Buffers().GetIpcStats().waiting.empty());  // not freed yet

  const int64_t frees = sim_.calls(SimOp::kFree);
  absl::StatusOr<IpcHandle> v2 = Buffers().Export("ring0", 0, 1 << 20);
  ASSERT_TRUE(v2.ok()) << v2.status();
  ASSERT_NE(v2->version, v1->version);
  IpcStats stats = Buffers().GetIpcStats();
  EXPECT_EQ(stats.versions_waiting, 1);
  ASSERT_EQ(stats.waiting.size(), 1u);
  EXPECT_EQ(stats.waiting[0].name, "ring0");
  EXPECT_EQ(stats.waiting[0].device, 0);
  EXPECT_EQ(stats.waiting[0].buffer_id, v1->buffer_id);
  EXPECT_EQ(stats.waiting[0].version, v1->version);
  EXPECT_EQ(stats.waiting[0].importers, 2);
  EXPECT_THAT(stats.ToString(),
              HasSubstr(absl::StrFormat("\"ring0\" device 0 version %d on 2 "
                                        "importers",
                                        v1->version)));

  EXPECT_EQ(first->Ask("drop"), "ok");
  EXPECT_EQ(first->Ask("trim"), "ok");  // closes its mapping: unpinned
  stats = Buffers().GetIpcStats();
  ASSERT_EQ(stats.waiting.size(), 1u);
  EXPECT_EQ(stats.waiting[0].importers, 1);
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(Buffers().GetIpcStats().waiting.size(), 1u);  // still held
  EXPECT_EQ(sim_.calls(SimOp::kFree), frees);

  second->Kill();
  stats = Buffers().GetIpcStats();
  ASSERT_EQ(stats.waiting.size(), 1u);
  EXPECT_EQ(stats.waiting[0].importers, 0);  // freed at the next Trim
  EXPECT_TRUE(cache_->Trim().ok());
  stats = Buffers().GetIpcStats();
  EXPECT_TRUE(stats.waiting.empty());
  EXPECT_EQ(stats.versions_waiting, 0);
  EXPECT_EQ(sim_.calls(SimOp::kFree), frees + 1);
  // Runtime calls per version: one export each, one open per importer.
  EXPECT_EQ(sim_.calls(SimOp::kIpcGetHandle), 2);
  EXPECT_EQ(first->Ask("sim"), "0 1 1 0 0");
  ASSERT_TRUE(Buffers().Release("ring0", 0).ok());
  first->Send("quit");
  EXPECT_EQ(first->Wait(), 0);
  EXPECT_TRUE(misuses_.empty()) << misuses_.front();
}

// More importers than count bytes: the first kCountedImporters are counted
// (the count reads "at least" that many), the others still pin, and the pins
// alone decide the free. Each Attach is a separate open file description,
// so one process stands in for many importers.
TEST(IpcRefsCountTest, ImportersBeyondTheCountBytesStillPin) {
  constexpr int kCounted = internal::IpcRefs::kCountedImporters;
  static_assert(kCounted == kIpcCountedImporters);
  const uint64_t id = internal::RandomIpcId();
  absl::StatusOr<std::unique_ptr<internal::IpcRefs>> table =
      internal::IpcRefs::Create(id);
  ASSERT_TRUE(table.ok()) << table.status();
  constexpr uint64_t kTag = 77;
  absl::StatusOr<uint32_t> slot =
      (*table)->Claim(kTag, internal::IpcSlotBinding{1, 2, 0, 4096});
  ASSERT_TRUE(slot.ok()) << slot.status();
  std::vector<std::unique_ptr<internal::IpcRefs>> importers;
  for (int i = 0; i < kCounted + 2; ++i) {
    absl::StatusOr<std::unique_ptr<internal::IpcRefs>> attached =
        internal::IpcRefs::Attach(id);
    ASSERT_TRUE(attached.ok()) << attached.status();
    ASSERT_TRUE((*attached)->Pin(*slot, kTag));
    ASSERT_TRUE((*attached)->Pin(*slot, kTag));  // a second lease: no count
    importers.push_back(*std::move(attached));
    EXPECT_EQ((*table)->Importers(*slot), std::min(i + 1, kCounted));
  }
  // Unpin the first kCounted (twice each: two leases): the last two are not
  // counted but still pin the version.
  for (int i = 0; i < kCounted; ++i) {
    importers[i]->Unpin(*slot, kTag);
    importers[i]->Unpin(*slot, kTag);
  }
  EXPECT_EQ((*table)->Importers(*slot), 0);
  EXPECT_TRUE((*table)->Pinned(*slot));
  EXPECT_FALSE((*table)->TryRetire(*slot, kTag));
  // A new importer takes a freed count byte.
  ASSERT_TRUE(importers[0]->Pin(*slot, kTag));
  EXPECT_EQ((*table)->Importers(*slot), 1);
  importers[0]->Unpin(*slot, kTag);
  importers.pop_back();  // its descriptor closed: its pin is gone
  EXPECT_FALSE((*table)->TryRetire(*slot, kTag));
  importers.pop_back();
  EXPECT_EQ((*table)->Importers(*slot), 0);
  EXPECT_TRUE((*table)->TryRetire(*slot, kTag));
}

// The path of unshare(1), or "" when there is none.
std::string UnsharePath() {
  for (const char* path : {"/usr/bin/unshare", "/bin/unshare"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// A peer in a PID namespace of its own (`unshare --pid --fork`), where it is
// pid 1: its handle is imported here, ours is imported there even when it
// names the peer's own pid, and its own handle (naming our pid) is still its
// own. Identity is the random exporter id, never the pid.
TEST_F(IpcLivenessTest, IdentityHoldsAcrossPidNamespaces) {
  const std::string unshare = UnsharePath();
  if (unshare.empty()) GTEST_SKIP() << "unshare(1) is not installed";
  if (std::system(absl::StrCat(unshare,
                               " --pid --fork --kill-child true "
                               ">/dev/null 2>&1")
                      .c_str()) != 0) {
    GTEST_SKIP() << "unshare --pid --fork is not permitted here (a new PID "
                    "namespace needs root, CAP_SYS_ADMIN)";
  }
  PeerProcess peer(unshare, {"--pid", "--fork", "--kill-child",
                             PeerBinary(GPUPOOL_IPC_CACHE_PEER), namespace_});
  ASSERT_TRUE(peer.started());
  const std::string peer_pid = peer.Ask("pid");
  EXPECT_EQ(peer_pid, "1");  // the first process of its namespace
  ASSERT_NE(std::to_string(getpid()), peer_pid);

  // Theirs, naming our pid: imported (mapped), not taken for our own.
  IpcHandle theirs = FromWire(peer.Ask("export ring0 4096 7"));
  EXPECT_EQ(theirs.exporter_pid, 1u);
  theirs.exporter_pid = static_cast<uint64_t>(getpid());
  absl::StatusOr<ImportedBuffer> lease =
      Buffers().Import(FromWire(Wire(theirs)), 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE(lease->local());
  EXPECT_EQ(*static_cast<unsigned char*>(lease->data()), 7);
  EXPECT_EQ(Buffers().GetIpcStats().opens, 1);

  // Ours, naming the peer's pid (1): the peer maps it.
  absl::StatusOr<IpcHandle> ours = Buffers().Export("mine", 0, 4096);
  ASSERT_TRUE(ours.ok()) << ours.status();
  void* ptr = *Buffers().Acquire("mine", 0, 4096);
  std::memset(sim_.ExportedBytes(ptr), 5, 4096);
  IpcHandle forged = *ours;
  forged.exporter_pid = 1;
  EXPECT_EQ(peer.Ask(absl::StrCat("import ", Wire(forged))), "ok 5");
  // Its own handle, naming our pid: still its own (the local buffer).
  theirs.exporter_pid = static_cast<uint64_t>(getpid());
  EXPECT_EQ(peer.Ask(absl::StrCat("import ", Wire(theirs))), "ok local");
  // exports opens closes hits mappings leases waiting
  EXPECT_EQ(peer.Ask("stats"), "1 1 0 0 1 2 0");

  lease->Release();
  EXPECT_EQ(peer.Ask("drop"), "ok");
  EXPECT_EQ(peer.Ask("trim"), "ok");
  ASSERT_TRUE(Buffers().Release("mine", 0).ok());
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(Buffers().GetIpcStats().versions_waiting, 0);
  peer.Send("quit");
  EXPECT_EQ(peer.Wait(), 0);
  EXPECT_TRUE(misuses_.empty()) << misuses_.front();
}

}  // namespace
}  // namespace gpupool
