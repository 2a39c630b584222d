// What every part of pool_fuzzer shares: the check that traps (Fail,
// FUZZ_CHECK), the device count, and the Harness: the runtime under test
// (SimBackend behind the checking backend, one DeviceHealth, the stream and
// event pools and the allocation cache, configured from the input's first
// values) and what the input did that loosens the final checks (faults
// injected, captures begun).

#ifndef GPUPOOL_TESTS_FUZZ_HARNESS_H_
#define GPUPOOL_TESTS_FUZZ_HARNESS_H_

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"
#include "tests/util/checking_backend.h"

namespace gpupool::fuzz {

constexpr int kDevices = 3;

// Prints the reason and traps, so libFuzzer keeps the input.
[[noreturn]] void Fail(const std::string& why);

#define FUZZ_CHECK(condition, why)                \
  do {                                            \
    if (!(condition)) ::gpupool::fuzz::Fail(why); \
  } while (0)

// The runtime one input drives. Constructing it consumes the pool and cache
// options from the input; everything after that is an operation.
class Harness {
 public:
  explicit Harness(FuzzedDataProvider& input);
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  FuzzedDataProvider& input() { return input_; }
  SimBackend& sim() { return *sim_; }
  testing::CheckingBackend& backend() { return *backend_; }
  DeviceHealth& health() { return *health_; }
  StreamPool& streams() { return *streams_; }
  EventPool& events() { return *events_; }
  AllocationCache& cache() { return *cache_; }
  size_t max_cached_block_bytes() const { return max_cached_block_bytes_; }

  // Device kDevices is out of range on purpose.
  int PickDevice() { return input_.ConsumeIntegralInRange(0, kDevices); }

  // Checks the status every entry point must give for an unusable device:
  // InvalidArgument out of range, FailedPrecondition when poisoned.
  void CheckRefusal(int device, const absl::Status& status,
                    absl::string_view what);

  // A fault was injected: failures and leaks are no longer proof of a bug.
  bool faults_injected() const { return faults_injected_; }
  void NoteFault() { faults_injected_ = true; }
  // A capture began that the pools may have to end: memory may leak.
  bool captured() const { return captured_; }
  void NoteCapture() { captured_ = true; }

  // The cache, then the event and stream pools, go (the end of an input).
  void DestroyPools();

 private:
  FuzzedDataProvider& input_;
  std::unique_ptr<SimBackend> sim_;
  std::unique_ptr<testing::CheckingBackend> backend_;
  std::shared_ptr<DeviceHealth> health_;
  std::unique_ptr<StreamPool> streams_;
  std::unique_ptr<EventPool> events_;
  std::unique_ptr<AllocationCache> cache_;
  size_t max_cached_block_bytes_ = 0;
  bool faults_injected_ = false;
  bool captured_ = false;
};

}  // namespace gpupool::fuzz

#endif  // GPUPOOL_TESTS_FUZZ_HARNESS_H_
