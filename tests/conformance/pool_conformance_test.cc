// Pool conformance: the same scenarios for the stream pool, the event pool
// and the allocation cache, on every backend (three SimBackend profiles, and
// cuda/hip, which skip with the runtime's own reason where there is no
// device). Each pool is driven through a small adapter (`PoolUnderTest`) so
// that a scenario is written once; where a pool lacks the feature a scenario
// needs (the allocation cache has no Discard, no Prewarm), the scenario skips
// naming what is missing. Scenarios that script pending work, faults or
// limits need SimBackend and skip elsewhere.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace gpupool {
namespace {

using ::gpupool::testing::IsOk;
using ::gpupool::testing::StatusIs;
using ::gpupool::testing::StrictSimOptions;
using ::testing::HasSubstr;

enum class PoolKind { kStream, kEvent, kAllocation };

// The bytes every allocation lease asks for (one size class).
constexpr size_t kBytes = 4096;

// Counters every pool keeps, under the pool's own names (see each mapping in
// the adapters below). `draining` is -1 where the pool does not count it.
struct Counts {
  int64_t acquired = 0;
  int64_t created = 0;
  int64_t reused = 0;
  int64_t destroyed = 0;
  int64_t in_use = 0;
  int64_t idle = 0;
  int64_t draining = 0;
  int64_t dropped = 0;
  int64_t leaked = 0;
  int64_t refused = 0;  // acquire_timeouts / failed_allocations
};

class LeaseUnderTest {
 public:
  virtual ~LeaseUnderTest() = default;
  virtual void* handle() const = 0;
  virtual uint64_t lease_id() const = 0;
  virtual int device() const = 0;
  virtual void Release() = 0;
  // Unimplemented where the pool has no Discard.
  virtual absl::Status Discard() = 0;
  // Leaves work pending on the resource (SimBackend only): `busy` is a
  // stream of the lease's device with never-ending work submitted.
  virtual void MakeBusy(SimBackend& sim, NativeStream busy) = 0;
};

class PoolUnderTest {
 public:
  virtual ~PoolUnderTest() = default;
  // "stream", "event", "allocation" (as in OutstandingLease::resource).
  virtual std::string resource() const = 0;
  // `key` 0 or 1: two configurations that must never share a resource.
  virtual absl::StatusOr<std::unique_ptr<LeaseUnderTest>> Acquire(
      int device, int key = 0, absl::Duration timeout = absl::Seconds(5)) = 0;
  // Unimplemented where the pool has no Prewarm.
  virtual absl::Status Prewarm(int device, int key, int count) = 0;
  virtual void Trim() = 0;
  virtual Counts Stats() const = 0;
  virtual std::vector<OutstandingLease> Outstanding() const = 0;
  virtual absl::Status Recover(int device) = 0;
  // Live runtime resources of this pool's kind on `device` (SimBackend).
  virtual int Live(const SimBackend& sim, int device) const = 0;
};

Counts FromPoolStats(const PoolStats& s) {
  return {.acquired = s.acquired,
          .created = s.created,
          .reused = s.reused,
          .destroyed = s.destroyed,
          .in_use = s.in_use,
          .idle = s.idle,
          .draining = s.draining,
          .dropped = s.dropped,
          .leaked = s.leaked,
          .refused = s.acquire_timeouts};
}

// --- stream and event pools (the keyed pools share one shape) ---------------

template <typename Lease>
class KeyedLease : public LeaseUnderTest {
 public:
  explicit KeyedLease(Lease lease) : lease_(std::move(lease)) {}
  void* handle() const override { return lease_.get(); }
  uint64_t lease_id() const override { return lease_.lease_id(); }
  int device() const override { return lease_.device(); }
  void Release() override { lease_.Release(); }
  absl::Status Discard() override {
    lease_.Discard();
    return absl::OkStatus();
  }
  void MakeBusy(SimBackend& sim, NativeStream busy) override;

 private:
  Lease lease_;
};

template <>
void KeyedLease<PooledStream>::MakeBusy(SimBackend& sim, NativeStream) {
  sim.SubmitWork(lease_.get(), absl::InfiniteDuration());
}
template <>
void KeyedLease<PooledEvent>::MakeBusy(SimBackend& sim, NativeStream busy) {
  EXPECT_THAT(sim.RecordEvent(lease_.device(), lease_.get(), busy), IsOk());
}

StreamConfig StreamKey(int key) { return {.priority = key == 0 ? 0 : -1}; }
EventConfig EventKey(int key) { return {.disable_timing = key == 0}; }

template <typename Pool, typename Lease, typename Config>
class KeyedPoolUnderTest : public PoolUnderTest {
 public:
  KeyedPoolUnderTest(Backend& backend, std::shared_ptr<DeviceHealth> health,
                     PoolOptions options, std::string resource,
                     Config (*key)(int))
      : pool_(backend, std::move(health), options),
        resource_(std::move(resource)),
        key_(key) {}
  std::string resource() const override { return resource_; }
  absl::StatusOr<std::unique_ptr<LeaseUnderTest>> Acquire(
      int device, int key, absl::Duration timeout) override {
    absl::StatusOr<Lease> lease = pool_.Acquire(device, key_(key), timeout);
    if (!lease.ok()) return lease.status();
    return std::unique_ptr<LeaseUnderTest>(
        std::make_unique<KeyedLease<Lease>>(*std::move(lease)));
  }
  absl::Status Prewarm(int device, int key, int count) override {
    return pool_.Prewarm(device, key_(key), count);
  }
  void Trim() override { pool_.Trim(); }
  Counts Stats() const override { return FromPoolStats(pool_.GetStats()); }
  std::vector<OutstandingLease> Outstanding() const override {
    return pool_.GetOutstandingLeases();
  }
  absl::Status Recover(int device) override {
    return pool_.RecoverDevice(device);
  }
  int Live(const SimBackend& sim, int device) const override;

 private:
  Pool pool_;
  std::string resource_;
  Config (*key_)(int);
};

template <>
int KeyedPoolUnderTest<StreamPool, PooledStream, StreamConfig>::Live(
    const SimBackend& sim, int device) const {
  return sim.live_streams(device);
}
template <>
int KeyedPoolUnderTest<EventPool, PooledEvent, EventConfig>::Live(
    const SimBackend& sim, int device) const {
  return sim.live_events(device);
}

// --- allocation cache --------------------------------------------------------
// Keys are memory kinds; a lease's handle is its address; reuse is a cache
// hit, creation a runtime allocation, destruction a runtime free.

class AllocationLease : public LeaseUnderTest {
 public:
  explicit AllocationLease(PooledAllocation lease) : lease_(std::move(lease)) {}
  void* handle() const override { return lease_.data(); }
  uint64_t lease_id() const override { return lease_.lease_id(); }
  int device() const override { return lease_.device(); }
  void Release() override { lease_.Release(); }
  absl::Status Discard() override {
    return absl::UnimplementedError(
        "the allocation cache has no Discard: a block goes back with Release "
        "and leaves through Trim");
  }
  void MakeBusy(SimBackend&, NativeStream busy) override {
    lease_.RecordUse(busy);
  }

 private:
  PooledAllocation lease_;
};

MemoryKind AllocationKey(int key) {
  return key == 0 ? MemoryKind::kDevice : MemoryKind::kPinnedHost;
}

class AllocationCacheUnderTest : public PoolUnderTest {
 public:
  AllocationCacheUnderTest(Backend& backend,
                           std::shared_ptr<DeviceHealth> health)
      : events_(backend, health), cache_(backend, events_, health) {}
  std::string resource() const override { return "allocation"; }
  absl::StatusOr<std::unique_ptr<LeaseUnderTest>> Acquire(
      int device, int key, absl::Duration) override {
    absl::StatusOr<PooledAllocation> lease =
        cache_.Allocate(device, kBytes, AllocationKey(key));
    if (!lease.ok()) return lease.status();
    return std::unique_ptr<LeaseUnderTest>(
        std::make_unique<AllocationLease>(*std::move(lease)));
  }
  absl::Status Prewarm(int, int, int) override {
    return absl::UnimplementedError("the allocation cache has no Prewarm");
  }
  void Trim() override { EXPECT_THAT(cache_.Trim(), IsOk()); }
  Counts Stats() const override {
    const AllocationCacheStats s = cache_.GetStats();
    return {.acquired = s.hits + s.misses,
            .created = s.runtime_allocations,
            .reused = s.hits,
            .destroyed = s.runtime_frees,
            .in_use = s.allocations_in_use,
            .idle = s.blocks_cached,
            .draining = -1,
            .dropped = s.blocks_dropped,
            .leaked = s.blocks_leaked,
            .refused = s.failed_allocations};
  }
  std::vector<OutstandingLease> Outstanding() const override {
    return cache_.GetOutstandingLeases();
  }
  absl::Status Recover(int device) override {
    return cache_.health()->Recover(device);
  }
  int Live(const SimBackend& sim, int device) const override {
    return sim.live_allocations(device);
  }

 private:
  EventPool events_;
  AllocationCache cache_;
};

// --- the fixture
// ---------------------------------------------------------------

struct Param {
  PoolKind kind;
  std::string backend;  // "sim-instant", "sim-cuda", "sim-rocm", "cuda", "hip"
};

std::string KindName(PoolKind kind);

void PrintTo(const Param& param, std::ostream* os) {
  *os << KindName(param.kind) << " on " << param.backend;
}

std::string KindName(PoolKind kind) {
  switch (kind) {
    case PoolKind::kStream:
      return "Stream";
    case PoolKind::kEvent:
      return "Event";
    case PoolKind::kAllocation:
      return "Allocation";
  }
  return "?";
}

class PoolConformanceTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const std::string& name = GetParam().backend;
    if (name.rfind("sim-", 0) == 0) {
      SimProfile profile = name == "sim-cuda"   ? SimProfile::Cuda()
                           : name == "sim-rocm" ? SimProfile::RocmMi300x()
                                                : SimProfile::Instant();
      auto sim = std::make_unique<SimBackend>(
          StrictSimOptions(/*devices=*/2, std::move(profile)));
      sim_ = sim.get();
      backend_ = std::move(sim);
    } else {
      absl::StatusOr<std::unique_ptr<Backend>> backend =
          ::gpupool::testing::MakeTestBackend(name);
      if (!backend.ok()) {
        GTEST_SKIP() << name << " backend unavailable: " << backend.status();
      }
      backend_ = *std::move(backend);
    }
    devices_ = std::min(2, *backend_->DeviceCount());
    health_ = std::make_shared<DeviceHealth>(*backend_->DeviceCount());
  }

  void TearDown() override {
    pool_.reset();
    if (sim_ != nullptr) {
      sim_->CompleteAllWork();
      for (auto [device, stream] : busy_) {
        EXPECT_THAT(sim_->DestroyStream(device, stream), IsOk());
      }
      EXPECT_EQ(sim_->misuse_count(), 0);
      EXPECT_THAT(sim_->CheckNoLeaks(), IsOk());
    }
  }

  PoolUnderTest& MakePool(PoolOptions options = {}) {
    switch (GetParam().kind) {
      case PoolKind::kStream:
        pool_ = std::make_unique<
            KeyedPoolUnderTest<StreamPool, PooledStream, StreamConfig>>(
            *backend_, health_, options, "stream", &StreamKey);
        break;
      case PoolKind::kEvent:
        pool_ = std::make_unique<
            KeyedPoolUnderTest<EventPool, PooledEvent, EventConfig>>(
            *backend_, health_, options, "event", &EventKey);
        break;
      case PoolKind::kAllocation:
        pool_ = std::make_unique<AllocationCacheUnderTest>(*backend_, health_);
        break;
    }
    return *pool_;
  }

  // A raw stream of `device` with never-ending work (SimBackend only).
  NativeStream BusyStream(int device) {
    absl::StatusOr<NativeStream> stream = sim_->CreateStream(device, {});
    EXPECT_THAT(stream, IsOk());
    busy_.push_back({device, *stream});
    sim_->SubmitWork(*stream, absl::InfiniteDuration());
    return *stream;
  }

  std::unique_ptr<LeaseUnderTest> MustAcquire(int device = 0, int key = 0) {
    absl::StatusOr<std::unique_ptr<LeaseUnderTest>> lease =
        pool_->Acquire(device, key);
    EXPECT_THAT(lease, IsOk());
    return lease.ok() ? *std::move(lease) : nullptr;
  }

  bool is_sim() const { return sim_ != nullptr; }
  bool is_allocation() const {
    return GetParam().kind == PoolKind::kAllocation;
  }

  std::unique_ptr<Backend> backend_;
  SimBackend* sim_ = nullptr;  // backend_ when it is a SimBackend
  int devices_ = 0;
  std::shared_ptr<DeviceHealth> health_;
  std::unique_ptr<PoolUnderTest> pool_;
  std::vector<std::pair<int, NativeStream>> busy_;
};

#define REQUIRE_SIM()                                                   \
  if (!is_sim())                                                        \
  GTEST_SKIP() << "needs SimBackend to script pending work, faults or " \
                  "limits"

TEST_P(PoolConformanceTest, AcquireReleaseCyclesReuseOneResource) {
  PoolUnderTest& pool = MakePool();
  void* first = nullptr;
  for (int i = 0; i < 100; ++i) {
    std::unique_ptr<LeaseUnderTest> lease = MustAcquire();
    ASSERT_NE(lease, nullptr);
    if (i == 0) first = lease->handle();
    EXPECT_EQ(lease->handle(), first) << "cycle " << i;
    EXPECT_EQ(lease->device(), 0);
    lease->Release();
  }
  const Counts counts = pool.Stats();
  EXPECT_EQ(counts.acquired, 100);
  EXPECT_EQ(counts.created, 1);
  EXPECT_EQ(counts.reused, 99);
  EXPECT_EQ(counts.destroyed, 0);
  EXPECT_EQ(counts.in_use, 0);
  EXPECT_EQ(counts.idle, 1);
}

TEST_P(PoolConformanceTest, ConcurrentLeasesGetDistinctResources) {
  PoolUnderTest& pool = MakePool();
  std::vector<std::unique_ptr<LeaseUnderTest>> held;
  absl::flat_hash_set<void*> handles;
  for (int i = 0; i < 8; ++i) {
    held.push_back(MustAcquire());
    ASSERT_NE(held.back(), nullptr);
    EXPECT_TRUE(handles.insert(held.back()->handle()).second) << i;
  }
  EXPECT_EQ(pool.Stats().created, 8);
  EXPECT_EQ(pool.Stats().in_use, 8);
  held.clear();  // released in reverse order; all eight go idle
  EXPECT_EQ(pool.Stats().idle, 8);
  for (int i = 0; i < 8; ++i) held.push_back(MustAcquire());
  for (const auto& lease : held) EXPECT_TRUE(handles.contains(lease->handle()));
  EXPECT_EQ(pool.Stats().created, 8);
  EXPECT_EQ(pool.Stats().reused, 8);
}

TEST_P(PoolConformanceTest, ConfigurationsAndDevicesNeverShare) {
  PoolUnderTest& pool = MakePool();
  std::unique_ptr<LeaseUnderTest> a = MustAcquire(0, 0);
  ASSERT_NE(a, nullptr);
  void* const key0 = a->handle();
  a->Release();
  std::unique_ptr<LeaseUnderTest> b = MustAcquire(0, 1);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(b->handle(), key0);
  void* const key1 = b->handle();
  b->Release();
  int expected_created = 2;
  if (devices_ >= 2) {
    std::unique_ptr<LeaseUnderTest> c = MustAcquire(1, 0);
    ASSERT_NE(c, nullptr);
    EXPECT_NE(c->handle(), key0);
    EXPECT_NE(c->handle(), key1);
    EXPECT_EQ(c->device(), 1);
    ++expected_created;
  }
  std::unique_ptr<LeaseUnderTest> again = MustAcquire(0, 0);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->handle(), key0);
  EXPECT_EQ(pool.Stats().created, expected_created);
}

TEST_P(PoolConformanceTest, DiscardDestroysTheResource) {
  PoolUnderTest& pool = MakePool();
  std::unique_ptr<LeaseUnderTest> lease = MustAcquire();
  ASSERT_NE(lease, nullptr);
  void* const discarded = lease->handle();
  const absl::Status discard = lease->Discard();
  if (absl::IsUnimplemented(discard)) GTEST_SKIP() << discard.message();
  ASSERT_THAT(discard, IsOk());
  const Counts counts = pool.Stats();
  EXPECT_EQ(counts.destroyed, 1);
  EXPECT_EQ(counts.idle, 0);
  EXPECT_EQ(counts.in_use, 0);
  if (is_sim()) {
    EXPECT_EQ(pool.Live(*sim_, 0), 0);
  }
  std::unique_ptr<LeaseUnderTest> next = MustAcquire();
  ASSERT_NE(next, nullptr);
  if (is_sim()) {
    EXPECT_NE(next->handle(), discarded);  // sim never recycles
  }
  EXPECT_EQ(pool.Stats().created, 2);
}

TEST_P(PoolConformanceTest, PendingWorkDrainsThenTheResourceIsReused) {
  REQUIRE_SIM();
  PoolUnderTest& pool = MakePool();
  const NativeStream busy = BusyStream(0);
  std::unique_ptr<LeaseUnderTest> lease = MustAcquire();
  ASSERT_NE(lease, nullptr);
  void* const pending = lease->handle();
  lease->MakeBusy(*sim_, busy);
  lease->Release();
  if (pool.Stats().draining != -1) {
    EXPECT_EQ(pool.Stats().draining, 1);
    // While the work is pending nobody gets the resource.
  }
  std::unique_ptr<LeaseUnderTest> other = MustAcquire();
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other->handle(), pending);
  other->Release();
  EXPECT_EQ(pool.Stats().created, 2);
  sim_->CompleteAllWork();
  // Once complete it is handed out again; nothing new is created.
  std::unique_ptr<LeaseUnderTest> first = MustAcquire();
  std::unique_ptr<LeaseUnderTest> second = MustAcquire();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_THAT((std::vector<void*>{first->handle(), second->handle()}),
              ::testing::Contains(pending));
  const Counts counts = pool.Stats();
  EXPECT_EQ(counts.created, 2);
  EXPECT_EQ(counts.destroyed, 0);
  if (counts.draining != -1) {
    EXPECT_EQ(counts.draining, 0);
  }
}

TEST_P(PoolConformanceTest, BoundedPoolRefusesWithResourceExhausted) {
  PoolOptions options;
  options.max_live_per_key = 2;
  if (is_allocation()) {
    REQUIRE_SIM();
    // The cache's bound is the device's memory.
    sim_->SetMemoryLimit(0, 2 * RoundedAllocationSize(kBytes));
  }
  PoolUnderTest& pool = MakePool(options);
  std::unique_ptr<LeaseUnderTest> a = MustAcquire();
  std::unique_ptr<LeaseUnderTest> b = MustAcquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_THAT(pool.Acquire(0, 0, absl::Milliseconds(10)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(pool.Stats().refused, 1);
  EXPECT_EQ(pool.Stats().in_use, 2);
  // Another configuration is not bounded by this one's leases (allocation:
  // pinned host memory has its own limit).
  EXPECT_THAT(pool.Acquire(0, 1, absl::Milliseconds(10)), IsOk());
  // A release makes room.
  void* const freed = a->handle();
  a->Release();
  std::unique_ptr<LeaseUnderTest> c = MustAcquire();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->handle(), freed);
  EXPECT_EQ(pool.Stats().refused, 1);
}

TEST_P(PoolConformanceTest, PrewarmCreatesAheadOfDemand) {
  PoolUnderTest& pool = MakePool();
  const absl::Status prewarm = pool.Prewarm(0, 0, 3);
  if (absl::IsUnimplemented(prewarm)) GTEST_SKIP() << prewarm.message();
  ASSERT_THAT(prewarm, IsOk());
  EXPECT_EQ(pool.Stats().created, 3);
  EXPECT_EQ(pool.Stats().idle, 3);
  if (is_sim()) {
    EXPECT_EQ(pool.Live(*sim_, 0), 3);
    // Prewarm tops up to the count; it does not add.
  }
  ASSERT_THAT(pool.Prewarm(0, 0, 2), IsOk());
  EXPECT_EQ(pool.Stats().created, 3);
  std::vector<std::unique_ptr<LeaseUnderTest>> held;
  for (int i = 0; i < 3; ++i) held.push_back(MustAcquire());
  const Counts counts = pool.Stats();
  EXPECT_EQ(counts.created, 3);
  EXPECT_EQ(counts.reused, 3);
  EXPECT_EQ(counts.idle, 0);
}

TEST_P(PoolConformanceTest, TrimDestroysEveryIdleResource) {
  PoolUnderTest& pool = MakePool();
  std::vector<std::unique_ptr<LeaseUnderTest>> held;
  for (int i = 0; i < 3; ++i) held.push_back(MustAcquire());
  std::unique_ptr<LeaseUnderTest> kept = MustAcquire(0, 1);
  held.clear();
  EXPECT_EQ(pool.Stats().idle, 3);
  pool.Trim();
  Counts counts = pool.Stats();
  EXPECT_EQ(counts.idle, 0);
  EXPECT_EQ(counts.destroyed, 3);
  EXPECT_EQ(counts.in_use, 1);  // a lease out is never trimmed
  if (is_sim()) {
    EXPECT_EQ(pool.Live(*sim_, 0), 1);
  }
  kept->Release();
  pool.Trim();
  EXPECT_EQ(pool.Stats().destroyed, 4);
  if (is_sim()) {
    EXPECT_EQ(pool.Live(*sim_, 0), 0);
  }
}

TEST_P(PoolConformanceTest, PoisonedDeviceRefusesUntilRecovered) {
  REQUIRE_SIM();
  PoolUnderTest& pool = MakePool();
  std::unique_ptr<LeaseUnderTest> idle = MustAcquire(1);
  std::unique_ptr<LeaseUnderTest> out = MustAcquire(1);
  ASSERT_NE(idle, nullptr);
  ASSERT_NE(out, nullptr);
  idle->Release();
  sim_->PoisonDevice(1, absl::InternalError("cudaErrorIllegalAddress"));
  // Another pool sharing the health object saw the sticky error.
  health_->Poison(1, absl::InternalError("cudaErrorIllegalAddress"));
  const int64_t calls = sim_->calls_on_device(1);
  EXPECT_THAT(pool.Acquire(1), StatusIs(absl::StatusCode::kFailedPrecondition,
                                        HasSubstr("cudaErrorIllegalAddress")));
  out->Release();  // forgotten: the context is dead
  EXPECT_EQ(sim_->calls_on_device(1), calls);
  const Counts counts = pool.Stats();
  EXPECT_EQ(counts.dropped, 2);
  EXPECT_EQ(counts.in_use, 0);
  EXPECT_EQ(counts.idle, 0);
  // Device 0 is unaffected.
  EXPECT_NE(MustAcquire(0), nullptr);
  // After a reset and recovery the device serves fresh resources.
  sim_->ResetDevice(1);
  ASSERT_THAT(pool.Recover(1), IsOk());
  std::unique_ptr<LeaseUnderTest> fresh = MustAcquire(1);
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->device(), 1);
  EXPECT_EQ(pool.Live(*sim_, 1), 1);
}

TEST_P(PoolConformanceTest, StatsAccountForEveryLease) {
  PoolUnderTest& pool = MakePool();
  std::vector<std::unique_ptr<LeaseUnderTest>> held;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i <= round; ++i) held.push_back(MustAcquire(0, i % 2));
    const Counts during = pool.Stats();
    EXPECT_EQ(during.in_use, static_cast<int64_t>(held.size()));
    held.clear();
  }
  const Counts counts = pool.Stats();
  EXPECT_EQ(counts.acquired, 1 + 2 + 3 + 4 + 5);
  EXPECT_EQ(counts.acquired, counts.created + counts.reused);
  // At most 3 of key 0 and 2 of key 1 were ever out together.
  EXPECT_EQ(counts.created, 5);
  EXPECT_EQ(counts.in_use, 0);
  EXPECT_EQ(counts.idle, counts.created - counts.destroyed);
  EXPECT_EQ(counts.dropped, 0);
  EXPECT_EQ(counts.leaked, 0);
  EXPECT_EQ(counts.refused, 0);
}

TEST_P(PoolConformanceTest, LeaseIdsAreUniqueAndNamedInOutstandingLeases) {
  PoolUnderTest& pool = MakePool();
  absl::flat_hash_set<uint64_t> ids;
  for (int i = 0; i < 50; ++i) {
    std::unique_ptr<LeaseUnderTest> lease = MustAcquire(i % devices_, i % 2);
    ASSERT_NE(lease, nullptr);
    EXPECT_NE(lease->lease_id(), 0u);
    EXPECT_TRUE(ids.insert(lease->lease_id()).second) << lease->lease_id();
  }
  std::unique_ptr<LeaseUnderTest> out = MustAcquire();
  ASSERT_NE(out, nullptr);
  const std::vector<OutstandingLease> outstanding = pool.Outstanding();
  ASSERT_EQ(outstanding.size(), 1u);
  EXPECT_EQ(outstanding[0].resource, pool.resource());
  EXPECT_EQ(outstanding[0].device, 0);
  EXPECT_EQ(outstanding[0].lease_id, out->lease_id());
  EXPECT_FALSE(ids.contains(out->lease_id()));
}

TEST_P(PoolConformanceTest, InvalidDeviceIsRefusedWithoutRuntimeCalls) {
  PoolUnderTest& pool = MakePool();
  const int count = *backend_->DeviceCount();
  const int64_t calls = is_sim() ? sim_->total_calls() : 0;
  EXPECT_THAT(pool.Acquire(-1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(pool.Acquire(count),
              StatusIs(absl::StatusCode::kInvalidArgument));
  if (is_sim()) {
    EXPECT_EQ(sim_->total_calls(), calls);
  }
  const Counts counts = pool.Stats();
  EXPECT_EQ(counts.acquired, 0);
  EXPECT_EQ(counts.created, 0);
}

TEST_P(PoolConformanceTest, ReleaseAfterThePoolIsGoneLeaksWithoutCalls) {
  REQUIRE_SIM();  // on a real runtime the leaked resource would stay leaked
  MakePool();
  std::unique_ptr<LeaseUnderTest> survivor = MustAcquire();
  ASSERT_NE(survivor, nullptr);
  pool_.reset();
  const int64_t calls = sim_->total_calls();
  survivor->Release();
  survivor->Release();  // a second release is a no-op
  EXPECT_EQ(sim_->total_calls(), calls);
  // Exactly the survivor was left to the OS; the test cleans it up.
  const int live = GetParam().kind == PoolKind::kStream ? sim_->live_streams(0)
                   : GetParam().kind == PoolKind::kEvent
                       ? sim_->live_events(0)
                       : sim_->live_allocations(0);
  EXPECT_EQ(live, 1);
  EXPECT_EQ(
      sim_->live_streams(0) + sim_->live_events(0) + sim_->live_allocations(0),
      1);
  sim_->ResetDevice(0);
}

// Every thread holds its leases across several yields and sleeps while
// checking, in a registry shared by all threads, that no other thread holds
// the same resource. max_live bounds the pool to fewer resources than
// threads, so each resource passes between threads thousands of times: a
// double hand-out would be seen by the registry (or by the owner check after
// the hold).
TEST_P(PoolConformanceTest, ConcurrentLeasesNeverShareAResource) {
  constexpr int kThreads = 8;
  constexpr int kBound = 3;
  const int iterations = is_sim() ? 400 : 100;
  PoolOptions options;
  options.max_live_per_key = kBound;
  options.acquire_timeout = absl::Seconds(60);
  PoolUnderTest& pool = MakePool(options);
  absl::Mutex mu;
  absl::flat_hash_map<void*, int> owner;  // resource → holding thread
  std::atomic<int64_t> double_held{0};
  std::atomic<int64_t> stolen{0};
  std::atomic<int64_t> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < iterations; ++i) {
        const int device = (t + i) % devices_;
        absl::StatusOr<std::unique_ptr<LeaseUnderTest>> lease =
            pool.Acquire(device, 0, absl::Seconds(60));
        if (!lease.ok()) {
          ++failures;
          continue;
        }
        void* const handle = (*lease)->handle();
        {
          absl::MutexLock lock(&mu);
          if (!owner.emplace(handle, t).second) ++double_held;
        }
        // Hold it while the other threads run.
        for (int k = 0; k < 3; ++k) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        {
          absl::MutexLock lock(&mu);
          auto it = owner.find(handle);
          if (it == owner.end() || it->second != t) {
            ++stolen;
          } else {
            owner.erase(it);
          }
        }
        (*lease)->Release();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(double_held.load(), 0);
  EXPECT_EQ(stolen.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  const Counts counts = pool.Stats();
  EXPECT_EQ(counts.acquired, int64_t{kThreads} * iterations);
  EXPECT_EQ(counts.acquired, counts.created + counts.reused);
  EXPECT_EQ(counts.in_use, 0);
  if (!is_allocation()) {
    // The bound held: never more than kBound per device.
    EXPECT_LE(counts.created, int64_t{kBound} * devices_);
  } else {
    // The cache is unbounded but reuses: never more blocks per device than
    // threads.
    EXPECT_LE(counts.created, int64_t{kThreads} * devices_);
  }
}

std::vector<Param> AllParams() {
  std::vector<Param> params;
  for (PoolKind kind :
       {PoolKind::kStream, PoolKind::kEvent, PoolKind::kAllocation}) {
    for (const char* backend :
         {"sim-instant", "sim-cuda", "sim-rocm", "cuda", "hip"}) {
      params.push_back({kind, backend});
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Pools, PoolConformanceTest,
                         ::testing::ValuesIn(AllParams()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string backend = info.param.backend;
                           std::replace(backend.begin(), backend.end(), '-',
                                        '_');
                           return absl::StrCat(KindName(info.param.kind), "_",
                                               backend);
                         });

}  // namespace
}  // namespace gpupool
