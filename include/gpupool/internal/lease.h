// gpupool/internal/lease.h — the move-only lease shared by PooledStream and
// PooledEvent. Internal: users hold the typed wrappers, never this.

#ifndef GPUPOOL_INTERNAL_LEASE_H_
#define GPUPOOL_INTERNAL_LEASE_H_

#include <cstdint>
#include <utility>

#include "gpupool/export.h"

namespace gpupool::internal {

// How a lease comes back to its owner. kCheck and kDiscard keep the values
// of the bool this replaced (false, true), so that a program built against
// the earlier header still returns its leases correctly.
enum class ReturnAs : uint8_t {
  // The usual return: the owner validates the handle before reusing it.
  kCheck = 0,
  // The caller knows the handle is bad: the owner destroys it.
  kDiscard = 1,
  // An event whose last record the caller saw complete (a query or a
  // synchronize that succeeded), with nothing recorded on it since: the
  // owner keeps it without its validating query. Streams are checked as
  // usual.
  kKnownIdle,
};

// Where a lease goes back to: one shard of a pool or cache. The owner keeps
// itself alive for its leases: it lives until the Return of every lease it
// handed out has returned, even past its pool's destruction, so a late
// release is defined. A lease holds a plain pointer and writes no shared
// reference count: the owner counts its leases where it already writes
// (a keyed shard, under the lock its acquire and return take anyway).
class GPUPOOL_EXPORT LeaseOwner {
 public:
  // Takes the handle back; the lease's last touch of the owner, which may
  // delete itself before returning. `site` is the owner's own bookkeeping
  // slot (the value it gave the lease).
  virtual void Return(void* handle, uint64_t lease_id, uint32_t site,
                      uint64_t generation, ReturnAs how) = 0;
  virtual int device() const = 0;
  // Points at the shard's StreamConfig or EventConfig.
  virtual const void* config() const = 0;

 protected:
  // Deleted by itself only (see Return), never through a lease.
  virtual ~LeaseOwner() = default;
};

class GPUPOOL_EXPORT Lease {
 public:
  Lease() = default;
  Lease(LeaseOwner* owner, void* handle, uint64_t lease_id, uint32_t site,
        uint64_t generation)
      : owner_(owner),
        handle_(handle),
        lease_id_(lease_id),
        generation_(generation),
        site_(site) {}
  Lease(Lease&& other) noexcept
      : owner_(std::exchange(other.owner_, nullptr)),
        handle_(std::exchange(other.handle_, nullptr)),
        lease_id_(std::exchange(other.lease_id_, 0)),
        generation_(std::exchange(other.generation_, 0)),
        site_(std::exchange(other.site_, 0)) {}
  Lease& operator=(Lease&& other) noexcept {
    if (this != &other) {
      Release();
      owner_ = std::exchange(other.owner_, nullptr);
      handle_ = std::exchange(other.handle_, nullptr);
      lease_id_ = std::exchange(other.lease_id_, 0);
      generation_ = std::exchange(other.generation_, 0);
      site_ = std::exchange(other.site_, 0);
    }
    return *this;
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { Release(); }

  void* handle() const { return handle_; }
  int device() const { return owner_ ? owner_->device() : -1; }
  const void* config() const { return owner_ ? owner_->config() : nullptr; }
  uint64_t lease_id() const { return lease_id_; }
  uint64_t generation() const { return generation_; }
  explicit operator bool() const { return owner_ != nullptr; }

  void Release() { Finish(ReturnAs::kCheck); }
  void Discard() { Finish(ReturnAs::kDiscard); }
  void ReleaseKnownIdle() { Finish(ReturnAs::kKnownIdle); }

 private:
  void Finish(ReturnAs how) {
    if (owner_ == nullptr) return;
    // Emptied first: the owner may be gone once Return returns.
    LeaseOwner* const owner = std::exchange(owner_, nullptr);
    owner->Return(std::exchange(handle_, nullptr), std::exchange(lease_id_, 0),
                  std::exchange(site_, 0), std::exchange(generation_, 0), how);
  }

  LeaseOwner* owner_ = nullptr;
  void* handle_ = nullptr;
  uint64_t lease_id_ = 0;
  uint64_t generation_ = 0;
  uint32_t site_ = 0;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_INTERNAL_LEASE_H_
