// libgpupool_bench_cudart.so: the stand-in CUDA runtime of the side-by-side
// allocator benchmarks (see bench_cudart.h for what it models and why).
//
// Not the preload tests' stand-in (tests/preload/standin_cudart.cc): that one
// checks handles for misuse under one process-wide mutex and never frees a
// handle, which is right for a test and would be measured here as allocator
// cost. This one keeps the hot calls (event record/query, device get/set) to a
// thread-local count and the charged latency.

#include "benchmarks/peers/bench_cudart.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

// What each call is counted as, beyond the total.
enum Kind : int {
  kCalls,
  kMallocs,
  kFrees,
  kEventsCreated,
  kEventRecords,
  kEventQueries,
  kKinds,
};

struct ThreadCounts {
  std::atomic<int64_t> n[kKinds] = {};
};

// Every live thread's counts, and the sums of threads that have exited.
struct Registry {
  std::mutex mu;
  std::vector<ThreadCounts*> live;
  int64_t retired[kKinds] = {};
};

Registry& Counts() {
  static auto* registry = new Registry;
  return *registry;
}

class ThreadSlot {
 public:
  ThreadSlot() : counts_(new ThreadCounts) {
    Registry& registry = Counts();
    std::lock_guard<std::mutex> lock(registry.mu);
    registry.live.push_back(counts_);
  }
  ~ThreadSlot() {
    Registry& registry = Counts();
    std::lock_guard<std::mutex> lock(registry.mu);
    for (int k = 0; k < kKinds; ++k) {
      registry.retired[k] += counts_->n[k].load(std::memory_order_relaxed);
    }
    registry.live.erase(
        std::find(registry.live.begin(), registry.live.end(), counts_));
    delete counts_;
  }
  ThreadCounts& counts() { return *counts_; }

 private:
  ThreadCounts* counts_;
};

// The instrument's own cost is kept to a few instructions per call, so that
// the null model is close to "calls cost nothing": the hot path reads one
// trivially initialised pointer in the static TLS block (the library is
// loaded with the program: allocator_peers_bench links it); the slot, whose
// constructor registers the counts and whose destructor retires them at
// thread exit, is touched once per thread.
#define GPUPOOL_BENCH_INITIAL_EXEC __attribute__((tls_model("initial-exec")))
thread_local ThreadCounts* thread_counts GPUPOOL_BENCH_INITIAL_EXEC = nullptr;

ThreadCounts& RegisterThread() {
  static thread_local ThreadSlot slot;
  thread_counts = &slot.counts();
  return *thread_counts;
}

ThreadCounts& MyCounts() {
  ThreadCounts* counts = thread_counts;
  return counts != nullptr ? *counts : RegisterThread();
}

// Only this thread writes its counts: a plain load and store, no lock prefix.
void Count(Kind kind) {
  std::atomic<int64_t>& n = MyCounts().n[kind];
  n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// A charge is a count of iterations of an empty loop, calibrated against the
// clock once, when the profile model is first chosen. Spinning on the clock
// itself would add about one and a half clock reads to every charge (the read
// that starts the spin and, on average, half the read that ends it past its
// deadline; 30-70 ns a read on the VMs measured here, a third of a 178 ns
// query), against the allocator that makes more charged calls.
void SpinIterations(int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    asm volatile("" : "+r"(i));  // the loop stays, one iteration at a time
  }
}

// How a charge is spun: loop iterations per microsecond and the fixed cost of
// a spin beyond its iterations (its call, the loop's mispredicted exit: about
// 20 ns on the VMs measured here), taken off each charge. Both are fitted to
// charges of 100 and 300 ns made as calls make them (a long spin runs some
// 5% faster per iteration than a short one), each the fastest of seven
// batches (a slower one was preempted or met a cold cache).
struct SpinRate {
  int64_t iterations_per_us = 1;
  int64_t fixed_ns = 0;
};

void Charge(int64_t ns, const SpinRate& rate);

// The time of one charge of `ns` at `rate`, in ns (fractional): the fastest
// of seven batches of `charges`.
double TimeCharge(int64_t ns, const SpinRate& rate, int charges = 20000) {
  int64_t best_ns = INT64_MAX;
  for (int trial = 0; trial < 7; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < charges; ++i) Charge(ns, rate);
    best_ns = std::min<int64_t>(
        best_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
  return static_cast<double>(best_ns) / charges;
}

const SpinRate& Rate() {
  static const SpinRate rate = [] {
    // A first rate from spins of a million iterations ...
    SpinRate first;
    first.iterations_per_us = 1000;
    const double million_ns = TimeCharge(1000000, first, /*charges=*/1);
    first.iterations_per_us =
        std::max<int64_t>(static_cast<int64_t>(1e9 / million_ns), 1);
    // ... then the line through two short charges.
    const double t100 = TimeCharge(100, first);
    const double t300 = TimeCharge(300, first);
    SpinRate r;
    const double ns_per_first_ns = std::max(t300 - t100, 1.0) / 200;
    r.iterations_per_us = std::max<int64_t>(
        static_cast<int64_t>(first.iterations_per_us / ns_per_first_ns), 1);
    r.fixed_ns = std::clamp<int64_t>(
        static_cast<int64_t>(t100 - 100 * ns_per_first_ns), 0, 50);
    return r;
  }();
  return rate;
}

// Spins for `ns`, less the spin's own fixed cost.
__attribute__((noinline)) void Charge(int64_t ns, const SpinRate& rate) {
  SpinIterations(std::max<int64_t>(ns - rate.fixed_ns, 0) *
                 rate.iterations_per_us / 1000);
}

int InitialCosts() {
  const char* env = std::getenv("GPUPOOL_BENCH_CUDART_COSTS");
  if (env == nullptr || std::strcmp(env, "profile") != 0) {
    return kGpupoolBenchCostsNull;
  }
  (void)Rate();  // calibrated before any call is charged
  return kGpupoolBenchCostsProfile;
}

std::atomic<int>& CostModel() {
  static std::atomic<int> model{InitialCosts()};
  return model;
}

// Counts one call and charges `profile_ns` under the profile model by
// spinning: the costs are far below any sleep's resolution.
void Call(int64_t profile_ns) {
  Count(kCalls);
  if (profile_ns == 0 || CostModel().load(std::memory_order_relaxed) !=
                             kGpupoolBenchCostsProfile) {
    return;
  }
  Charge(profile_ns, Rate());
}

// Device memory: fresh address space, never touched, with the bytes each
// live pointer holds.
struct Memory {
  std::mutex mu;
  std::unordered_map<uintptr_t, int64_t> live;
  uintptr_t next = uintptr_t{1} << 44;
  int64_t reserved = 0;
  int64_t peak = 0;
};

Memory& DeviceMemory() {
  static auto* memory = new Memory;
  return *memory;
}

struct Event {
  int device = 0;
};
struct Stream {
  int device = 0;
};

thread_local int current_device GPUPOOL_BENCH_INITIAL_EXEC = 0;
thread_local cudaStreamCaptureMode capture_mode GPUPOOL_BENCH_INITIAL_EXEC =
    cudaStreamCaptureModeGlobal;

// Forwarding mode: with GPUPOOL_BENCH_CUDART_REAL naming a real CUDA runtime
// library, every entry point is still counted here and then made by that
// library, at its own cost (no latency is charged). Both allocators then run
// over the real runtime and a real device with their calls counted as before.
struct RealRuntime {
  void* handle = nullptr;
  const char* path = nullptr;
  std::string error;
};

const RealRuntime& Real() {
  static const RealRuntime* real = [] {
    auto* r = new RealRuntime;
    const char* path = std::getenv("GPUPOOL_BENCH_CUDART_REAL");
    if (path == nullptr || *path == '\0') return r;
    r->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (r->handle == nullptr) {
      const char* error = dlerror();
      r->error = error != nullptr ? error : "dlopen failed";
    } else {
      r->path = path;
    }
    return r;
  }();
  return *real;
}

template <typename Fn>
Fn RealEntry(const char* name) {
  void* handle = Real().handle;
  return handle != nullptr ? reinterpret_cast<Fn>(dlsym(handle, name))
                           : nullptr;
}

}  // namespace

// Makes the call through the real runtime when forwarding (the entry point is
// looked up once per process).
#define FORWARD(name, ...)                                            \
  do {                                                                \
    static const auto real_entry = RealEntry<decltype(&name)>(#name); \
    if (real_entry != nullptr) return real_entry(__VA_ARGS__);        \
  } while (0)

namespace {}  // namespace

#define BENCH_EXPORT extern "C" __attribute__((visibility("default")))

BENCH_EXPORT const char* gpupool_bench_cudart_real_runtime(void) {
  return Real().path;
}
BENCH_EXPORT const char* gpupool_bench_cudart_real_error(void) {
  return Real().error.empty() ? nullptr : Real().error.c_str();
}
BENCH_EXPORT int gpupool_bench_cudart_set_costs(int costs) {
  // Calibrated here, outside any timed loop.
  if (costs == kGpupoolBenchCostsProfile) (void)Rate();
  return CostModel().exchange(costs);
}
BENCH_EXPORT int64_t gpupool_bench_cudart_thread_calls(void) {
  return MyCounts().n[kCalls].load(std::memory_order_relaxed);
}
BENCH_EXPORT void gpupool_bench_cudart_totals(GpupoolBenchCudartTotals* out) {
  int64_t sums[kKinds];
  {
    Registry& registry = Counts();
    std::lock_guard<std::mutex> lock(registry.mu);
    for (int k = 0; k < kKinds; ++k) {
      sums[k] = registry.retired[k];
      for (ThreadCounts* counts : registry.live) {
        sums[k] += counts->n[k].load(std::memory_order_relaxed);
      }
    }
  }
  out->calls = sums[kCalls];
  out->mallocs = sums[kMallocs];
  out->frees = sums[kFrees];
  out->events_created = sums[kEventsCreated];
  out->event_records = sums[kEventRecords];
  out->event_queries = sums[kEventQueries];
  Memory& memory = DeviceMemory();
  std::lock_guard<std::mutex> lock(memory.mu);
  out->bytes_reserved = memory.reserved;
  out->peak_bytes_reserved = memory.peak;
}
BENCH_EXPORT void gpupool_bench_cudart_reset_peak(void) {
  Memory& memory = DeviceMemory();
  std::lock_guard<std::mutex> lock(memory.mu);
  memory.peak = memory.reserved;
}

// --- errors and versions

BENCH_EXPORT const char* cudaGetErrorName(cudaError_t error) {
  Call(0);
  FORWARD(cudaGetErrorName, error);
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    default:
      return "cudaErrorUnknown";
  }
}
BENCH_EXPORT const char* cudaGetErrorString(cudaError_t error) {
  return cudaGetErrorName(error);
}
BENCH_EXPORT cudaError_t cudaGetLastError(void) {
  Call(kGpupoolBenchGetLastErrorNs);
  FORWARD(cudaGetLastError);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaPeekAtLastError(void) {
  Call(0);
  FORWARD(cudaPeekAtLastError);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaDriverGetVersion(int* version) {
  Call(0);
  FORWARD(cudaDriverGetVersion, version);
  *version = 13000;
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaRuntimeGetVersion(int* version) {
  Call(0);
  FORWARD(cudaRuntimeGetVersion, version);
  *version = 13000;
  return cudaSuccess;
}

// --- device

BENCH_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  Call(0);
  FORWARD(cudaGetDeviceCount, count);
  if (count == nullptr) return cudaErrorInvalidValue;
  *count = 1;
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaGetDevice(int* device) {
  Call(kGpupoolBenchGetDeviceNs);
  FORWARD(cudaGetDevice, device);
  if (device == nullptr) return cudaErrorInvalidValue;
  *device = current_device;
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaSetDevice(int device) {
  Call(kGpupoolBenchSetDeviceNs);
  FORWARD(cudaSetDevice, device);
  if (device != 0) return cudaErrorInvalidDevice;
  current_device = device;
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int* least,
                                                          int* greatest) {
  Call(0);
  FORWARD(cudaDeviceGetStreamPriorityRange, least, greatest);
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  Call(0);
  FORWARD(cudaDeviceSynchronize);
  return cudaSuccess;
}

// --- streams and capture

BENCH_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream,
                                                      unsigned int flags,
                                                      int priority) {
  Call(kGpupoolBenchStreamCreateNs);
  FORWARD(cudaStreamCreateWithPriority, stream, flags, priority);
  if (stream == nullptr) return cudaErrorInvalidValue;
  *stream = reinterpret_cast<cudaStream_t>(new Stream{current_device});
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream,
                                                   unsigned int flags) {
  return cudaStreamCreateWithPriority(stream, flags, 0);
}
BENCH_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithPriority(stream, cudaStreamDefault, 0);
}
BENCH_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Call(kGpupoolBenchStreamDestroyNs);
  FORWARD(cudaStreamDestroy, stream);
  if (stream == nullptr) return cudaErrorInvalidResourceHandle;
  delete reinterpret_cast<Stream*>(stream);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) {
  Call(kGpupoolBenchStreamQueryNs);
  FORWARD(cudaStreamQuery, stream);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Call(0);
  FORWARD(cudaStreamSynchronize, stream);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t
cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  Call(kGpupoolBenchStreamIsCapturingNs);
  FORWARD(cudaStreamIsCapturing, stream, status);
  if (status == nullptr) return cudaErrorInvalidValue;
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream,
                                              cudaGraph_t* graph) {
  Call(0);
  FORWARD(cudaStreamEndCapture, stream, graph);
  if (graph != nullptr) *graph = nullptr;
  return cudaErrorIllegalState;
}
BENCH_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  Call(0);
  FORWARD(cudaGraphDestroy, graph);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream,
                                             cudaEvent_t event,
                                             unsigned int flags) {
  Call(kGpupoolBenchStreamWaitEventNs);
  FORWARD(cudaStreamWaitEvent, stream, event, flags);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t
cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  Call(kGpupoolBenchCaptureModeExchangeNs);
  FORWARD(cudaThreadExchangeStreamCaptureMode, mode);
  if (mode == nullptr) return cudaErrorInvalidValue;
  std::swap(*mode, capture_mode);
  return cudaSuccess;
}

// --- events

BENCH_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event,
                                                  unsigned int flags) {
  Call(kGpupoolBenchEventCreateNs);
  Count(kEventsCreated);
  FORWARD(cudaEventCreateWithFlags, event, flags);
  if (event == nullptr) return cudaErrorInvalidValue;
  *event = reinterpret_cast<cudaEvent_t>(new Event{current_device});
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
BENCH_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Call(kGpupoolBenchEventDestroyNs);
  FORWARD(cudaEventDestroy, event);
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  delete reinterpret_cast<Event*>(event);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event,
                                         cudaStream_t stream) {
  Call(kGpupoolBenchEventRecordNs);
  Count(kEventRecords);
  FORWARD(cudaEventRecord, event, stream);
  return event == nullptr ? cudaErrorInvalidResourceHandle : cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
  Call(kGpupoolBenchEventQueryNs);
  Count(kEventQueries);
  FORWARD(cudaEventQuery, event);
  return event == nullptr ? cudaErrorInvalidResourceHandle : cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Call(0);
  FORWARD(cudaEventSynchronize, event);
  return event == nullptr ? cudaErrorInvalidResourceHandle : cudaSuccess;
}

// --- memory

BENCH_EXPORT cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  Call(kGpupoolBenchMallocNs);
  if (ptr == nullptr) return cudaErrorInvalidValue;
  Memory& memory = DeviceMemory();
  static const auto real_malloc =
      RealEntry<decltype(&cudaMalloc)>("cudaMalloc");
  if (real_malloc != nullptr) {
    const cudaError_t error = real_malloc(ptr, bytes);
    if (error != cudaSuccess) return error;
    std::lock_guard<std::mutex> lock(memory.mu);
    memory.live.emplace(reinterpret_cast<uintptr_t>(*ptr),
                        static_cast<int64_t>(bytes));
    memory.reserved += static_cast<int64_t>(bytes);
    memory.peak = std::max(memory.peak, memory.reserved);
  } else {
    std::lock_guard<std::mutex> lock(memory.mu);
    // 256-byte aligned, as cudaMalloc's pointers are; a zero-byte request
    // still gets an address of its own.
    const uintptr_t address = memory.next;
    memory.next += (std::max<size_t>(bytes, 1) + 255) & ~uintptr_t{255};
    memory.live.emplace(address, static_cast<int64_t>(bytes));
    memory.reserved += static_cast<int64_t>(bytes);
    memory.peak = std::max(memory.peak, memory.reserved);
    *ptr = reinterpret_cast<void*>(address);
  }
  Count(kMallocs);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaFree(void* ptr) {
  Call(kGpupoolBenchFreeNs);
  static const auto real_free = RealEntry<decltype(&cudaFree)>("cudaFree");
  if (ptr == nullptr)
    return real_free != nullptr ? real_free(ptr) : cudaSuccess;
  Memory& memory = DeviceMemory();
  {
    std::lock_guard<std::mutex> lock(memory.mu);
    auto it = memory.live.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == memory.live.end()) {
      return real_free != nullptr ? real_free(ptr) : cudaErrorInvalidValue;
    }
    memory.reserved -= it->second;
    memory.live.erase(it);
  }
  Count(kFrees);
  return real_free != nullptr ? real_free(ptr) : cudaSuccess;
}
// Pinned host memory: real host memory (a caller may touch it).
BENCH_EXPORT cudaError_t cudaHostAlloc(void** ptr, size_t bytes,
                                       unsigned int flags) {
  Call(0);
  FORWARD(cudaHostAlloc, ptr, bytes, flags);
  if (ptr == nullptr) return cudaErrorInvalidValue;
  *ptr = std::malloc(std::max<size_t>(bytes, 1));
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
BENCH_EXPORT cudaError_t cudaFreeHost(void* ptr) {
  Call(0);
  FORWARD(cudaFreeHost, ptr);
  std::free(ptr);
  return cudaSuccess;
}
BENCH_EXPORT cudaError_t cudaMemGetInfo(size_t* free_bytes,
                                        size_t* total_bytes) {
  Call(0);
  FORWARD(cudaMemGetInfo, free_bytes, total_bytes);
  constexpr size_t kTotal = size_t{80} << 30;  // an H100's 80 GB
  Memory& memory = DeviceMemory();
  std::lock_guard<std::mutex> lock(memory.mu);
  if (total_bytes != nullptr) *total_bytes = kTotal;
  if (free_bytes != nullptr) {
    *free_bytes = kTotal - std::min<size_t>(kTotal, memory.reserved);
  }
  return cudaSuccess;
}
