// Size classes of the allocation cache: rounding never shrinks a request,
// stays within the documented waste bound (< 25% of requests above 512 B),
// and the O(1) lookup agrees with the class table.

#include "src/allocation/size_classes.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpupool/allocation_cache.h"
#include "gtest/gtest.h"

namespace gpupool::internal {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

// The documented bound: at most 512 for tiny requests, otherwise strictly
// less than a quarter of the request (and less than a fifth of the block).
void ExpectWithinBound(size_t bytes) {
  const size_t rounded = RoundUpToSizeClass(bytes);
  ASSERT_GE(rounded, bytes) << bytes;
  if (bytes <= kMinSizeClassBytes) {
    EXPECT_EQ(rounded, kMinSizeClassBytes) << bytes;
    return;
  }
  const size_t waste = rounded - bytes;
  EXPECT_LT(4 * waste, bytes) << bytes << " -> " << rounded;
  EXPECT_LT(5 * waste, rounded) << bytes << " -> " << rounded;
  // Rounded sizes are classes: multiples of 128 bytes.
  EXPECT_EQ(rounded % 128, 0u) << bytes;
}

TEST(SizeClassesTest, TableOfSizesFromOneByteToOneGiB) {
  struct Case {
    size_t bytes;
    size_t rounded;
  };
  const Case cases[] = {
      {1, 512},
      {2, 512},
      {511, 512},
      {512, 512},
      {513, 640},
      {639, 640},
      {640, 640},
      {641, 768},
      {767, 768},
      {768, 768},
      {769, 896},
      {1000, 1024},
      {1023, 1024},
      {1024, 1024},
      {1025, 1280},
      {1280, 1280},
      {1281, 1536},
      {2047, 2048},
      {2048, 2048},
      {2049, 2560},
      {4095, 4096},
      {4096, 4096},
      {4097, 5120},
      {100000, 114688},
      {kMiB - 1, kMiB},
      {kMiB, kMiB},
      {kMiB + 1, kMiB + 256 * kKiB},
      {3 * kMiB, 3 * kMiB},
      {3 * kMiB + 1, 3 * kMiB + 512 * kKiB},
      {5 * kMiB, 5 * kMiB},
      {kGiB - 1, kGiB},
      {kGiB, kGiB},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RoundUpToSizeClass(c.bytes), c.rounded) << c.bytes;
    EXPECT_EQ(RoundedAllocationSize(c.bytes), c.rounded) << c.bytes;
    ExpectWithinBound(c.bytes);
  }
}

TEST(SizeClassesTest, PowersOfTwoPlusMinusOneUpToOneGiB) {
  for (size_t power = 1; power <= kGiB; power <<= 1) {
    for (size_t bytes : {power - 1, power, power + 1}) {
      if (bytes == 0) continue;
      ExpectWithinBound(bytes);
      // A power of two above the minimum is a class of its own.
      if (bytes == power && power >= kMinSizeClassBytes) {
        EXPECT_EQ(RoundUpToSizeClass(bytes), bytes);
      }
    }
  }
}

TEST(SizeClassesTest, WorstCaseIsJustAboveAClassBoundary) {
  // 2^b + 1 rounds to 2^b * 5/4: the largest waste relative to the request.
  for (int b = 9; b <= 30; ++b) {
    const size_t bytes = (size_t{1} << b) + 1;
    const size_t rounded = RoundUpToSizeClass(bytes);
    EXPECT_EQ(rounded, (size_t{1} << b) / 4 * 5) << bytes;
    ExpectWithinBound(bytes);
  }
}

TEST(SizeClassesTest, EverySizeUpToFourMiBMapsToTheSmallestClassHoldingIt) {
  // Exhaustive near the bottom: the class of n is the first class >= n, so
  // sizes in one bin share their class and neighbouring bins never overlap.
  int expected_index = 0;
  for (size_t bytes = 1; bytes <= 4 * kMiB; ++bytes) {
    if (bytes > SizeClassBytes(expected_index)) ++expected_index;
    ASSERT_EQ(SizeClassIndex(bytes), expected_index) << bytes;
    ASSERT_GE(SizeClassBytes(expected_index), bytes);
    if (expected_index > 0) {
      ASSERT_LT(SizeClassBytes(expected_index - 1), bytes);
    }
  }
}

TEST(SizeClassesTest, ClassesAreDenseIncreasingAndSelfConsistent) {
  const int count = SizeClassCount(kMaxSizeClassBytes);
  EXPECT_EQ(count, 1 + (62 - 9) * kSizeClassSubBins);
  size_t previous = 0;
  for (int index = 0; index < count; ++index) {
    const size_t bytes = SizeClassBytes(index);
    ASSERT_GT(bytes, previous) << index;
    EXPECT_EQ(SizeClassIndex(bytes), index) << bytes;
    EXPECT_EQ(SizeClassIndex(previous + 1), index) << previous + 1;
    previous = bytes;
  }
  EXPECT_EQ(previous, kMaxSizeClassBytes);
  EXPECT_EQ(SizeClassCount(kGiB), SizeClassIndex(kGiB) + 1);
  EXPECT_EQ(SizeClassCount(1), 1);
}

TEST(SizeClassesTest, SampledSizesUpToOneGiBStayWithinTheBound) {
  // A deterministic spread of odd sizes (not just boundaries).
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const size_t bytes = 1 + static_cast<size_t>(x % kGiB);
    ExpectWithinBound(bytes);
    const int index = SizeClassIndex(bytes);
    // Lookup is consistent: the rounded size maps back to the same class.
    ASSERT_EQ(SizeClassIndex(SizeClassBytes(index)), index) << bytes;
  }
}

}  // namespace
}  // namespace gpupool::internal
