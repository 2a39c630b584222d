// GoogleTest environment, leak-check listener and ScopedLeakGuard; see
// gpupool/testing/gtest_integration.h.

#include "gpupool/testing/gtest_integration.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/device_health.h"
#include "gpupool/pool_stats.h"
#include "gpupool/pools.h"
#include "gtest/gtest.h"

namespace gpupool::testing {
namespace internal {
namespace {

std::vector<uint64_t> SortedIds(const std::vector<OutstandingLease>& leases) {
  std::vector<uint64_t> ids;
  ids.reserve(leases.size());
  for (const OutstandingLease& lease : leases) ids.push_back(lease.lease_id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// True for leases gpupool holds itself, e.g. the ready events the allocation
// cache keeps with its cached blocks.
bool HeldByGpupool(const OutstandingLease& lease) {
  return lease.where.is_internal();
}

// Appends the leases of one pool acquired since `before` and still out; when
// the pool does not track acquire sites, a count from its in_use gauge less
// `held_by_gpupool` (leases gpupool itself took since).
void FindPoolLeaks(absl::string_view noun,
                   const std::vector<uint64_t>& before_ids,
                   int64_t before_in_use,
                   const std::vector<OutstandingLease>& now, int64_t now_in_use,
                   int64_t held_by_gpupool,
                   std::vector<LeaseSnapshot::Finding>* findings) {
  int named = 0;
  for (const OutstandingLease& lease : now) {
    if (HeldByGpupool(lease) ||
        std::binary_search(before_ids.begin(), before_ids.end(),
                           lease.lease_id)) {
      continue;
    }
    findings->push_back(
        {absl::StrCat(lease.ToString(), " is still out"), lease.where});
    ++named;
  }
  const int64_t extra = now_in_use - before_in_use - held_by_gpupool;
  if (named == 0 && extra > 0) {
    findings->push_back(
        {absl::StrCat(extra, " more ", noun, extra == 1 ? "" : "s",
                      " still out (acquire sites not tracked: enable "
                      "PoolOptions::track_lease_sites to name them)"),
         SourceLocation()});
  }
}

// Blocks the allocation cache keeps (each may hold ready events).
int64_t CacheBlocks(Pools& pools) {
  const AllocationCacheStats stats = pools.allocations().GetStats();
  return stats.blocks_cached + stats.blocks_retiring;
}

}  // namespace

LeaseSnapshot::LeaseSnapshot(Pools& pools, const LeakCheckOptions& options)
    : pools_(&pools), options_(options) {
  if (options_.check_streams) {
    streams_.lease_ids = SortedIds(pools.streams().GetOutstandingLeases());
    streams_.in_use = pools.streams().GetStats().in_use;
  }
  if (options_.check_events) {
    events_.lease_ids = SortedIds(pools.events().GetOutstandingLeases());
    events_.in_use = pools.events().GetStats().in_use;
  }
  if (options_.check_allocations) {
    allocations_.lease_ids =
        SortedIds(pools.allocations().GetOutstandingLeases());
    allocations_.in_use = pools.allocations().GetStats().allocations_in_use;
  }
  cache_blocks_ = CacheBlocks(pools);
  poison_count_ = pools.health()->poison_count();
}

std::vector<LeaseSnapshot::Finding> LeaseSnapshot::FindLeaks() const {
  std::vector<Finding> findings;
  if (options_.check_streams) {
    FindPoolLeaks("stream", streams_.lease_ids, streams_.in_use,
                  pools_->streams().GetOutstandingLeases(),
                  pools_->streams().GetStats().in_use,
                  /*held_by_gpupool=*/0, &findings);
  }
  if (options_.check_events) {
    // Untracked sites: approximate the cache's ready events by the growth of
    // its blocks (one event per block released on a single stream).
    const int64_t cache_growth =
        std::max<int64_t>(0, CacheBlocks(*pools_) - cache_blocks_);
    FindPoolLeaks("event", events_.lease_ids, events_.in_use,
                  pools_->events().GetOutstandingLeases(),
                  pools_->events().GetStats().in_use, cache_growth, &findings);
  }
  if (options_.check_allocations) {
    FindPoolLeaks("allocation", allocations_.lease_ids, allocations_.in_use,
                  pools_->allocations().GetOutstandingLeases(),
                  pools_->allocations().GetStats().allocations_in_use,
                  /*held_by_gpupool=*/0, &findings);
  }
  const DeviceHealth& health = *pools_->health();
  if (options_.fail_on_device_poisoned &&
      health.poison_count() > poison_count_) {
    int still_poisoned = 0;
    for (int device = 0; device < health.device_count(); ++device) {
      if (!health.is_poisoned(device)) continue;
      ++still_poisoned;
      findings.push_back(
          {absl::StrCat("device ", device, " was poisoned (",
                        MessageWithoutFault(health.poison_cause(device)), ")"),
           SourceLocation()});
    }
    if (still_poisoned == 0) {
      findings.push_back(
          {absl::StrCat(health.poison_count() - poison_count_,
                        " device poisoning(s) happened (since recovered)"),
           SourceLocation()});
    }
  }
  return findings;
}

}  // namespace internal

namespace {

bool HasSite(const SourceLocation& where) {
  return where.line() != 0 &&
         std::string(where.file_name()) != SourceLocation().file_name();
}

// Reports `finding` as a non-fatal failure of the running test, at its
// acquire site when known, else at `fallback`.
void ReportFinding(const internal::LeaseSnapshot::Finding& finding,
                   const char* fallback_file, int fallback_line,
                   absl::string_view context) {
  const bool at_site = HasSite(finding.where);
  const char* file = at_site ? finding.where.file_name() : fallback_file;
  const int line =
      at_site ? static_cast<int>(finding.where.line()) : fallback_line;
  ADD_FAILURE_AT(file, line)
      << "gpupool: " << finding.message << " " << context;
}

}  // namespace

void ProcessPoolsEnvironment::SetUp() {
  absl::StatusOr<Pools*> pools = ProcessPools();
  if (!pools.ok()) {
    FAIL() << "gpupool: ProcessPools() failed, no test can run: "
           << pools.status()
           << " (set GPUPOOL_BACKEND=cuda|hip|sim; sim runs without a GPU)";
  }
  pools_ = *pools;
}

LeakCheckListener::LeakCheckListener(LeakCheckOptions options)
    : options_(options) {}

LeakCheckListener::LeakCheckListener(Pools& pools, LeakCheckOptions options)
    : fixed_pools_(&pools), options_(options) {}

void LeakCheckListener::OnTestStart(const ::testing::TestInfo& test) {
  snapshot_.reset();
  Pools* pools = fixed_pools_;
  if (pools == nullptr) {
    absl::StatusOr<Pools*> process_pools = ProcessPools();
    if (!process_pools.ok()) return;  // the environment reports it
    pools = *process_pools;
  }
  snapshot_ = std::make_unique<internal::LeaseSnapshot>(*pools, options_);
}

void LeakCheckListener::OnTestEnd(const ::testing::TestInfo& test) {
  if (snapshot_ == nullptr) return;
  // Runs after the fixture's destructor and before GoogleTest stops
  // attributing failures to `test` (and, for listeners appended after the
  // default printer, before it prints the verdict).
  const std::string context = absl::StrCat(
      "at the end of test ", test.test_suite_name(), ".", test.name());
  for (const internal::LeaseSnapshot::Finding& finding :
       snapshot_->FindLeaks()) {
    ReportFinding(finding, test.file(), test.line(), context);
  }
  snapshot_.reset();
}

ScopedLeakGuard::ScopedLeakGuard(Pools& pools, LeakCheckOptions options,
                                 SourceLocation where)
    : snapshot_(pools, options), where_(where) {}

ScopedLeakGuard::~ScopedLeakGuard() {
  const std::string context =
      absl::StrCat("when the ScopedLeakGuard of ", where_.file_name(), ":",
                   where_.line(), " ended");
  for (const internal::LeaseSnapshot::Finding& finding :
       snapshot_.FindLeaks()) {
    ReportFinding(finding, where_.file_name(), static_cast<int>(where_.line()),
                  context);
  }
}

absl::Status ScopedLeakGuard::Check() const {
  std::vector<internal::LeaseSnapshot::Finding> findings =
      snapshot_.FindLeaks();
  if (findings.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "gpupool: ", findings.size(),
      " leak finding(s) since the ScopedLeakGuard at ", where_.file_name(), ":",
      where_.line(), ": ",
      absl::StrJoin(findings, "; ",
                    [](std::string* out,
                       const internal::LeaseSnapshot::Finding& finding) {
                      out->append(finding.message);
                    })));
}

void InstallProcessPoolsTestHooks(LeakCheckOptions options) {
  ::testing::AddGlobalTestEnvironment(new ProcessPoolsEnvironment());
  ::testing::UnitTest::GetInstance()->listeners().Append(
      new LeakCheckListener(options));
}

}  // namespace gpupool::testing
