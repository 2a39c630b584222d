// The runtime loader; see runtime_library.h.

#include "src/backends/loader/runtime_library.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gpupool/backend.h"

namespace gpupool {
namespace loader_internal {
namespace {

absl::Status Unavailable(std::string message) {
  return FaultError(Fault::kCaller, absl::StatusCode::kUnavailable,
                    std::move(message));
}

// dlerror() is per thread and cleared by reading it.
std::string LastLoaderError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dynamic loader error";
}

// The file the loader actually mapped for `handle` (a soname resolves to a
// path only here); `fallback` when it does not say.
std::string LoadedPath(void* handle, const std::string& fallback) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr &&
      map->l_name != nullptr && map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

}  // namespace

absl::StatusOr<RuntimeLibrary> RuntimeLibrary::OpenFile(
    absl::string_view runtime, const std::string& path,
    absl::string_view hint) {
  // RTLD_LOCAL: the runtime's symbols must not start satisfying other
  // libraries' lookups just because gpupool loaded it.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::string message =
        absl::StrCat("the ", runtime, " runtime library ", path,
                     " could not be loaded: ", LastLoaderError());
    if (!hint.empty()) absl::StrAppend(&message, "; ", hint);
    return Unavailable(std::move(message));
  }
  return RuntimeLibrary(handle, LoadedPath(handle, path), std::string(runtime));
}

absl::StatusOr<RuntimeLibrary> RuntimeLibrary::Open(
    const LibrarySearch& search) {
  // secure_getenv: a setuid, setgid or capability-raised program
  // (AT_SECURE) ignores the variable, as ld.so ignores LD_LIBRARY_PATH
  // there, so that its caller cannot make it load a library as root.
  const char* override_path =
      search.env_var.empty() ? nullptr : secure_getenv(search.env_var.c_str());
  if (override_path != nullptr && override_path[0] != '\0') {
    // An explicit choice is never second-guessed by a fallback.
    return OpenFile(search.runtime, override_path,
                    absl::StrCat("it was named by ", search.env_var,
                                 "; unset it to search for ",
                                 absl::StrJoin(search.candidates, ", ")));
  }
  // A runtime the application has already loaded wins: two copies of one
  // runtime in a process do not share streams or events.
  for (const std::string& name : search.candidates) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle != nullptr) {
      return RuntimeLibrary(handle, LoadedPath(handle, name), search.runtime);
    }
  }
  std::vector<std::string> failures;
  for (const std::string& name : search.candidates) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      return RuntimeLibrary(handle, LoadedPath(handle, name), search.runtime);
    }
    failures.push_back(LastLoaderError());
  }
  std::string message =
      absl::StrCat("no ", search.runtime, " runtime library found (looked for ",
                   absl::StrJoin(search.candidates, ", "),
                   " through the dynamic loader's search");
  if (!failures.empty()) {
    absl::StrAppend(&message, ": ", absl::StrJoin(failures, "; "));
  }
  absl::StrAppend(&message, "); set ", search.env_var,
                  " to the library's path, or add its directory to "
                  "LD_LIBRARY_PATH");
  return Unavailable(std::move(message));
}

void* RuntimeLibrary::FindSymbol(const char* name) const {
  // Lookup through the handle searches this library and its dependencies in
  // load order, not the global scope: an interposer's definition is never
  // returned.
  return dlsym(handle_, name);
}

absl::Status RuntimeLibrary::Resolve(
    absl::Span<const EntryPoint> entries) const {
  return ResolveEntryPoints(
      absl::StrCat(runtime_, " runtime ", path_),
      [this](const char* name) { return FindSymbol(name); }, entries);
}

absl::Status ResolveEntryPoints(absl::string_view source, SymbolLookup lookup,
                                absl::Span<const EntryPoint> entries) {
  std::vector<void*> found(entries.size(), nullptr);
  std::vector<absl::string_view> missing;
  for (size_t i = 0; i < entries.size(); ++i) {
    found[i] = lookup(entries[i].name);
    if (found[i] == nullptr && !entries[i].optional) {
      missing.push_back(entries[i].name);
    }
  }
  if (!missing.empty()) {
    return Unavailable(absl::StrCat(
        source, " lacks ", absl::StrJoin(missing, ", "),
        " (a runtime older than gpupool needs, or not that runtime at all)"));
  }
  for (size_t i = 0; i < entries.size(); ++i) *entries[i].slot = found[i];
  return absl::OkStatus();
}

}  // namespace loader_internal
}  // namespace gpupool
