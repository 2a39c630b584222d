// The SimBackend fixture shared by the AllocationCache's component tests
// (tests/allocation_cache/*_test.cc): two devices, strict misuse checking,
// one EventPool, and a teardown that proves nothing leaked.

#ifndef GPUPOOL_TESTS_ALLOCATION_SIM_FIXTURE_H_
#define GPUPOOL_TESTS_ALLOCATION_SIM_FIXTURE_H_

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gtest/gtest.h"
#include "src/lifetime/process_state.h"
#include "tests/util/fork_util.h"
#include "tests/util/test_util.h"

namespace gpupool {

inline constexpr size_t kKiB = size_t{1} << 10;
inline constexpr size_t kMiB = size_t{1} << 20;

// Not in an anonymous namespace: every test file of the binary must see the
// same fixture type.
class AllocationCacheSimTest : public ::testing::Test {
 protected:
  AllocationCacheSimTest()
      : sim_(::gpupool::testing::StrictSimOptions(/*devices=*/2)) {
    health_ = std::make_shared<DeviceHealth>(2);
    events_ = std::make_unique<EventPool>(sim_, health_);
  }

  void TearDown() override {
    // Tests destroy their caches in their own scope.
    sim_.CompleteAllWork();
    for (auto [device, stream] : streams_) {
      EXPECT_THAT(sim_.DestroyStream(device, stream),
                  ::gpupool::testing::IsOk());
    }
    events_.reset();
    EXPECT_EQ(sim_.misuse_count(), 0);
    EXPECT_THAT(sim_.CheckNoLeaks(), ::gpupool::testing::IsOk());
  }

  NativeStream NewStream(int device = 0) {
    absl::StatusOr<NativeStream> stream = sim_.CreateStream(device, {});
    EXPECT_THAT(stream, ::gpupool::testing::IsOk());
    streams_.push_back({device, *stream});
    return *stream;
  }

  std::unique_ptr<AllocationCache> NewCache(
      AllocationCacheOptions options = {}) {
    return std::make_unique<AllocationCache>(sim_, *events_, health_, options);
  }

  // Allocates `count` blocks of 1 MiB on `stream` of device 0, all live at
  // once, queues work of `work` on `stream` (none when zero; a kernel still
  // running on them when infinite), then releases them all. Returns their
  // addresses in allocation order; fewer than `count` (with a failed
  // expectation) when an allocation failed.
  std::vector<void*> AllocateAndReleaseMany(
      AllocationCache& cache, NativeStream stream, int count,
      absl::Duration work = absl::ZeroDuration()) {
    std::vector<PooledAllocation> held;
    std::vector<void*> blocks;
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<PooledAllocation> allocation =
          cache.Allocate(0, kMiB, MemoryKind::kDevice, stream);
      EXPECT_THAT(allocation, ::gpupool::testing::IsOk());
      if (!allocation.ok()) return blocks;
      blocks.push_back(allocation->data());
      held.push_back(*std::move(allocation));
    }
    if (work > absl::ZeroDuration()) sim_.SubmitWork(stream, work);
    return blocks;  // `held` is released here
  }
  // One block: its address, or nullptr when the allocation failed.
  void* AllocateAndRelease(AllocationCache& cache, NativeStream stream,
                           absl::Duration work = absl::ZeroDuration()) {
    std::vector<void*> blocks = AllocateAndReleaseMany(cache, stream, 1, work);
    return blocks.empty() ? nullptr : blocks.front();
  }

  SimBackend sim_;
  std::shared_ptr<DeviceHealth> health_;
  std::unique_ptr<EventPool> events_;
  std::vector<std::pair<int, NativeStream>> streams_;
};

}  // namespace gpupool

#endif  // GPUPOOL_TESTS_ALLOCATION_SIM_FIXTURE_H_
