// Forgetting the handles of a dead device generation. A sticky fault poisons
// a device and bumps its generation (gpupool/device_health.h); a handle
// remembers the generation it was created in, and one from an older
// generation belongs to a dead (or reset) context: it is forgotten without a
// runtime call.

#ifndef GPUPOOL_SRC_LIFETIME_STALE_HANDLES_H_
#define GPUPOOL_SRC_LIFETIME_STALE_HANDLES_H_

#include <cstdint>

namespace gpupool::internal {

// Erases the entries of `list` (anything with a `generation` field) older
// than `generation` and returns how many. Never one of a newer generation:
// a caller holding a stale generation must not forget live handles.
template <typename List>
int64_t EraseOlderGenerations(List& list, uint64_t generation) {
  int64_t erased = 0;
  for (auto it = list.begin(); it != list.end();) {
    if (it->generation < generation) {
      it = list.erase(it);
      ++erased;
    } else {
      ++it;
    }
  }
  return erased;
}

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_LIFETIME_STALE_HANDLES_H_
