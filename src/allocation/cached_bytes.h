// The bytes a device's allocation shards keep cached, counted against the
// cache's max_cached_bytes (a cap per device, over the shards of both memory
// kinds). Lock-free: the other kind's shard updates the same count under its
// own lock, and a release into a release slot under none.

#ifndef GPUPOOL_SRC_ALLOCATION_CACHED_BYTES_H_
#define GPUPOOL_SRC_ALLOCATION_CACHED_BYTES_H_

#include <atomic>
#include <cstddef>
#include <limits>

namespace gpupool::internal {

class CachedBytes {
 public:
  // `device_bytes` is the device's count; it must outlive this.
  CachedBytes(size_t max_bytes, std::atomic<size_t>* device_bytes)
      : max_bytes_(max_bytes), device_bytes_(device_bytes) {}
  CachedBytes(const CachedBytes&) = delete;
  CachedBytes& operator=(const CachedBytes&) = delete;

  // Whether Reserve can refuse (a capped cache).
  bool capped() const {
    return max_bytes_ != std::numeric_limits<size_t>::max();
  }
  // Counts `bytes` when the cap has room for them; false, nothing counted,
  // when it has not.
  bool Reserve(size_t bytes) {
    size_t cached = device_bytes_->load(std::memory_order_relaxed);
    do {
      if (bytes > max_bytes_ || cached > max_bytes_ - bytes) return false;
    } while (!device_bytes_->compare_exchange_weak(cached, cached + bytes,
                                                   std::memory_order_relaxed));
    return true;
  }
  // Counts `bytes` whatever the cap (part of a segment cannot go back to the
  // runtime, so it stays cached; an uncapped count cannot fail).
  void Add(size_t bytes) {
    device_bytes_->fetch_add(bytes, std::memory_order_relaxed);
  }
  void Remove(size_t bytes) {
    device_bytes_->fetch_sub(bytes, std::memory_order_relaxed);
  }

 private:
  const size_t max_bytes_;
  std::atomic<size_t>* const device_bytes_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_CACHED_BYTES_H_
