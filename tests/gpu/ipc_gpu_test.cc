// Sharing a stable buffer between two processes on one real GPU: a peer
// process (ipc_gpu_peer.cc, fork + exec) exports a buffer it filled with
// cudaMemset; this process imports it through its own AllocationCache and
// copies the bytes back. Growth on the exporter gives a new version whose
// bytes the next import reads. Without a CUDA device the test skips with the
// runtime's own reason.

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/stable_buffers.h"
#include "gtest/gtest.h"
#include "tests/util/peer_process.h"

namespace gpupool {
namespace {

using ::gpupool::testing::PeerProcess;

absl::StatusOr<IpcHandle> Ask(PeerProcess& peer, const std::string& line) {
  const std::string answer = peer.Ask(line);
  if (absl::StartsWith(answer, "err ")) {
    return absl::UnavailableError(answer.substr(4));
  }
  return IpcHandle::Parse(absl::HexStringToBytes(answer));
}

std::vector<unsigned char> CopyBack(const ImportedBuffer& buffer) {
  std::vector<unsigned char> host(buffer.size());
  EXPECT_EQ(cudaMemcpy(host.data(), buffer.data(), host.size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  return host;
}

TEST(CudaIpcTest, TwoProcessesShareAStableBufferAndItsGrowth) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend("cuda");
  if (!backend.ok()) GTEST_SKIP() << backend.status();
  PeerProcess peer(GPUPOOL_IPC_GPU_PEER, {});
  ASSERT_TRUE(peer.started());
  absl::StatusOr<IpcHandle> v1 = Ask(peer, "export ring 1048576 90");
  ASSERT_TRUE(v1.ok()) << v1.status();

  EventPool events(**backend);
  AllocationCache cache(**backend, events);
  {
    absl::StatusOr<ImportedBuffer> lease =
        gpupool::StableBuffers(cache).Import(*v1, 0);
    ASSERT_TRUE(lease.ok()) << lease.status();
    const std::vector<unsigned char> bytes = CopyBack(*lease);
    EXPECT_EQ(bytes.front(), 90);
    EXPECT_EQ(bytes.back(), 90);
    absl::StatusOr<ImportedBuffer> again =
        gpupool::StableBuffers(cache).Import(*v1, 0);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->data(), lease->data());
    EXPECT_EQ(gpupool::StableBuffers(cache).GetIpcStats().opens, 1);
    // The driver's address range of the mapping bounds every lease.
    absl::StatusOr<AddressRange> range =
        (*backend)->GetAddressRange(0, lease->data());
    ASSERT_TRUE(range.ok()) << range.status();
    EXPECT_EQ(range->base, lease->data());
    EXPECT_GE(range->bytes, size_t{1048576});
    IpcHandle forged = *v1;
    forged.bytes = range->bytes + 1;
    EXPECT_EQ(gpupool::StableBuffers(cache).Import(forged, 0).status().code(),
              absl::StatusCode::kInvalidArgument);
    forged = *v1;
    forged.runtime.bytes[12] ^= 1;
    EXPECT_EQ(gpupool::StableBuffers(cache).Import(forged, 0).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(gpupool::StableBuffers(cache).GetIpcStats().opens, 1);
  }
  // Growth: a new version with new bytes; the old mapping closes.
  absl::StatusOr<IpcHandle> v2 = Ask(peer, "export ring 8388608 51");
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_NE(v2->version, v1->version);
  {
    absl::StatusOr<ImportedBuffer> lease =
        gpupool::StableBuffers(cache).Import(*v2, 0);
    ASSERT_TRUE(lease.ok()) << lease.status();
    const std::vector<unsigned char> bytes = CopyBack(*lease);
    EXPECT_EQ(bytes.front(), 51);
    EXPECT_EQ(bytes.back(), 51);
  }
  EXPECT_EQ(gpupool::StableBuffers(cache).Import(*v1, 0).status().code(),
            absl::StatusCode::kNotFound);
  const IpcStats stats = gpupool::StableBuffers(cache).GetIpcStats();
  EXPECT_EQ(stats.opens, 2);
  EXPECT_EQ(stats.closes, 1);
  EXPECT_TRUE(cache.Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(cache).GetIpcStats().closes, 2);
  peer.Send("quit");
  EXPECT_EQ(peer.Wait(), 0);
}

// An importer killed with SIGKILL while it maps our buffer: its pin dies
// with it, so the next Trim frees the version (the driver has dropped the
// dead process's mapping).
TEST(CudaIpcTest, AKilledImportersPinDiesWithIt) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend("cuda");
  if (!backend.ok()) GTEST_SKIP() << backend.status();
  EventPool events(**backend);
  AllocationCache cache(**backend, events);
  absl::StatusOr<IpcHandle> handle =
      gpupool::StableBuffers(cache).Export("ring", 0, 1 << 20);
  ASSERT_TRUE(handle.ok()) << handle.status();
  PeerProcess peer(GPUPOOL_IPC_GPU_PEER, {});
  ASSERT_TRUE(peer.started());
  ASSERT_EQ(peer.Ask(absl::StrCat("import ",
                                  absl::BytesToHexString(handle->Serialize()))),
            "ok");
  ASSERT_TRUE(gpupool::StableBuffers(cache).Release("ring", 0).ok());
  EXPECT_TRUE(cache.Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(cache).GetIpcStats().versions_waiting,
            1);  // mapped by the peer
  peer.Kill();
  EXPECT_TRUE(cache.Trim().ok());
  EXPECT_EQ(gpupool::StableBuffers(cache).GetIpcStats().versions_waiting, 0);
}

}  // namespace
}  // namespace gpupool
