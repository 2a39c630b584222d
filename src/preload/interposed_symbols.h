// The entry points the preload exports, by name: what the interposed dlsym
// (dlsym_interposer.cc) and cuGetProcAddress hand out instead of the real
// runtime's functions. Each runtime's table (wrappers.cc) is built at compile
// time, readable before any constructor has run (a loader may call dlsym that
// early).

#ifndef GPUPOOL_SRC_PRELOAD_INTERPOSED_SYMBOLS_H_
#define GPUPOOL_SRC_PRELOAD_INTERPOSED_SYMBOLS_H_

#include "absl/types/span.h"
#include "src/preload/real_symbols.h"

namespace gpupool::preload_internal {

struct InterposedSymbol {
  const char* name;
  void* wrapper;
  Runtime runtime;
};

// Each runtime's table; empty when the preload was built without it.
absl::Span<const InterposedSymbol> HipSymbols();
absl::Span<const InterposedSymbol> CudaRuntimeSymbols();
absl::Span<const InterposedSymbol> CudaDriverSymbols();

// The table of `runtime`.
absl::Span<const InterposedSymbol> InterposedSymbolsOf(Runtime runtime);

// strcmp(a, b) == 0, without calling strcmp: this runs inside a sanitizer
// runtime's initialisation, when its strcmp interceptor cannot work yet.
inline bool SameName(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

// The entry for `name`, or null when the preload does not interpose it.
const InterposedSymbol* FindInterposedSymbol(const char* name);

}  // namespace gpupool::preload_internal

#endif  // GPUPOOL_SRC_PRELOAD_INTERPOSED_SYMBOLS_H_
