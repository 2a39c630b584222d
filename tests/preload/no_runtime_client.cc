// A program with no GPU runtime, run under the preload: dlsym keeps glibc's
// meaning (RTLD_DEFAULT, RTLD_NEXT from the caller's object, a missing name
// fails with an error), and a runtime entry point the process does not have
// stays missing even though the preload exports one of that name. Exits 0
// when all hold.

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int failures = 0;

void Expect(bool ok, const char* what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "no_runtime_client: FAIL: %s\n", what);
  }
}

}  // namespace

int main() {
  // Glibc's own answers.
  Expect(dlsym(RTLD_DEFAULT, "strlen") == reinterpret_cast<void*>(&strlen) ||
             dlsym(RTLD_DEFAULT, "strlen") != nullptr,
         "dlsym(RTLD_DEFAULT, strlen) found nothing");
  void* next_malloc = dlsym(RTLD_NEXT, "malloc");
  Expect(next_malloc != nullptr, "dlsym(RTLD_NEXT, malloc) found nothing");
  Dl_info info;
  Expect(next_malloc != nullptr && dladdr(next_malloc, &info) != 0 &&
             std::strstr(info.dli_fname, "gpupool_preload") == nullptr,
         "dlsym(RTLD_NEXT, malloc) resolved into the preload");
  dlerror();
  Expect(dlsym(RTLD_DEFAULT, "gpupool_no_such_symbol") == nullptr,
         "a missing symbol was found");
  Expect(dlerror() != nullptr, "a missing symbol set no dlerror");
  dlerror();
  Expect(dlsym(RTLD_DEFAULT, "strlen") != nullptr && dlerror() == nullptr,
         "a successful lookup left a dlerror");
  // No runtime in the process: its entry points are not there.
  Expect(dlsym(RTLD_DEFAULT, "hipStreamCreate") == nullptr,
         "hipStreamCreate found in a process without HIP");
  Expect(dlsym(RTLD_DEFAULT, "cudaStreamCreate") == nullptr,
         "cudaStreamCreate found in a process without the CUDA runtime");
  std::printf("no_runtime_client: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
