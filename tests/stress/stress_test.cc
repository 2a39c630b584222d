// Stress: many threads mix StreamPool, EventPool and AllocationCache over one
// SimBackend with many devices, and check after every acquisition that
//
//   * no stream or event handle is held by two live leases at once, and
//   * no two live allocations (same device and memory kind) overlap,
//
// while streams carry short real work (so returns drain and cached blocks
// wait on their ready events), captures and dirty attributes come back,
// leases are discarded, pools and the cache are trimmed and prewarmed, and
// the runtime fails now and then (kResource faults, out-of-memory). At the
// end every pool is destroyed and the simulator must hold nothing.
//
// Not part of the default test run (label `stress`). Usage:
//   stress_test [--ops=N] [--threads=T] [--devices=D] [--seed=S]
// N is the total number of operations over all threads (default 2000000, or
// env GPUPOOL_STRESS_OPS); docs/reliability.md has the 10M-op command.
// Exit status 0 when every check held.

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"
#include "gpupool/stream_pool.h"
#include "tests/util/checking_backend.h"

namespace gpupool {
namespace {

struct Flags {
  int64_t ops = 2000000;
  int threads = 16;
  int devices = 8;
  uint64_t seed = 1;
};

// Every problem found, reported at the end (and counted at once).
class Failures {
 public:
  void Add(std::string message) {
    if (count_.fetch_add(1) >= 20) return;  // keep the report short
    absl::MutexLock lock(&mu_);
    messages_.push_back(std::move(message));
  }
  int64_t count() const { return count_.load(); }
  void Print() const {
    absl::MutexLock lock(&mu_);
    for (const std::string& message : messages_) {
      std::fprintf(stderr, "stress: FAILED: %s\n", message.c_str());
    }
  }

 private:
  std::atomic<int64_t> count_{0};
  mutable absl::Mutex mu_;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

// Handles held by live leases, sharded to keep the check off the critical
// path of the pools' own locks.
class HandleRegistry {
 public:
  // False when `handle` is already held by another live lease.
  bool Insert(const void* handle) {
    Shard& shard = ShardOf(handle);
    absl::MutexLock lock(&shard.mu);
    return shard.handles.insert(handle).second;
  }
  void Erase(const void* handle) {
    Shard& shard = ShardOf(handle);
    absl::MutexLock lock(&shard.mu);
    shard.handles.erase(handle);
  }

 private:
  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_set<const void*> handles ABSL_GUARDED_BY(mu);
  };
  Shard& ShardOf(const void* handle) {
    return shards_[(reinterpret_cast<uintptr_t>(handle) >> 3) % kShards];
  }
  static constexpr size_t kShards = 64;
  Shard shards_[kShards];
};

// Live allocation ranges per (device, kind).
class RangeRegistry {
 public:
  explicit RangeRegistry(int devices)
      : keys_(static_cast<size_t>(devices) * 2) {}
  // False when [begin, end) overlaps a live range.
  bool Insert(int device, MemoryKind kind, uintptr_t begin, uintptr_t end) {
    Key& key = KeyOf(device, kind);
    absl::MutexLock lock(&key.mu);
    auto next = key.ranges.lower_bound(begin);
    if (next != key.ranges.end() && next->first < end) return false;
    if (next != key.ranges.begin() && std::prev(next)->second > begin) {
      return false;
    }
    key.ranges.emplace(begin, end);
    return true;
  }
  void Erase(int device, MemoryKind kind, uintptr_t begin) {
    Key& key = KeyOf(device, kind);
    absl::MutexLock lock(&key.mu);
    key.ranges.erase(begin);
  }

 private:
  struct Key {
    absl::Mutex mu;
    std::map<uintptr_t, uintptr_t> ranges ABSL_GUARDED_BY(mu);
  };
  Key& KeyOf(int device, MemoryKind kind) {
    return keys_[static_cast<size_t>(device) * 2 +
                 (kind == MemoryKind::kDevice ? 0 : 1)];
  }
  std::vector<Key> keys_;
};

struct World {
  explicit World(const Flags& flags)
      : flags(flags),
        sim([&] {
          SimOptions options;
          options.device_count = flags.devices;
          // Users set attributes (SetStreamAttribute): pools must reset them.
          options.profile.stream_attributes = true;
          options.on_misuse = [this](absl::string_view message) {
            failures.Add(absl::StrCat("SimBackend misuse: ", message));
          };
          return options;
        }()),
        backend(sim),
        health(std::make_shared<DeviceHealth>(flags.devices)),
        ranges(flags.devices) {
    backend.WatchHealth(health);
    PoolOptions pool_options;
    pool_options.max_idle_per_key = 8;
    streams = std::make_unique<StreamPool>(backend, health, pool_options);
    events = std::make_unique<EventPool>(backend, health, pool_options);
    AllocationCacheOptions cache_options;
    cache_options.max_cached_bytes = size_t{8} << 20;  // retiring happens
    cache_options.max_cached_block_bytes = size_t{1} << 20;
    cache = std::make_unique<AllocationCache>(backend, *events, health,
                                              cache_options);
  }

  const Flags flags;
  Failures failures;
  SimBackend sim;
  testing::CheckingBackend backend;
  std::shared_ptr<DeviceHealth> health;
  std::unique_ptr<StreamPool> streams;
  std::unique_ptr<EventPool> events;
  std::unique_ptr<AllocationCache> cache;
  HandleRegistry handles;
  RangeRegistry ranges;
  std::atomic<int64_t> acquired{0};
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> refused{0};
};

const StreamConfig kStreamConfigs[] = {{}, {.priority = -1}};
const EventConfig kEventConfigs[] = {{}, {.disable_timing = false}};

// One thread's leases. Its streams are used by its own allocations only.
class Worker {
 public:
  Worker(World& world, int index)
      : world_(world), rng_(world.flags.seed * 1000003 + index) {}

  void Run(int64_t ops) {
    for (int64_t i = 0; i < ops; ++i) Step();
    ReleaseAll();
  }

 private:
  struct HeldAllocation {
    PooledAllocation lease;
    std::vector<NativeStream> uses;
  };

  int RandomBelow(int n) {
    return std::uniform_int_distribution<int>(0, n - 1)(rng_);
  }

  void Step() {
    switch (RandomBelow(16)) {
      case 0:
      case 1:
        return AcquireStream();
      case 2:
      case 3:
        return ReleaseStream(/*discard=*/RandomBelow(16) == 0);
      case 4:
      case 5:
        return AcquireEvent();
      case 6:
        return ReleaseEvent(/*discard=*/RandomBelow(16) == 0);
      case 7:
      case 8:
      case 9:
        return Allocate();
      case 10:
      case 11:
        return ReleaseAllocation();
      case 12:
        return RecordUse();
      case 13:
        return Work();
      case 14:
        return Maintenance();
      default:
        return InjectFault();
    }
  }

  void AcquireStream() {
    if (streams_.size() >= 4) return ReleaseStream(false);
    const int device = RandomBelow(world_.flags.devices);
    absl::StatusOr<PooledStream> lease =
        world_.streams->Acquire(device, kStreamConfigs[RandomBelow(2)]);
    if (!lease.ok()) {
      world_.refused.fetch_add(1);
      return;
    }
    world_.acquired.fetch_add(1);
    if (!world_.handles.Insert(lease->get())) {
      world_.failures.Add(
          absl::StrCat("stream handed out twice (device ", device, ")"));
    }
    streams_.push_back(*std::move(lease));
  }

  bool StreamInUse(NativeStream stream) const {
    for (const HeldAllocation& held : allocations_) {
      if (std::find(held.uses.begin(), held.uses.end(), stream) !=
          held.uses.end()) {
        return true;
      }
    }
    return false;
  }

  void ReleaseStream(bool discard) {
    if (streams_.empty()) return;
    const size_t i =
        static_cast<size_t>(RandomBelow(static_cast<int>(streams_.size())));
    // A stream must outlive the allocations used on it (their release
    // records on it), as with cudaMallocAsync.
    if (StreamInUse(streams_[i].get())) return;
    PooledStream lease = std::move(streams_[i]);
    streams_.erase(streams_.begin() + static_cast<ptrdiff_t>(i));
    switch (RandomBelow(8)) {  // what users leave behind on a stream
      case 0:
        world_.sim.BeginCapture(lease.get());
        break;
      case 1:
        world_.sim.SetStreamAttribute(lease.get());
        break;
      default:
        break;
    }
    world_.handles.Erase(lease.get());  // before another thread can get it
    discard ? lease.Discard() : lease.Release();
  }

  void AcquireEvent() {
    if (events_.size() >= 4) return ReleaseEvent(false);
    const int device = RandomBelow(world_.flags.devices);
    absl::StatusOr<PooledEvent> lease =
        world_.events->Acquire(device, kEventConfigs[RandomBelow(2)]);
    if (!lease.ok()) {
      world_.refused.fetch_add(1);
      return;
    }
    world_.acquired.fetch_add(1);
    if (!world_.handles.Insert(lease->get())) {
      world_.failures.Add("event handed out twice");
    }
    // Record it on one of our streams of its device now and then, so that
    // it comes back pending.
    for (const PooledStream& stream : streams_) {
      if (stream.device() == device && RandomBelow(2) == 0) {
        (void)world_.sim.RecordEvent(device, lease->get(), stream.get());
        break;
      }
    }
    events_.push_back(*std::move(lease));
  }

  void ReleaseEvent(bool discard) {
    if (events_.empty()) return;
    const size_t i =
        static_cast<size_t>(RandomBelow(static_cast<int>(events_.size())));
    PooledEvent lease = std::move(events_[i]);
    events_.erase(events_.begin() + static_cast<ptrdiff_t>(i));
    world_.handles.Erase(lease.get());
    discard ? lease.Discard() : lease.Release();
  }

  NativeStream StreamOf(int device) {
    for (const PooledStream& stream : streams_) {
      if (stream.device() == device) return stream.get();
    }
    return nullptr;
  }

  void Allocate() {
    if (allocations_.size() >= 6) return ReleaseAllocation();
    const int device = RandomBelow(world_.flags.devices);
    static constexpr size_t kSizes[] = {512,   4096,   5000,
                                        65536, 300000, (size_t{1} << 20) + 7};
    const size_t bytes =
        kSizes[RandomBelow(6)] + static_cast<size_t>(RandomBelow(64));
    const MemoryKind kind =
        RandomBelow(4) == 0 ? MemoryKind::kPinnedHost : MemoryKind::kDevice;
    NativeStream stream = RandomBelow(2) == 0 ? StreamOf(device) : nullptr;
    absl::StatusOr<PooledAllocation> lease =
        world_.cache->Allocate(device, bytes, kind, stream);
    if (!lease.ok()) {
      world_.refused.fetch_add(1);
      return;
    }
    world_.allocated.fetch_add(1);
    const auto begin = reinterpret_cast<uintptr_t>(lease->data());
    if (!world_.ranges.Insert(device, kind, begin, begin + lease->capacity())) {
      world_.failures.Add(
          absl::StrCat("allocations overlap on device ", device));
    }
    HeldAllocation held{*std::move(lease), {}};
    if (stream != nullptr) held.uses.push_back(stream);
    allocations_.push_back(std::move(held));
  }

  void ReleaseAllocation() {
    if (allocations_.empty()) return;
    const size_t i =
        static_cast<size_t>(RandomBelow(static_cast<int>(allocations_.size())));
    HeldAllocation held = std::move(allocations_[i]);
    allocations_.erase(allocations_.begin() + static_cast<ptrdiff_t>(i));
    // Work on the streams that used it, still running at release.
    for (NativeStream stream : held.uses) {
      if (RandomBelow(2) == 0) {
        world_.sim.SubmitWork(stream, absl::Microseconds(RandomBelow(100)));
      }
    }
    world_.ranges.Erase(held.lease.device(), held.lease.kind(),
                        reinterpret_cast<uintptr_t>(held.lease.data()));
    held.lease.Release();
  }

  void RecordUse() {
    if (allocations_.empty()) return;
    HeldAllocation& held = allocations_[static_cast<size_t>(
        RandomBelow(static_cast<int>(allocations_.size())))];
    NativeStream stream = StreamOf(held.lease.device());
    if (stream == nullptr) return;
    held.lease.RecordUse(stream);
    if (std::find(held.uses.begin(), held.uses.end(), stream) ==
        held.uses.end()) {
      held.uses.push_back(stream);
    }
  }

  void Work() {
    if (streams_.empty()) return;
    world_.sim.SubmitWork(streams_[static_cast<size_t>(RandomBelow(
                                       static_cast<int>(streams_.size())))]
                              .get(),
                          absl::Microseconds(RandomBelow(200)));
  }

  void Maintenance() {
    const int device = RandomBelow(world_.flags.devices);
    switch (RandomBelow(64)) {
      case 0:
        world_.streams->Trim(device);
        return;
      case 1:
        world_.events->Trim(device);
        return;
      case 2:
        world_.cache->Trim(device, size_t{1} << 20).IgnoreError();
        return;
      case 3:
        (void)world_.streams->Prewarm(device, kStreamConfigs[RandomBelow(2)],
                                      4);
        return;
      case 4:
        (void)world_.events->Prewarm(device, kEventConfigs[RandomBelow(2)], 4);
        return;
      case 5:
        (void)gpupool::StableBuffers(*world_.cache)
            .Acquire(absl::StrCat("stable", RandomBelow(4)), device,
                     4096u << RandomBelow(4));
        return;
      default:
        return;
    }
  }

  // Faults that cost a handle (kResource: destroy it) or run the OOM chain;
  // never one that legitimately leaks, so the final leak check stays exact.
  void InjectFault() {
    if (RandomBelow(32) != 0) return;
    static constexpr SimOp kOps[] = {SimOp::kStreamQuery, SimOp::kStreamCreate,
                                     SimOp::kEventCreate, SimOp::kCaptureStatus,
                                     SimOp::kResetAttributes};
    if (RandomBelow(4) == 0) {
      world_.sim.FailNext(
          SimOp::kAllocate,
          FaultError(Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted,
                     "stress: injected out of memory"));
      return;
    }
    world_.sim.FailNext(kOps[RandomBelow(5)],
                        FaultError(Fault::kResource, absl::StatusCode::kAborted,
                                   "stress: injected resource fault"));
  }

  void ReleaseAll() {
    while (!allocations_.empty()) ReleaseAllocation();
    while (!events_.empty()) ReleaseEvent(false);
    while (!streams_.empty()) ReleaseStream(false);
  }

  World& world_;
  std::mt19937_64 rng_;
  std::vector<PooledStream> streams_;
  std::vector<PooledEvent> events_;
  std::vector<HeldAllocation> allocations_;
};

bool ParseFlag(absl::string_view arg, absl::string_view name, int64_t* out) {
  const std::string prefix = absl::StrCat("--", name, "=");
  if (arg.substr(0, prefix.size()) != prefix) return false;
  if (!absl::SimpleAtoi(arg.substr(prefix.size()), out) || *out <= 0) {
    std::fprintf(stderr, "stress: bad value in %.*s\n",
                 static_cast<int>(arg.size()), arg.data());
    std::exit(2);
  }
  return true;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (const char* env = std::getenv("GPUPOOL_STRESS_OPS")) {
    if (!absl::SimpleAtoi(env, &flags.ops) || flags.ops <= 0) {
      std::fprintf(stderr, "stress: bad GPUPOOL_STRESS_OPS=%s\n", env);
      return 2;
    }
  }
  for (int i = 1; i < argc; ++i) {
    int64_t value = 0;
    if (ParseFlag(argv[i], "ops", &flags.ops)) continue;
    if (ParseFlag(argv[i], "threads", &value)) {
      flags.threads = static_cast<int>(value);
    } else if (ParseFlag(argv[i], "devices", &value)) {
      flags.devices = static_cast<int>(value);
    } else if (ParseFlag(argv[i], "seed", &value)) {
      flags.seed = static_cast<uint64_t>(value);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--ops=N] [--threads=T] [--devices=D] "
                   "[--seed=S]\n",
                   argv[0]);
      return 2;
    }
  }
  std::printf("stress: %" PRId64 " ops, %d threads, %d devices, seed %" PRIu64
              "\n",
              flags.ops, flags.threads, flags.devices, flags.seed);
  std::fflush(stdout);

  World world(flags);
  const absl::Time start = absl::Now();
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < flags.threads; ++t) {
      const int64_t ops =
          flags.ops / flags.threads + (t < flags.ops % flags.threads ? 1 : 0);
      threads.emplace_back([&world, t, ops] { Worker(world, t).Run(ops); });
    }
    for (std::thread& thread : threads) thread.join();
  }
  const absl::Duration elapsed = absl::Now() - start;
  // Cached blocks hold ready events (leases of the event pool) until the
  // cache lets them go: trim it first.
  const AllocationCacheStats cache_stats = world.cache->GetStats();
  if (absl::Status trimmed = world.cache->Trim(); !trimmed.ok()) {
    world.failures.Add(absl::StrCat("cache Trim: ", trimmed.ToString()));
  }
  const PoolStats stream_stats = world.streams->GetStats();
  const PoolStats event_stats = world.events->GetStats();
  if (stream_stats.in_use != 0 || event_stats.in_use != 0 ||
      cache_stats.allocations_in_use != 0) {
    world.failures.Add(absl::StrCat(
        "leases still counted in use after every release: streams ",
        stream_stats.in_use, ", events ", event_stats.in_use, ", allocations ",
        cache_stats.allocations_in_use));
  }
  world.sim.CompleteAllWork();
  world.cache.reset();
  world.events.reset();
  world.streams.reset();
  if (absl::Status leaks = world.sim.CheckNoLeaks(); !leaks.ok()) {
    world.failures.Add(absl::StrCat("leaks: ", leaks.ToString()));
  }
  if (world.backend.violation_count() != 0) {
    world.failures.Add("runtime call on a poisoned device");
  }
  std::printf(
      "stress: %.1f s, %" PRId64 " leases, %" PRId64 " allocations, %" PRId64
      " refused (injected faults), stream hit rate %.3f, event hit rate "
      "%.3f, cache hit rate %.3f\n",
      absl::ToDoubleSeconds(elapsed), world.acquired.load(),
      world.allocated.load(), world.refused.load(), stream_stats.hit_rate(),
      event_stats.hit_rate(), cache_stats.hit_rate());
  if (world.failures.count() != 0) {
    world.failures.Print();
    std::printf("stress: FAILED (%" PRId64 " problems)\n",
                world.failures.count());
    return 1;
  }
  std::printf("stress: ok\n");
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Main(argc, argv); }
