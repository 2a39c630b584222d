// A host-function gate for the GPU tests: holds a stream's queued work until
// the test opens it (host code only).

#ifndef GPUPOOL_TESTS_GPU_GATE_H_
#define GPUPOOL_TESTS_GPU_GATE_H_

#include <atomic>
#include <chrono>
#include <thread>

namespace gpupool::gpu_test {

// Holds a stream (WaitForGate, enqueued with cudaLaunchHostFunc) until
// Open(), or until a watchdog opens it after `limit`: nothing may
// synchronize the device while it is shut (cudaFree does), so a wrongly
// freed segment fails the test instead of hanging it. Destruction opens it.
class Gate {
 public:
  explicit Gate(std::chrono::seconds limit)
      : watchdog_([this, limit] {
          const auto deadline = std::chrono::steady_clock::now() + limit;
          while (!open_.load(std::memory_order_acquire) &&
                 std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          if (!open_.exchange(true)) timed_out_.store(true);
        }) {}
  ~Gate() { Open(); }

  void Open() {
    open_.store(true, std::memory_order_release);
    if (watchdog_.joinable()) watchdog_.join();
  }
  bool timed_out() const { return timed_out_.load(); }

  // The host function: no CUDA call on the runtime's callback thread.
  static void WaitForGate(void* gate) {
    auto* self = static_cast<Gate*>(gate);
    while (!self->open_.load(std::memory_order_acquire)) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

 private:
  std::atomic<bool> open_{false};
  std::atomic<bool> timed_out_{false};
  std::thread watchdog_;
};

}  // namespace gpupool::gpu_test

#endif  // GPUPOOL_TESTS_GPU_GATE_H_
