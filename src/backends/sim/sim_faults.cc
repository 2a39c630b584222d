// SimFaultInjector: call counting and FailNext injections (sim_faults.h).

#include "src/backends/sim/sim_faults.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/optional.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_support.h"
#include "src/backends/sim/sim_user_objects.h"

namespace gpupool {
namespace sim_internal {

SimFaultInjector::SimFaultInjector(int device_count, SimMisuseLog& misuse)
    : device_count_(device_count),
      misuse_(misuse),
      device_calls_(
          std::make_unique<DeviceCalls[]>(static_cast<size_t>(device_count))) {}

absl::Status SimFaultInjector::FromDestructor(SimOp op) {
  std::string message =
      absl::StrCat(SimOpName(op),
                   " called from a user object's destructor, where no "
                   "runtime call is allowed");
  absl::Status refused =
      CallerError(absl::StatusCode::kFailedPrecondition, message);
  misuse_.Report(std::move(message));
  return refused;
}

absl::Status SimFaultInjector::Enter(SimOp op, int device) {
  const int index = static_cast<int>(op);
  const bool valid = device >= 0 && device < device_count_;
  if (valid) {
    device_calls_[device].op_calls[index].fetch_add(1,
                                                    std::memory_order_relaxed);
  } else {
    calls_without_device_[index].fetch_add(1, std::memory_order_relaxed);
  }
  if (queued_.load(std::memory_order_acquire) > 0) {
    absl::optional<absl::Status> injected = TakeInjected(op, device);
    if (injected.has_value()) return *std::move(injected);
  }
  if (ABSL_PREDICT_FALSE(InUserObjectDestructor())) return FromDestructor(op);
  if (!valid) {
    return CallerError(absl::StatusCode::kInvalidArgument,
                       absl::StrCat(SimOpName(op), ": device ", device,
                                    " out of range [0, ", device_count_, ")"));
  }
  return absl::OkStatus();
}

absl::Status SimFaultInjector::EnterWithoutDevice(SimOp op) {
  calls_without_device_[static_cast<int>(op)].fetch_add(
      1, std::memory_order_relaxed);
  if (queued_.load(std::memory_order_acquire) > 0) {
    absl::optional<absl::Status> injected = TakeInjected(op, -1);
    if (injected.has_value()) return *std::move(injected);
  }
  if (ABSL_PREDICT_FALSE(InUserObjectDestructor())) return FromDestructor(op);
  return absl::OkStatus();
}

void SimFaultInjector::Queue(SimOp op, absl::Status status, int device) {
  absl::MutexLock lock(&mu_);
  injected_.push_back(InjectedFailure{op, device, std::move(status)});
  queued_.fetch_add(1, std::memory_order_release);
}

absl::optional<absl::Status> SimFaultInjector::TakeInjected(SimOp op,
                                                            int device) {
  absl::MutexLock lock(&mu_);
  for (auto it = injected_.begin(); it != injected_.end(); ++it) {
    if (it->op == op && (it->device == -1 || it->device == device)) {
      absl::Status status = std::move(it->status);
      injected_.erase(it);
      queued_.fetch_sub(1, std::memory_order_release);
      return status;
    }
  }
  return absl::nullopt;
}

int64_t SimFaultInjector::calls(SimOp op) const {
  const int index = static_cast<int>(op);
  int64_t sum = calls_without_device_[index].load(std::memory_order_relaxed);
  for (int device = 0; device < device_count_; ++device) {
    sum +=
        device_calls_[device].op_calls[index].load(std::memory_order_relaxed);
  }
  return sum;
}

int64_t SimFaultInjector::total_calls() const {
  int64_t total = 0;
  for (int op = 0; op < kSimOpCount; ++op) {
    total += calls(static_cast<SimOp>(op));
  }
  return total;
}

int64_t SimFaultInjector::calls_on_device(int device) const {
  if (device < 0 || device >= device_count_) return 0;
  int64_t total = 0;
  for (const std::atomic<int64_t>& count : device_calls_[device].op_calls) {
    total += count.load(std::memory_order_relaxed);
  }
  return total;
}

}  // namespace sim_internal
}  // namespace gpupool
