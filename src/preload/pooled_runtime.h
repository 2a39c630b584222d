// PooledRuntime: the preload's engine for one runtime (HIP, the CUDA runtime
// or the CUDA driver). The exported wrappers (wrappers.h) turn each
// intercepted call into one of the calls below, passing the real call as a
// fallback; everything runtime-neutral lives here.
//
// What it guarantees, per the runtime's own contract:
//  * A create is served from the process's pools, keyed by the calling
//    thread's current device and the exact config asked (priority, flags,
//    CU mask), so the handle reports what was asked. Anything the pools
//    cannot serve exactly (unknown flag bits, interprocess events, a priority
//    the runtime would clamp, a forked child, an exiting process, an
//    uninitialised or absent runtime) goes to the real call unchanged.
//  * A destroy of a handle the preload handed out returns it to its pool;
//    any other handle goes straight to the real destroy. With
//    `destroy_waits_for_work` (HIP), the stream is synchronized first, so the
//    destroy returns once its work is done, as hipStreamDestroy does; without
//    it (CUDA), the destroy returns at once and the pool keeps the stream on
//    its draining list until the work completes.
//  * A device reset drops the device's pooled handles without a runtime
//    call (a new device generation, gpupool's RecoverDevice path), before
//    the real reset runs: no invalidated handle is ever handed out.
//  * Inside gpupool's own runtime calls (runtime_call_guard.h) every call is
//    the real one.
//
// Thread safety: every method is safe to call concurrently.

#ifndef GPUPOOL_SRC_PRELOAD_POOLED_RUNTIME_H_
#define GPUPOOL_SRC_PRELOAD_POOLED_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/config.h"
#include "gpupool/event_pool.h"
#include "gpupool/pools.h"
#include "gpupool/stream_pool.h"
#include "src/lifetime/fork_safe_mutex.h"
#include "src/preload/real_symbols.h"

namespace gpupool::preload_internal {

// Builds a backend over the real runtime whose entry points `lookup`
// returns; `source` names that runtime's library in messages.
using BackendFactory = absl::StatusOr<std::unique_ptr<Backend>> (*)(
    absl::string_view source,
    absl::FunctionRef<void*(const char* name)> lookup);

struct RuntimeDescription {
  Runtime runtime;
  const char* name;     // "hip", "cuda", "cu": messages and stats
  const char* library;  // "HIP runtime", "CUDA runtime", "CUDA driver"
  BackendFactory make_backend;
  bool destroy_waits_for_work;
};

// The counters GPUPOOL_STATS=1 prints.
struct PreloadCounters {
  std::atomic<int64_t> stream_creates{0};   // creates intercepted
  std::atomic<int64_t> stream_pooled{0};    // of them, served by a pool
  std::atomic<int64_t> stream_destroys{0};  // pooled handles returned
  std::atomic<int64_t> event_creates{0};
  std::atomic<int64_t> event_pooled{0};
  std::atomic<int64_t> event_destroys{0};
  std::atomic<int64_t> device_resets{0};
};

class PooledRuntime {
 public:
  // The result of a call the wrapper returns to the program: the runtime's
  // error number (0 is success in every runtime).
  using RealCall = absl::FunctionRef<int()>;

  explicit PooledRuntime(const RuntimeDescription& description);
  PooledRuntime(const PooledRuntime&) = delete;
  PooledRuntime& operator=(const PooledRuntime&) = delete;

  // A stream of `config` on the current device into *stream, or real().
  int CreateStream(void** stream, const StreamConfig& config, RealCall real);
  // Returns a stream the preload handed out to its pool, or real().
  int DestroyStream(void* stream, RealCall real);

  int CreateEvent(void** event, const EventConfig& config, RealCall real);
  int DestroyEvent(void* event, RealCall real);

  // The program is resetting `device` (-1: the current device): drops its
  // pooled handles, then real().
  int ResetDevice(int device, RealCall real);

  // The pools, built on first use; null when this runtime is not pooled:
  // switched off (the reason is printed with GPUPOOL_STATS=1), or a runtime
  // the preload cannot use (one line on stderr, once, naming the runtime's
  // library and what it lacks, whatever GPUPOOL_STATS says).
  Pools* pools();

  const RuntimeDescription& description() const { return description_; }
  const PreloadCounters& counters() const { return counters_; }
  // One paragraph for GPUPOOL_STATS=1; empty when nothing was intercepted.
  std::string StatsReport();

 private:
  template <typename Lease>
  class LeaseMap;

  bool Initialize();
  bool CurrentDevice(int* device);

  const RuntimeDescription description_;
  PreloadConfig switches_;
  PreloadCounters counters_;
  // Set once by Initialize (never destroyed: a lease may be returned from a
  // static destructor or an atexit handler).
  std::atomic<int> state_{kUninitialized};
  Pools* pools_ = nullptr;
  std::string unavailable_reason_;
  ForkSafeMutex init_mu_;
  LeaseMap<PooledStream>* streams_;
  LeaseMap<PooledEvent>* events_;

  static constexpr int kUninitialized = 0;
  static constexpr int kReady = 1;
  static constexpr int kOff = 2;
};

}  // namespace gpupool::preload_internal

#endif  // GPUPOOL_SRC_PRELOAD_POOLED_RUNTIME_H_
