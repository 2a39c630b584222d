// The stable buffers' entries of an allocation shard: stable_entries.h.

#include "src/allocation/stable_entries.h"

namespace gpupool::internal {

StableBuffer* StableEntries::Entry(absl::string_view name) {
  std::unique_ptr<StableBuffer>& entry = entries_[name];
  if (entry == nullptr) entry = std::make_unique<StableBuffer>();
  return entry.get();
}

void* StableEntries::Take(StableBuffer* buffer) {
  void* ptr = buffer->ptr;
  if (ptr != nullptr) {
    --allocations_;
    bytes_ -= static_cast<int64_t>(buffer->capacity);
  }
  buffer->ptr = nullptr;
  buffer->capacity = 0;
  return ptr;
}

void* StableEntries::Replace(StableBuffer* buffer, void* ptr, size_t capacity,
                             uint64_t generation) {
  void* old = Take(buffer);
  buffer->ptr = ptr;
  buffer->capacity = capacity;
  buffer->generation = generation;
  ++allocations_;
  bytes_ += static_cast<int64_t>(capacity);
  if (old != nullptr) ++reallocations_;
  return old;
}

void StableEntries::AddTo(AllocationCacheStats* stats) const {
  stats->stable_allocations = allocations_;
  stats->bytes_stable = bytes_;
  stats->stable_reallocations = reallocations_;
}

}  // namespace gpupool::internal
