// GuardedBackend: a Backend that marks every call it forwards as gpupool's
// own runtime call (runtime_call_guard.h), so that whatever the real runtime
// does inside it — calling its own interposed entry points, reaching the
// driver through cuGetProcAddress — reaches the real runtime, never the
// preload's wrappers. The pools the preload builds run on one of these, on
// every thread they call from (the caller's, an exit drain, a prewarm).
//
// Thread safety: as the wrapped backend.

#ifndef GPUPOOL_SRC_PRELOAD_GUARDED_BACKEND_H_
#define GPUPOOL_SRC_PRELOAD_GUARDED_BACKEND_H_

#include <memory>

#include "gpupool/backend.h"

namespace gpupool::preload_internal {

std::unique_ptr<Backend> MakeGuardedBackend(std::unique_ptr<Backend> backend);

}  // namespace gpupool::preload_internal

#endif  // GPUPOOL_SRC_PRELOAD_GUARDED_BACKEND_H_
