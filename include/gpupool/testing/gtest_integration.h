// gpupool/testing/gtest_integration.h — GoogleTest helpers for test binaries
// that use gpupool: keep the process-wide pools alive for the whole binary and
// fail any test that leaks a lease.
//
//   * ProcessPoolsEnvironment creates `ProcessPools()` before the first test
//     (so every test shares the warm pools) and fails the whole run loudly,
//     with the status, when it cannot be created.
//   * LeakCheckListener fails a test that ends with leases it acquired still
//     out — streams, events, allocations — naming each one and the file:line
//     where it was acquired (captured by the `SourceLocation` default argument
//     of every Acquire and Allocate), and optionally a test during which a
//     device was poisoned.
//     Leases acquired before the test started (SetUpTestSuite, globals) are
//     not its leaks, nor are those gpupool holds itself (the ready events the
//     allocation cache keeps with cached blocks). The check runs after the
//     fixture was destroyed, so leases held by fixture members are returned in
//     time.
//   * ScopedLeakGuard does the same check for a block of code, with any
//     `Pools` bundle (e.g. a private one per test).
//
// A leak is reported as a failure at the acquire site:
//
//   my_test.cc:42: Failure
//   gpupool: stream dev0 {priority=0,non_blocking=1} #7 acquired at
//   my_test.cc:42 is still out at the end of MyTest.Leaks
//
// Thread safety: the environment and listener are driven by GoogleTest on its
// main thread. A ScopedLeakGuard is used by one thread; the leases it counts
// may be acquired by any thread (every lease of the bundle counts).
// Acquire-site tracking (`PoolOptions::track_lease_sites`, on by default) is
// needed to name leaks; without it a leak is reported as a count.
//
// Usage (or link gpupool::testing_main, which does exactly this):
//
//   int main(int argc, char** argv) {
//     ::testing::InitGoogleTest(&argc, argv);
//     gpupool::testing::InstallProcessPoolsTestHooks();
//     return RUN_ALL_TESTS();
//   }

#ifndef GPUPOOL_TESTING_GTEST_INTEGRATION_H_
#define GPUPOOL_TESTING_GTEST_INTEGRATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpupool/export.h"
#include "gpupool/pool_stats.h"
#include "gpupool/pools.h"
#include "gpupool/source_location.h"
#include "gtest/gtest.h"

namespace gpupool::testing {

// What a leak check looks at.
struct GPUPOOL_EXPORT LeakCheckOptions {
  bool check_streams = true;
  bool check_events = true;
  bool check_allocations = true;  // PooledAllocation leases (not stable ones)
  // Also fail when a device was poisoned (a sticky kDevice error) while the
  // checked code ran, naming the device and the original error.
  bool fail_on_device_poisoned = false;
};

namespace internal {

// What is out at construction, and what was acquired since and is still out.
class GPUPOOL_EXPORT LeaseSnapshot {
 public:
  LeaseSnapshot(Pools& pools, const LeakCheckOptions& options);

  // One line per finding: a lease still out (with its acquire site), a count
  // when sites are not tracked, or a device poisoned since the snapshot.
  struct Finding {
    std::string message;
    // The acquire site; file "unknown" when not tracked.
    SourceLocation where;
  };
  std::vector<Finding> FindLeaks() const;

 private:
  struct PoolSnapshot {
    std::vector<uint64_t> lease_ids;  // sorted
    int64_t in_use = 0;
  };
  Pools* pools_;
  LeakCheckOptions options_;
  PoolSnapshot streams_;
  PoolSnapshot events_;
  PoolSnapshot allocations_;
  int64_t cache_blocks_ = 0;  // cached + retiring blocks of the cache
  int64_t poison_count_ = 0;
};

}  // namespace internal

// Creates ProcessPools() in SetUp and keeps it for the whole binary (it is
// never destroyed). When ProcessPools() fails, SetUp fails fatally with the
// status and GoogleTest runs no test (e.g. no GPU and GPUPOOL_BACKEND unset).
class GPUPOOL_EXPORT ProcessPoolsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override;
  // The bundle; nullptr before SetUp or when it failed.
  Pools* pools() const { return pools_; }

 private:
  Pools* pools_ = nullptr;
};

// Fails each test that ends with leases it acquired still out. Append it to
// GoogleTest's listeners after the default printer (the order
// `listeners().Append` gives), so that the verdict printed includes it.
class GPUPOOL_EXPORT LeakCheckListener
    : public ::testing::EmptyTestEventListener {
 public:
  // Checks ProcessPools() (nothing when it cannot be created: the
  // environment reports that).
  explicit LeakCheckListener(LeakCheckOptions options = {});
  // Checks `pools`, which must outlive the listener's use.
  explicit LeakCheckListener(Pools& pools, LeakCheckOptions options = {});

  void OnTestStart(const ::testing::TestInfo& test) override;
  void OnTestEnd(const ::testing::TestInfo& test) override;

 private:
  Pools* fixed_pools_ = nullptr;  // nullptr: ProcessPools()
  LeakCheckOptions options_;
  std::unique_ptr<internal::LeaseSnapshot> snapshot_;
};

// Checks a block of code: leases of `pools` acquired during the guard's life
// and still out when it is destroyed fail the running test (ADD_FAILURE at
// each lease's acquire site). Declare it before the leases it watches, so
// that they are returned before it checks:
//
//   {
//     gpupool::testing::ScopedLeakGuard guard(*pools);
//     MyClient client(*pools);   // ~MyClient returns everything first
//   }
class GPUPOOL_EXPORT ScopedLeakGuard {
 public:
  explicit ScopedLeakGuard(Pools& pools, LeakCheckOptions options = {},
                           SourceLocation where = SourceLocation::Current());
  ~ScopedLeakGuard();
  ScopedLeakGuard(const ScopedLeakGuard&) = delete;
  ScopedLeakGuard& operator=(const ScopedLeakGuard&) = delete;

  // OK when nothing acquired since construction is still out (and, with
  // fail_on_device_poisoned, no device was poisoned); otherwise
  // FailedPrecondition listing every leak and its acquire site. Fails no
  // test by itself.
  absl::Status Check() const;

 private:
  internal::LeaseSnapshot snapshot_;
  SourceLocation where_;
};

// Registers a ProcessPoolsEnvironment and appends a LeakCheckListener over
// ProcessPools() to the running GoogleTest. Call once, after
// ::testing::InitGoogleTest and before RUN_ALL_TESTS.
GPUPOOL_EXPORT void InstallProcessPoolsTestHooks(LeakCheckOptions options = {});

}  // namespace gpupool::testing

#endif  // GPUPOOL_TESTING_GTEST_INTEGRATION_H_
