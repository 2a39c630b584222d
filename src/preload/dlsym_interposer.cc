// The preload's dlsym: programs that load their runtime with dlopen and look
// its functions up with dlsym (XLA's stub loaders, for HIP and CUDA) get the
// preload's wrappers for the interposed names, exactly when the real lookup
// would have found the runtime's function. The library the real function
// lives in is recorded, so the wrappers (and the pools' backend) find the
// real runtime there. Every other lookup — and every lookup made inside
// gpupool's own runtime calls — is glibc's, with RTLD_NEXT keeping its
// meaning for the caller (not for the preload).

#include <dlfcn.h>

#include "src/preload/interposed_symbols.h"
#include "src/preload/real_symbols.h"
#include "src/preload/runtime_call_guard.h"

extern "C" __attribute__((visibility("default"))) void* dlsym(
    void* handle, const char* name) {
  using gpupool::preload_internal::FindInterposedSymbol;
  using gpupool::preload_internal::FindRealSymbol;
  using gpupool::preload_internal::InRuntimeCall;
  using gpupool::preload_internal::InterposedSymbol;
  using gpupool::preload_internal::NextSymbolAfter;
  using gpupool::preload_internal::RealDlsym;
  using gpupool::preload_internal::RecordLibrary;

  const void* caller = __builtin_return_address(0);
  void* real = handle == RTLD_NEXT ? NextSymbolAfter(caller, name)
                                   : RealDlsym()(handle, name);
  if (real == nullptr || InRuntimeCall()) return real;
  const InterposedSymbol* symbol = FindInterposedSymbol(name);
  if (symbol == nullptr) return real;
  if (real == symbol->wrapper) {
    // Found the preload's own export (RTLD_DEFAULT): it stands for the
    // runtime only when the runtime is in the process; otherwise the name
    // stays missing, as it would be without the preload.
    return FindRealSymbol(symbol->runtime, name) != nullptr ? real : nullptr;
  }
  // The program asked the runtime for one of the interposed functions.
  RecordLibrary(symbol->runtime, real);
  return symbol->wrapper;
}
