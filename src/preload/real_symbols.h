// Finding the real runtime's functions from inside the preload, whichever
// way the program reached the runtime:
//  * linked directly: dlsym(RTLD_NEXT) from the preload finds the runtime's
//    definition (the preload comes first in the global scope, the runtime
//    after it);
//  * dlopen'ed and looked up with dlsym: the interposed dlsym records the
//    library the real definition lives in (RecordLibrary), and later lookups
//    search that library's own scope, which never includes the preload;
//  * already loaded by someone else: each of the runtime's sonames is tried
//    with RTLD_NOLOAD (never loading a runtime the program did not load).
// A result that is the preload's own wrapper is never returned.
//
// Thread safety: all functions are safe to call concurrently.

#ifndef GPUPOOL_SRC_PRELOAD_REAL_SYMBOLS_H_
#define GPUPOOL_SRC_PRELOAD_REAL_SYMBOLS_H_

#include <atomic>

namespace gpupool::preload_internal {

// The runtimes the preload interposes.
enum class Runtime : int { kHip = 0, kCudaRuntime = 1, kCudaDriver = 2 };
inline constexpr int kRuntimeCount = 3;

// glibc's dlsym, never the preload's.
using DlsymFunction = void* (*)(void*, const char*);
DlsymFunction RealDlsym();

// True when `address` lies in the preload library itself.
bool IsInPreload(const void* address);

// Remembers the library that defines `real_symbol` (an address the real
// dlsym returned for one of `runtime`'s names) as `runtime`'s library. The
// first library recorded wins.
void RecordLibrary(Runtime runtime, const void* real_symbol);

// The real definition of `name` for `runtime`, or null when the runtime is
// not in the process. Not cached: callers cache (RealFunction).
void* FindRealSymbol(Runtime runtime, const char* name);

// dlsym(RTLD_NEXT, name) as seen from the object containing `caller`
// (the preload's dlsym forwards a program's RTLD_NEXT lookups with this, so
// that they keep their meaning).
void* NextSymbolAfter(const void* caller, const char* name);

// A real entry point resolved on first use and cached (a lookup that finds
// nothing is retried next time: the runtime may be loaded later).
template <typename Function>
class RealFunction {
 public:
  constexpr RealFunction(Runtime runtime, const char* name)
      : runtime_(runtime), name_(name) {}

  // The real function's result, or `missing` when the process has no such
  // function.
  template <typename... Args>
  int CallOr(int missing, Args... args) {
    Function* function = get();
    return function != nullptr ? function(args...) : missing;
  }

  // Null when the runtime has no such function in this process.
  Function* get() {
    Function* function = cached_.load(std::memory_order_acquire);
    if (function != nullptr) return function;
    function = reinterpret_cast<Function*>(FindRealSymbol(runtime_, name_));
    if (function != nullptr) cached_.store(function, std::memory_order_release);
    return function;
  }

 private:
  const Runtime runtime_;
  const char* const name_;
  std::atomic<Function*> cached_{nullptr};
};

}  // namespace gpupool::preload_internal

#endif  // GPUPOOL_SRC_PRELOAD_REAL_SYMBOLS_H_
