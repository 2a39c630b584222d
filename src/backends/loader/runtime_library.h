// The runtime loader: opens a GPU runtime's shared library at run time and
// resolves a table of its entry points, so that no gpupool library references
// a vendor symbol at link time. One build of gpupool then runs on a CUDA
// machine, a ROCm machine, and a machine with neither; a backend whose
// runtime cannot be loaded reports Unavailable with the reason.
//
// Generic over runtimes: no vendor header here. Each runtime backend
// (src/backends/cuda/cuda_entry_points.h, src/backends/hip/hip_entry_points.h)
// lists its
// entry points and keeps the process's resolved table.
//
// The interface, for a backend and for anything built on top of one (an
// LD_PRELOAD interposer, a test stand-in):
//
//   LibrarySearch    where one runtime's library is looked for: an
//                    environment variable naming an exact file (when set, the
//                    only place looked), else a list of sonames tried through
//                    the dynamic loader's ordinary search.
//   RuntimeLibrary   an opened library. Open(search) honours the environment
//                    variable, prefers a candidate this process has already
//                    loaded (so gpupool shares the application's runtime
//                    instead of loading a second copy), then tries each
//                    candidate in order. OpenFile(runtime, path) opens exactly
//                    one file. FindSymbol(name) looks in that library and its
//                    dependencies only: it returns the library's own
//                    definition, never one an LD_PRELOAD interposer exports
//                    under the same name.
//   EntryPoint       one named function, the slot its address goes to, and
//                    whether it is optional (a feature's, not pooling's).
//   ResolveEntryPoints(source, lookup, entries)
//                    fills every slot through `lookup` (a RuntimeLibrary's
//                    FindSymbol, or e.g. dlsym(RTLD_NEXT, name) in an
//                    interposer); fails with Unavailable naming every missing
//                    required symbol and `source`, and then leaves no slot
//                    written. A missing optional symbol leaves its slot null:
//                    the backend then refuses that feature alone.
//
// Every failure is absl::StatusCode::kUnavailable with fault kCaller: the
// runtime cannot be used in this process, nothing was created, and the message
// says what was looked for and how to point elsewhere.
//
// Libraries are never closed: a runtime unloaded while a pool still holds its
// streams, or while its own atexit handlers are pending, would crash the
// process. A linked runtime stays loaded for the process lifetime too.
//
// Thread safety: every function here is safe to call concurrently (dlopen and
// dlsym are); RuntimeLibrary is an immutable value.

#ifndef GPUPOOL_SRC_BACKENDS_LOADER_RUNTIME_LIBRARY_H_
#define GPUPOOL_SRC_BACKENDS_LOADER_RUNTIME_LIBRARY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gpupool/export.h"

namespace gpupool {
namespace loader_internal {

// Where one runtime's shared library is looked for.
struct LibrarySearch {
  // The runtime's name in messages: "CUDA", "HIP".
  std::string runtime;
  // When this environment variable is set and not empty, its value (a path,
  // or a name for the dynamic loader's search) is the only library tried.
  std::string env_var;
  // Otherwise these sonames, in order, through the dynamic loader's search
  // (LD_LIBRARY_PATH, the executable's RUNPATH, the ld.so cache, the system
  // directories).
  std::vector<std::string> candidates;
};

// One entry point: the exported name and where its address is stored. An
// optional one may be absent (its slot is then null); a required one may not.
struct EntryPoint {
  const char* name;
  void** slot;
  bool optional = false;
};

// Looks up one exported symbol; returns null when it is absent.
using SymbolLookup = absl::FunctionRef<void*(const char* name)>;

// An opened runtime library (never closed; see above).
// Exported from a shared libgpupool_loader for the backend libraries.
class GPUPOOL_EXPORT RuntimeLibrary {
 public:
  // Opens the library `search` describes (see the header comment for the
  // order). Unavailable, naming the environment variable and every candidate
  // with the loader's reason, when none opens.
  static absl::StatusOr<RuntimeLibrary> Open(const LibrarySearch& search);

  // Opens exactly `path` (a file path, or a name for the loader's search).
  // `hint` ends the message of a failure ("set GPUPOOL_CUDA_RUNTIME to ...").
  static absl::StatusOr<RuntimeLibrary> OpenFile(absl::string_view runtime,
                                                 const std::string& path,
                                                 absl::string_view hint);

  // The file that was loaded (its resolved path where the loader reports one,
  // else the name it was opened by), and the runtime's name.
  const std::string& path() const { return path_; }
  const std::string& runtime() const { return runtime_; }

  // The library's own definition of `name` (searching it and its
  // dependencies, never the global scope); null when absent.
  void* FindSymbol(const char* name) const;

  // ResolveEntryPoints over FindSymbol, naming this library in errors.
  absl::Status Resolve(absl::Span<const EntryPoint> entries) const;

 private:
  RuntimeLibrary(void* handle, std::string path, std::string runtime)
      : handle_(handle), path_(std::move(path)), runtime_(std::move(runtime)) {}

  void* handle_;
  std::string path_;
  std::string runtime_;
};

// Fills each entry's slot with lookup(entry.name) (null for an optional entry
// the lookup does not find). When a required one is missing, fails with
// Unavailable "<source> lacks <names> (...)" naming every missing required
// entry, and writes no slot. `source` names where the symbols came from ("the
// CUDA runtime /usr/lib/libcudart.so.13").
GPUPOOL_EXPORT absl::Status ResolveEntryPoints(
    absl::string_view source, SymbolLookup lookup,
    absl::Span<const EntryPoint> entries);

}  // namespace loader_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_LOADER_RUNTIME_LIBRARY_H_
