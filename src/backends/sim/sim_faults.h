// SimFaultInjector: the gate every simulated primitive enters through. It
// counts the call (per op, and per device when the call names a valid one),
// returns a failure a test queued with SimBackend::FailNext, and rejects an
// out-of-range device. Sticky device faults (poison) and stream faults live
// with the device (sim_device.h).
//
// Thread safety: all methods may be called concurrently. Counters are
// atomics; the queue has its own mutex, skipped on the hot path while empty.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_FAULTS_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_FAULTS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/optional.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_misuse.h"

namespace gpupool {
namespace sim_internal {

class SimFaultInjector {
 public:
  SimFaultInjector(int device_count, SimMisuseLog& misuse);
  SimFaultInjector(const SimFaultInjector&) = delete;
  SimFaultInjector& operator=(const SimFaultInjector&) = delete;

  // Steps 1-3 of every primitive naming `device` (sim_backend.cc lists
  // them): count the call, return a matching queued failure, reject a bad
  // device (kCaller). A call from inside a user object's destructor is a
  // misuse: reported, and refused with kCaller.
  absl::Status Enter(SimOp op, int device);
  // Steps 1-2 for primitives that name no device.
  absl::Status EnterWithoutDevice(SimOp op);

  // Queues `status` (not OK) for the next call of `op` on `device` (-1: any
  // device). Injections are consumed in FIFO order.
  void Queue(SimOp op, absl::Status status, int device);

  // Calls of `op` so far (injected failures included); all ops summed; the
  // calls that named `device`.
  int64_t calls(SimOp op) const;
  int64_t total_calls() const;
  int64_t calls_on_device(int device) const;

 private:
  struct InjectedFailure {
    SimOp op;
    int device;  // -1: any device.
    absl::Status status;
  };
  // alignas keeps the counters of different devices on different cache
  // lines, so callers on different devices never share one.
  struct alignas(64) DeviceCalls {
    std::atomic<int64_t> op_calls[kSimOpCount] = {};
  };

  // Reports a call of `op` from a user object's destructor; its refusal.
  absl::Status FromDestructor(SimOp op);
  // Removes and returns the first queued injection matching the call.
  absl::optional<absl::Status> TakeInjected(SimOp op, int device);

  const int device_count_;
  SimMisuseLog& misuse_;
  std::unique_ptr<DeviceCalls[]> device_calls_;
  // Calls that named no valid device (per op).
  std::atomic<int64_t> calls_without_device_[kSimOpCount] = {};
  // Lets the hot path skip the queue's lock when nothing is queued.
  std::atomic<int> queued_{0};
  absl::Mutex mu_;
  std::deque<InjectedFailure> injected_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_FAULTS_H_
