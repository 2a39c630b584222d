// An allocation shard's stable buffers (AcquireStable) by name, with their
// gauges. The shard's lock guards them: every method is called holding it.
// Entries are never erased, so that a thread waiting for a busy entry
// (AllocationShard::ClaimStable) holds a pointer that stays valid.

#ifndef GPUPOOL_SRC_ALLOCATION_STABLE_ENTRIES_H_
#define GPUPOOL_SRC_ALLOCATION_STABLE_ENTRIES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "gpupool/allocation_cache.h"

namespace gpupool::internal {

// A buffer of AcquireStable. `busy` while one thread (re)allocates it
// outside the lock; others wait for it.
struct StableBuffer {
  void* ptr = nullptr;
  size_t capacity = 0;
  uint64_t generation = 0;
  bool busy = false;
};

class StableEntries {
 public:
  StableEntries() = default;
  StableEntries(const StableEntries&) = delete;
  StableEntries& operator=(const StableEntries&) = delete;

  // The entry of `name`, made (empty) when there is none.
  StableBuffer* Entry(absl::string_view name);
  // Empties `buffer`; returns its memory (nullptr: none).
  void* Take(StableBuffer* buffer);
  // Puts `ptr` (of `capacity` bytes, allocated in `generation`) in
  // `buffer`; returns the memory it replaced (nullptr: none), counted as a
  // reallocation.
  void* Replace(StableBuffer* buffer, void* ptr, size_t capacity,
                uint64_t generation);
  // The stable gauges and counter (stable_allocations, bytes_stable,
  // stable_reallocations) into `stats`.
  void AddTo(AllocationCacheStats* stats) const;

  // `visit(name, buffer)` for every entry, empty and busy ones included.
  template <typename Visit>
  void ForEach(Visit visit) const {
    for (const auto& [name, buffer] : entries_) visit(name, *buffer);
  }
  // Empties every entry that holds memory, is not busy and for which
  // `take(buffer)` holds; its memory is appended to `out` when given.
  // Returns how many were emptied.
  template <typename Predicate>
  int64_t TakeIf(Predicate take, std::vector<void*>* out = nullptr) {
    int64_t taken = 0;
    for (auto& [name, buffer] : entries_) {
      if (buffer->ptr == nullptr || buffer->busy || !take(*buffer)) continue;
      void* ptr = Take(buffer.get());
      if (out != nullptr) out->push_back(ptr);
      ++taken;
    }
    return taken;
  }

 private:
  // unique_ptr: a waiter's pointer survives a rehash.
  absl::flat_hash_map<std::string, std::unique_ptr<StableBuffer>> entries_;
  int64_t allocations_ = 0;  // entries holding memory
  int64_t bytes_ = 0;        // their capacities
  int64_t reallocations_ = 0;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_STABLE_ENTRIES_H_
