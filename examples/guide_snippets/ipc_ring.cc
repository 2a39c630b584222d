// docs/guide.md "Sharing buffers across processes": two ranks each publish a
// stable ring buffer and map the other's, every step, through their own
// transport (here a pipe pair between a parent and its forked child, each
// with its own SimBackend). Export costs one runtime call per buffer version
// and import one open per version; every later step is a cache hit.

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/event_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"

// Sends `mine` to the peer rank and returns what it sent: the user's
// transport (MPI_Sendrecv, a TCP store, a pipe).
using Exchange = std::function<std::string(const std::string& mine)>;

// One step: publish this rank's ring buffer, map the peer's. Every rank makes
// the same calls, so every rank reallocates at the same step.
absl::StatusOr<gpupool::ImportedBuffer> ShareRingBuffer(
    gpupool::StableBuffers& buffers, int device, size_t bytes,
    const Exchange& exchange) {
  absl::StatusOr<gpupool::IpcHandle> mine =
      buffers.Export("ring", device, bytes);
  if (!mine.ok()) return mine.status();
  absl::StatusOr<gpupool::IpcHandle> theirs =
      gpupool::IpcHandle::Parse(exchange(mine->Serialize()));
  if (!theirs.ok()) return theirs.status();
  return buffers.Import(*theirs, device);  // opened once per version, then hits
}

namespace {

// Writes `mine` to `out`, reads as many bytes from `in`.
std::string PipeExchange(int in, int out, const std::string& mine) {
  if (write(out, mine.data(), mine.size()) !=
      static_cast<ssize_t>(mine.size())) {
    return "";
  }
  std::string theirs(mine.size(), '\0');
  size_t got = 0;
  while (got < theirs.size()) {
    const ssize_t n = read(in, &theirs[got], theirs.size() - got);
    if (n <= 0) return "";
    got += static_cast<size_t>(n);
  }
  return theirs;
}

int RunRank(const std::string& ipc_namespace, int in, int out) {
  gpupool::SimOptions options;
  options.ipc_namespace = ipc_namespace;
  gpupool::SimBackend sim(options);
  gpupool::IpcStats stats;
  {
    gpupool::EventPool events(sim);
    gpupool::AllocationCache cache(sim, events);
    gpupool::StableBuffers buffers(cache);
    const Exchange exchange = [in, out](const std::string& mine) {
      return PipeExchange(in, out, mine);
    };
    for (int step = 0; step < 100; ++step) {
      absl::StatusOr<gpupool::ImportedBuffer> peer =
          ShareRingBuffer(buffers, /*device=*/0, size_t{1} << 20, exchange);
      if (!peer.ok()) {
        std::fprintf(stderr, "%s\n", peer.status().ToString().c_str());
        return 1;
      }
      // Enqueue work reading peer->data() here.
    }
    // Close the peer's mapping, then wait for the peer to close ours before
    // the cache frees it.
    if (!cache.Trim().ok() || PipeExchange(in, out, "done").empty()) return 1;
    stats = buffers.GetIpcStats();
  }
  std::printf(
      "ipc_ring: 100 steps, %lld export(s), %lld open(s), %lld hit(s)\n",
      static_cast<long long>(stats.exports),
      static_cast<long long>(stats.opens),
      static_cast<long long>(stats.import_hits));
  std::fflush(stdout);  // the child leaves with _exit
  return stats.exports == 1 && stats.opens == 1 && stats.import_hits == 99 ? 0
                                                                           : 2;
}

}  // namespace

int main() {
  int to_child[2];
  int to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) return 1;
  const std::string ipc_namespace = absl::StrCat("guide-ipc-", getpid());
  const pid_t child = fork();  // before any pool exists: nothing inherited
  if (child < 0) return 1;
  if (child == 0) _exit(RunRank(ipc_namespace, to_child[0], to_parent[1]));
  const int parent = RunRank(ipc_namespace, to_parent[0], to_child[1]);
  int status = 0;
  waitpid(child, &status, 0);
  return parent == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
