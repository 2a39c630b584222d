// The fuzzer's runtime: the simulator, the checking backend, the pools and
// the allocation cache, with the options the input picks.

#include "tests/fuzz/harness.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gpupool/pool_options.h"

namespace gpupool::fuzz {

void Fail(const std::string& why) {
  std::fprintf(stderr, "pool_fuzzer invariant violated: %s\n", why.c_str());
  __builtin_trap();
}

Harness::Harness(FuzzedDataProvider& input) : input_(input) {
  // The input's length, before anything is read from it.
  const size_t length = input_.remaining_bytes();
  SimOptions sim_options;
  sim_options.device_count = kDevices;
  // The fuzzer sets stream attributes: pools must reset them.
  sim_options.profile.stream_attributes = true;
  sim_options.on_misuse = [](absl::string_view message) {
    Fail(absl::StrCat("SimBackend misuse: ", message));
  };
  sim_ = std::make_unique<SimBackend>(std::move(sim_options));
  backend_ = std::make_unique<testing::CheckingBackend>(*sim_);
  health_ = std::make_shared<DeviceHealth>(kDevices);
  backend_->WatchHealth(health_);
  backend_->OnViolation([](absl::string_view violation) {
    Fail(absl::StrCat("runtime call after poisoning: ", violation));
  });
  // Work completes only when told to; a synchronize (Trim, the OOM chain)
  // would wait forever, so it completes all work first: one legal
  // schedule, and inputs replay deterministically.
  backend_->CompleteWorkOnSynchronize(true);

  PoolOptions pool_options;
  pool_options.max_idle_per_key = input_.ConsumeIntegralInRange(0, 4);
  pool_options.max_live_per_key = input_.ConsumeIntegralInRange(0, 4);
  pool_options.acquire_timeout = absl::ZeroDuration();  // never block
  pool_options.validate_on_acquire = input_.ConsumeBool();
  pool_options.drain_checks_per_acquire = input_.ConsumeIntegralInRange(0, 2);
  AllocationCacheOptions cache_options;
  const size_t caps[] = {0, 64 << 10, size_t{1} << 62};
  cache_options.max_cached_bytes =
      caps[input_.ConsumeIntegralInRange<size_t>(0, 2)];
  cache_options.max_cached_block_bytes =
      input_.ConsumeBool() ? size_t{1} << 30 : size_t{64} << 10;
  cache_options.cross_stream = input_.ConsumeBool()
                                   ? CrossStreamPolicy::kWaitOnStream
                                   : CrossStreamPolicy::kWaitForCompletion;
  cache_options.pending_checks_per_allocate =
      input_.ConsumeIntegralInRange(0, 2);
  // The fuzzed user begins captures without telling the cache (op 16).
  // Detection keeps a block released during one out of reuse (held until
  // the cache goes) instead of recording its ready event into the capture,
  // an event the simulator, like the runtimes, refuses to query. Fixed, not
  // fuzzed: the corpus' byte layout stays as it was.
  cache_options.detect_unregistered_captures = true;
  // How memory is cut and given back, chosen by the input's length (not
  // read from its bytes, so the corpus keeps its meaning): give-back before
  // growth at the default threshold, at every miss (0), at a low one, or
  // never; splits bounded by the default ratio, unbounded, or by 2.
  const int thresholds[] = {25, 0, 1, -1};
  const size_t ratios[] = {8, 0, 2};
  cache_options.give_back_above_percent = thresholds[length % 4];
  cache_options.max_split_ratio = ratios[(length / 4) % 3];
  // Fences deferred on every other length: a release on one stream parks
  // its block, fenced before anything else may have it; the stream pool
  // fences a stream's blocks before it destroys the stream.
  cache_options.defer_same_stream_fences = (length / 12) % 2 == 1;
  max_cached_block_bytes_ = cache_options.max_cached_block_bytes;

  PoolOptions stream_options = pool_options;
  if (cache_options.defer_same_stream_fences) {
    stream_options.before_destroy = [this](int device, void* stream) {
      if (cache_ != nullptr) cache_->FenceStream(device, stream).IgnoreError();
    };
  }
  streams_ = std::make_unique<StreamPool>(*backend_, health_, stream_options);
  events_ = std::make_unique<EventPool>(*backend_, health_, pool_options);
  cache_ = std::make_unique<AllocationCache>(*backend_, *events_, health_,
                                             cache_options);
}

void Harness::CheckRefusal(int device, const absl::Status& status,
                           absl::string_view what) {
  if (device >= kDevices) {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument,
               absl::StrCat(what, " on a bad device: ", status.ToString()));
  } else if (health_->is_poisoned(device)) {
    FUZZ_CHECK(
        status.code() == absl::StatusCode::kFailedPrecondition,
        absl::StrCat(what, " on a poisoned device: ", status.ToString()));
  }
}

void Harness::DestroyPools() {
  cache_.reset();
  events_.reset();
  streams_.reset();
}

}  // namespace gpupool::fuzz
