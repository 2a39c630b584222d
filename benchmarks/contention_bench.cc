// contention_bench — acquire+release throughput with 1 to 16 threads spread
// over the devices (thread t uses device t % devices, as a client drives each
// device from its own threads), for the sharded StreamPool and for the same
// pool behind one global lock.
//
//   contention/sharded/real_time/threads:N       StreamPool as built: a lock
//                                                per (device, config) shard
//   contention/global_lock/real_time/threads:N   every Acquire and every
//                                                Release also takes one
//                                                process-wide absl::Mutex,
//                                                as a pool with a single lock
//                                                would
//   contention/allocation/real_time/threads:N    AllocationCache: a 4 KiB
//                                                block allocated and released
//                                                on the thread's device (a
//                                                cache hit, no stream)
//
// Thread 0 builds the pool and warms every device in turn before the timed
// loop, as a client warming its devices would: the shards of neighbouring
// devices are then made one after the other, which is what shows whether
// their hot state shares cache lines.
//
// items_per_second is the total over all threads (wall time). Scaling needs
// cores: on a machine with C cores, more than C spinning threads cannot go
// faster, whatever the pool does.

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "benchmarks/bench_common.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/event_pool.h"
#include "gpupool/stream_pool.h"

namespace gpupool::bench {
namespace {

constexpr int kMaxThreads = 16;

// What the threads of one run share. Built by thread 0 before the loop and
// destroyed by it after: Google Benchmark holds every thread at a barrier on
// entering and on leaving the timed loop, so no thread sees it half built or
// uses it after teardown.
struct SharedPool {
  explicit SharedPool(Backend& backend) : pool(backend) {}
  StreamPool pool;
  // The global-lock variant's single lock; unused by the sharded one.
  absl::Mutex global_mu;
  // Streams created by the prewarm, before the timed loop.
  int64_t prewarmed = 0;
};
SharedPool* shared_pool = nullptr;

// Acquire + release, both under the global lock when `global_lock`.
absl::Status AcquireRelease(SharedPool& shared, int device, bool global_lock) {
  absl::StatusOr<PooledStream> stream;
  if (global_lock) {
    absl::MutexLock lock(&shared.global_mu);
    stream = shared.pool.Acquire(device);
  } else {
    stream = shared.pool.Acquire(device);
  }
  if (!stream.ok()) return stream.status();
  benchmark::DoNotOptimize(stream->get());
  if (global_lock) {
    absl::MutexLock lock(&shared.global_mu);
    stream->Release();
  } else {
    stream->Release();
  }
  return absl::OkStatus();
}

void Contention(benchmark::State& state, const BenchEnv& env,
                bool global_lock) {
  const int devices = std::min(8, env.device_count);
  if (state.thread_index() == 0) {
    state.SetLabel(env.label.c_str());
    shared_pool = new SharedPool(*env.backend);
    // Enough idle streams per device that no thread ever has to create.
    int per_device = (state.threads() + devices - 1) / devices;
    for (int device = 0; device < devices; ++device) {
      if (!Check(state, shared_pool->pool.Prewarm(device, {}, per_device))) {
        break;
      }
    }
    shared_pool->prewarmed = shared_pool->pool.GetStats().created;
  }
  const int device = state.thread_index() % devices;
  for (auto _ : state) {
    if (!Check(state, AcquireRelease(*shared_pool, device, global_lock))) {
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    // Counters are summed over threads; only this one sets it.
    const int64_t created = shared_pool->pool.GetStats().created;
    state.counters["streams_created"] = static_cast<double>(created);
    // 0 when every timed iteration was a hit.
    state.counters["timed_misses"] =
        static_cast<double>(created - shared_pool->prewarmed);
    delete std::exchange(shared_pool, nullptr);
  }
}

// The allocation cache's counterpart of SharedPool.
struct SharedCache {
  explicit SharedCache(Backend& backend)
      : events(backend), cache(backend, events) {}
  EventPool events;
  AllocationCache cache;
  // Runtime allocations made by the warm-up, before the timed loop.
  int64_t warm_misses = 0;
};
SharedCache* shared_cache = nullptr;

constexpr size_t kBlockBytes = 4096;

void AllocationContention(benchmark::State& state, const BenchEnv& env) {
  const int devices = std::min(8, env.device_count);
  if (state.thread_index() == 0) {
    state.SetLabel(env.label.c_str());
    shared_cache = new SharedCache(*env.backend);
    // One cached block per thread, on its device.
    std::vector<PooledAllocation> warm;
    for (int thread = 0; thread < state.threads(); ++thread) {
      absl::StatusOr<PooledAllocation> block =
          shared_cache->cache.Allocate(thread % devices, kBlockBytes);
      if (!Check(state, block.status())) break;
      warm.push_back(*std::move(block));
    }
    warm.clear();
    shared_cache->warm_misses = shared_cache->cache.GetStats().misses;
  }
  const int device = state.thread_index() % devices;
  for (auto _ : state) {
    absl::StatusOr<PooledAllocation> block =
        shared_cache->cache.Allocate(device, kBlockBytes);
    if (!Check(state, block.status())) break;
    benchmark::DoNotOptimize(block->data());
    block->Release();
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    // 0 when every timed iteration was a hit.
    state.counters["timed_misses"] = static_cast<double>(
        shared_cache->cache.GetStats().misses - shared_cache->warm_misses);
    delete std::exchange(shared_cache, nullptr);
  }
}

void RegisterContentionBenchmarks(const BenchEnv& env) {
  for (bool global_lock : {false, true}) {
    benchmark::internal::Benchmark* benchmark = benchmark::RegisterBenchmark(
        global_lock ? "contention/global_lock" : "contention/sharded",
        [env, global_lock](benchmark::State& state) {
          Contention(state, env, global_lock);
        });
    benchmark->UseRealTime();
    for (int threads = 1; threads <= kMaxThreads; threads *= 2) {
      benchmark->Threads(threads);
    }
  }
  benchmark::internal::Benchmark* allocation = benchmark::RegisterBenchmark(
      "contention/allocation",
      [env](benchmark::State& state) { AllocationContention(state, env); });
  allocation->UseRealTime();
  for (int threads = 1; threads <= kMaxThreads; threads *= 2) {
    allocation->Threads(threads);
  }
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  return gpupool::bench::RunBenchmarkMain(
      argc, argv, &gpupool::bench::RegisterContentionBenchmarks);
}
