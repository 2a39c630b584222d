// What a peer can and cannot make an importer do (AllocationCache::Import
// on SimBackend, two real processes: this test and ipc_cache_peer.cc). Every
// forged handle here has a valid checksum (it went through Serialize), so
// Parse accepts it and the semantic checks must refuse it; none may make
// the importer map or touch memory beyond what the exporter allocated.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
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
#include "tests/util/peer_process.h"

namespace gpupool {
namespace {

using ::gpupool::testing::PeerProcess;
using ::testing::HasSubstr;

IpcHandle FromWire(const std::string& hex) {
  absl::StatusOr<IpcHandle> handle =
      IpcHandle::Parse(absl::HexStringToBytes(hex));
  EXPECT_TRUE(handle.ok()) << handle.status() << " for \"" << hex << "\"";
  return handle.ok() ? *handle : IpcHandle();
}

// Through the wire and back: a forgery any peer could send.
IpcHandle Reparsed(const IpcHandle& forged) {
  absl::StatusOr<IpcHandle> parsed = IpcHandle::Parse(forged.Serialize());
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : IpcHandle();
}

std::vector<std::string> ListDirectory(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* dir = opendir(path.c_str())) {
    while (const dirent* entry = readdir(dir)) names.push_back(entry->d_name);
    closedir(dir);
  }
  return names;
}

class IpcTrustTest : public ::testing::Test {
 protected:
  IpcTrustTest()
      : namespace_(absl::StrCat(
            "ipctrust-", getpid(), "-",
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

  // Import must refuse `handle` with `code` and a message naming `field`,
  // without a runtime open.
  void ExpectRefused(const IpcHandle& handle, absl::StatusCode code,
                     const std::string& field) {
    const int64_t opens = sim_.calls(SimOp::kIpcOpenHandle);
    absl::StatusOr<ImportedBuffer> lease =
        gpupool::StableBuffers(*cache_).Import(handle, 0);
    EXPECT_EQ(lease.status().code(), code) << lease.status();
    EXPECT_THAT(lease.status().message(), HasSubstr(field));
    EXPECT_EQ(sim_.calls(SimOp::kIpcOpenHandle), opens);
  }

  std::string namespace_;
  std::vector<std::string> misuses_;
  SimBackend sim_;
  EventPool events_;
  std::unique_ptr<AllocationCache> cache_;
};

// The attack that overwrote the exporter's table: a size far past the
// mapping. Refused before anything is pinned or opened; the exporter's next
// exports still work.
TEST_F(IpcTrustTest, OffsetAndBytesPastTheExportedExtentAreRefused) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle real = FromWire(peer->Ask("export ring0 4096 3"));
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

  IpcHandle forged = real;
  forged.bytes = uint64_t{1} << 30;
  ExpectRefused(Reparsed(forged), absl::StatusCode::kInvalidArgument, "bytes");
  forged = real;
  forged.offset = 4096;  // 4096 + 4096 bytes past a 4096-byte buffer
  ExpectRefused(Reparsed(forged), absl::StatusCode::kInvalidArgument, "offset");
  forged = real;
  forged.offset = kMax - 8;  // offset + bytes wraps around
  ExpectRefused(Reparsed(forged), absl::StatusCode::kInvalidArgument, "offset");
  forged.bytes = kMax;
  forged.offset = 1;
  ExpectRefused(Reparsed(forged), absl::StatusCode::kInvalidArgument, "bytes");

  // Nothing was pinned: a release frees at once, nothing waits.
  EXPECT_EQ(peer->Ask("release ring0"), "ok");
  // exports opens closes hits mappings leases waiting
  EXPECT_EQ(peer->Ask("stats"), "1 0 0 0 0 0 0");
  const IpcHandle next = FromWire(peer->Ask("export ring1 8192 4"));
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(next, 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(*static_cast<unsigned char*>(lease->data()), 4);
  EXPECT_EQ(lease->size(), 8192u);
  lease->Release();
  EXPECT_TRUE(cache_->Trim().ok());
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
  EXPECT_TRUE(misuses_.empty());
}

// A handle with one buffer's runtime bytes and another's slot/version would
// pin the second and map the first; the slot's recorded digest refuses it
// before either happens.
TEST_F(IpcTrustTest, CrossedSlotAndRuntimeBytesAreRefusedBeforeAnyPin) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle a = FromWire(peer->Ask("export bufa 4096 1"));
  const IpcHandle b = FromWire(peer->Ask("export bufb 4096 2"));
  ASSERT_NE(a.slot, b.slot);

  IpcHandle crossed = b;
  crossed.runtime = a.runtime;
  ExpectRefused(Reparsed(crossed), absl::StatusCode::kInvalidArgument,
                "runtime bytes");
  crossed = a;
  crossed.slot = b.slot;
  crossed.version = b.version;
  ExpectRefused(Reparsed(crossed), absl::StatusCode::kInvalidArgument,
                "runtime bytes");
  crossed = b;
  crossed.buffer_id = a.buffer_id;
  ExpectRefused(Reparsed(crossed), absl::StatusCode::kInvalidArgument,
                "buffer id");
  crossed = b;
  crossed.device = 1;
  ExpectRefused(Reparsed(crossed), absl::StatusCode::kInvalidArgument,
                "device");
  // A slot that holds no such version: stale, not a mapping.
  crossed = b;
  crossed.slot = 4000;
  ExpectRefused(Reparsed(crossed), absl::StatusCode::kNotFound, "slot");
  crossed.slot = 1u << 30;
  ExpectRefused(Reparsed(crossed), absl::StatusCode::kNotFound, "slot");
  crossed = b;
  crossed.version = 0;  // would pin a free slot
  ExpectRefused(Reparsed(crossed), absl::StatusCode::kNotFound, "slot");

  // Neither buffer was pinned: both free at once when released.
  EXPECT_EQ(peer->Ask("release bufa"), "ok");
  EXPECT_EQ(peer->Ask("release bufb"), "ok");
  EXPECT_EQ(peer->Ask("stats"), "2 0 0 0 0 0 0");
  EXPECT_EQ(peer->Ask("sim"), "2 0 0 2 0");
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

// A cache hit is served only for exactly the handle that was mapped, and
// only within the mapped extent (the sim's address-range query).
TEST_F(IpcTrustTest, AHitRequiresTheMappedHandleAndStaysInsideIt) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle real = FromWire(peer->Ask("export ring0 4096 6"));
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(real, 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  // The mapping's real extent, as the importer learnt it.
  absl::StatusOr<AddressRange> range =
      sim_.GetAddressRange(0, static_cast<char*>(lease->data()) + 100);
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->base, lease->data());
  EXPECT_GE(range->bytes, 4096u);

  IpcHandle other = real;
  other.slot = real.slot + 1;
  ExpectRefused(Reparsed(other), absl::StatusCode::kInvalidArgument, "slot");
  other = real;
  other.runtime.bytes[30] ^= 1;
  ExpectRefused(Reparsed(other), absl::StatusCode::kInvalidArgument,
                "runtime bytes");
  other = real;
  other.bytes = range->bytes + 1;
  ExpectRefused(Reparsed(other), absl::StatusCode::kInvalidArgument,
                "mapped allocation");
  other = real;
  other.offset = std::numeric_limits<uint64_t>::max();
  ExpectRefused(Reparsed(other), absl::StatusCode::kInvalidArgument, "offset");
  // A smaller view inside the mapping is a hit.
  other = real;
  other.offset = 1024;
  other.bytes = 1024;
  absl::StatusOr<ImportedBuffer> view =
      gpupool::StableBuffers(*cache_).Import(Reparsed(other), 0);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data(), static_cast<char*>(lease->data()) + 1024);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().import_hits, 1);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().opens, 1);
  view->Release();
  lease->Release();
  EXPECT_TRUE(cache_->Trim().ok());
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
  EXPECT_TRUE(misuses_.empty());
}

// A larger request that the exported buffer still holds (4000 bytes were
// rounded up to 4096): the same version, and the exporter now vouches for
// the larger extent, so a fresh importer's check of the binding accepts it.
TEST_F(IpcTrustTest, TheRecordedExtentGrowsWithTheExportersRequests) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle first = FromWire(peer->Ask("export ring0 4000 8"));
  const IpcHandle larger = FromWire(peer->Ask("export ring0 4096 8"));
  EXPECT_EQ(larger.version, first.version);
  EXPECT_EQ(larger.bytes, 4096u);
  absl::StatusOr<ImportedBuffer> whole =
      gpupool::StableBuffers(*cache_).Import(larger, 0);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->size(), 4096u);
  absl::StatusOr<ImportedBuffer> part =
      gpupool::StableBuffers(*cache_).Import(first, 0);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->size(), 4000u);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().opens, 1);
  part->Release();
  whole->Release();
  EXPECT_TRUE(cache_->Trim().ok());
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

// Own handles are checked like any other, and a handle is "own" by the
// random exporter id, not by the pid: a peer's handle that names our pid
// (two containers' first processes are both pid 1) is imported normally.
TEST_F(IpcTrustTest, OwnHandlesAreKnownByExporterIdAndCheckedToo) {
  absl::StatusOr<IpcHandle> mine =
      gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096);
  ASSERT_TRUE(mine.ok()) << mine.status();
  IpcHandle forged = *mine;
  forged.bytes = 1 << 20;
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(Reparsed(forged), 0);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lease.status().message(), HasSubstr("bytes"));
  forged = *mine;
  forged.runtime.bytes[9] ^= 1;
  lease = gpupool::StableBuffers(*cache_).Import(Reparsed(forged), 0);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lease.status().message(), HasSubstr("runtime bytes"));

  std::unique_ptr<PeerProcess> peer = StartPeer();
  IpcHandle theirs = FromWire(peer->Ask("export ring0 4096 7"));
  theirs.exporter_pid = static_cast<uint64_t>(getpid());
  lease = gpupool::StableBuffers(*cache_).Import(Reparsed(theirs), 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE(lease->local());
  EXPECT_EQ(*static_cast<unsigned char*>(lease->data()), 7);
  lease->Release();
  EXPECT_TRUE(cache_->Trim().ok());
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

// A lease on one's own handle pins its version like an importer's mapping:
// a growth (or release) of the buffer waits for the lease before the free.
TEST_F(IpcTrustTest, ALeaseOnOnesOwnHandleKeepsItsVersionAlive) {
  absl::StatusOr<IpcHandle> v1 =
      gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096);
  ASSERT_TRUE(v1.ok()) << v1.status();
  void* old_ptr = *gpupool::StableBuffers(*cache_).Acquire("ring0", 0, 4096);
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(*v1, 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(lease->local());
  absl::StatusOr<ImportedBuffer> second =
      gpupool::StableBuffers(*cache_).Import(*v1, 0);
  ASSERT_TRUE(second.ok()) << second.status();
  const int64_t frees = sim_.calls(SimOp::kFree);

  absl::StatusOr<IpcHandle> v2 =
      gpupool::StableBuffers(*cache_).Export("ring0", 0, 1 << 20);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_NE(v2->version, v1->version);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting, 1);
  EXPECT_EQ(sim_.calls(SimOp::kFree), frees);
  // The waiting version still leases (it is not freed).
  absl::StatusOr<ImportedBuffer> third =
      gpupool::StableBuffers(*cache_).Import(*v1, 0);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->data(), old_ptr);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().import_leases, 3);

  lease->Release();
  second->Release();
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting,
            1);  // one lease left
  third->Release();
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().import_leases, 0);
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting, 0);
  EXPECT_EQ(sim_.calls(SimOp::kFree), frees + 1);
  // Freed now: the old handle is stale.
  EXPECT_EQ(gpupool::StableBuffers(*cache_).Import(*v1, 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(misuses_.empty());
}

// StableBuffers::Export against StableBuffers::Release and growth of the same
// name on other threads: the runtime is never handed a freed pointer (the
// simulator flags a GetIpcHandle of memory that is not a live allocation as
// misuse), and every handle made names a live version when it is returned.
TEST_F(IpcTrustTest, ExportIsAtomicWithReleaseAndGrowthOfTheName) {
  std::atomic<bool> stop{false};
  std::thread releaser([&] {
    int round = 0;
    while (!stop.load()) {
      if (++round % 2 == 0) {
        (void)gpupool::StableBuffers(*cache_).Release("ring0", 0);
      } else {
        (void)gpupool::StableBuffers(*cache_).Acquire(
            "ring0", 0, size_t{4096} << (round % 5));
      }
    }
  });
  int exported = 0;
  int gave_up = 0;  // Aborted: the name moved under every attempt
  for (int i = 0; i < 3000; ++i) {
    absl::StatusOr<IpcHandle> handle = gpupool::StableBuffers(*cache_).Export(
        "ring0", 0, size_t{4096} << (i % 3));
    if (handle.ok()) {
      ++exported;
    } else {
      ASSERT_EQ(handle.status().code(), absl::StatusCode::kAborted)
          << handle.status();
      ++gave_up;
    }
  }
  stop.store(true);
  releaser.join();
  EXPECT_GT(exported, 0);
  EXPECT_EQ(exported + gave_up, 3000);
  EXPECT_TRUE(misuses_.empty()) << misuses_.front();
  EXPECT_EQ(sim_.calls(SimOp::kIpcGetHandle),
            gpupool::StableBuffers(*cache_).GetIpcStats().exports);
  (void)gpupool::StableBuffers(*cache_).Release("ring0", 0);
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting, 0);
}

// The user's private directory and a table's name in it (refs.h).
std::string UserDirectory() {
  return absl::StrCat("/dev/shm/gpupool-", geteuid());
}
std::string TablePath(uint64_t exporter_id) {
  return absl::StrFormat("%s/ipc-refs-%016x", UserDirectory(), exporter_id);
}

// Files planted where a table would be: a symlink to a real table, a FIFO,
// another user's file, a file with group/other bits, a truncated file. Each
// is refused on the descriptor before it is mapped; none hangs or crashes
// the importer.
TEST_F(IpcTrustTest, PlantedTableFilesAreRefusedBeforeMapping) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle real = FromWire(peer->Ask("export ring0 4096 3"));
  struct stat table;
  ASSERT_EQ(stat(TablePath(real.exporter_id).c_str(), &table), 0);
  EXPECT_TRUE(S_ISREG(table.st_mode));
  EXPECT_EQ(table.st_mode & 0777, 0600u);
  EXPECT_EQ(table.st_uid, geteuid());
  struct stat directory;
  ASSERT_EQ(stat(UserDirectory().c_str(), &directory), 0);
  EXPECT_EQ(directory.st_mode & 0777, 0700u);

  IpcHandle planted = real;
  planted.exporter_id = real.exporter_id ^ 0x5a5a5a5a5a5a5a5a;
  const std::string path = TablePath(planted.exporter_id);
  // A symlink to the real table: O_NOFOLLOW.
  ASSERT_EQ(symlink(TablePath(real.exporter_id).c_str(), path.c_str()), 0);
  ExpectRefused(planted, absl::StatusCode::kPermissionDenied, "symbolic link");
  ASSERT_EQ(unlink(path.c_str()), 0);
  // A FIFO: opened non-blocking, then not a regular file.
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  ExpectRefused(planted, absl::StatusCode::kPermissionDenied,
                "not a regular file");
  ASSERT_EQ(unlink(path.c_str()), 0);
  // Group and other bits.
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, table.st_size), 0);
  ASSERT_EQ(fchmod(fd, 0666), 0);
  ExpectRefused(planted, absl::StatusCode::kPermissionDenied, "other users");
  // Truncated: the right owner and mode, the wrong size. No SIGBUS.
  ASSERT_EQ(fchmod(fd, 0600), 0);
  ASSERT_EQ(ftruncate(fd, 64), 0);
  ExpectRefused(planted, absl::StatusCode::kInvalidArgument, "bytes");
  // Another user's file (only root can make one here).
  ASSERT_EQ(ftruncate(fd, table.st_size), 0);
  if (geteuid() == 0) {
    ASSERT_EQ(fchown(fd, 65534, 65534), 0);
    ExpectRefused(planted, absl::StatusCode::kPermissionDenied, "uid 65534");
  }
  close(fd);
  ASSERT_EQ(unlink(path.c_str()), 0);
  // Gone: NotFound, the documented stale answer.
  ExpectRefused(planted, absl::StatusCode::kNotFound, "gone");

  // The real one still imports.
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(real, 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(*static_cast<unsigned char*>(lease->data()), 3);
  lease->Release();
  EXPECT_TRUE(cache_->Trim().ok());
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

// The exporter's segment truncated under a valid handle: the open is
// refused on the descriptor's size, the pin released, the importer alive.
TEST_F(IpcTrustTest, ATruncatedSegmentIsRefusedNotMapped) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle real = FromWire(peer->Ask("export ring0 4096 3"));
  int truncated = 0;
  for (const auto& entry : ListDirectory(UserDirectory())) {
    if (absl::StartsWith(entry, absl::StrCat("sim-", namespace_, "-"))) {
      ASSERT_EQ(truncate((UserDirectory() + "/" + entry).c_str(), 100), 0);
      ++truncated;
    }
  }
  ASSERT_EQ(truncated, 1);
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(real, 0);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kInvalidArgument)
      << lease.status();
  EXPECT_THAT(lease.status().message(), HasSubstr("bytes"));
  EXPECT_EQ(sim_.ipc_maps(), 0);
  // Unpinned: the release frees at once.
  EXPECT_EQ(peer->Ask("release ring0"), "ok");
  EXPECT_EQ(peer->Ask("stats"), "1 0 0 0 0 0 0");
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

std::string Wire(const IpcHandle& handle) {
  return absl::BytesToHexString(handle.Serialize());
}

int FilesStartingWith(const std::string& prefix) {
  int found = 0;
  for (const std::string& entry : ListDirectory(UserDirectory())) {
    found += absl::StartsWith(entry, prefix);
  }
  return found;
}

// The OOM killer's SIGKILL: the importer's pin dies with it (a kernel lock,
// not a count), so the exporter frees the version at its next Trim.
TEST_F(IpcTrustTest, AKilledImportersPinDiesWithIt) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  absl::StatusOr<IpcHandle> handle =
      gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096);
  ASSERT_TRUE(handle.ok()) << handle.status();
  void* ptr = *gpupool::StableBuffers(*cache_).Acquire("ring0", 0, 4096);
  std::memset(sim_.ExportedBytes(ptr), 5, 4096);
  ASSERT_EQ(peer->Ask(absl::StrCat("import ", Wire(*handle))), "ok 5");
  const int64_t frees = sim_.calls(SimOp::kFree);
  ASSERT_TRUE(gpupool::StableBuffers(*cache_).Release("ring0", 0).ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting,
            1);  // still mapped
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting, 1);
  EXPECT_EQ(sim_.calls(SimOp::kFree), frees);

  peer->Kill();
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting, 0);
  EXPECT_EQ(sim_.calls(SimOp::kFree), frees + 1);
  // The simulator, like the driver, forgets a dead importer's mapping: the
  // free is not misuse.
  EXPECT_TRUE(misuses_.empty()) << misuses_.front();
}

// A process releases only the pins it holds: one importer dropping and
// trimming its mapping leaves the other's pin in place.
TEST_F(IpcTrustTest, OneImporterCannotReleaseAnothersPin) {
  std::unique_ptr<PeerProcess> holder = StartPeer();
  std::unique_ptr<PeerProcess> other = StartPeer();
  absl::StatusOr<IpcHandle> handle =
      gpupool::StableBuffers(*cache_).Export("ring0", 0, 4096);
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_EQ(holder->Ask(absl::StrCat("import ", Wire(*handle))), "ok 0");
  ASSERT_EQ(other->Ask(absl::StrCat("import ", Wire(*handle))), "ok 0");
  ASSERT_TRUE(gpupool::StableBuffers(*cache_).Release("ring0", 0).ok());
  EXPECT_EQ(other->Ask("drop"), "ok");
  EXPECT_EQ(other->Ask("trim"), "ok");  // closes and unpins its own
  EXPECT_EQ(other->Ask("trim"), "ok");  // twice: still nothing of the holder's
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting, 1);
  EXPECT_EQ(holder->Ask("drop"), "ok");
  EXPECT_EQ(holder->Ask("trim"), "ok");
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().versions_waiting, 0);
  holder->Send("quit");
  other->Send("quit");
  EXPECT_EQ(holder->Wait(), 0);
  EXPECT_EQ(other->Wait(), 0);
  EXPECT_TRUE(misuses_.empty()) << misuses_.front();
}

// A killed exporter: its handles are NotFound, and its table and segments
// are reaped by the next process of this user that looks (an import of its
// handle, an export). That may be another test process running beside
// this one, so what is checked is that they are gone once this process
// has looked, whoever reaped them.
TEST_F(IpcTrustTest, AKilledExportersFilesAreReapedAndItsHandlesNotFound) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle orphan = FromWire(peer->Ask("export ring0 4096 3"));
  // The peer's segment (ours, made later, share the namespace prefix).
  std::string segments;
  for (const std::string& entry : ListDirectory(UserDirectory())) {
    if (absl::StartsWith(entry, absl::StrCat("sim-", namespace_, "-"))) {
      segments = entry;
    }
  }
  ASSERT_FALSE(segments.empty());
  ASSERT_EQ(FilesStartingWith(segments), 1);
  struct stat table;
  ASSERT_EQ(stat(TablePath(orphan.exporter_id).c_str(), &table), 0);
  peer->Kill();

  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(orphan, 0);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kNotFound)
      << lease.status();
  EXPECT_EQ(sim_.calls(SimOp::kIpcOpenHandle), 0);
  // The import found the exporter dead (or its table already reaped) and
  // its table is gone; our first export reaps the segments it left, if no
  // other process of ours did first.
  EXPECT_NE(stat(TablePath(orphan.exporter_id).c_str(), &table), 0);
  ASSERT_TRUE(gpupool::StableBuffers(*cache_).Export("mine", 0, 4096).ok());
  EXPECT_EQ(FilesStartingWith(segments), 0);
}

// An exporter killed after this process attached its table: an import that
// needs an open is NotFound before any runtime call, a mapping already open
// keeps serving its leases, and Trim detaches the dead table.
TEST_F(IpcTrustTest, AnExporterKilledAfterAttachIsNotFoundForNewOpens) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcHandle first = FromWire(peer->Ask("export ring0 4096 3"));
  const IpcHandle second = FromWire(peer->Ask("export ring1 4096 4"));
  const int peer_segments =
      FilesStartingWith(absl::StrCat("sim-", namespace_, "-"));
  EXPECT_EQ(peer_segments, 2);
  absl::StatusOr<ImportedBuffer> lease =
      gpupool::StableBuffers(*cache_).Import(first, 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  peer->Kill();
  absl::StatusOr<ImportedBuffer> other =
      gpupool::StableBuffers(*cache_).Import(second, 0);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound)
      << other.status();
  EXPECT_THAT(other.status().message(), HasSubstr("died"));
  EXPECT_EQ(sim_.calls(SimOp::kIpcOpenHandle), 1);
  // The open mapping stays valid until its last lease goes.
  EXPECT_EQ(*static_cast<unsigned char*>(lease->data()), 3);
  lease->Release();
  EXPECT_TRUE(cache_->Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(*cache_).GetIpcStats().mappings_live, 0);
  EXPECT_EQ(gpupool::StableBuffers(*cache_).Import(first, 0).status().code(),
            absl::StatusCode::kNotFound);
  // Our first export reaps what the dead exporter left.
  ASSERT_TRUE(gpupool::StableBuffers(*cache_).Export("mine", 0, 4096).ok());
  struct stat table;
  EXPECT_NE(stat(TablePath(first.exporter_id).c_str(), &table), 0);
  EXPECT_EQ(FilesStartingWith(absl::StrCat("sim-", namespace_, "-")), 1);
}

// A cache's table and its simulator's segments go with them.
TEST_F(IpcTrustTest, ACachesFilesGoWithIt) {
  const std::string segments = absl::StrCat("sim-", namespace_, "-");
  std::string table_path;
  {
    SimBackend sim(Options(namespace_, &misuses_));
    EventPool events(sim);
    AllocationCache cache(sim, events);
    absl::StatusOr<IpcHandle> handle =
        gpupool::StableBuffers(cache).Export("ring0", 0, 4096);
    ASSERT_TRUE(handle.ok()) << handle.status();
    struct stat table;
    EXPECT_EQ(stat(TablePath(handle->exporter_id).c_str(), &table), 0);
    EXPECT_EQ(FilesStartingWith(segments), 1);
    ASSERT_TRUE(gpupool::StableBuffers(cache).Release("ring0", 0).ok());
    table_path = TablePath(handle->exporter_id);
  }
  EXPECT_EQ(FilesStartingWith(segments), 0);
  struct stat table;
  EXPECT_NE(stat(table_path.c_str(), &table), 0);
}

}  // namespace
}  // namespace gpupool
