// PooledRuntime; see pooled_runtime.h.

#include "src/preload/pooled_runtime.h"

#include <dlfcn.h>
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gpupool/config.h"
#include "gpupool/pools.h"
#include "src/lifetime/fork_safe_mutex.h"
#include "src/preload/environment_check.h"
#include "src/preload/guarded_backend.h"
#include "src/preload/interposed_symbols.h"
#include "src/preload/runtime_call_guard.h"
#include "src/process/snapshot_dumps.h"

namespace gpupool::preload_internal {

thread_local int runtime_call_depth __attribute__((tls_model("initial-exec"))) =
    0;

namespace {

// Every lease map, so that one fork handler can hold them all across fork():
// a child must not inherit a map locked by another parent thread.
struct ForkLocks {
  ForkSafeMutex mu;  // guards `maps` (registration only)
  std::vector<ForkSafeMutex*> maps ABSL_GUARDED_BY(mu);
};

ForkLocks& GetForkLocks();

// pthread_atfork handlers: every map lock is held across fork() and released
// on both sides. A lock held from one handler to another is beyond the
// analysis.
void LockAllForFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  ForkLocks& all = GetForkLocks();
  all.mu.Lock();
  for (ForkSafeMutex* map : all.maps) map->Lock();
}
void UnlockAllAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  ForkLocks& all = GetForkLocks();
  for (ForkSafeMutex* map : all.maps) map->Unlock();
  all.mu.Unlock();
}

ForkLocks& GetForkLocks() {
  static ForkLocks* locks = [] {
    auto* created = new ForkLocks;
    pthread_atfork(&LockAllForFork, &UnlockAllAfterFork, &UnlockAllAfterFork);
    return created;
  }();
  return *locks;
}

// The runtimes whose stats GPUPOOL_STATS=1 prints at exit.
struct StatsRegistry {
  ForkSafeMutex mu;
  std::vector<PooledRuntime*> runtimes ABSL_GUARDED_BY(mu);
};

StatsRegistry& GetStatsRegistry() {
  static StatsRegistry* registry = new StatsRegistry;
  return *registry;
}

void PrintStatsAtExit() {
  StatsRegistry& registry = GetStatsRegistry();
  ForkSafeLock lock(&registry.mu);
  for (PooledRuntime* runtime : registry.runtimes) {
    const std::string report = runtime->StatsReport();
    if (!report.empty()) std::fprintf(stderr, "%s", report.c_str());
  }
}

std::string Seconds(absl::Duration duration) {
  return absl::StrFormat("%.3f s", absl::ToDoubleSeconds(duration));
}

std::string Milliseconds(absl::Duration duration) {
  return absl::StrFormat("%.3f ms", absl::ToDoubleMilliseconds(duration));
}

// "the HIP runtime /opt/rocm/lib/libamdhip64.so.6": the file the program's
// `runtime` lives in, found through the real definitions of the entry points
// the preload interposes for it.
std::string DescribeLibrary(Runtime runtime, const char* library) {
  for (const InterposedSymbol& symbol : InterposedSymbolsOf(runtime)) {
    const void* real = FindRealSymbol(runtime, symbol.name);
    Dl_info info;
    if (real != nullptr && dladdr(real, &info) != 0 &&
        info.dli_fname != nullptr && info.dli_fname[0] != '\0') {
      return absl::StrCat("the ", library, " ", info.dli_fname);
    }
  }
  return absl::StrCat("the ", library, " this program uses");
}

}  // namespace

// Handles the preload handed out, with their leases. A handle already
// present at insertion can only be one the runtime invalidated (a device
// reset) and whose address it reused: the stale lease is returned, and its
// pool drops it (older device generation) without a runtime call.
template <typename Lease>
class PooledRuntime::LeaseMap {
 public:
  LeaseMap() {
    ForkLocks& locks = GetForkLocks();
    ForkSafeLock lock(&locks.mu);
    locks.maps.push_back(&mu_);
  }

  void Insert(void* handle, Lease lease) {
    Lease stale;
    {
      ForkSafeLock lock(&mu_);
      Lease& slot = map_[handle];
      stale = std::move(slot);
      slot = std::move(lease);
    }
    // ~Lease returns `stale`, outside the lock.
  }

  std::optional<Lease> Take(void* handle) {
    ForkSafeLock lock(&mu_);
    auto it = map_.find(handle);
    if (it == map_.end()) return std::nullopt;
    std::optional<Lease> lease(std::move(it->second));
    map_.erase(it);
    return lease;
  }

 private:
  ForkSafeMutex mu_;
  absl::flat_hash_map<void*, Lease> map_ ABSL_GUARDED_BY(mu_);
};

PooledRuntime::PooledRuntime(const RuntimeDescription& description)
    : description_(description),
      streams_(new LeaseMap<PooledStream>),
      events_(new LeaseMap<PooledEvent>) {}

bool PooledRuntime::Initialize() {
  const int state = state_.load(std::memory_order_acquire);
  if (state != kUninitialized) return state == kReady;
  ForkSafeLock lock(&init_mu_);
  if (state_.load(std::memory_order_relaxed) != kUninitialized) {
    return state_.load(std::memory_order_relaxed) == kReady;
  }
  // Everything below that reaches the runtime is gpupool's own call.
  ScopedRuntimeCall guard;
  absl::StatusOr<PoolsConfig> config = PoolsConfigFromEnvironment();
  absl::Status status = config.status();
  if (status.ok()) {
    switches_ = config->preload;
    if (!switches_.enabled) {
      status = absl::CancelledError(
          absl::StrCat(kPoolsConfigEnvVar, " has preload=false"));
    }
  }
  if (status.ok() && StatsRequested()) {
    StatsRegistry& registry = GetStatsRegistry();
    ForkSafeLock stats_lock(&registry.mu);
    // Registered before the pools exist, so that it runs after their exit
    // drain (atexit runs newest first): the report then includes what the
    // drain's destroys cost.
    if (registry.runtimes.empty()) std::atexit(&PrintStatsAtExit);
    registry.runtimes.push_back(this);
  }
  // Set when the runtime itself is the reason (not a switch or a setting,
  // which environment_check.cc reports when the library loads).
  bool unusable_runtime = false;
  if (status.ok()) {
    const Runtime runtime = description_.runtime;
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        description_.make_backend(
            DescribeLibrary(runtime, description_.library),
            [runtime](const char* name) {
              return FindRealSymbol(runtime, name);
            });
    if (backend.ok()) {
      internal::ArmSnapshotDumps(&config->options);
      absl::StatusOr<std::unique_ptr<Pools>> pools = Pools::Create(
          MakeGuardedBackend(*std::move(backend)), config->options);
      if (pools.ok()) {
        pools_ = pools->release();
        internal::AttachSnapshotDumps(pools_);
        if (absl::Status prewarm = RunPrewarms(*pools_, config->prewarm);
            !prewarm.ok()) {
          std::fprintf(stderr, "gpupool preload [%s]: %s\n", description_.name,
                       prewarm.ToString().c_str());
        }
      } else {
        status = pools.status();
        unusable_runtime = true;
      }
    } else {
      status = backend.status();
      unusable_runtime = true;
    }
  }
  if (!status.ok()) {
    unavailable_reason_ = std::string(status.message());
    // Once (Initialize decides once): a program run under the preload has no
    // other way to learn that its streams are not pooled.
    if (unusable_runtime || StatsRequested()) {
      std::fprintf(stderr, "gpupool preload [%s]: not pooling: %s\n",
                   description_.name, unavailable_reason_.c_str());
    }
    state_.store(kOff, std::memory_order_release);
    return false;
  }
  state_.store(kReady, std::memory_order_release);
  return true;
}

Pools* PooledRuntime::pools() { return Initialize() ? pools_ : nullptr; }

bool PooledRuntime::CurrentDevice(int* device) {
  absl::StatusOr<int> current = pools_->backend().GetCurrentDevice();
  if (!current.ok()) return false;
  *device = *current;
  return true;
}

int PooledRuntime::CreateStream(void** stream, const StreamConfig& config,
                                RealCall real) {
  if (stream == nullptr || InRuntimeCall()) return real();
  counters_.stream_creates.fetch_add(1, std::memory_order_relaxed);
  int device = 0;
  if (!Initialize() || !switches_.streams || !CurrentDevice(&device)) {
    return real();
  }
  absl::StatusOr<PooledStream> lease =
      pools_->streams().Acquire(device, config, SourceLocation::Internal());
  // Refused (a priority the runtime would clamp, a forked child, exit, a
  // poisoned device): the program gets exactly what the runtime gives.
  if (!lease.ok()) return real();
  counters_.stream_pooled.fetch_add(1, std::memory_order_relaxed);
  void* handle = lease->get();
  streams_->Insert(handle, *std::move(lease));
  *stream = handle;
  return 0;
}

int PooledRuntime::DestroyStream(void* stream, RealCall real) {
  if (stream == nullptr || InRuntimeCall() ||
      state_.load(std::memory_order_acquire) != kReady) {
    return real();
  }
  std::optional<PooledStream> lease = streams_->Take(stream);
  if (!lease.has_value()) return real();
  counters_.stream_destroys.fetch_add(1, std::memory_order_relaxed);
  if (description_.destroy_waits_for_work) {
    // The runtime's destroy returns once the stream's work is done; so does
    // this one. An error here (a faulted stream) is seen again, and
    // classified, by the pool's check on return.
    pools_->backend().SynchronizeStream(lease->device(), stream).IgnoreError();
  }
  lease->Release();
  return 0;
}

int PooledRuntime::CreateEvent(void** event, const EventConfig& config,
                               RealCall real) {
  if (event == nullptr || InRuntimeCall()) return real();
  counters_.event_creates.fetch_add(1, std::memory_order_relaxed);
  int device = 0;
  if (!Initialize() || !switches_.events || !CurrentDevice(&device)) {
    return real();
  }
  absl::StatusOr<PooledEvent> lease =
      pools_->events().Acquire(device, config, SourceLocation::Internal());
  if (!lease.ok()) return real();
  counters_.event_pooled.fetch_add(1, std::memory_order_relaxed);
  void* handle = lease->get();
  events_->Insert(handle, *std::move(lease));
  *event = handle;
  return 0;
}

int PooledRuntime::DestroyEvent(void* event, RealCall real) {
  if (event == nullptr || InRuntimeCall() ||
      state_.load(std::memory_order_acquire) != kReady) {
    return real();
  }
  std::optional<PooledEvent> lease = events_->Take(event);
  if (!lease.has_value()) return real();
  counters_.event_destroys.fetch_add(1, std::memory_order_relaxed);
  lease->Release();
  return 0;
}

int PooledRuntime::ResetDevice(int device, RealCall real) {
  if (InRuntimeCall() || state_.load(std::memory_order_acquire) != kReady) {
    return real();
  }
  if (device < 0 && !CurrentDevice(&device)) return real();
  counters_.device_resets.fetch_add(1, std::memory_order_relaxed);
  // The reset invalidates every handle of the device: start a new
  // generation, which drops the pooled ones without a runtime call (and the
  // leases still out when they come back).
  pools_->health()->Poison(
      device, absl::FailedPreconditionError(
                  absl::StrCat("device ", device, " reset by the program (",
                               description_.name, " device reset)")));
  pools_->RecoverDevice(device).IgnoreError();
  return real();
}

std::string PooledRuntime::StatsReport() {
  if (state_.load(std::memory_order_acquire) != kReady) return "";
  const PoolStats streams = pools_->streams().GetStats();
  const PoolStats events = pools_->events().GetStats();
  const int64_t stream_creates = counters_.stream_creates.load();
  const int64_t event_creates = counters_.event_creates.load();
  if (stream_creates == 0 && event_creates == 0) return "";
  // Every acquire served without creating saved one create, and every
  // return kept saved one destroy; priced at what the runtime's own
  // creates and destroys cost in this process.
  const int64_t streams_avoided = streams.acquired - streams.created;
  const int64_t events_avoided = events.acquired - events.created;
  const int64_t stream_destroys_avoided = std::max<int64_t>(
      0, counters_.stream_destroys.load() - streams.destroyed);
  const int64_t event_destroys_avoided =
      std::max<int64_t>(0, counters_.event_destroys.load() - events.destroyed);
  const absl::Duration saved =
      streams_avoided * streams.create_latency.mean() +
      stream_destroys_avoided * streams.destroy_latency.mean() +
      events_avoided * events.create_latency.mean() +
      event_destroys_avoided * events.destroy_latency.mean();
  return absl::StrCat(
      "gpupool preload [", description_.name, "]: streams: ", stream_creates,
      " creates asked, ", streams.created, " created by the runtime, ",
      streams_avoided, " avoided; events: ", event_creates, " creates asked, ",
      events.created, " created by the runtime, ", events_avoided,
      " avoided; device resets: ", counters_.device_resets.load(),
      "; estimated time saved: ", Seconds(saved),
      " (mean runtime stream create ",
      Milliseconds(streams.create_latency.mean()), ", destroy ",
      Milliseconds(streams.destroy_latency.mean()),
      ", measured in this process)\n");
}

}  // namespace gpupool::preload_internal
