// Stable buffers of the allocation cache: device memory by name whose
// address never moves while it holds enough bytes (the public face is
// StableBuffers). The bookkeeping is the shard's (shard_kept.cc); these
// functions make the runtime calls, with no lock held.

#ifndef GPUPOOL_SRC_ALLOCATION_STABLE_H_
#define GPUPOOL_SRC_ALLOCATION_STABLE_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/allocation/cache_core.h"

namespace gpupool::internal {

// The buffer named `name` on `device`, of at least `bytes`: the same pointer
// while it fits, else a new one (the old memory is freed, or kept by the
// free gate while it is in use outside this cache).
absl::StatusOr<void*> AcquireStable(AllocationCacheCore& core,
                                    absl::string_view name, int device,
                                    size_t bytes);
// Frees the buffer named `name` (NotFound when there is none).
absl::Status ReleaseStable(AllocationCacheCore& core, absl::string_view name,
                           int device);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_STABLE_H_
