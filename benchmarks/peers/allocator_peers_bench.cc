// allocator_peers_bench — gpupool's AllocationCache beside CUB's
// cub::CachingDeviceAllocator, both over one stand-in CUDA runtime
// (libgpupool_bench_cudart.so, bench_cudart.h) in the same run: gpupool's
// CUDA backend loads it through GPUPOOL_CUDA_RUNTIME, CUB calls it as the
// libcudart this binary links. Every runtime call either allocator makes is
// counted, and charged by one of two cost models, both in every run:
//   null     calls cost nothing: the allocators' own CPU cost;
//   profile  each call costs what it measured on an H200.
// With GPUPOOL_BENCH_CUDART_REAL naming the real libcudart the stand-in
// forwards every call to it (still counting): the one model is then "real",
// both allocators on a real device (tests/gpu/run_all.sh runs it so).
//
//   peers/same_stream/<costs>/<peer>    1 MiB on one stream, allocate + free
//   peers/cross_stream/<costs>/<peer>   1 MiB, alternating two streams: each
//                                       allocation reuses the block the other
//                                       stream released
//   peers/mixed_sizes/<costs>/<peer>    sizes from a training-like mix (see
//                                       MixedSizes), 8 live at a time
//   peers/cold_start/<costs>/<peer>     a fresh allocator, 64 allocations of
//                                       that mix live at once (all misses),
//                                       freed, the allocator destroyed: one
//                                       iteration per burst
//   peers/threads/<costs>/<peer>/threads:N  the same-stream cycle on N
//                                       threads, each on its own stream, one
//                                       allocator and one device
//   standin/<call>/<costs>              one stand-in call (a query, a
//                                       record, a capture-mode exchange,
//                                       cudaGetDevice, cudaGetLastError):
//                                       profile minus null is what the model
//                                       really charges, against its figure
//                                       (counter charged_ns)
//   replay/<trace>/<peer>               one replay of a shipped trace
//                                       (trace_replay.h): peak reserved over
//                                       peak live bytes, runtime mallocs
//
// Peers:
//   gpupool      AllocationCache with its defaults over an EventPool.
//   gpupool_deferred  the same with defer_same_stream_fences: a same-stream
//                cycle makes no runtime call (the fence is recorded when
//                another stream, a miss or the cache's end needs the block).
//   gpupool_wait the defaults with CrossStreamPolicy::kWaitOnStream
//                (cross-stream case only): the other stream's request makes
//                its stream wait on the block's event instead of querying
//                it.
//   cub_default  CachingDeviceAllocator(): bins of 8^3..8^7 (512 B..2 MiB),
//                at most 6 MiB - 1 cached per device, larger requests never
//                cached. What a user gets who writes no arguments.
//   cub_fair     CachingDeviceAllocator(2, 9, 30, INVALID_SIZE): power-of-two
//                bins from 512 B to 1 GiB (CUB's finest growth), no cache cap:
//                the limits gpupool has by default (512 B minimum, blocks up
//                to 1 GiB cached, unbounded cache).
//   raw          cudaMalloc + cudaFree (replays only): the physical limit.
// CUB's calls are those of its no-device overloads
// (DeviceAllocate(&ptr, bytes, stream), DeviceFree(ptr)), as its own examples
// use it.
//
// Counters: calls_per_cycle (runtime calls per iteration, the calling
// thread's own), and for replays reserved_over_live, peak_reserved_mib,
// peak_live_mib, runtime_mallocs. tools/peer_report.py turns the JSON into
// the tables of docs/benchmarks.md, with gpupool ÷ CUB ratios.

#include <cuda_runtime_api.h>
#include <dirent.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "benchmarks/bench_common.h"
#include "benchmarks/peers/bench_cudart.h"
#include "benchmarks/peers/peer_allocators.h"
#include "benchmarks/peers/trace_replay.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"

#ifndef GPUPOOL_PEERS_TRACE_DIR
#define GPUPOOL_PEERS_TRACE_DIR "benchmarks/peers/traces"
#endif

namespace gpupool::bench {
namespace {

constexpr size_t kHitBytes = size_t{1} << 20;
constexpr int kMixedLive = 8;

// --- timed cycles

// Which runtime answered the calls, for each result's label.
const char* CostsLabel(int costs) {
  if (gpupool_bench_cudart_real_runtime() != nullptr) {
    return "real cudart, calls counted";
  }
  return costs == kGpupoolBenchCostsNull ? "stand-in cudart: null"
                                         : "stand-in cudart: profile";
}

struct Streams {
  std::vector<cudaStream_t> handles;
  explicit Streams(int n) : handles(n, nullptr) {
    for (cudaStream_t& stream : handles) {
      (void)cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    }
  }
  ~Streams() {
    for (cudaStream_t stream : handles) (void)cudaStreamDestroy(stream);
  }
};

// The runtime calls a timed loop makes: the calling thread's, and (with one
// thread) the process's by kind.
struct CallWindow {
  int64_t thread_calls = gpupool_bench_cudart_thread_calls();
  GpupoolBenchCudartTotals totals = [] {
    GpupoolBenchCudartTotals totals{};
    gpupool_bench_cudart_totals(&totals);
    return totals;
  }();
};

void SetCalls(benchmark::State& state, const CallWindow& before) {
  if (state.iterations() == 0) return;
  const double cycles = static_cast<double>(state.iterations());
  state.counters["calls_per_cycle"] = benchmark::Counter(
      static_cast<double>(gpupool_bench_cudart_thread_calls() -
                          before.thread_calls) /
          cycles,
      benchmark::Counter::kAvgThreads);
  if (state.threads() != 1) return;
  GpupoolBenchCudartTotals now{};
  gpupool_bench_cudart_totals(&now);
  state.counters["records_per_cycle"] =
      static_cast<double>(now.event_records - before.totals.event_records) /
      cycles;
  state.counters["queries_per_cycle"] =
      static_cast<double>(now.event_queries - before.totals.event_queries) /
      cycles;
  state.counters["mallocs_per_cycle"] =
      static_cast<double>(now.mallocs - before.totals.mallocs) / cycles;
  state.counters["event_creates_per_cycle"] =
      static_cast<double>(now.events_created - before.totals.events_created) /
      cycles;
}

// Allocates and frees `bytes`, the i-th time on streams[i % n].
template <typename Peer>
void CycleOnStreams(benchmark::State& state, Peer& peer,
                    const std::vector<cudaStream_t>& streams, size_t bytes) {
  const size_t n = streams.size();
  for (size_t warm = 0; warm < n; ++warm) {  // the one miss, outside the loop
    auto lease = peer.Allocate(bytes, streams[warm]);
    if (!Check(state, lease.status()) || !Check(state, peer.Free(*lease))) {
      return;
    }
  }
  const CallWindow calls_before;
  size_t i = 0;
  for (auto _ : state) {
    auto lease = peer.Allocate(bytes, streams[i++ % n]);
    if (!Check(state, lease.status())) break;
    benchmark::DoNotOptimize(Peer::Data(*lease));
    if (!Check(state, peer.Free(*lease))) break;
  }
  SetCalls(state, calls_before);
}

// The mixed-size request stream: 256 sizes, seeded, drawn as a training step's
// buffers are: 60% small (512 B..64 KiB: biases, norms, reductions), 30%
// medium (64 KiB..4 MiB: activations and weight tiles), 10% large (4..64 MiB:
// weight gradients, attention and MLP activations), log-uniform within each
// band.
const std::vector<size_t>& MixedSizes() {
  static const auto* sizes = [] {
    auto* out = new std::vector<size_t>;
    std::mt19937_64 random(20261126);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int i = 0; i < 256; ++i) {
      const double band = unit(random);
      double low_log2 = 9, high_log2 = 16;
      if (band >= 0.6 && band < 0.9) low_log2 = 16, high_log2 = 22;
      if (band >= 0.9) low_log2 = 22, high_log2 = 26;
      out->push_back(static_cast<size_t>(
          std::exp2(low_log2 + (high_log2 - low_log2) * unit(random))));
    }
    return out;
  }();
  return *sizes;
}

template <typename Peer>
void MixedCycle(benchmark::State& state, Peer& peer, cudaStream_t stream) {
  const std::vector<size_t>& sizes = MixedSizes();
  std::vector<typename Peer::Lease> ring(kMixedLive);
  std::vector<bool> live(kMixedLive, false);
  size_t i = 0;
  auto step = [&]() -> bool {
    const size_t slot = i % kMixedLive;
    if (live[slot] && !Check(state, peer.Free(ring[slot]))) return false;
    live[slot] = false;
    auto lease = peer.Allocate(sizes[i % sizes.size()], stream);
    ++i;
    if (!Check(state, lease.status())) return false;
    ring[slot] = std::move(*lease);
    live[slot] = true;
    return true;
  };
  // One pass over the sizes first, so that the timed loop measures the
  // steady state a long-running client sees.
  bool ok = true;
  for (size_t warm = 0; ok && warm < sizes.size(); ++warm) ok = step();
  const CallWindow calls_before;
  if (ok) {
    for (auto _ : state) {
      if (!step()) break;
    }
    SetCalls(state, calls_before);
  }
  for (int slot = 0; slot < kMixedLive; ++slot) {
    if (live[slot]) (void)peer.Free(ring[slot]);
  }
}

// A client's start and end, as a test suite that builds a client per test
// sees it: a fresh allocator serves kColdBurst allocations, all live at
// once (the first sizes of MixedSizes, on one stream: every one a miss),
// they are freed, and the allocator is destroyed (its cached memory freed).
// One iteration is one such burst.
constexpr int kColdBurst = 64;

template <typename Peer>
bool ColdBurst(benchmark::State& state, Peer& peer, cudaStream_t stream) {
  const std::vector<size_t>& sizes = MixedSizes();
  std::vector<typename Peer::Lease> live;
  live.reserve(kColdBurst);
  bool ok = true;
  for (int i = 0; ok && i < kColdBurst; ++i) {
    auto lease = peer.Allocate(sizes[i], stream);
    ok = Check(state, lease.status());
    if (ok) live.push_back(std::move(*lease));
  }
  for (auto& lease : live) ok = Check(state, peer.Free(lease)) && ok;
  return ok;
}

void ColdStarts(benchmark::State& state, Backend& backend, PeerKind kind,
                cudaStream_t stream) {
  const CallWindow calls_before;
  for (auto _ : state) {
    bool ok = false;
    WithPeer(kind, backend,
             [&](auto& peer) { ok = ColdBurst(state, peer, stream); });
    if (!ok) break;
  }
  SetCalls(state, calls_before);
}

enum class Case { kSameStream, kCrossStream, kMixedSizes, kColdStart };

void RunCase(benchmark::State& state, Backend& backend, Case which,
             PeerKind kind, int costs) {
  gpupool_bench_cudart_set_costs(costs);
  state.SetLabel(CostsLabel(costs));
  Streams streams(which == Case::kCrossStream ? 2 : 1);
  if (which == Case::kColdStart) {
    ColdStarts(state, backend, kind, streams.handles[0]);
    gpupool_bench_cudart_set_costs(kGpupoolBenchCostsNull);
    return;
  }
  WithPeer(kind, backend, [&](auto& peer) {
    switch (which) {
      case Case::kSameStream:
      case Case::kCrossStream:
        CycleOnStreams(state, peer, streams.handles, kHitBytes);
        break;
      case Case::kMixedSizes:
        MixedCycle(state, peer, streams.handles[0]);
        break;
      case Case::kColdStart:
        break;  // above: a fresh peer per iteration
    }
  });
  gpupool_bench_cudart_set_costs(kGpupoolBenchCostsNull);
}

// One stand-in call under a cost model, timed alone: profile minus null is
// what a charge of `charged_ns` really costs, the instrument checked against
// its own figure.
enum class StandInCall {
  kEventQuery,
  kEventRecord,
  kCaptureModeExchange,
  kGetDevice,
  kGetLastError,
};

void RunStandInCall(benchmark::State& state, StandInCall call, int costs,
                    int64_t charged_ns) {
  cudaEvent_t event = nullptr;
  if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess) {
    state.SkipWithError("cudaEventCreateWithFlags failed");
    return;
  }
  gpupool_bench_cudart_set_costs(costs);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  bool ok = true;
  for (auto _ : state) {
    switch (call) {
      case StandInCall::kEventQuery:
        ok &= cudaEventQuery(event) == cudaSuccess;
        break;
      case StandInCall::kEventRecord:
        ok &= cudaEventRecord(event, nullptr) == cudaSuccess;
        break;
      case StandInCall::kCaptureModeExchange:
        ok &= cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
        break;
      case StandInCall::kGetDevice: {
        int device = -1;
        ok &= cudaGetDevice(&device) == cudaSuccess;
        break;
      }
      case StandInCall::kGetLastError:
        ok &= cudaGetLastError() == cudaSuccess;
        break;
    }
  }
  gpupool_bench_cudart_set_costs(kGpupoolBenchCostsNull);
  if (call == StandInCall::kCaptureModeExchange &&
      state.iterations() % 2 != 0) {
    // The thread's mode back to what it was: an allocator skips its restoring
    // exchange on a thread left in Relaxed mode, which would change the
    // calls of every later case on this thread.
    ok &= cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
  }
  (void)cudaEventDestroy(event);
  if (!ok) state.SkipWithError("a stand-in call failed");
  state.counters["charged_ns"] = static_cast<double>(charged_ns);
}

// The threaded cases share one allocator among the threads: made before the
// run (the threads start the timed loop together) and kept to the end.
struct SharedPeers {
  std::unique_ptr<GpupoolPeer> gpupool;
  std::unique_ptr<GpupoolPeer> gpupool_deferred;
  std::unique_ptr<CubPeer> cub_default;
  std::unique_ptr<CubPeer> cub_fair;
};
SharedPeers* shared_peers = nullptr;

void RunThreaded(benchmark::State& state, PeerKind kind, int costs) {
  if (state.thread_index() == 0) gpupool_bench_cudart_set_costs(costs);
  state.SetLabel(CostsLabel(costs));
  Streams stream(1);
  switch (kind) {
    case PeerKind::kGpupool:
      CycleOnStreams(state, *shared_peers->gpupool, stream.handles, kHitBytes);
      break;
    case PeerKind::kGpupoolDeferred:
      CycleOnStreams(state, *shared_peers->gpupool_deferred, stream.handles,
                     kHitBytes);
      // Its blocks are fenced before the thread's stream is destroyed.
      (void)shared_peers->gpupool_deferred->cache().FenceStream(
          0, stream.handles[0]);
      break;
    case PeerKind::kCubDefault:
      CycleOnStreams(state, *shared_peers->cub_default, stream.handles,
                     kHitBytes);
      break;
    case PeerKind::kCubFair:
      CycleOnStreams(state, *shared_peers->cub_fair, stream.handles, kHitBytes);
      break;
    case PeerKind::kGpupoolWait:  // cross-stream only: not registered here
    case PeerKind::kRaw:
      break;
  }
  if (state.thread_index() == 0) {
    gpupool_bench_cudart_set_costs(kGpupoolBenchCostsNull);
  }
}

// --- trace replays

template <typename Peer>
class ReplayAdapter : public ReplayAllocator {
 public:
  explicit ReplayAdapter(Peer& peer) : peer_(peer) {}
  absl::StatusOr<void*> Allocate(size_t bytes, void* stream) override {
    auto lease = peer_.Allocate(bytes, static_cast<cudaStream_t>(stream));
    if (!lease.ok()) return lease.status();
    void* ptr = Peer::Data(*lease);
    leases_.emplace(ptr, std::move(*lease));
    return ptr;
  }
  absl::Status Release(void* ptr) override {
    auto it = leases_.find(ptr);
    if (it == leases_.end()) return absl::InternalError("unknown pointer");
    absl::Status status = peer_.Free(it->second);
    leases_.erase(it);
    return status;
  }

 private:
  Peer& peer_;
  std::unordered_map<void*, typename Peer::Lease> leases_;
};

void RunReplay(benchmark::State& state, Backend& backend,
               const std::shared_ptr<Trace>& trace, PeerKind kind) {
  // What a replay measures is memory and calls; its time is not a result.
  gpupool_bench_cudart_set_costs(kGpupoolBenchCostsNull);
  state.SetLabel(CostsLabel(kGpupoolBenchCostsNull));
  Streams streams(trace->streams);
  const std::vector<void*> stream_handles(streams.handles.begin(),
                                          streams.handles.end());
  GpupoolBenchCudartTotals before{}, after{};
  double reserved_mib = 0;
  for (auto _ : state) {
    gpupool_bench_cudart_reset_peak();
    gpupool_bench_cudart_totals(&before);
    absl::Status replayed;
    WithPeer(kind, backend, [&](auto& peer) {
      using Peer = std::remove_reference_t<decltype(peer)>;
      ReplayAdapter<Peer> adapter(peer);
      replayed = Replay(*trace, stream_handles, adapter);
      // Peak of what the runtime handed out, read before the peer's
      // destructor returns its cache.
      gpupool_bench_cudart_totals(&after);
    });
    if (!Check(state, replayed)) return;
    reserved_mib =
        static_cast<double>(after.peak_bytes_reserved - before.bytes_reserved) /
        (1 << 20);
  }
  const double live_mib =
      static_cast<double>(trace->peak_live_bytes) / (1 << 20);
  state.counters["peak_reserved_mib"] = reserved_mib;
  state.counters["peak_live_mib"] = live_mib;
  state.counters["reserved_over_live"] = reserved_mib / live_mib;
  state.counters["runtime_mallocs"] =
      static_cast<double>(after.mallocs - before.mallocs);
  state.counters["runtime_calls"] =
      static_cast<double>(after.calls - before.calls);
  state.counters["trace_allocations"] = static_cast<double>(trace->allocations);
}

std::vector<std::string> TraceFiles(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      std::string name = entry->d_name;
      if (name.size() > 6 && name.substr(name.size() - 6) == ".trace") {
        files.push_back(dir + "/" + name);
      }
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// --- registration and main

constexpr PeerKind kTimedPeers[] = {PeerKind::kGpupool,
                                    PeerKind::kGpupoolDeferred,
                                    PeerKind::kCubDefault, PeerKind::kCubFair};

int Register(Backend& backend, const std::string& trace_dir) {
  const std::pair<const char*, Case> cases[] = {
      {"same_stream", Case::kSameStream},
      {"cross_stream", Case::kCrossStream},
      {"mixed_sizes", Case::kMixedSizes},
      {"cold_start", Case::kColdStart}};
  // Over a real runtime its own costs are the only model ("real").
  const bool real = gpupool_bench_cudart_real_runtime() != nullptr;
  std::vector<std::pair<const char*, int>> cost_models = {
      {"null", kGpupoolBenchCostsNull}, {"profile", kGpupoolBenchCostsProfile}};
  if (real) cost_models = {{"real", kGpupoolBenchCostsNull}};
  for (const auto& [case_name, which] : cases) {
    for (const auto& [costs_name, costs] : cost_models) {
      std::vector<PeerKind> kinds(std::begin(kTimedPeers),
                                  std::end(kTimedPeers));
      // The cross-stream policy matters only where blocks cross streams.
      if (which == Case::kCrossStream) kinds.push_back(PeerKind::kGpupoolWait);
      for (PeerKind kind : kinds) {
        benchmark::RegisterBenchmark(
            absl::StrCat("peers/", case_name, "/", costs_name, "/",
                         PeerName(kind))
                .c_str(),
            [&backend, which = which, kind,
             costs = costs](benchmark::State& state) {
              RunCase(state, backend, which, kind, costs);
            })
            ->UseRealTime();
      }
    }
  }
  for (const auto& [costs_name, costs] : cost_models) {
    for (PeerKind kind : kTimedPeers) {
      benchmark::RegisterBenchmark(
          absl::StrCat("peers/threads/", costs_name, "/", PeerName(kind))
              .c_str(),
          [kind, costs = costs](benchmark::State& state) {
            RunThreaded(state, kind, costs);
          })
          ->ThreadRange(1, 8)
          ->UseRealTime();
    }
  }
  if (!real) {
    const std::tuple<const char*, StandInCall, int64_t> calls[] = {
        {"cudaEventQuery", StandInCall::kEventQuery, kGpupoolBenchEventQueryNs},
        {"cudaEventRecord", StandInCall::kEventRecord,
         kGpupoolBenchEventRecordNs},
        {"cudaThreadExchangeStreamCaptureMode",
         StandInCall::kCaptureModeExchange, kGpupoolBenchCaptureModeExchangeNs},
        {"cudaGetDevice", StandInCall::kGetDevice, kGpupoolBenchGetDeviceNs},
        {"cudaGetLastError", StandInCall::kGetLastError,
         kGpupoolBenchGetLastErrorNs}};
    for (const auto& [call_name, call, charged_ns] : calls) {
      for (const auto& [costs_name, costs] : cost_models) {
        benchmark::RegisterBenchmark(
            absl::StrCat("standin/", call_name, "/", costs_name).c_str(),
            [call = call, costs = costs,
             charged_ns = charged_ns](benchmark::State& state) {
              RunStandInCall(state, call, costs, charged_ns);
            });
      }
    }
  }
  const std::vector<std::string> files = TraceFiles(trace_dir);
  for (const std::string& file : files) {
    absl::StatusOr<Trace> trace = ReadTrace(file);
    if (!trace.ok()) {
      std::fprintf(stderr, "allocator_peers_bench: %s\n",
                   std::string(trace.status().message()).c_str());
      return 2;
    }
    auto shared = std::make_shared<Trace>(*std::move(trace));
    for (PeerKind kind :
         {PeerKind::kGpupool, PeerKind::kGpupoolDeferred, PeerKind::kCubDefault,
          PeerKind::kCubFair, PeerKind::kRaw}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("replay/", shared->name, "/", PeerName(kind)).c_str(),
          [&backend, shared, kind](benchmark::State& state) {
            RunReplay(state, backend, shared, kind);
          })
          ->Iterations(1)
          ->UseRealTime();
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "allocator_peers_bench: no .trace files in %s\n",
                 trace_dir.c_str());
    return 2;
  }
  return 0;
}

// Points gpupool's CUDA backend at the stand-in this binary links, so that
// both allocators call one library (one set of counters).
void UseLinkedStandIn() {
  if (std::getenv("GPUPOOL_CUDA_RUNTIME") != nullptr) return;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&gpupool_bench_cudart_totals), &info) !=
          0 &&
      info.dli_fname != nullptr) {
    setenv("GPUPOOL_CUDA_RUNTIME", info.dli_fname, /*overwrite=*/1);
  }
}

int Main(int argc, char** argv) {
  // A multithreaded process, as every GPU client is (bench_common.cc).
  std::thread([] {}).join();
  std::string trace_dir = GPUPOOL_PEERS_TRACE_DIR;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--trace_dir=", 0) == 0) {
      trace_dir = arg.substr(12);
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      --i;
    }
  }
  if (const char* error = gpupool_bench_cudart_real_error()) {
    std::fprintf(stderr,
                 "allocator_peers_bench: GPUPOOL_BENCH_CUDART_REAL=%s did not "
                 "load: %s\n",
                 std::getenv("GPUPOOL_BENCH_CUDART_REAL"), error);
    return 2;
  }
  UseLinkedStandIn();
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      MakeBenchBackend("cuda", "");
  if (!backend.ok()) {
    std::fprintf(stderr, "allocator_peers_bench: no CUDA backend: %s\n",
                 std::string(backend.status().message()).c_str());
    return 2;
  }
  GpupoolBenchCudartTotals before{}, after{};
  gpupool_bench_cudart_totals(&before);
  {
    EventPool events(**backend);
    AllocationCache cache(**backend, events);
    (void)cache.Allocate(0, 1, MemoryKind::kDevice, nullptr);
  }
  gpupool_bench_cudart_totals(&after);
  if (after.mallocs == before.mallocs) {
    std::fprintf(stderr,
                 "allocator_peers_bench: gpupool's CUDA backend did not reach "
                 "the linked stand-in runtime (GPUPOOL_CUDA_RUNTIME=%s)\n",
                 std::getenv("GPUPOOL_CUDA_RUNTIME"));
    return 2;
  }

  SharedPeers peers;
  peers.gpupool = std::make_unique<GpupoolPeer>(**backend);
  peers.gpupool_deferred =
      std::make_unique<GpupoolPeer>(**backend, DeferredFences());
  peers.cub_default = std::make_unique<CubPeer>(/*fair=*/false);
  peers.cub_fair = std::make_unique<CubPeer>(/*fair=*/true);
  shared_peers = &peers;
  int status = Register(**backend, trace_dir);
  if (status != 0) return status;
  if (const char* real = gpupool_bench_cudart_real_runtime()) {
    benchmark::AddCustomContext(
        "gpupool_backend",
        absl::StrCat("cuda over ", real, " (calls counted by the stand-in)"));
    benchmark::AddCustomContext("gpupool_simulated", "false");
  } else {
    benchmark::AddCustomContext("gpupool_backend", "cuda over stand-in cudart");
    benchmark::AddCustomContext("gpupool_simulated", "true");
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  benchmark::ClearRegisteredBenchmarks();
  shared_peers = nullptr;
  return 0;
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) { return gpupool::bench::Main(argc, argv); }
