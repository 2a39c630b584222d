// Resolution of the real runtime's entry points; see real_symbols.h.

#include "src/preload/real_symbols.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include <atomic>
#include <cstdlib>
#include <initializer_list>

#include "src/preload/interposed_symbols.h"

extern "C" void* dlsym(void* handle, const char* name);

namespace gpupool::preload_internal {
namespace {

// The libraries that are each runtime when a program loads it itself, in the
// order tried, with the environment variable gpupool's backends honour.
struct RuntimeLibraries {
  const char* env_var;
  const char* sonames[4];
};
constexpr RuntimeLibraries kLibraries[kRuntimeCount] = {
    {"GPUPOOL_HIP_RUNTIME",
     {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so", nullptr}},
    {"GPUPOOL_CUDA_RUNTIME",
     {"libcudart.so.13", "libcudart.so.12", "libcudart.so", nullptr}},
    {"GPUPOOL_CUDA_DRIVER", {"libcuda.so.1", "libcuda.so", nullptr, nullptr}},
};

// Each runtime's library (a link_map, which glibc accepts as a dlsym
// handle) once recorded.
std::atomic<void*> recorded[kRuntimeCount] = {};

// The preload's own link map: lookups that land in it are ours.
const void* PreloadBase() {
  static const void* base = [] {
    Dl_info info;
    return dladdr(reinterpret_cast<const void*>(&PreloadBase), &info) != 0
               ? info.dli_fbase
               : nullptr;
  }();
  return base;
}

void* RealDefinition(void* handle, const char* name) {
  void* symbol = RealDlsym()(handle, name);
  return symbol != nullptr && !IsInPreload(symbol) ? symbol : nullptr;
}

}  // namespace

DlsymFunction RealDlsym() {
  static std::atomic<DlsymFunction> real{nullptr};
  DlsymFunction function = real.load(std::memory_order_acquire);
  if (function != nullptr) return function;
  // dlvsym is not interposed, so this cannot recurse. glibc 2.34 moved dlsym
  // into libc under a new version; older ones have only the first. A plain
  // array, not an initializer_list: a sanitizer runtime calls this while it
  // initialises, and an unoptimised build would call initializer_list's
  // out-of-line begin(), whose copy the linker may take from an
  // instrumented object.
  static constexpr const char* kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5",
                                              "GLIBC_2.17"};
  for (const char* version : kVersions) {
    function =
        reinterpret_cast<DlsymFunction>(dlvsym(RTLD_NEXT, "dlsym", version));
    if (function != nullptr) break;
  }
  real.store(function, std::memory_order_release);
  return function;
}

bool IsInPreload(const void* address) {
  Dl_info info;
  return dladdr(address, &info) != 0 && info.dli_fbase == PreloadBase();
}

void RecordLibrary(Runtime runtime, const void* real_symbol) {
  Dl_info info;
  link_map* map = nullptr;
  if (dladdr1(real_symbol, &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return;
  }
  void* expected = nullptr;
  recorded[static_cast<int>(runtime)].compare_exchange_strong(
      expected, map, std::memory_order_acq_rel);
}

void* FindRealSymbol(Runtime runtime, const char* name) {
  const int index = static_cast<int>(runtime);
  if (void* library = recorded[index].load(std::memory_order_acquire)) {
    if (void* symbol = RealDefinition(library, name)) return symbol;
  }
  // Linked directly: the next definition after the preload.
  if (void* symbol = RealDefinition(RTLD_NEXT, name)) return symbol;
  // Loaded by someone else (RTLD_LOCAL): only a library already in the
  // process, never loading one.
  const RuntimeLibraries& libraries = kLibraries[index];
  const char* override_path = secure_getenv(libraries.env_var);
  if (override_path != nullptr && *override_path != '\0') {
    if (void* handle = dlopen(override_path, RTLD_LAZY | RTLD_NOLOAD)) {
      if (void* symbol = RealDefinition(handle, name)) return symbol;
    }
  }
  for (const char* soname : libraries.sonames) {
    if (soname == nullptr) break;
    if (void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD)) {
      if (void* symbol = RealDefinition(handle, name)) return symbol;
    }
  }
  return nullptr;
}

void* NextSymbolAfter(const void* caller, const char* name) {
  Dl_info info;
  link_map* caller_map = nullptr;
  if (dladdr1(caller, &info, reinterpret_cast<void**>(&caller_map),
              RTLD_DL_LINKMAP) == 0 ||
      caller_map == nullptr) {
    return RealDlsym()(RTLD_NEXT, name);
  }
  // The common case, and the one a sanitizer runtime hits while it
  // initialises (LD_PRELOAD=libasan.so:libgpupool_preload.so): the preload
  // is the very next object, so the answer is the preload's own definition
  // or else the next one after the preload. Nothing here may reach an
  // interceptor (the sanitizer's dlopen, strcmp, ... are not usable yet).
  link_map* preload_map = nullptr;
  if (dladdr1(reinterpret_cast<const void*>(&NextSymbolAfter), &info,
              reinterpret_cast<void**>(&preload_map), RTLD_DL_LINKMAP) != 0 &&
      caller_map->l_next == preload_map) {
    if (SameName(name, "dlsym")) {
      return reinterpret_cast<void*>(&dlsym);
    }
    if (const InterposedSymbol* symbol = FindInterposedSymbol(name)) {
      return symbol->wrapper;
    }
    return RealDlsym()(RTLD_NEXT, name);
  }
  // Otherwise the objects after the caller, in load order, each opened by
  // name (a link map is not a dlsym handle until it has a search list, which
  // objects loaded at startup get only when opened). dlsym on an object
  // searches its dependencies too, so a hit counts only when it is defined
  // in that object itself; a definition in a later object is met at that
  // object.
  for (link_map* map = caller_map->l_next; map != nullptr; map = map->l_next) {
    if (map->l_name == nullptr || map->l_name[0] == '\0') continue;
    void* handle = dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;  // e.g. the vDSO: not a file
    void* symbol = RealDlsym()(handle, name);
    dlclose(handle);
    if (symbol == nullptr) continue;
    link_map* owner = nullptr;
    if (dladdr1(symbol, &info, reinterpret_cast<void**>(&owner),
                RTLD_DL_LINKMAP) != 0 &&
        owner == map) {
      dlerror();  // the misses before this hit are not the caller's error
      return symbol;
    }
  }
  return nullptr;
}

}  // namespace gpupool::preload_internal
