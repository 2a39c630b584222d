// The preload's re-entrancy guard. While a thread is inside a call gpupool
// makes to the real runtime (a pool creating, querying or destroying a
// handle, the preload resolving entry points), every interposed entry point
// it reaches again — a runtime calling its own exported functions through
// the PLT, the CUDA runtime reaching the driver through cuGetProcAddress, a
// loader's dlsym — must go straight to the real runtime: pooling there
// would recurse into the pools or hand the pools their own handles.
//
// Thread-local and initial-exec: the preload is loaded at startup, so its
// TLS is static, and reading it never allocates (a dynamic TLS access may
// call malloc, which another interposer may route back here).

#ifndef GPUPOOL_SRC_PRELOAD_RUNTIME_CALL_GUARD_H_
#define GPUPOOL_SRC_PRELOAD_RUNTIME_CALL_GUARD_H_

namespace gpupool::preload_internal {

// Depth of gpupool's own runtime calls on this thread.
extern thread_local int runtime_call_depth
    __attribute__((tls_model("initial-exec")));

// True while this thread is inside one of gpupool's own runtime calls.
inline bool InRuntimeCall() { return runtime_call_depth > 0; }

// Marks the scope as gpupool's own runtime call.
class ScopedRuntimeCall {
 public:
  ScopedRuntimeCall() { ++runtime_call_depth; }
  ~ScopedRuntimeCall() { --runtime_call_depth; }
  ScopedRuntimeCall(const ScopedRuntimeCall&) = delete;
  ScopedRuntimeCall& operator=(const ScopedRuntimeCall&) = delete;
};

}  // namespace gpupool::preload_internal

#endif  // GPUPOOL_SRC_PRELOAD_RUNTIME_CALL_GUARD_H_
