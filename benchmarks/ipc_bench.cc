// Importing another process's buffer: an StableBuffers::Import hit (the
// version is already mapped: no runtime call) against the raw runtime
// calls a cache-less importer makes every time (OpenIpcHandle +
// CloseIpcHandle). On SimBackend only (its IPC works across real processes);
// every figure is labelled simulated. The exporter is a forked child with its
// own SimBackend and cache in the same IPC namespace; it exports one stable
// buffer, sends the serialized handle over a pipe and waits until the pipe
// closes.
//
//   ipc_bench [--sim_profile=instant|cuda] [benchmark flags]

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/event_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"

namespace {

gpupool::SimOptions Options(const std::string& ipc_namespace,
                            const gpupool::SimProfile& profile) {
  gpupool::SimOptions options;
  options.ipc_namespace = ipc_namespace;
  options.profile = profile;
  return options;
}

// The child: export, send, wait for the parent to close the pipe.
int RunExporter(const std::string& ipc_namespace, int out, int in) {
  gpupool::SimBackend sim(
      Options(ipc_namespace, gpupool::SimProfile::Instant()));
  gpupool::EventPool events(sim);
  gpupool::AllocationCache cache(sim, events);
  absl::StatusOr<gpupool::IpcHandle> handle =
      gpupool::StableBuffers(cache).Export("bench", 0, size_t{1} << 20);
  if (!handle.ok()) return 1;
  const std::string wire = handle->Serialize();
  if (write(out, wire.data(), wire.size()) !=
      static_cast<ssize_t>(wire.size())) {
    return 1;
  }
  char byte;
  while (read(in, &byte, 1) > 0) {
  }
  return 0;
}

struct Shared {
  gpupool::SimBackend* sim = nullptr;
  gpupool::AllocationCache* cache = nullptr;
  gpupool::IpcHandle handle;
  std::string label;
};
Shared shared;

void BM_ImportHit(benchmark::State& state) {
  {  // the one open, outside the timed loop
    absl::StatusOr<gpupool::ImportedBuffer> first =
        gpupool::StableBuffers(*shared.cache).Import(shared.handle, 0);
    if (!first.ok()) {
      state.SkipWithError(first.status().ToString().c_str());
      return;
    }
  }
  const int64_t calls_before = shared.sim->total_calls();
  for (auto _ : state) {
    absl::StatusOr<gpupool::ImportedBuffer> lease =
        gpupool::StableBuffers(*shared.cache).Import(shared.handle, 0);
    benchmark::DoNotOptimize(lease->data());
  }
  state.counters["runtime_calls_per_import"] = benchmark::Counter(
      static_cast<double>(shared.sim->total_calls() - calls_before) /
      static_cast<double>(state.iterations()));
  state.SetLabel(shared.label);
}

void BM_RawOpenClose(benchmark::State& state) {
  const int64_t calls_before = shared.sim->total_calls();
  for (auto _ : state) {
    absl::StatusOr<void*> ptr =
        shared.sim->OpenIpcHandle(0, shared.handle.runtime);
    if (!ptr.ok()) {
      state.SkipWithError(ptr.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(*ptr);
    (void)shared.sim->CloseIpcHandle(0, *ptr);
  }
  state.counters["runtime_calls_per_import"] = benchmark::Counter(
      static_cast<double>(shared.sim->total_calls() - calls_before) /
      static_cast<double>(state.iterations()));
  state.SetLabel(shared.label);
}

BENCHMARK(BM_ImportHit)->Name("ipc/import_hit");
BENCHMARK(BM_RawOpenClose)->Name("ipc/raw_open_close");

}  // namespace

int main(int argc, char** argv) {
  gpupool::SimProfile profile = gpupool::SimProfile::Instant();
  std::string profile_name = "instant";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sim_profile=cuda") == 0) {
      profile = gpupool::SimProfile::Cuda();
      profile_name = "cuda";
    }
  }
  int to_parent[2];
  int to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) return 1;
  const std::string ipc_namespace = absl::StrCat("ipc-bench-", getpid());
  const pid_t child = fork();  // before any thread or pool exists
  if (child < 0) return 1;
  if (child == 0) {
    close(to_parent[0]);
    close(to_child[1]);
    _exit(RunExporter(ipc_namespace, to_parent[1], to_child[0]));
  }
  close(to_parent[1]);
  close(to_child[0]);
  std::string wire(gpupool::IpcHandle::kSerializedBytes, '\0');
  size_t got = 0;
  while (got < wire.size()) {
    const ssize_t n = read(to_parent[0], &wire[got], wire.size() - got);
    if (n <= 0) return 1;
    got += static_cast<size_t>(n);
  }
  absl::StatusOr<gpupool::IpcHandle> handle = gpupool::IpcHandle::Parse(wire);
  if (!handle.ok()) return 1;
  int status = 0;
  {
    gpupool::SimBackend sim(Options(ipc_namespace, profile));
    gpupool::EventPool events(sim);
    gpupool::AllocationCache cache(sim, events);
    shared = {&sim, &cache, *handle,
              absl::StrCat("sim:", profile_name, " (simulated)")};
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    (void)cache.Trim();
    status = sim.misuse_count() == 0 ? 0 : 1;
  }
  close(to_child[1]);  // the exporter may go now
  int child_status = 0;
  waitpid(child, &child_status, 0);
  return status;
}
