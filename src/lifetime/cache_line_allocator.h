// An allocator whose blocks own whole cache lines: aligned to a line and
// rounded up to a multiple of it.
//
// Why: a shard's small containers (its idle list, its lease-site table) are
// written on every acquire and return. Shards are usually made one after the
// other by one thread (a client prewarming each device in turn), so with the
// default allocator the containers of two devices' shards sit next to each
// other on the heap, often in the same cache line. Two threads driving two
// devices then write one line from two cores, and every pool operation
// waits for that line to move: the pools stop scaling with threads although
// no lock is shared. Blocks from this allocator share a line with nothing.

#ifndef GPUPOOL_SRC_LIFETIME_CACHE_LINE_ALLOCATOR_H_
#define GPUPOOL_SRC_LIFETIME_CACHE_LINE_ALLOCATOR_H_

#include <cstddef>
#include <new>

namespace gpupool::internal {

// The line size the pools pad to (x86-64 and most ARM server cores).
inline constexpr size_t kCacheLine = 64;

template <typename T>
class CacheLineAllocator {
 public:
  using value_type = T;

  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: rebind

  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(Bytes(n), kAlignment));
  }
  // Unsized: the sized aligned form needs -fsized-deallocation under clang.
  void deallocate(T* p, size_t /*n*/) { ::operator delete(p, kAlignment); }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const {
    return false;
  }

 private:
  static constexpr std::align_val_t kAlignment{
      kCacheLine > alignof(T) ? kCacheLine : alignof(T)};

  static size_t Bytes(size_t n) {
    const size_t bytes = n * sizeof(T);
    return (bytes + kCacheLine - 1) / kCacheLine * kCacheLine;
  }
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_LIFETIME_CACHE_LINE_ALLOCATOR_H_
