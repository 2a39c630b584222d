// The GPUPOOL_STATS=1 exit report (src/process/stats_report.cc): a child
// process runs a known program on the process pools and exits; the parent reads
// the whole report from the child's stderr and checks every line against what
// the program did. Its own binary: ProcessPools() must be first created in
// the child (a pool created before fork() refuses in the child).

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gpupool/gpupool.h"
#include "gtest/gtest.h"
#include "tests/util/fork_util.h"

namespace gpupool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// In the child: stderr to `path`, the sim backend, the report at exit.
bool PrepareChild(const std::string& path, const char* conf) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) return false;
  setenv("GPUPOOL_BACKEND", "sim", 1);
  setenv("GPUPOOL_CONF", conf, 1);
  setenv("GPUPOOL_STATS", "1", 1);
  return true;
}

// Runs `program` (given the path its stderr goes to) in a fork()ed child;
// returns its exit code and puts what it wrote on stderr in `lines`.
template <typename Program>
int RunAndReadStderr(Program program, std::vector<std::string>* lines) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/stats_report_", getpid(), ".txt");
  const int code = ::gpupool::testing::RunInForkedChild(
      [&path, &program] { return program(path); });
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  *lines = absl::StrSplit(text.str(), '\n');
  return code;
}

// The program: on the sim backend, with one stream prewarmed by GPUPOOL_CONF.
//   streams: 3 leases held together, then released;
//   events: 2 held together and released, then 1 kept out at exit;
//   allocations: 4 KiB twice in turn (a miss, a hit), then 1 MiB kept out.
int StatsProgram(const std::string& stderr_path) {
  if (!PrepareChild(stderr_path, "prewarm=sim:0:default:1")) return 10;
  absl::StatusOr<Pools*> pools = ProcessPools();
  if (!pools.ok()) return 11;
  {
    std::vector<PooledStream> held;
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<PooledStream> stream = (*pools)->streams().Acquire(0);
      if (!stream.ok()) return 12;
      held.push_back(*std::move(stream));
    }
  }
  {
    absl::StatusOr<PooledEvent> a = (*pools)->events().Acquire(0);
    absl::StatusOr<PooledEvent> b = (*pools)->events().Acquire(0);
    if (!a.ok() || !b.ok()) return 13;
  }
  // Kept out at exit on purpose (the report lists it): held by statics
  // that are never destroyed, so no destructor releases them first.
  const int event_line = __LINE__ + 1;
  absl::StatusOr<PooledEvent> kept_event = (*pools)->events().Acquire(0);
  if (!kept_event.ok()) return 14;
  static PooledEvent* const kept_event_holder =
      new PooledEvent(*std::move(kept_event));
  (void)kept_event_holder;
  for (int i = 0; i < 2; ++i) {
    if (!(*pools)->allocations().Allocate(0, 4096).ok()) return 15;
  }
  AllocationCache& cache = (*pools)->allocations();
  const int allocation_line = __LINE__ + 1;
  absl::StatusOr<PooledAllocation> kept = cache.Allocate(0, 1 << 20);
  if (!kept.ok()) return 16;
  static PooledAllocation* const kept_holder =
      new PooledAllocation(*std::move(kept));
  (void)kept_holder;
  // Where the kept leases were acquired, for the parent, before the report.
  fprintf(stderr, "kept at lines %d %d\n", event_line, allocation_line);
  std::exit(0);  // the report is printed at exit
}

TEST(StatsReportTest, ExitReportAccountsForWhatTheProgramDid) {
  std::vector<std::string> lines;
  ASSERT_EQ(RunAndReadStderr(StatsProgram, &lines), 0);
  std::stringstream shown;
  for (const std::string& line : lines) shown << "| " << line << "\n";
  ASSERT_GE(lines.size(), 9u) << shown.str();
  int event_line = 0;
  int allocation_line = 0;
  ASSERT_EQ(sscanf(lines[0].c_str(), "kept at lines %d %d", &event_line,
                   &allocation_line),
            2)
      << shown.str();
  lines.erase(lines.begin());
  EXPECT_EQ(lines[0], "gpupool stats at exit (backend sim):") << shown.str();
  EXPECT_EQ(lines[1],
            "  streams      acquired=3 created=3 reused=1 destroyed=0 "
            "hit_rate=33.3% in_use=0 idle=3 peak_in_use=3");
  EXPECT_EQ(lines[2],
            "  events       acquired=3 created=2 reused=1 destroyed=0 "
            "hit_rate=33.3% in_use=1 idle=1 peak_in_use=2");
  EXPECT_EQ(lines[3],
            "  allocations  hits=1 misses=2 hit_rate=33.3% uncached=0 "
            "oom_retries=0 in_use=1 (1.00 MiB) cached=4.00 KiB "
            "peak_in_use=1.00 MiB reserved=1.00 MiB");
  EXPECT_EQ(lines[4], "leases still out: 2 (+0 held by gpupool itself)");
  const std::string here = "stats_report_test.cc:";
  EXPECT_THAT(lines[5], StartsWith("  event dev0 "));
  EXPECT_THAT(lines[5], HasSubstr(absl::StrCat(here, event_line)));
  EXPECT_THAT(lines[6], StartsWith("  allocation dev0 "));
  EXPECT_THAT(lines[6], HasSubstr(absl::StrCat(here, allocation_line)));
  EXPECT_EQ(lines[7], "detail:");
}

// A block released on a stream is cached with a ready event the cache leases
// from the event pool: the user holds nothing, gpupool holds that event.
int CachedBlockProgram(const std::string& stderr_path) {
  if (!PrepareChild(stderr_path, "")) return 10;
  absl::StatusOr<Pools*> pools = ProcessPools();
  if (!pools.ok()) return 11;
  absl::StatusOr<PooledStream> stream = (*pools)->streams().Acquire(0);
  if (!stream.ok()) return 12;
  absl::StatusOr<PooledAllocation> block = (*pools)->allocations().Allocate(
      0, 4096, MemoryKind::kDevice, stream->get());
  if (!block.ok()) return 13;
  block->Release();
  stream->Release();
  std::exit(0);  // the report is printed at exit
}

TEST(StatsReportTest, EventsHeldByTheCacheAreLabelledAndCountedAsItsOwn) {
  std::vector<std::string> lines;
  ASSERT_EQ(RunAndReadStderr(CachedBlockProgram, &lines), 0);
  std::stringstream shown;
  for (const std::string& line : lines) shown << "| " << line << "\n";
  ASSERT_GE(lines.size(), 5u) << shown.str();
  EXPECT_EQ(lines[2],
            "  events       acquired=1 created=1 reused=0 destroyed=0 "
            "hit_rate=0.0% in_use=1 (1 held by gpupool) idle=0 "
            "peak_in_use=1")
      << shown.str();
  EXPECT_EQ(lines[4], "leases still out: 0 (+1 held by gpupool itself)")
      << shown.str();
}

}  // namespace
}  // namespace gpupool
