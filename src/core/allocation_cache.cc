// AllocationCache and PooledAllocation: the runtime side of the cache (event
// recording and checks, the OOM chain, stable buffers, exit and fork). The
// per-(device, kind) bookkeeping lives in allocation_shard.{h,cc}; every
// runtime call here is made with no shard lock held.

#include "gpupool/allocation_cache.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "src/core/allocation_block.h"
#include "src/core/allocation_shard.h"
#include "src/core/mutex.h"
#include "src/core/process_state.h"
#include "src/core/size_classes.h"

namespace gpupool {
namespace internal {
namespace {

constexpr MemoryKind kKinds[] = {MemoryKind::kDevice, MemoryKind::kPinnedHost};
constexpr int kKindCount = 2;

int KindIndex(MemoryKind kind) { return kind == MemoryKind::kDevice ? 0 : 1; }

bool IsKnownKind(MemoryKind kind) {
  return kind == MemoryKind::kDevice || kind == MemoryKind::kPinnedHost;
}

absl::string_view PolicyName(CrossStreamPolicy policy) {
  return policy == CrossStreamPolicy::kWaitOnStream ? "wait_on_stream"
                                                    : "wait_for_completion";
}

std::atomic<uint64_t> next_lease_id{1};

// What became of a block whose safety had to be proven with the runtime.
enum class Outcome {
  kIdle,     // no work of its uses is pending (or the new stream waits on it)
  kPending,  // some work may still be pending: keep it, check later
  kDrop,     // the device is dead (poisoned): forget it without a call
  kLeak,     // unprovable (bad event or stream, runtime unloading): forget it
};

}  // namespace

class AllocationCacheCore
    : public std::enable_shared_from_this<AllocationCacheCore> {
 public:
  AllocationCacheCore(Backend& backend, EventPool& events,
                      std::shared_ptr<DeviceHealth> health,
                      AllocationCacheOptions options)
      : backend_(backend),
        events_(events),
        options_(Sanitize(options)),
        fork_epoch_(ForkEpoch()) {
    absl::StatusOr<int> count = backend_.DeviceCount();
    if (count.ok()) {
      device_count_ = *count;
    } else {
      device_count_status_ = count.status();
    }
    if (health == nullptr) health = events.health();
    if (health == nullptr)
      health = std::make_shared<DeviceHealth>(device_count_);
    health_ = std::move(health);
    device_count_ = std::min(device_count_, health_->device_count());
    const int classes = SizeClassCount(options_.max_cached_block_bytes);
    device_cached_bytes_ =
        std::make_unique<std::atomic<size_t>[]>(std::max(device_count_, 1));
    for (int device = 0; device < device_count_; ++device) {
      device_cached_bytes_[device].store(0);
      for (MemoryKind kind : kKinds) {
        shards_.push_back(std::make_unique<AllocationShard>(
            device, kind, classes, &device_cached_bytes_[device]));
      }
    }
  }

  ~AllocationCacheCore() {
    // A parent thread may have held a shard lock at fork() time and its
    // lists may be half-updated: touch nothing in a child.
    if (Forked()) {
      for (auto& shard : shards_) shard.release();  // NOLINT: deliberate leak
      // Nor destroy the health's mutexes: ~absl::Mutex takes Abseil's
      // process-wide deadlock-detection lock, which a parent thread may have
      // held at fork time (this runs when a lease outlived its cache).
      new std::shared_ptr<DeviceHealth>(health_);  // NOLINT: deliberate leak
    }
  }

  bool Forked() const { return ForkEpoch() != fork_epoch_; }
  Backend& backend() const { return backend_; }
  const std::shared_ptr<DeviceHealth>& health() const { return health_; }
  const AllocationCacheOptions& options() const { return options_; }

  // ---------------------------------------------------------------------
  // Allocate
  // ---------------------------------------------------------------------

  absl::StatusOr<PooledAllocation> Allocate(int device, size_t bytes,
                                            MemoryKind kind,
                                            NativeStream stream,
                                            SourceLocation where) {
    if (absl::Status usable = CheckUsable(device, "Allocate"); !usable.ok()) {
      return usable;
    }
    if (bytes == 0) {
      return absl::InvalidArgumentError(
          "AllocationCache::Allocate: bytes must be > 0");
    }
    if (!IsKnownKind(kind)) {
      return absl::InvalidArgumentError(
          absl::StrCat("AllocationCache::Allocate: unknown MemoryKind ",
                       static_cast<int>(kind)));
    }
    AllocationShard& shard = Shard(device, kind);
    if (bytes > options_.max_cached_block_bytes) {
      return AllocateUncached(shard, bytes, stream, where);
    }
    const int size_class = SizeClassIndex(bytes);

    // 1. Same stream (safe at once in stream order), else a ready block,
    //    else a few of the oldest pending blocks to check outside the lock.
    AllocationBlock* block = nullptr;
    std::vector<AllocationBlock*> candidates;
    std::vector<AllocationBlock*> stale;
    {
      MutexLock lock(&shard.mu);
      shard.TakeStaleLocked(health_->generation(device), &stale);
      if (stream != nullptr) {
        block = shard.TakeSameStreamLocked(size_class, stream);
      }
      if (block == nullptr) block = shard.TakeReadyLocked(size_class);
      if (block != nullptr) {
        ++shard.stats.hits;
        LeaseLocked(shard, block, bytes, stream, where);
      } else {
        for (int i = 0; i < options_.pending_checks_per_allocate; ++i) {
          AllocationBlock* candidate =
              shard.TakeOldestPendingLocked(size_class);
          if (candidate == nullptr) break;
          candidates.push_back(candidate);
        }
      }
    }
    DeleteBlocks(stale);
    if (block != nullptr) {
      // A same-stream hit keeps its ready events (already consumed: the new
      // work is ordered after them) as spares that the next release
      // re-records, instead of a round trip through the EventPool per
      // cycle. A ready block has none.
      return MakeLease(block);
    }

    // 2. Blocks released on other streams: usable once their events
    //    completed, or at once when the new stream waits on them.
    if (!candidates.empty()) {
      block = TakeFromCandidates(shard, candidates, bytes, stream, where);
      if (block != nullptr) return MakeLease(block);
      if (health_->is_poisoned(device)) return PoisonedError(device);
    }

    // 3. A new block from the runtime.
    PollRetiring(shard);
    // Polling (or freeing) a retired block can meet a sticky fault: no
    // runtime allocation on a device that just died.
    if (health_->is_poisoned(device)) {
      return AllocationFailed(shard, PoisonedError(device));
    }
    const size_t rounded = SizeClassBytes(size_class);
    const uint64_t generation = health_->generation(device);
    absl::StatusOr<void*> ptr = RuntimeAllocate(shard, bytes, rounded);
    if (!ptr.ok()) return ptr.status();
    block = NewBlock(shard, *ptr, rounded, size_class, generation);
    {
      MutexLock lock(&shard.mu);
      ++shard.stats.misses;
      LeaseLocked(shard, block, bytes, stream, where);
    }
    return MakeLease(block);
  }

  // ---------------------------------------------------------------------
  // Release
  // ---------------------------------------------------------------------

  // Takes back the block of a released lease.
  void Return(AllocationBlock* block) {
    // A fork() child takes no lock and makes no runtime call: the memory
    // belongs to the parent's context. The record is leaked with it.
    if (Forked()) return;
    AllocationShard& shard = Shard(block->device, block->kind);
    const int device = block->device;

    Outcome outcome = Outcome::kIdle;
    if (closed_.load(std::memory_order_acquire) || ProcessIsExiting()) {
      outcome = Outcome::kLeak;
    } else if (health_->is_poisoned(device) ||
               block->generation != health_->generation(device)) {
      outcome = Outcome::kDrop;
    } else {
      outcome = RecordReadyEvents(block);
    }

    AllocationBlock* to_free = nullptr;
    AllocationBlock* to_poll = nullptr;
    std::vector<AllocationBlock*> garbage;
    {
      MutexLock lock(&shard.mu);
      shard.RemoveInUseLocked(block);
      const bool keep =
          outcome == Outcome::kIdle || outcome == Outcome::kPending;
      if (keep && shard.closed) {
        outcome = Outcome::kLeak;  // the cache was destroyed meanwhile
      } else if (keep && block->generation != health_->generation(device)) {
        outcome = Outcome::kDrop;  // poisoned while we recorded
      }
      switch (outcome) {
        case Outcome::kDrop:
          ++shard.stats.blocks_dropped;
          garbage.push_back(block);
          break;
        case Outcome::kLeak:
          ++shard.stats.blocks_leaked;
          garbage.push_back(block);
          break;
        case Outcome::kIdle:
        case Outcome::kPending: {
          if (shard.has_retiring()) to_poll = shard.TakeOldestRetiringLocked();
          const bool cached =
              block->size_class >= 0 &&
              shard.TryAddCachedLocked(block, options_.max_cached_bytes);
          if (!cached) {
            // Uncached or over the cap: free it, but never while the GPU
            // may still use it — retire it until its events complete.
            if (block->events.empty()) {
              to_free = block;
            } else {
              shard.AddRetiringLocked(block);
            }
          }
          break;
        }
      }
    }
    DeleteBlocks(garbage);
    if (to_free != nullptr) FreeBlock(shard, to_free).IgnoreError();
    if (to_poll != nullptr) CheckRetiring(shard, to_poll);
  }

  // ---------------------------------------------------------------------
  // Stable buffers
  // ---------------------------------------------------------------------

  absl::StatusOr<void*> AcquireStable(absl::string_view name, int device,
                                      size_t bytes) {
    if (absl::Status usable = CheckUsable(device, "AcquireStable");
        !usable.ok()) {
      return usable;
    }
    if (bytes == 0) {
      return absl::InvalidArgumentError(
          "AllocationCache::AcquireStable: bytes must be > 0");
    }
    AllocationShard& shard = Shard(device, MemoryKind::kDevice);
    // Rounded like cached blocks, so that a slightly larger request later
    // still fits and the address does not move.
    const size_t capacity = bytes <= options_.max_cached_block_bytes
                                ? RoundUpToSizeClass(bytes)
                                : bytes;
    StableBuffer* buffer = nullptr;
    void* old = nullptr;
    void* existing = nullptr;
    std::vector<AllocationBlock*> stale;
    {
      MutexLock lock(&shard.mu);
      buffer = LockedStableBuffer(shard, name, &stale);
      if (buffer->ptr != nullptr && bytes <= buffer->capacity) {
        existing = buffer->ptr;
      } else {
        old = shard.TakeStableLocked(buffer);
        buffer->busy = true;  // others wait until FinishStable is done
      }
    }
    DeleteBlocks(stale);
    if (existing != nullptr) return existing;
    return FinishStable(shard, buffer, old, bytes, capacity);
  }

  absl::Status ReleaseStable(absl::string_view name, int device) {
    if (absl::Status usable = CheckUsable(device, "ReleaseStable");
        !usable.ok()) {
      return usable;
    }
    AllocationShard& shard = Shard(device, MemoryKind::kDevice);
    void* ptr = nullptr;
    std::vector<AllocationBlock*> stale;
    {
      MutexLock lock(&shard.mu);
      ptr = shard.TakeStableLocked(LockedStableBuffer(shard, name, &stale));
    }
    DeleteBlocks(stale);
    if (ptr == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "AllocationCache::ReleaseStable: no stable buffer named \"", name,
          "\" on device ", device));
    }
    return FreeRaw(shard, ptr);
  }

  // ---------------------------------------------------------------------
  // Trim, exit, close
  // ---------------------------------------------------------------------

  absl::Status Trim(int device, size_t keep_bytes) {
    if (absl::Status usable = CheckUsable(device, "Trim"); !usable.ok()) {
      // A poisoned device has nothing left to trim: its blocks were dropped.
      const bool poisoned = !Forked() && !ProcessIsExiting() && device >= 0 &&
                            device < device_count_ &&
                            health_->is_poisoned(device);
      return poisoned ? absl::OkStatus() : usable;
    }
    absl::Status first;
    for (MemoryKind kind : kKinds) {
      const size_t cached = device_cached_bytes_[device].load();
      const size_t excess = cached > keep_bytes ? cached - keep_bytes : 0;
      first.Update(
          ReleaseCached(Shard(device, kind), excess, /*with_retiring=*/true)
              .status);
    }
    return first;
  }

  absl::Status TrimAll() {
    absl::Status first;
    for (int device = 0; device < device_count_; ++device) {
      first.Update(Trim(device, 0));
    }
    if (device_count_ == 0 && !device_count_status_.ok()) {
      return device_count_status_;
    }
    return first;
  }

  // Frees every cached, retiring and stable block while the runtime is
  // alive (`call_runtime`), else leaks them. `close`: the cache is being
  // destroyed; later releases leak.
  void FreeEverything(bool close, bool call_runtime) {
    if (close) closed_.store(true, std::memory_order_release);
    for (const auto& shard_ptr : shards_) {
      AllocationShard& shard = *shard_ptr;
      std::vector<AllocationBlock*> blocks;
      std::vector<AllocationBlock*> stale;
      std::vector<void*> stable;
      {
        MutexLock lock(&shard.mu);
        if (close) shard.closed = true;
        shard.TakeStaleLocked(health_->generation(shard.device()), &stale);
        shard.TakeCachedLocked(static_cast<size_t>(-1), &blocks);
        shard.TakeAllRetiringLocked(&blocks);
        for (auto& [name, buffer] : shard.stable) {
          if (buffer->ptr == nullptr || buffer->busy) continue;
          stable.push_back(shard.TakeStableLocked(buffer.get()));
        }
        if (!call_runtime) {
          shard.stats.blocks_leaked +=
              static_cast<int64_t>(blocks.size() + stable.size());
        }
      }
      DeleteBlocks(stale);
      if (!call_runtime) {
        DeleteBlocks(blocks);
        continue;
      }
      ReleaseBlocks(shard, std::move(blocks));
      for (void* ptr : stable) FreeRaw(shard, ptr).IgnoreError();
    }
  }

  // The exit hook: free while the runtime is alive; the exiting flag set
  // right after makes every later release leak.
  void DrainForExit() {
    if (Forked()) return;
    FreeEverything(/*close=*/false, /*call_runtime=*/true);
  }

  // ---------------------------------------------------------------------
  // Observability
  // ---------------------------------------------------------------------

  AllocationCacheStats GetStats() const {
    AllocationCacheStats total;
    if (Forked()) return total;
    for (const auto& shard : shards_) total += ShardStats(*shard);
    return total;
  }

  AllocationCacheStats GetStats(int device) const {
    AllocationCacheStats total;
    if (Forked() || device < 0 || device >= device_count_) return total;
    for (MemoryKind kind : kKinds) total += ShardStats(Shard(device, kind));
    return total;
  }

  AllocationCacheStats GetStats(int device, MemoryKind kind) const {
    if (Forked() || device < 0 || device >= device_count_ ||
        !IsKnownKind(kind)) {
      return {};
    }
    return ShardStats(Shard(device, kind));
  }

  std::vector<OutstandingLease> GetOutstandingLeases() const {
    std::vector<OutstandingLease> out;
    if (Forked()) return out;
    for (const auto& shard : shards_) {
      MutexLock lock(&shard->mu);
      shard->AppendOutstandingLocked(&out);
    }
    return out;
  }

  std::string DebugString() const {
    std::string out = absl::StrFormat(
        "allocation cache over %s (%d devices, max_cached_bytes=%s, "
        "max_cached_block_bytes=%d, cross_stream=%s)",
        std::string(backend_.name()), device_count_,
        options_.max_cached_bytes == static_cast<size_t>(-1)
            ? std::string("unbounded")
            : absl::StrCat(options_.max_cached_bytes),
        options_.max_cached_block_bytes, PolicyName(options_.cross_stream));
    if (Forked()) return absl::StrCat(out, " [forked: unusable]");
    if (!device_count_status_.ok()) {
      absl::StrAppend(&out, " [", device_count_status_.ToString(), "]");
    }
    absl::StrAppend(&out, "\n  total: ", GetStats().ToString());
    for (const auto& shard : shards_) {
      AllocationCacheStats stats = ShardStats(*shard);
      if (stats.runtime_allocations == 0 && stats.failed_allocations == 0) {
        continue;
      }
      absl::StrAppend(&out, "\n  dev", shard->device(), " ",
                      MemoryKindName(shard->kind()),
                      health_->is_poisoned(shard->device()) ? " POISONED" : "",
                      ": ", stats.ToString());
    }
    return out;
  }

 private:
  static AllocationCacheOptions Sanitize(AllocationCacheOptions options) {
    options.max_cached_block_bytes =
        std::min(options.max_cached_block_bytes, kMaxSizeClassBytes);
    options.pending_checks_per_allocate =
        std::max(options.pending_checks_per_allocate, 0);
    return options;
  }

  AllocationShard& Shard(int device, MemoryKind kind) const {
    return *shards_[static_cast<size_t>(device) * kKindCount + KindIndex(kind)];
  }

  AllocationCacheStats ShardStats(const AllocationShard& shard) const {
    MutexLock lock(&shard.mu);
    return shard.stats;
  }

  // The checks every entry point makes before touching a shard.
  absl::Status CheckUsable(int device, absl::string_view what) {
    if (Forked()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "AllocationCache::", what,
          ": this process is a fork() child of the one that created the "
          "cache; inherited GPU memory belongs to the parent's context and "
          "is never reused (create a new cache in the child)"));
    }
    if (ProcessIsExiting()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "AllocationCache::", what,
          ": the process is exiting; the cache no longer hands out memory"));
    }
    if (!device_count_status_.ok()) return device_count_status_;
    if (device < 0 || device >= device_count_) {
      return absl::InvalidArgumentError(
          absl::StrCat("AllocationCache::", what, ": device ", device,
                       " out of range [0, ", device_count_, ")"));
    }
    if (health_->is_poisoned(device)) {
      DropStale(device);
      return PoisonedError(device);
    }
    return absl::OkStatus();
  }

  absl::Status PoisonedError(int device) const {
    absl::Status status = health_->CheckHealthy(device);
    if (status.ok()) {
      // Recovered meanwhile: still report the failure that brought us here.
      status = absl::FailedPreconditionError(absl::StrCat(
          "device ", device, " was poisoned during the call and recovered"));
    }
    return status;
  }

  // Forgets, without runtime calls, every block of an older generation.
  void DropStale(int device) {
    for (MemoryKind kind : kKinds) {
      AllocationShard& shard = Shard(device, kind);
      std::vector<AllocationBlock*> stale;
      {
        MutexLock lock(&shard.mu);
        shard.TakeStaleLocked(health_->generation(device), &stale);
      }
      DeleteBlocks(stale);
    }
  }

  // Deletes host records (returning their events to the EventPool). Must be
  // called without our locks: the EventPool takes its own.
  static void DeleteBlocks(const std::vector<AllocationBlock*>& blocks) {
    for (AllocationBlock* block : blocks) delete block;
  }

  AllocationBlock* NewBlock(const AllocationShard& shard, void* ptr,
                            size_t size, int size_class, uint64_t generation) {
    auto* block = new AllocationBlock();
    block->ptr = ptr;
    block->size = size;
    block->size_class = size_class;
    block->device = shard.device();
    block->kind = shard.kind();
    block->generation = generation;
    return block;
  }

  void LeaseLocked(AllocationShard& shard, AllocationBlock* block,
                   size_t requested, NativeStream stream, SourceLocation where)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    block->requested = requested;
    block->stream = stream;
    block->uses.clear();
    if (stream != nullptr) block->uses.push_back(stream);
    block->release_stream = nullptr;
    block->lease_id = next_lease_id.fetch_add(1, std::memory_order_relaxed);
    block->where = where;
    shard.AddInUseLocked(block);
  }

  PooledAllocation MakeLease(AllocationBlock* block) {
    return PooledAllocation(shared_from_this(), block);
  }

  absl::StatusOr<PooledAllocation> AllocateUncached(AllocationShard& shard,
                                                    size_t bytes,
                                                    NativeStream stream,
                                                    SourceLocation where) {
    const uint64_t generation = health_->generation(shard.device());
    absl::StatusOr<void*> ptr = RuntimeAllocate(shard, bytes, bytes);
    if (!ptr.ok()) return ptr.status();
    AllocationBlock* block =
        NewBlock(shard, *ptr, bytes, /*size_class=*/-1, generation);
    {
      MutexLock lock(&shard.mu);
      ++shard.stats.uncached_allocations;
      LeaseLocked(shard, block, bytes, stream, where);
    }
    return MakeLease(block);
  }

  // Checks candidates (taken oldest first) until one is usable on `stream`;
  // puts the others back. Returns the leased block or nullptr.
  AllocationBlock* TakeFromCandidates(
      AllocationShard& shard, const std::vector<AllocationBlock*>& candidates,
      size_t bytes, NativeStream stream, SourceLocation where) {
    const bool wait_on_stream =
        stream != nullptr &&
        options_.cross_stream == CrossStreamPolicy::kWaitOnStream;
    AllocationBlock* chosen = nullptr;
    bool waited = false;
    std::vector<AllocationBlock*> keep;
    std::vector<AllocationBlock*> dropped;
    std::vector<AllocationBlock*> leaked;
    for (AllocationBlock* candidate : candidates) {
      if (chosen != nullptr) {
        keep.push_back(candidate);
        continue;
      }
      // An earlier candidate's sticky fault poisoned the device: the others
      // are dropped without another runtime call.
      if (health_->is_poisoned(candidate->device)) {
        dropped.push_back(candidate);
        continue;
      }
      Outcome outcome = Outcome::kPending;
      if (wait_on_stream) {
        outcome = MakeStreamWait(candidate, stream);
        waited = outcome == Outcome::kIdle;
      }
      // Fall back to a query only after a plain failure of the wait
      // (kPending): a sticky fault (kDrop) or an unloading runtime (kLeak)
      // must not be followed by another runtime call.
      if (!waited && outcome == Outcome::kPending) {
        outcome = QueryEvents(candidate);
      }
      switch (outcome) {
        case Outcome::kIdle:
          chosen = candidate;
          break;
        case Outcome::kPending:
          keep.push_back(candidate);
          break;
        case Outcome::kDrop:
          dropped.push_back(candidate);
          break;
        case Outcome::kLeak:
          leaked.push_back(candidate);
          break;
      }
    }
    // Consumed (waited on or complete): back to the EventPool.
    if (chosen != nullptr) chosen->events.clear();
    {
      MutexLock lock(&shard.mu);
      const uint64_t generation = health_->generation(shard.device());
      // Back as the oldest again, in their original order.
      for (auto it = keep.rbegin(); it != keep.rend(); ++it) {
        if ((*it)->generation == generation) {
          shard.RestorePendingLocked(*it);
        } else {
          dropped.push_back(*it);
        }
      }
      if (chosen != nullptr && chosen->generation != generation) {
        dropped.push_back(chosen);
        chosen = nullptr;
      }
      shard.stats.blocks_dropped += static_cast<int64_t>(dropped.size());
      shard.stats.blocks_leaked += static_cast<int64_t>(leaked.size());
      if (chosen != nullptr) {
        ++shard.stats.hits;
        if (waited) ++shard.stats.cross_stream_waits;
        LeaseLocked(shard, chosen, bytes, stream, where);
      }
    }
    DeleteBlocks(dropped);
    DeleteBlocks(leaked);
    return chosen;
  }

  // Records a ready event on every stream that used the block: one of the
  // block's spare events (kept from a same-stream hit) when it has any, else
  // one from the EventPool. Re-recording an event is allowed whatever its
  // previous record's state, and nothing else waits on these. kIdle:
  // recorded (or nothing to record); the block is cacheable. Unused spares
  // go back to the EventPool.
  Outcome RecordReadyEvents(AllocationBlock* block) {
    const int device = block->device;
    absl::InlinedVector<PooledEvent, 1> spares = std::move(block->events);
    block->events.clear();
    block->release_stream = nullptr;
    NativeStream single_stream = nullptr;
    for (NativeStream stream : block->uses) {
      absl::StatusOr<PooledEvent> event =
          spares.empty() ? events_.Acquire(device, options_.event_config,
                                           SourceLocation::Internal())
                         : TakeSpare(&spares);
      absl::Status status = event.status();
      if (event.ok()) {
        status = backend_.RecordEvent(device, event->get(), stream);
        if (status.ok()) {
          single_stream = stream;
          block->events.push_back(*std::move(event));
          continue;
        }
        if (FaultOf(status) != Fault::kDevice) event->Discard();
      }
      Outcome outcome = ReactTo(device, status);
      // Discarding the event may itself have met a sticky fault: then the
      // device is dead and nothing more may be called on it.
      if (health_->is_poisoned(device)) outcome = Outcome::kDrop;
      if (outcome == Outcome::kDrop || outcome == Outcome::kLeak) {
        block->events.clear();
        return outcome;
      }
      // No event: make sure this stream's work is done the slow way.
      absl::Status synced = backend_.SynchronizeStream(device, stream);
      if (!synced.ok()) {
        outcome = ReactTo(device, synced);
        block->events.clear();
        // The work may still touch the memory and we cannot tell when it
        // stops: never reuse or free it.
        return outcome == Outcome::kDrop ? Outcome::kDrop : Outcome::kLeak;
      }
    }
    if (block->events.size() == 1) block->release_stream = single_stream;
    return block->events.empty() ? Outcome::kIdle : Outcome::kPending;
  }

  static PooledEvent TakeSpare(absl::InlinedVector<PooledEvent, 1>* spares) {
    PooledEvent event = std::move(spares->back());
    spares->pop_back();
    return event;
  }

  // kIdle when every event of `block` completed (then they go back to the
  // EventPool), kPending while any is pending.
  Outcome QueryEvents(AllocationBlock* block) {
    for (PooledEvent& event : block->events) {
      absl::Status status = backend_.QueryEvent(block->device, event.get());
      if (status.ok()) continue;
      if (FaultOf(status) == Fault::kNotReady) return Outcome::kPending;
      return ReactToEventFault(block, status);
    }
    block->events.clear();
    return Outcome::kIdle;
  }

  // Blocks until every event of `block` completed.
  Outcome SynchronizeEvents(AllocationBlock* block) {
    for (PooledEvent& event : block->events) {
      absl::Status status =
          backend_.SynchronizeEvent(block->device, event.get());
      if (!status.ok()) return ReactToEventFault(block, status);
    }
    block->events.clear();
    return Outcome::kIdle;
  }

  // Makes `stream` wait on every event of `block` (no host sync). Falls
  // back to a query on backends without StreamWaitEvent.
  Outcome MakeStreamWait(AllocationBlock* block, NativeStream stream) {
    for (PooledEvent& event : block->events) {
      absl::Status status =
          backend_.StreamWaitEvent(block->device, stream, event.get());
      if (status.ok()) continue;
      if (status.code() == absl::StatusCode::kUnimplemented) {
        return QueryEvents(block);
      }
      Outcome outcome = ReactTo(block->device, status);
      return outcome == Outcome::kIdle ? Outcome::kPending : outcome;
    }
    block->events.clear();
    return Outcome::kIdle;
  }

  Outcome ReactToEventFault(AllocationBlock* block,
                            const absl::Status& status) {
    Outcome outcome = ReactTo(block->device, status);
    if (outcome == Outcome::kIdle) {
      // A bad event (kResource): the work it guarded cannot be observed any
      // more. Never reuse or free memory we cannot prove idle.
      for (PooledEvent& event : block->events) event.Discard();
      outcome = Outcome::kLeak;
    }
    block->events.clear();
    return outcome;
  }

  // Device faults poison the device, shutdown means leak; everything else is
  // left to the caller (kIdle).
  Outcome ReactTo(int device, const absl::Status& status) {
    switch (FaultOf(status)) {
      case Fault::kDevice:
        health_->Poison(device, status);
        return Outcome::kDrop;
      case Fault::kShutdown:
        return Outcome::kLeak;
      default:
        return Outcome::kIdle;
    }
  }

  // Backend::Allocate with the OOM chain: on kOutOfMemory, free the cached
  // blocks of this (device, kind) — idle ones first, then the pending ones
  // after waiting for their events — and retry once.
  absl::StatusOr<void*> RuntimeAllocate(AllocationShard& shard,
                                        size_t requested, size_t bytes) {
    const int device = shard.device();
    absl::StatusOr<void*> ptr = backend_.Allocate(device, bytes, shard.kind());
    if (ptr.ok()) {
      MutexLock lock(&shard.mu);
      ++shard.stats.runtime_allocations;
      return ptr;
    }
    if (FaultOf(ptr.status()) != Fault::kOutOfMemory) {
      return AllocationFailed(shard, ptr.status());
    }
    absl::StatusOr<MemoryInfo> info = backend_.GetMemoryInfo(device);
    if (!info.ok() && FaultOf(info.status()) == Fault::kDevice) {
      return AllocationFailed(shard, info.status());
    }
    if (shard.kind() == MemoryKind::kDevice && info.ok() &&
        bytes > info->total_bytes) {
      // Trimming cannot help: keep the cache warm.
      return AllocationFailed(
          shard, OutOfMemoryError(shard, requested, bytes, info, 0, false,
                                  ptr.status()));
    }
    const Released released =
        ReleaseCached(shard, static_cast<size_t>(-1), /*with_retiring=*/true);
    {
      MutexLock lock(&shard.mu);
      ++shard.stats.oom_retries;
    }
    if (health_->is_poisoned(device)) {
      return AllocationFailed(shard, PoisonedError(device));
    }
    ptr = backend_.Allocate(device, bytes, shard.kind());
    if (ptr.ok()) {
      MutexLock lock(&shard.mu);
      ++shard.stats.runtime_allocations;
      return ptr;
    }
    if (FaultOf(ptr.status()) != Fault::kOutOfMemory) {
      return AllocationFailed(shard, ptr.status());
    }
    info = backend_.GetMemoryInfo(device);
    return AllocationFailed(
        shard, OutOfMemoryError(shard, requested, bytes, info, released.bytes,
                                true, ptr.status()));
  }

  // Counts a failed allocation; a sticky device error poisons the device and
  // turns into FailedPrecondition naming it.
  absl::Status AllocationFailed(AllocationShard& shard, absl::Status status) {
    if (FaultOf(status) == Fault::kDevice) {
      health_->Poison(shard.device(), status);
      status = PoisonedError(shard.device());
    }
    MutexLock lock(&shard.mu);
    ++shard.stats.failed_allocations;
    return status;
  }

  absl::Status OutOfMemoryError(AllocationShard& shard, size_t requested,
                                size_t rounded,
                                const absl::StatusOr<MemoryInfo>& info,
                                size_t released, bool retried,
                                const absl::Status& runtime) {
    AllocationCacheStats stats = ShardStats(shard);
    std::string memory =
        info.ok() ? absl::StrFormat("device free %d bytes of %d bytes total",
                                    info->free_bytes, info->total_bytes)
                  : absl::StrCat("device free/total unknown (",
                                 info.status().ToString(), ")");
    return absl::ResourceExhaustedError(absl::StrFormat(
        "AllocationCache: out of %s memory on device %d: requested %d bytes, "
        "rounded to %d bytes; in use %d bytes (%d allocations), cached %d "
        "bytes; %s; %s; runtime: %s",
        MemoryKindName(shard.kind()), shard.device(), requested, rounded,
        stats.bytes_in_use + stats.bytes_stable, stats.allocations_in_use,
        stats.bytes_cached, memory,
        retried ? absl::StrFormat("retried once after freeing %d cached bytes",
                                  released)
                : std::string("larger than the device, not retried"),
        runtime.message()));
  }

  struct Released {
    size_t bytes = 0;
    absl::Status status;
  };

  // Takes cached blocks of `shard` (largest first) until at least `bytes`
  // are taken, plus the retiring ones, and frees them: those already idle
  // first, then the pending ones after waiting for their events.
  Released ReleaseCached(AllocationShard& shard, size_t bytes,
                         bool with_retiring) {
    std::vector<AllocationBlock*> blocks;
    std::vector<AllocationBlock*> stale;
    {
      MutexLock lock(&shard.mu);
      shard.TakeStaleLocked(health_->generation(shard.device()), &stale);
      if (bytes > 0) shard.TakeCachedLocked(bytes, &blocks);
      if (with_retiring) shard.TakeAllRetiringLocked(&blocks);
    }
    DeleteBlocks(stale);
    return ReleaseBlocks(shard, std::move(blocks));
  }

  Released ReleaseBlocks(AllocationShard& shard,
                         std::vector<AllocationBlock*> blocks) {
    Released released;
    std::vector<AllocationBlock*> pending;
    for (AllocationBlock* block : blocks) {
      if (health_->is_poisoned(block->device)) {
        // A dead context: no query, no free, ever.
        released.status.Update(Dispose(shard, block, Outcome::kDrop));
        continue;
      }
      Outcome outcome = QueryEvents(block);
      if (outcome == Outcome::kPending) {
        pending.push_back(block);
        continue;
      }
      released.bytes += block->size;
      released.status.Update(Dispose(shard, block, outcome));
    }
    for (AllocationBlock* block : pending) {
      released.bytes += block->size;
      // An earlier block's sticky fault may have poisoned the device since
      // the loop above: never wait on (or free) a dead context.
      const Outcome outcome = health_->is_poisoned(block->device)
                                  ? Outcome::kDrop
                                  : SynchronizeEvents(block);
      released.status.Update(Dispose(shard, block, outcome));
    }
    return released;
  }

  // Frees an idle block, or forgets it per `outcome`.
  absl::Status Dispose(AllocationShard& shard, AllocationBlock* block,
                       Outcome outcome) {
    if (outcome == Outcome::kIdle) return FreeBlock(shard, block);
    {
      MutexLock lock(&shard.mu);
      ++(outcome == Outcome::kDrop ? shard.stats.blocks_dropped
                                   : shard.stats.blocks_leaked);
    }
    delete block;
    return absl::OkStatus();
  }

  // Frees the memory of an idle block (no pending events) and its record.
  absl::Status FreeBlock(AllocationShard& shard, AllocationBlock* block) {
    absl::Status status;
    if (health_->is_poisoned(block->device) ||
        block->generation != health_->generation(block->device)) {
      MutexLock lock(&shard.mu);
      ++shard.stats.blocks_dropped;
    } else {
      status = FreeRaw(shard, block->ptr);
    }
    delete block;
    return status;
  }

  absl::Status FreeRaw(AllocationShard& shard, void* ptr) {
    if (health_->is_poisoned(shard.device())) {
      MutexLock lock(&shard.mu);
      ++shard.stats.blocks_dropped;
      return absl::OkStatus();
    }
    absl::Status status = backend_.Free(shard.device(), ptr, shard.kind());
    if (FaultOf(status) == Fault::kDevice) {
      health_->Poison(shard.device(), status);
    }
    MutexLock lock(&shard.mu);
    ++shard.stats.runtime_frees;
    return status;
  }

  // Retiring blocks wait for their events; check the oldest one now and then.
  void PollRetiring(AllocationShard& shard) {
    AllocationBlock* block = nullptr;
    {
      MutexLock lock(&shard.mu);
      if (!shard.has_retiring()) return;
      block = shard.TakeOldestRetiringLocked();
    }
    CheckRetiring(shard, block);
  }

  void CheckRetiring(AllocationShard& shard, AllocationBlock* block) {
    // A sticky fault since the block retired (e.g. the free Return made just
    // before polling it) leaves a dead context: drop it without a call.
    if (health_->is_poisoned(block->device) ||
        block->generation != health_->generation(block->device)) {
      Dispose(shard, block, Outcome::kDrop).IgnoreError();
      return;
    }
    Outcome outcome = QueryEvents(block);
    if (outcome == Outcome::kPending) {
      MutexLock lock(&shard.mu);
      shard.RestoreRetiringLocked(block);
      return;
    }
    Dispose(shard, block, outcome).IgnoreError();
  }

  // The stable buffer `name` of `shard`, once no other thread is
  // (re)allocating it. Entries are never erased, so the pointer stays valid.
  StableBuffer* LockedStableBuffer(AllocationShard& shard,
                                   absl::string_view name,
                                   std::vector<AllocationBlock*>* stale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    std::unique_ptr<StableBuffer>& slot = shard.stable[name];
    if (slot == nullptr) slot = std::make_unique<StableBuffer>();
    StableBuffer* buffer = slot.get();
    shard.mu.Await(absl::Condition(
        +[](StableBuffer* b) { return !b->busy; }, buffer));
    shard.TakeStaleLocked(health_->generation(shard.device()), stale);
    return buffer;
  }

  absl::StatusOr<void*> FinishStable(AllocationShard& shard,
                                     StableBuffer* buffer, void* old,
                                     size_t bytes, size_t capacity) {
    // The old buffer goes first: growing must not need both at once.
    if (old != nullptr) FreeRaw(shard, old).IgnoreError();
    const uint64_t generation = health_->generation(shard.device());
    absl::StatusOr<void*> ptr = health_->is_poisoned(shard.device())
                                    ? absl::StatusOr<void*>(AllocationFailed(
                                          shard, PoisonedError(shard.device())))
                                    : RuntimeAllocate(shard, bytes, capacity);
    MutexLock lock(&shard.mu);
    buffer->busy = false;
    if (!ptr.ok()) return ptr.status();
    buffer->ptr = *ptr;
    buffer->capacity = capacity;
    buffer->generation = generation;
    ++shard.stats.stable_allocations;
    shard.stats.bytes_stable += static_cast<int64_t>(capacity);
    if (old != nullptr) ++shard.stats.stable_reallocations;
    return ptr;
  }

  Backend& backend_;
  EventPool& events_;
  const AllocationCacheOptions options_;
  const uint64_t fork_epoch_;
  std::shared_ptr<DeviceHealth> health_;
  int device_count_ = 0;
  absl::Status device_count_status_;
  // Cached bytes per device over both kinds (the cap is per device).
  std::unique_ptr<std::atomic<size_t>[]> device_cached_bytes_;
  // device * kKindCount + KindIndex(kind); fixed after construction.
  std::vector<std::unique_ptr<AllocationShard>> shards_;
  std::atomic<bool> closed_{false};
};

}  // namespace internal

// ---------------------------------------------------------------------------
// PooledAllocation
// ---------------------------------------------------------------------------

PooledAllocation::PooledAllocation(
    std::shared_ptr<internal::AllocationCacheCore> core,
    internal::AllocationBlock* block)
    : core_(std::move(core)),
      block_(block),
      data_(block->ptr),
      size_(block->requested),
      capacity_(block->size),
      device_(block->device),
      kind_(block->kind),
      stream_(block->stream),
      lease_id_(block->lease_id) {}

PooledAllocation::PooledAllocation(PooledAllocation&& other) noexcept {
  *this = std::move(other);
}

PooledAllocation& PooledAllocation::operator=(
    PooledAllocation&& other) noexcept {
  if (this != &other) {
    Release();
    core_ = std::move(other.core_);
    block_ = std::exchange(other.block_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    device_ = std::exchange(other.device_, -1);
    kind_ = std::exchange(other.kind_, MemoryKind::kDevice);
    stream_ = std::exchange(other.stream_, nullptr);
    lease_id_ = std::exchange(other.lease_id_, 0);
  }
  return *this;
}

void PooledAllocation::RecordUse(NativeStream stream) {
  if (block_ == nullptr || stream == nullptr) return;
  auto& uses = block_->uses;
  if (std::find(uses.begin(), uses.end(), stream) == uses.end()) {
    uses.push_back(stream);
  }
}

void PooledAllocation::Release() {
  if (block_ == nullptr) return;
  std::shared_ptr<internal::AllocationCacheCore> core = std::move(core_);
  internal::AllocationBlock* block = std::exchange(block_, nullptr);
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
  device_ = -1;
  kind_ = MemoryKind::kDevice;
  stream_ = nullptr;
  lease_id_ = 0;
  core->Return(block);
}

// ---------------------------------------------------------------------------
// AllocationCache
// ---------------------------------------------------------------------------

AllocationCache::AllocationCache(Backend& backend, EventPool& events,
                                 AllocationCacheOptions options)
    : AllocationCache(backend, events, nullptr, options) {}

AllocationCache::AllocationCache(Backend& backend, EventPool& events,
                                 std::shared_ptr<DeviceHealth> health,
                                 AllocationCacheOptions options)
    : core_(std::make_shared<internal::AllocationCacheCore>(
          backend, events, std::move(health), options)) {
  // After DeviceCount() initialised the runtime (in the core), so that our
  // exit drain runs before the runtime's own atexit teardown.
  internal::InstallProcessHooks();
  internal::AllocationCacheCore* core = core_.get();
  exit_registration_ =
      internal::RegisterExitDrain([core] { core->DrainForExit(); });
}

AllocationCache::~AllocationCache() {
  internal::UnregisterExitDrain(exit_registration_);
  if (core_->Forked()) {
    // Leases may still hold the core; a child must neither free nor lock.
    new std::shared_ptr<internal::AllocationCacheCore>(  // NOLINT: leak
        std::move(core_));
    return;
  }
  core_->FreeEverything(/*close=*/true,
                        /*call_runtime=*/!internal::ProcessIsExiting());
}

absl::StatusOr<PooledAllocation> AllocationCache::Allocate(
    int device, size_t bytes, MemoryKind kind, NativeStream stream,
    SourceLocation where) {
  return core_->Allocate(device, bytes, kind, stream, where);
}

absl::StatusOr<void*> AllocationCache::AcquireStable(std::string_view name,
                                                     int device, size_t bytes) {
  return core_->AcquireStable(absl::string_view(name.data(), name.size()),
                              device, bytes);
}

absl::Status AllocationCache::ReleaseStable(std::string_view name, int device) {
  return core_->ReleaseStable(absl::string_view(name.data(), name.size()),
                              device);
}

absl::Status AllocationCache::Trim(int device, size_t keep_bytes) {
  return core_->Trim(device, keep_bytes);
}

absl::Status AllocationCache::Trim() { return core_->TrimAll(); }

AllocationCacheStats AllocationCache::GetStats() const {
  return core_->GetStats();
}

AllocationCacheStats AllocationCache::GetStats(int device) const {
  return core_->GetStats(device);
}

AllocationCacheStats AllocationCache::GetStats(int device,
                                               MemoryKind kind) const {
  return core_->GetStats(device, kind);
}

std::vector<OutstandingLease> AllocationCache::GetOutstandingLeases() const {
  return core_->GetOutstandingLeases();
}

std::string AllocationCache::DebugString() const {
  return core_->DebugString();
}

Backend& AllocationCache::backend() const { return core_->backend(); }

const std::shared_ptr<DeviceHealth>& AllocationCache::health() const {
  return core_->health();
}

const AllocationCacheOptions& AllocationCache::options() const {
  return core_->options();
}

size_t AllocationCache::RoundedSize(size_t bytes) {
  if (bytes > internal::kMaxSizeClassBytes) return bytes;
  return internal::RoundUpToSizeClass(bytes == 0 ? 1 : bytes);
}

}  // namespace gpupool
