// benchmarks/peers/bench_cudart.h — the control surface of
// libgpupool_bench_cudart.so, the stand-in CUDA runtime that the side-by-side
// allocator benchmarks run gpupool and CUB's CachingDeviceAllocator over.
//
// The library exports the CUDA runtime entry points both allocators call
// (declared by CUDA's own cuda_runtime_api.h, so the signatures are the
// runtime's), with one device that is always idle: every event and stream
// query answers "complete". Memory is address space only: cudaMalloc hands
// out fresh addresses that nothing ever touches, so an allocation costs what
// the cost model charges and nothing more. Each call:
//   * is counted, per entry point, in counters private to the calling thread
//     (no shared cache line on the hot path);
//   * charges a latency by spinning (a loop whose iterations per microsecond
//     are timed once, when the profile model is first chosen, so that a
//     charge costs its figure and no clock read), from the cost model in
//     effect:
//       null     every call returns at once;
//       profile  the per-call costs measured on an H200 (docs/benchmarks.md,
//                "H200 runtime call costs"); calls that table lacks cost 0.
//     The model starts as GPUPOOL_BENCH_CUDART_COSTS (null|profile, default
//     null) and can be switched at any time with
//     gpupool_bench_cudart_set_costs.
// With GPUPOOL_BENCH_CUDART_REAL set to the path of a real CUDA runtime
// library (libcudart.so.13), the library forwards instead: each call is
// counted as above and then made by the real runtime at its own cost (the cost
// model charges nothing more), so the same binary measures both allocators on
// a real GPU with their calls still counted.
//
// Thread safety: every function here and every exported runtime entry point
// may be called from any thread.

#ifndef GPUPOOL_BENCHMARKS_PEERS_BENCH_CUDART_H_
#define GPUPOOL_BENCHMARKS_PEERS_BENCH_CUDART_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Cost models (see above).
enum GpupoolBenchCosts {
  kGpupoolBenchCostsNull = 0,
  kGpupoolBenchCostsProfile = 1,
};

// Costs of the profile model, ns per call: docs/benchmarks.md "H200 runtime
// call costs" (runtime_call_probe, the median of three runs in one session). A
// create + destroy or there-and-back pair measured together is split evenly
// between its two calls. Every call either allocator makes has its measured
// cost; calls not listed (version and device-count queries, capture begin and
// end, graph destroy, cudaPeekAtLastError, cudaDeviceSynchronize) cost
// nothing.
enum GpupoolBenchProfileNs {
  kGpupoolBenchMallocNs = 33792,     // cudaMalloc + cudaFree 1 MiB:
  kGpupoolBenchFreeNs = 33792,       //   67,584 ns the pair
  kGpupoolBenchEventCreateNs = 166,  // create + destroy: 331
  kGpupoolBenchEventDestroyNs = 165,
  kGpupoolBenchEventRecordNs = 222,
  kGpupoolBenchEventQueryNs = 237,
  kGpupoolBenchStreamQueryNs = 231,
  kGpupoolBenchStreamWaitEventNs = 180,
  kGpupoolBenchStreamCreateNs = 2299,  // create + destroy: 4,597
  kGpupoolBenchStreamDestroyNs = 2298,
  kGpupoolBenchCaptureModeExchangeNs = 53,  // there and back: 107
  kGpupoolBenchStreamIsCapturingNs = 68,
  kGpupoolBenchGetDeviceNs = 47,
  kGpupoolBenchSetDeviceNs = 89,
  kGpupoolBenchGetLastErrorNs = 43,
};

// Process-wide totals since load (all threads, exited ones included).
struct GpupoolBenchCudartTotals {
  int64_t calls;                // every exported entry point
  int64_t mallocs;              // cudaMalloc successes
  int64_t frees;                // cudaFree calls on a live pointer
  int64_t events_created;       // cudaEventCreate*
  int64_t event_records;        // cudaEventRecord
  int64_t event_queries;        // cudaEventQuery
  int64_t bytes_reserved;       // cudaMalloc'd and not yet freed, now
  int64_t peak_bytes_reserved;  // high-water mark since the last reset
};

// The real runtime every call is forwarded to, or NULL when the calls are
// answered here (GPUPOOL_BENCH_CUDART_REAL unset, or it failed to load).
const char* gpupool_bench_cudart_real_runtime(void);
// Why GPUPOOL_BENCH_CUDART_REAL failed to load (dlerror), or NULL.
const char* gpupool_bench_cudart_real_error(void);
// Switches the cost model for every later call; returns the previous one.
int gpupool_bench_cudart_set_costs(int costs);
// Runtime calls made so far by the calling thread.
int64_t gpupool_bench_cudart_thread_calls(void);
// Fills `out` with the process-wide totals.
void gpupool_bench_cudart_totals(struct GpupoolBenchCudartTotals* out);
// Restarts peak_bytes_reserved at bytes_reserved.
void gpupool_bench_cudart_reset_peak(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // GPUPOOL_BENCHMARKS_PEERS_BENCH_CUDART_H_
