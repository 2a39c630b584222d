// gpupool/pools.h — the process-lifetime bundle of pools over one backend.
//
// `Pools` owns a backend and the stream pool, event pool and allocation cache
// over it, sharing one DeviceHealth so a sticky error seen by any of them
// poisons the device for all. `ProcessPools()` returns the process-wide
// bundle, created on first use and never destroyed by a static destructor:
//
//   * backend: env GPUPOOL_BACKEND=cuda|hip|sim; by default the first runtime
//     backend that reports a device. With none, an error — never a silent
//     fallback to the simulator.
//   * exit: an atexit hook registered after the runtime was initialised
//     destroys idle resources while the runtime is alive and then sets an
//     exiting flag; afterwards every release leaks instead of calling it.
//   * fork: in a child process every pool inherited from the parent is marked
//     forked: inherited handles are leaked, acquires fail fast with
//     FailedPrecondition, and no lock is taken (a lock held by another parent
//     thread at fork time cannot deadlock the child).
//
// Thread safety: all methods are thread-safe.

#ifndef GPUPOOL_POOLS_H_
#define GPUPOOL_POOLS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "gpupool/export.h"
#include "gpupool/pool_options.h"
#include "gpupool/stable_buffers.h"
#include "gpupool/stream_pool.h"

namespace gpupool {

struct GPUPOOL_EXPORT PoolsOptions {
  StreamPoolOptions streams;
  EventPoolOptions events;
  AllocationCacheOptions allocations;
};

class GPUPOOL_EXPORT Pools {
 public:
  // Takes ownership of `backend`. InvalidArgument when null; the backend's
  // status when it reports no usable device.
  static absl::StatusOr<std::unique_ptr<Pools>> Create(
      std::unique_ptr<Backend> backend, PoolsOptions options = {});
  ~Pools();
  Pools(const Pools&) = delete;
  Pools& operator=(const Pools&) = delete;

  Backend& backend() { return *backend_; }
  StreamPool& streams() { return *streams_; }
  EventPool& events() { return *events_; }
  AllocationCache& allocations() { return *allocations_; }
  const StreamPool& streams() const { return *streams_; }
  const EventPool& events() const { return *events_; }
  const AllocationCache& allocations() const { return *allocations_; }
  // Named buffers that never move, and IPC, over allocations().
  StableBuffers& stable_buffers() { return *stable_buffers_; }
  const std::shared_ptr<DeviceHealth>& health() const { return health_; }

  // Leases and allocations the user still holds in every pool, with acquire
  // sites (leases gpupool holds itself, SourceLocation::Internal(), are not
  // listed).
  std::vector<OutstandingLease> GetOutstandingLeases() const;

  // After the user reset a poisoned device: a new generation for every pool.
  absl::Status RecoverDevice(int device);
  // Destroys idle resources of every pool and frees cached memory.
  void Trim();
  std::string DebugString() const;

 private:
  Pools(std::unique_ptr<Backend> backend, std::shared_ptr<DeviceHealth> health,
        const PoolsOptions& options);
  // Declared first: destroyed last, after the pools that call it.
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<DeviceHealth> health_;
  std::unique_ptr<StreamPool> streams_;
  std::unique_ptr<EventPool> events_;
  // Declared last: destroyed first, while the event pool it records on lives.
  std::unique_ptr<AllocationCache> allocations_;
  std::unique_ptr<StableBuffers> stable_buffers_;
};

// The process-wide bundle (see above). The pointer lives until the process
// ends. Errors: InvalidArgument for an unknown GPUPOOL_BACKEND; the chosen
// backend's status (e.g. Unavailable "no CUDA device") when unusable; NotFound
// when no runtime backend reports a device and GPUPOOL_BACKEND is unset.
GPUPOOL_EXPORT absl::StatusOr<Pools*> ProcessPools();

}  // namespace gpupool

#endif  // GPUPOOL_POOLS_H_
