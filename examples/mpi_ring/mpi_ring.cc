// A real multi-process job: 4 ranks under mpirun, each with its own
// simulated GPU, share their ring buffers through gpupool with MPI as the
// transport. Every step each rank exports its ring buffer, the ranks
// exchange handles with MPI_Allgather, and each rank imports and reads its
// peers' buffers. All ranks grow their buffers at the same steps (3 and 6),
// so every rank gets a new buffer version at the same step. After step 4 the
// last rank is killed with SIGKILL while it still maps every peer's buffer:
// the survivors carry on among themselves, and their exporters free the
// versions the dead rank held at their next export or Trim (pins are kernel
// locks that die with their process). gpupool ships no transport: MPI (or
// NCCL, or a TCP store) carries the handles.
//
//   mpirun --oversubscribe --enable-recovery -np 4 ./mpi_ring
//
// (--enable-recovery: Open MPI keeps the job running after a rank dies.
// The survivors skip MPI_Finalize, which waits for the dead rank.)

#include <dirent.h>
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/event_pool.h"
#include "gpupool/ipc_handle.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stable_buffers.h"

namespace {

constexpr int kSteps = 8;
constexpr int kKilledAfterStep = 4;
constexpr int kHandleBytes =
    static_cast<int>(gpupool::IpcHandle::kSerializedBytes);

unsigned char Fill(int rank, int step) {
  return static_cast<unsigned char>(16 * rank + step + 1);
}

// Every rank makes the same calls, so every rank reallocates at the same step.
size_t RingBytes(int step) { return size_t{4096} << (step / 3); }

struct Outcome {
  int64_t failures = 0;
  int64_t waiting = 0;  // versions still held back after the final Trim
  int64_t exports = 0;  // GetIpcHandle calls
  int64_t opens = 0;    // OpenIpcHandle calls
};

// One step on `comm` (all ranks, or the survivors): export, exchange, import
// and check every peer's bytes; `leases` keeps the imports until the caller
// drops them.
void Step(gpupool::SimBackend& sim, gpupool::AllocationCache& cache,
          MPI_Comm comm, int rank, int step,
          std::vector<gpupool::ImportedBuffer>* leases, Outcome* outcome) {
  const size_t bytes = RingBytes(step);
  absl::StatusOr<gpupool::IpcHandle> mine =
      gpupool::StableBuffers(cache).Export("ring", 0, bytes);
  absl::StatusOr<void*> ring =
      gpupool::StableBuffers(cache).Acquire("ring", 0, bytes);
  if (!mine.ok() || !ring.ok()) {
    std::fprintf(stderr, "rank %d step %d: export: %s\n", rank, step,
                 mine.status().ToString().c_str());
    ++outcome->failures;
    return;
  }
  std::memset(sim.ExportedBytes(*ring), Fill(rank, step), bytes);
  int ranks = 0;
  MPI_Comm_size(comm, &ranks);
  std::vector<char> all(static_cast<size_t>(ranks) * kHandleBytes);
  const std::string wire = mine->Serialize();
  MPI_Allgather(wire.data(), kHandleBytes, MPI_BYTE, all.data(), kHandleBytes,
                MPI_BYTE, comm);
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank) continue;  // ranks keep their numbers among survivors
    absl::StatusOr<gpupool::IpcHandle> theirs =
        gpupool::IpcHandle::Parse(std::string(
            &all[static_cast<size_t>(peer) * kHandleBytes], kHandleBytes));
    absl::StatusOr<gpupool::ImportedBuffer> lease =
        theirs.ok() ? gpupool::StableBuffers(cache).Import(*theirs, 0)
                    : absl::StatusOr<gpupool::ImportedBuffer>(theirs.status());
    if (!lease.ok()) {
      std::fprintf(stderr, "rank %d step %d: import of rank %d: %s\n", rank,
                   step, peer, lease.status().ToString().c_str());
      ++outcome->failures;
      continue;
    }
    const unsigned char* data =
        static_cast<const unsigned char*>(lease->data());
    if (lease->size() != bytes || data[0] != Fill(peer, step) ||
        data[bytes - 1] != Fill(peer, step)) {
      std::fprintf(stderr, "rank %d step %d: rank %d's bytes are wrong\n", rank,
                   step, peer);
      ++outcome->failures;
    }
    leases->push_back(*std::move(lease));
  }
}

// The simulator's segments of this job in the user's shared-memory
// directory.
int JobSegments(const std::string& ipc_namespace) {
  int found = 0;
  const std::string prefix = absl::StrCat("sim-", ipc_namespace, "-");
  if (DIR* dir =
          opendir(absl::StrCat("/dev/shm/gpupool-", geteuid()).c_str())) {
    while (const dirent* entry = readdir(dir)) {
      found += std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0;
    }
    closedir(dir);
  }
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int victim = size - 1;
  // Made while every rank lives: the survivors' communicator after the kill.
  MPI_Comm survivors;
  MPI_Comm_split(MPI_COMM_WORLD, rank == victim ? 1 : 0, rank, &survivors);
  // One simulated IPC namespace for the job: rank 0's pid.
  int64_t job = getpid();
  MPI_Bcast(&job, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  const std::string ipc_namespace = absl::StrCat("mpiring-", job);

  Outcome outcome;
  {
    gpupool::SimOptions options;
    options.ipc_namespace = ipc_namespace;
    options.on_misuse = [&outcome, rank](absl::string_view message) {
      std::fprintf(stderr, "rank %d: simulator misuse: %s\n", rank,
                   std::string(message).c_str());
      ++outcome.failures;
    };
    gpupool::SimBackend sim(options);
    gpupool::EventPool events(sim);
    gpupool::AllocationCache cache(sim, events);
    for (int step = 0; step < kSteps; ++step) {
      MPI_Comm comm = step <= kKilledAfterStep ? MPI_COMM_WORLD : survivors;
      std::vector<gpupool::ImportedBuffer> leases;
      Step(sim, cache, comm, rank, step, &leases, &outcome);
      MPI_Barrier(comm);  // everyone has read before anyone writes again
      // Killed like the OOM killer kills: mapping, and pinning, every peer.
      if (rank == victim && step == kKilledAfterStep) raise(SIGKILL);
    }
    // Close what this rank maps, wait for the others to do the same, then
    // free what nobody live maps. The dead rank's pins go with its process;
    // its teardown may still be under way (nothing tells the survivors when
    // it ends), so a version it held is freed at the first Trim after.
    if (!cache.Trim().ok()) ++outcome.failures;
    MPI_Barrier(survivors);
    for (int trim = 0; trim < 500; ++trim) {
      if (!cache.Trim().ok()) ++outcome.failures;
      if (gpupool::StableBuffers(cache).GetIpcStats().versions_waiting == 0)
        break;
      usleep(10000);
    }
    outcome.waiting =
        gpupool::StableBuffers(cache).GetIpcStats().versions_waiting;
    outcome.exports = sim.calls(gpupool::SimOp::kIpcGetHandle);
    outcome.opens = sim.calls(gpupool::SimOp::kIpcOpenHandle);
  }
  int64_t mine[4] = {outcome.failures, outcome.waiting, outcome.exports,
                     outcome.opens};
  int64_t total[4] = {0, 0, 0, 0};
  MPI_Reduce(mine, total, 4, MPI_INT64_T, MPI_SUM, 0, survivors);
  if (rank == 0) {
    // A fresh cache (a restarted rank would make one) reaps what the killed
    // rank left in shared memory.
    gpupool::SimOptions options;
    options.ipc_namespace = ipc_namespace;
    gpupool::SimBackend sim(options);
    gpupool::EventPool events(sim);
    gpupool::AllocationCache cache(sim, events);
    const bool exported =
        gpupool::StableBuffers(cache).Export("probe", 0, 4096).ok();
    std::printf(
        "mpi_ring: %d survivors after %d steps: %lld failures, %lld versions "
        "still waiting, %lld exports and %lld opens in all (3 versions per "
        "rank); after a new cache's export the job has %d shared-memory "
        "segment(s) (%s)\n",
        size - 1, kSteps, static_cast<long long>(total[0]),  // NOLINT
        static_cast<long long>(total[1]),                    // NOLINT
        static_cast<long long>(total[2]),                    // NOLINT
        static_cast<long long>(total[3]),                    // NOLINT
        JobSegments(ipc_namespace), exported ? "its own" : "export failed");
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // Not MPI_Finalize: it waits for the dead rank.
  _exit(total[0] == 0 || rank != 0 ? 0 : 1);
}
