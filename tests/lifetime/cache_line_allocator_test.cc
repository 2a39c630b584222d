// CacheLineAllocator: every block starts on a cache line and owns whole
// lines, so containers made one after the other never share a line.

#include "src/lifetime/cache_line_allocator.h"

#include <cstdint>
#include <deque>
#include <vector>

#include "gtest/gtest.h"

namespace gpupool::internal {
namespace {

struct Entry {
  void* handle = nullptr;
  uint64_t generation = 0;
};

uintptr_t Address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(CacheLineAllocatorTest, BlocksStartOnALine) {
  CacheLineAllocator<Entry> allocator;
  for (size_t n : {1, 3, 4, 5, 17}) {
    Entry* block = allocator.allocate(n);
    EXPECT_EQ(Address(block) % kCacheLine, 0u) << n << " entries";
    allocator.deallocate(block, n);
  }
}

TEST(CacheLineAllocatorTest, SmallNeighboursNeverShareALine) {
  // What the default allocator does for two shards built in turn: two small
  // blocks one after the other. Here each owns its own lines.
  std::vector<std::vector<Entry, CacheLineAllocator<Entry>>> lists(8);
  for (auto& list : lists) list.resize(1);
  for (size_t i = 0; i < lists.size(); ++i) {
    const uintptr_t begin = Address(lists[i].data()) / kCacheLine;
    const uintptr_t last =
        (Address(lists[i].data() + lists[i].size()) - 1) / kCacheLine;
    for (size_t j = 0; j < lists.size(); ++j) {
      if (i == j) continue;
      const uintptr_t other = Address(lists[j].data()) / kCacheLine;
      EXPECT_TRUE(other < begin || other > last)
          << "lists " << i << " and " << j << " share a cache line";
    }
  }
}

TEST(CacheLineAllocatorTest, WorksForVectorsAndDeques) {
  std::vector<Entry, CacheLineAllocator<Entry>> idle;
  std::deque<Entry, CacheLineAllocator<Entry>> draining;
  for (uintptr_t i = 1; i <= 1000; ++i) {
    idle.push_back(Entry{reinterpret_cast<void*>(i), i});
    draining.push_back(Entry{reinterpret_cast<void*>(i), i});
  }
  EXPECT_EQ(Address(idle.data()) % kCacheLine, 0u);
  uint64_t sum = 0;
  for (const Entry& e : idle) sum += e.generation;
  for (const Entry& e : draining) sum += e.generation;
  EXPECT_EQ(sum, 2 * 500500u);
  idle.clear();
  idle.shrink_to_fit();
  draining.clear();
  EXPECT_TRUE(idle.empty());
  EXPECT_TRUE(draining.empty());
}

}  // namespace
}  // namespace gpupool::internal
