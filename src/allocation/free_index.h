// The index over a shard's free (cached) blocks: segregated fit after TLSF
// (two-level segregated fit). Size classes (size_classes.h) are the two
// levels — a power of two, then four sub-bins — and a two-level bitmap of the
// non-empty classes finds the smallest class at or above a request's in O(1)
// (a few word operations, independent of the number of blocks). A free block
// is listed under the largest class not above its size, so every block of a
// class at or above the request's class fits the request ("good fit").
//
// Per class a free block is in one of two lists:
//   ready    no pending work anywhere: any request may take it (LIFO);
//   pending  events recorded at release may still be pending (FIFO by release
//            time, so the oldest — likeliest complete — is checked first).
// A pending block whose events were all recorded on one stream is also in
// that stream's own classes (LIFO), so a request on that stream takes it in
// O(1) without any check.
//
// Not thread-safe: the owning shard guards it with its lock.

#ifndef GPUPOOL_SRC_ALLOCATION_FREE_INDEX_H_
#define GPUPOOL_SRC_ALLOCATION_FREE_INDEX_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpupool/backend.h"
#include "src/allocation/block.h"
#include "src/allocation/size_classes.h"

namespace gpupool::internal {

// One bit per size class, with a summary word of the non-empty words: the
// first set class at or above a given one is found in O(1).
class ClassBitmap {
 public:
  // Classes 0..kMaxClasses-1 (size_classes.h defines at most ~215).
  static constexpr int kWords = 4;
  static constexpr int kMaxClasses = kWords * 64;

  void Set(int size_class);
  void Clear(int size_class);
  bool empty() const { return summary_ == 0; }
  // The smallest set class >= `size_class`, or -1.
  int FindAtOrAbove(int size_class) const;

 private:
  std::array<uint64_t, kWords> words_{};
  uint64_t summary_ = 0;
};

// Inline: every lease and release of a cached block sets or clears a bit.
inline int LowestBit(uint64_t word) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_ctzll(word);
#else
  int bit = 0;
  while ((word & 1) == 0) {
    word >>= 1;
    ++bit;
  }
  return bit;
#endif
}

inline void ClassBitmap::Set(int size_class) {
  const int word = size_class / 64;
  words_[word] |= uint64_t{1} << (size_class % 64);
  summary_ |= uint64_t{1} << word;
}

inline void ClassBitmap::Clear(int size_class) {
  const int word = size_class / 64;
  words_[word] &= ~(uint64_t{1} << (size_class % 64));
  if (words_[word] == 0) summary_ &= ~(uint64_t{1} << word);
}

inline int ClassBitmap::FindAtOrAbove(int size_class) const {
  if (size_class < 0) size_class = 0;
  if (size_class >= kMaxClasses) return -1;
  // First level: the word of `size_class`, masked below it.
  int word = size_class / 64;
  const uint64_t here = words_[word] & (~uint64_t{0} << (size_class % 64));
  if (here != 0) return word * 64 + LowestBit(here);
  // Second level: the next non-empty word from the summary.
  const uint64_t above =
      word + 1 < kWords ? summary_ & (~uint64_t{0} << (word + 1)) : 0;
  if (above == 0) return -1;
  word = LowestBit(above);
  return word * 64 + LowestBit(words_[word]);
}

class FreeIndex {
 public:
  // `max_split_ratio`: the split policy (segment.h, ServingOrNull).
  FreeIndex(int size_class_count, size_t max_split_ratio);
  FreeIndex(const FreeIndex&) = delete;
  FreeIndex& operator=(const FreeIndex&) = delete;

  int size_class_count() const { return static_cast<int>(bins_.size()); }
  size_t max_split_ratio() const { return max_split_ratio_; }
  // Whether no block is listed.
  bool empty() const {
    return ready_classes_.empty() && pending_classes_.empty();
  }

  // Lists `block` under its size_class (FloorSizeClass of its size, kept so
  // by whoever sizes a block): ready when it has
  // no events, else pending, and in its stream's classes when
  // `release_stream` is set. `oldest`: as the oldest pending block (a
  // checked candidate put back).
  void Insert(AllocationBlock* block, bool oldest = false);
  // Unlists a listed block.
  void Remove(AllocationBlock* block);

  // Each Find returns a listed block of at least `bytes` (still listed), or
  // nullptr: the head of the list of the class `bytes` falls in when that
  // block is large enough (a block of exactly a size asked for before is
  // found there), else the head of the smallest non-empty class whose every
  // block fits.
  //
  // The newest block pending on `stream` alone.
  AllocationBlock* FindSameStream(size_t bytes, NativeStream stream) const;
  // The newest ready block.
  AllocationBlock* FindReady(size_t bytes) const;
  // The oldest pending block.
  AllocationBlock* FindOldestPending(size_t bytes) const;
  // The best fit for a request on `stream` (nullptr: none) under the
  // bounded remainder policy (segment.h): the smallest of the blocks Find
  // gives pending on `stream` alone, ready, and the oldest pending one —
  // the last only when `with_pending` or when it is pending on `stream`
  // alone (a block of another stream is checked before use: see
  // UsableAtOnce). Ties go to `stream`'s own block, then the ready one; a
  // block of `stream` of the class asked for is taken without looking
  // further (nothing fits better: the same-stream hit). At most three
  // bitmap searches and one hash lookup.
  AllocationBlock* FindBestFit(size_t bytes, NativeStream stream,
                               bool with_pending) const;
  // Whether a request on `stream` may take the listed `block` without a
  // check: ready, or pending on `stream` alone.
  static bool UsableAtOnce(const AllocationBlock* block, NativeStream stream) {
    return block->events.empty() ||
           (stream != nullptr && block->release_stream == stream);
  }

  // The smallest listed whole segment (segment.h) of at least `bytes`, or
  // nullptr. O(listed blocks) at worst: for the out-of-memory path only.
  AllocationBlock* SmallestWholeOf(size_t bytes);

  // Every listed block and whether it is pending, in no particular order
  // (for snapshots; the caller holds the shard's lock).
  template <typename Visit>
  void ForEachListed(Visit visit) const {
    for (const Bin& bin : bins_) {
      for (const AllocationBlock* block = bin.ready.front(); block != nullptr;
           block = PrimaryList::Next(block)) {
        visit(*block, /*pending=*/false);
      }
      for (const AllocationBlock* block = bin.pending.front(); block != nullptr;
           block = PrimaryList::Next(block)) {
        visit(*block, /*pending=*/true);
      }
    }
  }

  // Every listed block, largest class first, ready before pending within a
  // class (the order Trim frees in). Stop early by returning false from
  // `visit`; `visit` may Remove the block it is given.
  template <typename Visit>
  void ForEachLargestFirst(Visit visit) {
    for (size_t i = bins_.size(); i-- > 0;) {
      for (PrimaryList* list : {&bins_[i].ready, &bins_[i].pending}) {
        for (AllocationBlock* block = list->front(); block != nullptr;) {
          AllocationBlock* next = PrimaryList::Next(block);
          if (!visit(block)) return;
          block = next;
        }
      }
    }
  }

 private:
  struct Bin {
    PrimaryList ready;
    PrimaryList pending;
  };
  struct StreamBins {
    ClassBitmap classes;
    std::vector<StreamList> lists;
  };
  // Empty per-stream entries are kept (a same-stream cycle would otherwise
  // allocate one per release) until there are more than this many streams.
  static constexpr size_t kMaxIdleStreams = 64;

  void SweepIdleStreams();
  // The entry of `stream`, or nullptr: the last one looked up answers
  // without hashing (a same-stream cycle looks up one stream twice).
  StreamBins* StreamEntry(NativeStream stream) const {
    if (stream == memo_stream_ && stream != nullptr) return memo_entry_;
    return LookUpStream(stream);
  }
  StreamBins* LookUpStream(NativeStream stream) const;
  // Find's search over lists indexed by class: `head(c)` is the head of the
  // list of class c (nullptr when empty).
  // The classes Find searches for `bytes`: the one it falls in, and the
  // first whose every block fits.
  struct Classes {
    explicit Classes(size_t bytes)
        : fits(SizeClassIndex(bytes)),
          floor(bytes < kMinSizeClassBytes || SizeClassBytes(fits) == bytes
                    ? fits
                    : fits - 1) {}
    int fits;
    int floor;
  };
  template <typename Head>
  AllocationBlock* Find(size_t bytes, Classes classes,
                        const ClassBitmap& non_empty, Head head) const;
  AllocationBlock* FindSameStream(size_t bytes, Classes classes,
                                  NativeStream stream) const;
  AllocationBlock* FindReady(size_t bytes, Classes classes) const;
  AllocationBlock* FindOldestPending(size_t bytes, Classes classes) const;

  const size_t max_split_ratio_;
  std::vector<Bin> bins_;
  ClassBitmap ready_classes_;
  ClassBitmap pending_classes_;
  // unique_ptr: a listed block points at its stream's entry.
  absl::flat_hash_map<NativeStream, std::unique_ptr<StreamBins>> by_stream_;
  // StreamEntry's memo; an entry lives until SweepIdleStreams, which clears
  // it. Mutable: a lookup from a const search fills it (callers hold the
  // shard's lock, as for every other member).
  mutable NativeStream memo_stream_ = nullptr;
  mutable StreamBins* memo_entry_ = nullptr;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_FREE_INDEX_H_
