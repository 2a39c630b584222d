// runtime_call_probe: a plain timing loop over the CUDA runtime calls a pool's
// hot path could make, and a check of what the runtime does with stream
// capture (which calls break a global-mode capture, on which thread; what a
// refused cross-thread cudaStreamEndCapture leaves behind). The per-call
// figures and capture findings in docs/benchmarks.md and docs/backends.md
// come from this program. runtime_calls_bench measures the same calls under
// Google Benchmark.
//
// Calls the CUDA runtime directly (like the other benchmarks/cuda/ files, it
// measures the runtime, not gpupool). Built in CUDA builds; run on a machine
// with an NVIDIA GPU: build/release/benchmarks/runtime_call_probe
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

static double TimeNs(int iters, const std::function<void()>& f) {
  for (int i = 0; i < 1000; ++i) f();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) f();
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
}
#define E(x)                                                          \
  do {                                                                \
    cudaError_t e_ = (x);                                             \
    if (e_ != cudaSuccess)                                            \
      printf("  %s -> %s (%d)\n", #x, cudaGetErrorName(e_), (int)e_); \
  } while (0)
static const char* N(cudaError_t e) { return cudaGetErrorName(e); }

int main() {
  int devices = 0;
  const cudaError_t count = cudaGetDeviceCount(&devices);
  if (count != cudaSuccess || devices == 0) {
    std::printf("runtime_call_probe: no usable CUDA device (%s)\n", N(count));
    return 2;
  }
  E(cudaSetDevice(0));
  cudaStream_t s, s2;
  E(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  E(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t ev;
  E(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  E(cudaEventRecord(ev, s));
  E(cudaStreamSynchronize(s));
  const int kIters = 200000;
  printf("== per-call costs (ns), %d iterations\n", kIters);
  printf("cudaStreamQuery(idle)                 %8.1f\n",
         TimeNs(kIters, [&] { (void)cudaStreamQuery(s); }));
  printf("cudaEventQuery(complete)              %8.1f\n",
         TimeNs(kIters, [&] { (void)cudaEventQuery(ev); }));
  printf("cudaEventRecord(idle stream)          %8.1f\n",
         TimeNs(kIters, [&] { (void)cudaEventRecord(ev, s); }));
  E(cudaStreamSynchronize(s));
  printf("exchange capture mode x2              %8.1f\n", TimeNs(kIters, [&] {
           cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
           (void)cudaThreadExchangeStreamCaptureMode(&m);
           (void)cudaThreadExchangeStreamCaptureMode(&m);
         }));
  printf("exchange+query+exchange               %8.1f\n", TimeNs(kIters, [&] {
           cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
           (void)cudaThreadExchangeStreamCaptureMode(&m);
           (void)cudaStreamQuery(s);
           (void)cudaThreadExchangeStreamCaptureMode(&m);
         }));
  printf("cudaStreamIsCapturing                 %8.1f\n", TimeNs(kIters, [&] {
           cudaStreamCaptureStatus c;
           (void)cudaStreamIsCapturing(s, &c);
         }));
  printf("cudaGetDevice                         %8.1f\n", TimeNs(kIters, [&] {
           int d;
           (void)cudaGetDevice(&d);
         }));
  printf("cudaSetDevice(same)                   %8.1f\n",
         TimeNs(kIters, [&] { (void)cudaSetDevice(0); }));
  printf("cudaGetLastError(no error)            %8.1f\n",
         TimeNs(kIters, [&] { (void)cudaGetLastError(); }));
  printf("cudaStreamWaitEvent(complete)         %8.1f\n",
         TimeNs(kIters, [&] { (void)cudaStreamWaitEvent(s2, ev, 0); }));
  E(cudaStreamSynchronize(s2));
  cudaStreamAttrValue v{};
  printf("cudaStreamGetAttribute(APW)           %8.1f\n", TimeNs(kIters, [&] {
           (void)cudaStreamGetAttribute(
               s, cudaStreamAttributeAccessPolicyWindow, &v);
         }));
  cudaStreamAttrValue z{};
  printf("cudaStreamSetAttribute(APW=0)         %8.1f\n", TimeNs(kIters, [&] {
           (void)cudaStreamSetAttribute(
               s, cudaStreamAttributeAccessPolicyWindow, &z);
         }));
  printf("cudaStreamGetPriority                 %8.1f\n", TimeNs(kIters, [&] {
           int p;
           (void)cudaStreamGetPriority(s, &p);
         }));
  printf("cudaStreamGetFlags                    %8.1f\n", TimeNs(kIters, [&] {
           unsigned f;
           (void)cudaStreamGetFlags(s, &f);
         }));
  printf("cudaStreamCreate+Destroy(nonblocking) %8.1f\n", TimeNs(20000, [&] {
           cudaStream_t t;
           (void)cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
           (void)cudaStreamDestroy(t);
         }));
  printf("cudaStreamCreateWithPriority+Destroy  %8.1f\n", TimeNs(20000, [&] {
           cudaStream_t t;
           (void)cudaStreamCreateWithPriority(&t, cudaStreamNonBlocking, -1);
           (void)cudaStreamDestroy(t);
         }));
  printf("cudaEventCreate+Destroy(notiming)     %8.1f\n", TimeNs(20000, [&] {
           cudaEvent_t t;
           (void)cudaEventCreateWithFlags(&t, cudaEventDisableTiming);
           (void)cudaEventDestroy(t);
         }));
  void* p = nullptr;
  printf("cudaMalloc+Free(1MiB)                 %8.1f\n", TimeNs(2000, [&] {
           (void)cudaMalloc(&p, 1 << 20);
           (void)cudaFree(p);
         }));

  printf("== semantics\n");
  E(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
  printf("query(capturing stream, global, same thread) -> %s\n",
         N(cudaStreamQuery(s2)));
  cudaStreamCaptureStatus cs;
  E(cudaStreamIsCapturing(s2, &cs));
  printf("  capture status after: %d\n", (int)cs);
  cudaGraph_t g = nullptr;
  printf("  end capture -> %s\n", N(cudaStreamEndCapture(s2, &g)));
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  E(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
  printf(
      "query(other idle stream) while global capture open on this thread -> "
      "%s\n",
      N(cudaStreamQuery(s)));
  E(cudaStreamIsCapturing(s2, &cs));
  printf("  capture status after: %d\n", (int)cs);
  printf("eventquery(other) while global capture open -> %s\n",
         N(cudaEventQuery(ev)));
  E(cudaStreamIsCapturing(s2, &cs));
  printf("  capture status after: %d\n", (int)cs);
  g = nullptr;
  printf("  end capture -> %s\n", N(cudaStreamEndCapture(s2, &g)));
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  E(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
  {
    cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    E(cudaThreadExchangeStreamCaptureMode(&m));
    printf("relaxed: query(other idle stream) while global capture -> %s\n",
           N(cudaStreamQuery(s)));
    printf("relaxed: query(capturing stream) -> %s\n", N(cudaStreamQuery(s2)));
    E(cudaThreadExchangeStreamCaptureMode(&m));
  }
  E(cudaStreamIsCapturing(s2, &cs));
  printf("  capture status after: %d\n", (int)cs);
  g = nullptr;
  printf("  end capture -> %s\n", N(cudaStreamEndCapture(s2, &g)));
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  {
    cudaStream_t s3;
    E(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
    E(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
    cudaError_t q = cudaSuccess, q2 = cudaSuccess;
    std::thread([&] {
      cudaSetDevice(0);
      q = cudaStreamQuery(s3);
      q2 = cudaEventQuery(ev);
    }).join();
    printf(
        "other thread: query(idle) while main has global capture -> %s, "
        "eventquery -> %s\n",
        N(q), N(q2));
    E(cudaStreamIsCapturing(s2, &cs));
    printf("  capture status after: %d\n", (int)cs);
    g = nullptr;
    printf("  end capture -> %s\n", N(cudaStreamEndCapture(s2, &g)));
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    E(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal));
    printf(
        "query(other idle) while thread-local capture open on this thread -> "
        "%s\n",
        N(cudaStreamQuery(s3)));
    E(cudaStreamIsCapturing(s2, &cs));
    printf("  capture status after: %d\n", (int)cs);
    g = nullptr;
    printf("  end capture -> %s\n", N(cudaStreamEndCapture(s2, &g)));
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    E(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
    cudaError_t we = cudaSuccess;
    cudaGraph_t wg = nullptr;
    std::thread([&] {
      cudaSetDevice(0);
      we = cudaStreamEndCapture(s2, &wg);
    }).join();
    printf("end capture from wrong thread (global) -> %s, graph %p\n", N(we),
           (void*)wg);
    cs = cudaStreamCaptureStatusActive;
    cudaError_t ie = cudaStreamIsCapturing(s2, &cs);
    printf("  is capturing after -> %s status %d\n", N(ie), (int)cs);
    g = nullptr;
    printf("  owner end capture -> %s\n", N(cudaStreamEndCapture(s2, &g)));
    if (g) cudaGraphDestroy(g);
    printf("  last error -> %s\n", N(cudaGetLastError()));
    printf("  query after -> %s\n", N(cudaStreamQuery(s2)));
    E(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
    we = cudaSuccess;
    wg = nullptr;
    std::thread([&] {
      cudaSetDevice(0);
      we = cudaStreamEndCapture(s2, &wg);
    }).join();
    printf("end capture from wrong thread (relaxed) -> %s, graph %p\n", N(we),
           (void*)wg);
    cs = cudaStreamCaptureStatusActive;
    ie = cudaStreamIsCapturing(s2, &cs);
    printf("  is capturing after -> %s status %d\n", N(ie), (int)cs);
    if (wg) cudaGraphDestroy(wg);
    g = nullptr;
    printf("  owner end capture -> %s\n", N(cudaStreamEndCapture(s2, &g)));
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    E(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
    std::thread([&] {
      cudaSetDevice(0);
      q = cudaStreamQuery(s2);
    }).join();
    printf("query(capturing stream, relaxed capture) from other thread -> %s\n",
           N(q));
    E(cudaStreamIsCapturing(s2, &cs));
    printf("  capture status after: %d\n", (int)cs);
    g = nullptr;
    printf("  end capture -> %s\n", N(cudaStreamEndCapture(s2, &g)));
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    E(cudaStreamDestroy(s3));
  }
  printf("last error at end -> %s\n", N(cudaGetLastError()));
  E(cudaStreamDestroy(s));
  E(cudaStreamDestroy(s2));
  E(cudaEventDestroy(ev));
  return 0;
}
