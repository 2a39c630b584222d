// Size classes of the allocation cache: geometric bins with four sub-bins per
// power of two above a 512-byte minimum class.
//
//   class 0                 512 bytes (every request of 1..512 bytes)
//   classes 1..4            640, 768, 896, 1024
//   classes 5..8            1280, 1536, 1792, 2048
//   ...                     (2^b) * {5/4, 6/4, 7/4, 8/4} for b = 9, 10, ...
//
// Worst-case waste: a request of n > 512 bytes lands in (2^b, 2^(b+1)] and is
// rounded up to the next multiple of 2^(b-2), so the rounding adds at most
// 2^(b-2) - 1 bytes, which is strictly less than n / 4. Hence
//   rounded < 1.25 * n           (waste < 25% of the request), and
//   rounded - n < rounded / 5    (waste < 20% of the block).
// Requests of at most 512 bytes round to 512 (less than 512 bytes of waste).
//
// Lookup is O(1): one count-leading-zeros and a few shifts. Every class size
// is a multiple of 128 bytes.

#ifndef GPUPOOL_SRC_ALLOCATION_SIZE_CLASSES_H_
#define GPUPOOL_SRC_ALLOCATION_SIZE_CLASSES_H_

#include <cstddef>
#include <cstdint>

namespace gpupool::internal {

inline constexpr size_t kMinSizeClassBytes = 512;
inline constexpr int kMinSizeClassLog2 = 9;
// Sub-bins per power of two: 4 = 2 bits of mantissa.
inline constexpr int kSizeClassSubBinBits = 2;
inline constexpr int kSizeClassSubBins = 1 << kSizeClassSubBinBits;
// Largest size the classes are defined for (no overflow in the rounding).
inline constexpr size_t kMaxSizeClassBytes = size_t{1} << 62;

// floor(log2(value)) for value > 0.
inline int FloorLog2(uint64_t value) {
#if defined(__GNUC__) || defined(__clang__)
  return 63 - __builtin_clzll(value);
#else
  int log = 0;
  while (value >>= 1) ++log;
  return log;
#endif
}

// Index of the size class holding `bytes`, for 1 <= bytes <=
// kMaxSizeClassBytes. Classes are dense: 0, 1, 2, ...
inline int SizeClassIndex(size_t bytes) {
  if (bytes <= kMinSizeClassBytes) return 0;
  // bytes lies in (2^b, 2^(b+1)], i.e. bytes - 1 in [2^b, 2^(b+1)).
  const int b = FloorLog2(static_cast<uint64_t>(bytes - 1));
  const int shift = b - kSizeClassSubBinBits;
  // Mantissa of the rounded-up size in [kSizeClassSubBins, 2 *
  // kSizeClassSubBins): the top bits of (bytes - 1) with the rest rounded up.
  const int mantissa = static_cast<int>((bytes - 1) >> shift);
  return 1 + (b - kMinSizeClassLog2) * kSizeClassSubBins +
         (mantissa - kSizeClassSubBins);
}

// Bytes of size class `index` (the inverse of SizeClassIndex).
inline size_t SizeClassBytes(int index) {
  if (index <= 0) return kMinSizeClassBytes;
  const int b = kMinSizeClassLog2 + (index - 1) / kSizeClassSubBins;
  const size_t mantissa = kSizeClassSubBins + (index - 1) % kSizeClassSubBins;
  return (mantissa + 1) << (b - kSizeClassSubBinBits);
}

// `bytes` rounded up to its size class.
inline size_t RoundUpToSizeClass(size_t bytes) {
  return SizeClassBytes(SizeClassIndex(bytes));
}

// Largest size class whose bytes are <= `bytes` (bytes >= 512): the class a
// free block of `bytes` is filed under.
inline int FloorSizeClass(size_t bytes) {
  const int up = SizeClassIndex(bytes);
  return SizeClassBytes(up) == bytes ? up : up - 1;
}

// Requests above `large_from` bytes are leased in multiples of `granule`
// rather than their class size: less than a granule of waste where the
// class could waste up to a quarter (a 650 MiB request would take 768 MiB).
// Their segments have that size too; the free index still files them by
// class. AllocationCacheOptions::large_rounding_from_bytes and
// large_granule_bytes; the defaults below.
struct LargeRounding {
  size_t large_from = size_t{8} << 20;
  size_t granule = size_t{2} << 20;  // a multiple of 512
};

// Bytes a request of `bytes` is leased with (and a new segment for it has).
inline size_t LeaseBytes(size_t bytes, const LargeRounding& rounding = {}) {
  if (bytes <= rounding.large_from) return RoundUpToSizeClass(bytes);
  return (bytes + rounding.granule - 1) / rounding.granule * rounding.granule;
}

// Number of classes needed for every size up to `max_bytes` (clamped to
// [1, kMaxSizeClassBytes]).
inline int SizeClassCount(size_t max_bytes) {
  if (max_bytes < 1) max_bytes = 1;
  if (max_bytes > kMaxSizeClassBytes) max_bytes = kMaxSizeClassBytes;
  return SizeClassIndex(max_bytes) + 1;
}

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_SIZE_CLASSES_H_
