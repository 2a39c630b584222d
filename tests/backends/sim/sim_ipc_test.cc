// SimBackend's IPC primitives across two real processes: this test and a
// peer (sim_ipc_peer.cc, fork + exec, handles over a pipe) share a registry
// namespace; the importer must read the exporter's live bytes, and forged,
// corrupt or stale handles must be refused with their codes.

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "tests/util/peer_process.h"

namespace gpupool {
namespace {

using ::gpupool::testing::PeerProcess;

std::string Namespace() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat("ipctest-", getpid(), "-", info->name());
}

std::string Hex(const IpcMemHandle& handle) {
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(handle.bytes.data()), handle.bytes.size()));
}

IpcMemHandle FromHex(const std::string& hex) {
  IpcMemHandle handle;
  const std::string bytes = absl::HexStringToBytes(hex);
  EXPECT_EQ(bytes.size(), kIpcMemHandleBytes) << hex;
  std::memcpy(handle.bytes.data(), bytes.data(),
              std::min(bytes.size(), handle.bytes.size()));
  return handle;
}

class SimIpcTest : public ::testing::Test {
 protected:
  SimIpcTest() : namespace_(Namespace()) {
    SimOptions options;
    options.ipc_namespace = namespace_;
    options.on_misuse = [this](absl::string_view message) {
      misuses_.push_back(std::string(message));
    };
    sim_ = std::make_unique<SimBackend>(options);
  }

  std::unique_ptr<PeerProcess> StartPeer() {
    auto peer = std::make_unique<PeerProcess>(
        GPUPOOL_SIM_IPC_PEER, std::vector<std::string>{namespace_});
    EXPECT_TRUE(peer->started());
    return peer;
  }

  std::string namespace_;
  std::vector<std::string> misuses_;
  std::unique_ptr<SimBackend> sim_;
};

TEST_F(SimIpcTest, ImporterReadsTheExportersLiveBytes) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcMemHandle handle = FromHex(peer->Ask("export 4096 90"));
  absl::StatusOr<void*> ptr = sim_->OpenIpcHandle(0, handle);
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  const unsigned char* bytes = static_cast<const unsigned char*>(*ptr);
  EXPECT_EQ(bytes[0], 90);
  EXPECT_EQ(bytes[4095], 90);
  EXPECT_EQ(peer->Ask("importers"), "1");
  // The exporter writes again: the mapping is its allocation, not a copy.
  EXPECT_EQ(peer->Ask("fill 51"), "ok");
  EXPECT_EQ(bytes[17], 51);

  EXPECT_TRUE(sim_->CloseIpcHandle(0, *ptr).ok());
  EXPECT_EQ(peer->Ask("importers"), "0");
  EXPECT_EQ(sim_->calls(SimOp::kIpcOpenHandle), 1);
  EXPECT_EQ(sim_->calls(SimOp::kIpcCloseHandle), 1);
  EXPECT_EQ(sim_->ipc_maps(), 1);
  EXPECT_EQ(sim_->ipc_unmaps(), 1);
  EXPECT_EQ(sim_->ipc_mappings_live(), 0);
  EXPECT_EQ(peer->Ask("free"), "ok 0");  // freed after the close: no misuse
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
  EXPECT_TRUE(misuses_.empty());
}

// cuMemGetAddressRange / hipMemGetAddressRange: base and size of the
// allocation containing an address, an IPC mapping included.
TEST_F(SimIpcTest, AddressRangeOfAMappingIsTheExportersAllocation) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcMemHandle handle = FromHex(peer->Ask("export 4096 90"));
  absl::StatusOr<void*> ptr = sim_->OpenIpcHandle(0, handle);
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  for (size_t at : {size_t{0}, size_t{100}, size_t{4095}}) {
    absl::StatusOr<AddressRange> range =
        sim_->GetAddressRange(0, static_cast<char*>(*ptr) + at);
    ASSERT_TRUE(range.ok()) << range.status();
    EXPECT_EQ(range->base, *ptr);
    EXPECT_EQ(range->bytes, 4096u);
  }
  EXPECT_EQ(
      sim_->GetAddressRange(0, static_cast<char*>(*ptr) + 4096).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(sim_->GetAddressRange(1, *ptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<void*> local = sim_->Allocate(0, 8192, MemoryKind::kDevice);
  ASSERT_TRUE(local.ok());
  absl::StatusOr<AddressRange> range =
      sim_->GetAddressRange(0, static_cast<char*>(*local) + 8000);
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->base, *local);
  EXPECT_EQ(range->bytes, 8192u);
  EXPECT_TRUE(sim_->Free(0, *local, MemoryKind::kDevice).ok());
  EXPECT_TRUE(sim_->CloseIpcHandle(0, *ptr).ok());
  EXPECT_EQ(sim_->GetAddressRange(0, *ptr).status().code(),
            absl::StatusCode::kNotFound);
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
  EXPECT_TRUE(misuses_.empty());
}

TEST_F(SimIpcTest, RepeatedExportAndOpenMakeOneSegmentAndOneMapping) {
  absl::StatusOr<void*> allocation =
      sim_->Allocate(0, 1 << 20, MemoryKind::kDevice);
  ASSERT_TRUE(allocation.ok());
  absl::StatusOr<IpcMemHandle> first = sim_->GetIpcHandle(0, *allocation);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 0; i < 999; ++i) {
    absl::StatusOr<IpcMemHandle> again = sim_->GetIpcHandle(0, *allocation);
    ASSERT_TRUE(again.ok());
    ASSERT_EQ(*again, *first);
  }
  EXPECT_EQ(sim_->ipc_exports(), 1);
  std::memset(sim_->ExportedBytes(*allocation), 7, 1 << 20);

  std::unique_ptr<PeerProcess> peer = StartPeer();
  const std::string open = absl::StrCat("open ", Hex(*first));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(peer->Ask(open), "ok 7");
  // CUDA >= 11.1: a re-open in one context counts a reference and returns the
  // same mapping; the sim maps once.
  EXPECT_EQ(peer->Ask("counts"), "1000 1 0 1");
  EXPECT_EQ(sim_->ipc_importers(*allocation), 1);
  for (int i = 0; i < 999; ++i) ASSERT_EQ(peer->Ask("close"), "ok");
  EXPECT_EQ(sim_->ipc_importers(*allocation), 1);
  ASSERT_EQ(peer->Ask("close"), "ok");
  EXPECT_EQ(peer->Ask("counts"), "1000 1 1 0");
  EXPECT_EQ(sim_->ipc_importers(*allocation), 0);
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
  EXPECT_TRUE(sim_->Free(0, *allocation, MemoryKind::kDevice).ok());
  EXPECT_TRUE(misuses_.empty());
}

TEST_F(SimIpcTest, AHandleOfAFreedAllocationIsStale) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcMemHandle handle = FromHex(peer->Ask("export 256 1"));
  EXPECT_EQ(peer->Ask("free"), "ok 0");
  absl::StatusOr<void*> ptr = sim_->OpenIpcHandle(0, handle);
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FaultOf(ptr.status()), Fault::kCaller);
  EXPECT_NE(ptr.status().message().find("exporter freed"),
            absl::string_view::npos)
      << ptr.status();
  // A new allocation of the same size gets a new handle: never the old one.
  const IpcMemHandle renewed = FromHex(peer->Ask("export 256 2"));
  EXPECT_NE(renewed, handle);
  EXPECT_EQ(sim_->OpenIpcHandle(0, handle).status().code(),
            absl::StatusCode::kNotFound);
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
  EXPECT_EQ(sim_->ipc_maps(), 0);
}

TEST_F(SimIpcTest, AHandleOfAnExporterThatExitedIsStaleAndCleanedUp) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcMemHandle handle = FromHex(peer->Ask("export 256 1"));
  peer->Send("die");  // no free, no destructor: like a crash
  EXPECT_EQ(peer->Wait(), 0);
  absl::StatusOr<void*> ptr = sim_->OpenIpcHandle(0, handle);
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kNotFound);
  // This open finds the dead exporter's segment and removes it — unless a
  // simulator in another process (a test running beside this one) reaped it
  // first at its own first export: then the segment is simply gone.
  const absl::string_view message = ptr.status().message();
  EXPECT_TRUE(absl::StrContains(message, "stale handle: export 1 of process") &&
              (absl::StrContains(message, "the exporter exited") ||
               absl::StrContains(message, "the exporter freed")))
      << ptr.status();
  // The importer removed the dead exporter's segment: now it is just gone.
  EXPECT_EQ(sim_->OpenIpcHandle(0, handle).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(sim_->ipc_maps(), 0);
}

TEST_F(SimIpcTest, ForgedAndCorruptHandlesAreInvalidArguments) {
  IpcMemHandle zeros;
  EXPECT_EQ(sim_->OpenIpcHandle(0, zeros).status().code(),
            absl::StatusCode::kInvalidArgument);
  IpcMemHandle noise;
  for (size_t i = 0; i < noise.bytes.size(); ++i) {
    noise.bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  }
  EXPECT_EQ(sim_->OpenIpcHandle(0, noise).status().code(),
            absl::StatusCode::kInvalidArgument);

  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcMemHandle handle = FromHex(peer->Ask("export 256 1"));
  for (size_t i = 0; i < kIpcMemHandleBytes; ++i) {
    IpcMemHandle corrupt = handle;
    corrupt.bytes[i] ^= 0x40;
    absl::StatusOr<void*> ptr = sim_->OpenIpcHandle(0, corrupt);
    EXPECT_EQ(ptr.status().code(), absl::StatusCode::kInvalidArgument)
        << "byte " << i << ": " << ptr.status();
  }
  EXPECT_EQ(sim_->ipc_maps(), 0);
  // Untouched, the same handle opens.
  absl::StatusOr<void*> ptr = sim_->OpenIpcHandle(0, handle);
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  EXPECT_TRUE(sim_->CloseIpcHandle(0, *ptr).ok());
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

TEST_F(SimIpcTest, OpeningOwnHandleIsRefused) {
  absl::StatusOr<void*> allocation = sim_->Allocate(0, 64, MemoryKind::kDevice);
  ASSERT_TRUE(allocation.ok());
  absl::StatusOr<IpcMemHandle> handle = sim_->GetIpcHandle(0, *allocation);
  ASSERT_TRUE(handle.ok());
  absl::StatusOr<void*> ptr = sim_->OpenIpcHandle(0, *handle);
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ptr.status().message().find("exported by this process"),
            absl::string_view::npos);
  EXPECT_TRUE(sim_->Free(0, *allocation, MemoryKind::kDevice).ok());
}

TEST_F(SimIpcTest, FreeingAnExportedAllocationStillMappedIsMisuse) {
  absl::StatusOr<void*> allocation = sim_->Allocate(0, 64, MemoryKind::kDevice);
  ASSERT_TRUE(allocation.ok());
  absl::StatusOr<IpcMemHandle> handle = sim_->GetIpcHandle(0, *allocation);
  ASSERT_TRUE(handle.ok());
  std::memset(sim_->ExportedBytes(*allocation), 3, 64);
  std::unique_ptr<PeerProcess> peer = StartPeer();
  ASSERT_EQ(peer->Ask(absl::StrCat("open ", Hex(*handle))), "ok 3");
  EXPECT_TRUE(sim_->Free(0, *allocation, MemoryKind::kDevice).ok());
  ASSERT_EQ(misuses_.size(), 1u);
  EXPECT_NE(misuses_[0].find("still mapped by 1 other process"),
            std::string::npos)
      << misuses_[0];
  EXPECT_EQ(sim_->ExportedBytes(*allocation), nullptr);
  // A handle of the freed allocation no longer opens anywhere.
  EXPECT_EQ(peer->Ask("close"), "ok");
  EXPECT_EQ(
      peer->Ask(absl::StrCat("open ", Hex(*handle))),
      absl::StrCat("err ", static_cast<int>(absl::StatusCode::kNotFound)));
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

TEST_F(SimIpcTest, MisuseAndCallerErrorsOfTheExporter) {
  absl::StatusOr<void*> allocation = sim_->Allocate(0, 64, MemoryKind::kDevice);
  ASSERT_TRUE(allocation.ok());
  // An interior pointer: the contract asks for the base (carry the offset).
  absl::StatusOr<IpcMemHandle> interior =
      sim_->GetIpcHandle(0, static_cast<char*>(*allocation) + 8);
  EXPECT_EQ(interior.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<void*> host = sim_->Allocate(0, 64, MemoryKind::kPinnedHost);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(sim_->GetIpcHandle(0, *host).status().code(),
            absl::StatusCode::kInvalidArgument);
  int not_mapped = 0;
  EXPECT_EQ(sim_->CloseIpcHandle(0, &not_mapped).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(misuses_.size(), 2u);  // the interior pointer and the close
  EXPECT_EQ(sim_->GetIpcHandle(3, *allocation).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(sim_->Free(0, *allocation, MemoryKind::kDevice).ok());
  EXPECT_TRUE(sim_->Free(0, *host, MemoryKind::kPinnedHost).ok());
}

TEST_F(SimIpcTest, PoisonedDeviceAndInjectedFailures) {
  sim_->FailNext(SimOp::kIpcOpenHandle,
                 FaultError(Fault::kOutOfMemory,
                            absl::StatusCode::kResourceExhausted, "injected"));
  IpcMemHandle any;
  EXPECT_EQ(sim_->OpenIpcHandle(0, any).status().code(),
            absl::StatusCode::kResourceExhausted);
  sim_->PoisonDevice(0, absl::InternalError("cudaErrorIllegalAddress"));
  EXPECT_EQ(FaultOf(sim_->OpenIpcHandle(0, any).status()), Fault::kDevice);
  int local = 0;
  EXPECT_EQ(FaultOf(sim_->CloseIpcHandle(0, &local)), Fault::kDevice);
  EXPECT_EQ(FaultOf(sim_->GetIpcHandle(0, &local).status()), Fault::kDevice);
}

TEST_F(SimIpcTest, EightThreadsOpeningOneHandleMapItOnce) {
  std::unique_ptr<PeerProcess> peer = StartPeer();
  const IpcMemHandle handle = FromHex(peer->Ask("export 4096 9"));
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  std::vector<void*> pointers(8, nullptr);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<void*> ptr = sim_->OpenIpcHandle(0, handle);
      if (ptr.ok()) {
        pointers[t] = *ptr;
        opened.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(opened.load(), 8);
  EXPECT_EQ(sim_->ipc_maps(), 1);
  for (void* ptr : pointers) EXPECT_EQ(ptr, pointers[0]);
  EXPECT_EQ(peer->Ask("importers"), "1");
  for (void* ptr : pointers) EXPECT_TRUE(sim_->CloseIpcHandle(0, ptr).ok());
  EXPECT_EQ(sim_->ipc_unmaps(), 1);
  EXPECT_EQ(peer->Ask("importers"), "0");
  peer->Send("quit");
  EXPECT_EQ(peer->Wait(), 0);
}

}  // namespace
}  // namespace gpupool
