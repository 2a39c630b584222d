// FindInterposedSymbol over the runtimes' tables (wrappers.cc); see
// interposed_symbols.h.

#include "src/preload/interposed_symbols.h"

#include "absl/types/span.h"

namespace gpupool::preload_internal {

absl::Span<const InterposedSymbol> InterposedSymbolsOf(Runtime runtime) {
  switch (runtime) {
    case Runtime::kHip:
      return HipSymbols();
    case Runtime::kCudaRuntime:
      return CudaRuntimeSymbols();
    case Runtime::kCudaDriver:
      return CudaDriverSymbols();
  }
  return {};
}

const InterposedSymbol* FindInterposedSymbol(const char* name) {
  // Every interposed name starts with "hip" or "cu"; most lookups do not.
  if (name == nullptr || !((name[0] == 'h' && name[1] == 'i') ||
                           (name[0] == 'c' && name[1] == 'u'))) {
    return nullptr;
  }
  for (absl::Span<const InterposedSymbol> table :
       {HipSymbols(), CudaRuntimeSymbols(), CudaDriverSymbols()}) {
    for (const InterposedSymbol& symbol : table) {
      if (SameName(symbol.name, name)) return &symbol;
    }
  }
  return nullptr;
}

}  // namespace gpupool::preload_internal
