// The leases pool_fuzzer holds: each with whether its device was reset, how
// an input picks one, and how released ones are forgotten.

#ifndef GPUPOOL_TESTS_FUZZ_HELD_LEASE_H_
#define GPUPOOL_TESTS_FUZZ_HELD_LEASE_H_

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace gpupool::fuzz {

// The most live leases of one kind (streams, events, allocations) held.
constexpr size_t kMaxLeases = 12;

// A lease plus what the fuzzer knows about it.
template <typename Lease>
struct Held {
  Lease lease;
  bool stale = false;  // its device was reset: the handle is dead
};

// The lease of an entry the input picks; nullptr when there is none or the
// entry was released.
template <typename T>
T* PickHeld(FuzzedDataProvider& input, std::vector<Held<T>>& held) {
  if (held.empty()) return nullptr;
  auto& entry = held[input.ConsumeIntegralInRange<size_t>(0, held.size() - 1)];
  return entry.lease ? &entry.lease : nullptr;
}

// The entry the input picks, released or not; nullptr when there is none.
template <typename T>
Held<T>* PickHeldEntry(FuzzedDataProvider& input, std::vector<Held<T>>& held) {
  if (held.empty()) return nullptr;
  return &held[input.ConsumeIntegralInRange<size_t>(0, held.size() - 1)];
}

// Forgets released leases so that kMaxLeases bounds the live ones.
template <typename T>
void Compact(std::vector<Held<T>>& held) {
  held.erase(std::remove_if(held.begin(), held.end(),
                            [](const Held<T>& h) { return !h.lease; }),
             held.end());
}

}  // namespace gpupool::fuzz

#endif  // GPUPOOL_TESTS_FUZZ_HELD_LEASE_H_
