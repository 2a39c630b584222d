// GPUPOOL_SNAPSHOT=path on the process-wide bundle: the snapshot at the first
// out-of-memory (path.oom) and at exit (path), each in a child process
// (ProcessPools() is built once per process).

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gpupool/pools.h"
#include "gtest/gtest.h"

namespace gpupool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// In the child: a 4 KiB lease held across an allocation no device can hold,
// then exit with the lease released.
void LeaseThenRunOutOfMemory(const std::string& path) {
  setenv("GPUPOOL_BACKEND", "sim", 1);
  setenv("GPUPOOL_SNAPSHOT", path.c_str(), 1);
  absl::StatusOr<Pools*> pools = ProcessPools();
  if (!pools.ok()) std::exit(3);
  AllocationCache& cache = (*pools)->allocations();
  absl::StatusOr<PooledAllocation> held =
      cache.Allocate(0, 4096, MemoryKind::kDevice);
  if (!held.ok()) std::exit(4);
  for (int i = 0; i < 2; ++i) {  // the second out-of-memory writes nothing
    absl::StatusOr<PooledAllocation> huge =
        cache.Allocate(0, size_t{1} << 60, MemoryKind::kDevice);
    if (huge.ok() ||
        huge.status().code() != absl::StatusCode::kResourceExhausted) {
      std::exit(5);
    }
  }
  held->Release();
  std::exit(0);
}

TEST(SnapshotDumpsDeathTest, WrittenAtTheFirstOutOfMemoryAndAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The same in the child, which runs this test again from the start.
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/gpupool_snapshot_dumps_test.json");
  unlink(path.c_str());
  unlink(absl::StrCat(path, ".oom").c_str());
  EXPECT_EXIT(LeaseThenRunOutOfMemory(path), ::testing::ExitedWithCode(0), "");
  const std::string oom = ReadFile(absl::StrCat(path, ".oom"));
  const std::string at_exit = ReadFile(path);
  // At the out-of-memory the 4 KiB block was leased; at exit it was free.
  EXPECT_THAT(oom, HasSubstr("\"format\":\"gpupool.snapshot\""));
  EXPECT_THAT(oom, HasSubstr("\"bytes\":4096,\"state\":\"leased\""));
  EXPECT_THAT(at_exit, HasSubstr("\"format\":\"gpupool.snapshot\""));
  EXPECT_THAT(at_exit, HasSubstr("\"bytes\":4096,\"state\":\"free\""));
  EXPECT_THAT(at_exit, Not(HasSubstr("\"state\":\"leased\"")));
  // The bundle's pools are listed per key.
  EXPECT_THAT(at_exit, HasSubstr("\"stream_pools\":["));
  unlink(path.c_str());
  unlink(absl::StrCat(path, ".oom").c_str());
}

}  // namespace
}  // namespace gpupool
