// CheckingBackend: a Backend that forwards every primitive to a SimBackend and
// watches the calls, for the reliability tests (fault matrix, fuzzer, stress).
//
// * Sticky faults stay sticky. A kDevice status the simulator returns because
//   of an injected failure (FailNext) poisons the simulated device on the spot,
//   as a real sticky error would: every later call on it fails, and its
//   handles are exempt from the simulator's leak checks.
// * Calls after a poison are violations. With a DeviceHealth attached, a call
//   naming a device the pools have marked poisoned is recorded (the pools must
//   drop such a device's handles without calling the runtime). Without one,
//   the stricter rule applies: no call after the simulator's device was
//   poisoned at all — right for tests whose only poison is an injected one.
// * Marked injections are counted: a status whose message contains a
//   registered marker is counted once per call that consumed it (not again
//   when a poisoned device returns the same sticky status).
//
// Free of GoogleTest so that the libFuzzer target can use it.
//
// Thread safety: all methods are thread-safe.

#ifndef GPUPOOL_TESTS_UTIL_CHECKING_BACKEND_H_
#define GPUPOOL_TESTS_UTIL_CHECKING_BACKEND_H_

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/sim_backend.h"

namespace gpupool::testing {

class CheckingBackend final : public Backend {
 public:
  // `sim` must outlive this object. `markers`: substrings of injected
  // messages to count (see marker_count).
  explicit CheckingBackend(SimBackend& sim,
                           std::vector<std::string> markers = {})
      : sim_(sim), markers_(std::move(markers)), counts_(markers_.size()) {
    absl::StatusOr<int> devices = sim_.DeviceCount();
    device_count_ = devices.ok() ? *devices : 0;
  }

  ~CheckingBackend() override {
    if (getpid() == creator_) delete mu_;
  }
  CheckingBackend(const CheckingBackend&) = delete;
  CheckingBackend& operator=(const CheckingBackend&) = delete;

  // Judge "after a poison" by the pools' view instead of the simulator's.
  // `health` must outlive this object (or be reset with nullptr).
  void WatchHealth(std::shared_ptr<const DeviceHealth> health) {
    absl::MutexLock lock(mu_);
    health_ = std::move(health);
  }

  // Before every synchronize, complete all pending work: the waiting ends
  // at once, as if the work had just finished. For single-threaded tests
  // whose work only completes when told to (InfiniteDuration).
  void CompleteWorkOnSynchronize(bool enabled) {
    complete_on_synchronize_.store(enabled);
  }

  // Called (outside our lock) at each violation, e.g. to trap right there
  // with the offending call on the stack. Set before the first call.
  void OnViolation(std::function<void(absl::string_view)> hook) {
    on_violation_ = std::move(hook);
  }

  // Called (outside our lock) before each call is passed on, e.g. to look
  // at the pools from inside one of their calls, as another thread could.
  // Set while no call is in flight.
  void BeforeEachCall(std::function<void(SimOp, int device)> hook) {
    before_call_ = std::move(hook);
  }

  SimBackend& sim() const { return sim_; }
  int marker_count(size_t marker) const { return counts_[marker].load(); }
  int64_t violation_count() const { return violation_count_.load(); }
  std::vector<std::string> violations() const {
    absl::MutexLock lock(mu_);
    return violations_;
  }

  // --- Backend ---------------------------------------------------------------
  std::string_view name() const override { return "sim (checked)"; }
  absl::StatusOr<int> DeviceCount() override {
    return Call(SimOp::kDeviceCount, -1, [&] { return sim_.DeviceCount(); });
  }
  absl::StatusOr<int> GetCurrentDevice() override {
    return Call(SimOp::kGetCurrentDevice, -1,
                [&] { return sim_.GetCurrentDevice(); });
  }
  absl::Status SetCurrentDevice(int device) override {
    return Call(SimOp::kSetCurrentDevice, device,
                [&] { return sim_.SetCurrentDevice(device); });
  }
  absl::StatusOr<NativeStream> CreateStream(
      int device, const StreamConfig& config) override {
    return Call(SimOp::kStreamCreate, device,
                [&] { return sim_.CreateStream(device, config); });
  }
  absl::Status DestroyStream(int device, NativeStream stream) override {
    return Call(SimOp::kStreamDestroy, device,
                [&] { return sim_.DestroyStream(device, stream); });
  }
  absl::Status QueryStream(int device, NativeStream stream) override {
    return Call(SimOp::kStreamQuery, device,
                [&] { return sim_.QueryStream(device, stream); });
  }
  absl::Status SynchronizeStream(int device, NativeStream stream) override {
    if (complete_on_synchronize_.load()) sim_.CompleteAllWork();
    return Call(SimOp::kStreamSynchronize, device,
                [&] { return sim_.SynchronizeStream(device, stream); });
  }
  absl::StatusOr<CaptureStatus> GetCaptureStatus(int device,
                                                 NativeStream stream) override {
    return Call(SimOp::kCaptureStatus, device,
                [&] { return sim_.GetCaptureStatus(device, stream); });
  }
  absl::StatusOr<CaptureInfo> GetCaptureInfo(int device,
                                             NativeStream stream) override {
    return Call(SimOp::kCaptureStatus, device,
                [&] { return sim_.GetCaptureInfo(device, stream); });
  }
  absl::Status EndCapture(int device, NativeStream stream) override {
    return Call(SimOp::kEndCapture, device,
                [&] { return sim_.EndCapture(device, stream); });
  }
  absl::Status ResetStreamAttributes(int device, NativeStream stream) override {
    return Call(SimOp::kResetAttributes, device,
                [&] { return sim_.ResetStreamAttributes(device, stream); });
  }
  bool HasResettableStreamAttributes(int device) override {
    return sim_.HasResettableStreamAttributes(device);
  }
  absl::Status StreamWaitEvent(int device, NativeStream stream,
                               NativeEvent event) override {
    return Call(SimOp::kStreamWaitEvent, device,
                [&] { return sim_.StreamWaitEvent(device, stream, event); });
  }
  absl::StatusOr<NativeEvent> CreateEvent(int device,
                                          const EventConfig& config) override {
    return Call(SimOp::kEventCreate, device,
                [&] { return sim_.CreateEvent(device, config); });
  }
  absl::Status DestroyEvent(int device, NativeEvent event) override {
    return Call(SimOp::kEventDestroy, device,
                [&] { return sim_.DestroyEvent(device, event); });
  }
  absl::Status RecordEvent(int device, NativeEvent event,
                           NativeStream stream) override {
    return Call(SimOp::kEventRecord, device,
                [&] { return sim_.RecordEvent(device, event, stream); });
  }
  absl::Status QueryEvent(int device, NativeEvent event) override {
    return Call(SimOp::kEventQuery, device,
                [&] { return sim_.QueryEvent(device, event); });
  }
  absl::Status SynchronizeEvent(int device, NativeEvent event) override {
    if (complete_on_synchronize_.load()) sim_.CompleteAllWork();
    return Call(SimOp::kEventSynchronize, device,
                [&] { return sim_.SynchronizeEvent(device, event); });
  }
  absl::StatusOr<void*> Allocate(int device, size_t bytes,
                                 MemoryKind kind) override {
    return Call(SimOp::kAllocate, device,
                [&] { return sim_.Allocate(device, bytes, kind); });
  }
  absl::Status Free(int device, void* ptr, MemoryKind kind) override {
    return Call(SimOp::kFree, device,
                [&] { return sim_.Free(device, ptr, kind); });
  }
  absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) override {
    return Call(SimOp::kMemoryInfo, device,
                [&] { return sim_.GetMemoryInfo(device); });
  }
  absl::StatusOr<IpcMemHandle> GetIpcHandle(int device, void* ptr) override {
    return Call(SimOp::kIpcGetHandle, device,
                [&] { return sim_.GetIpcHandle(device, ptr); });
  }
  absl::StatusOr<void*> OpenIpcHandle(int device,
                                      const IpcMemHandle& handle) override {
    return Call(SimOp::kIpcOpenHandle, device,
                [&] { return sim_.OpenIpcHandle(device, handle); });
  }
  absl::Status CloseIpcHandle(int device, void* ptr) override {
    return Call(SimOp::kIpcCloseHandle, device,
                [&] { return sim_.CloseIpcHandle(device, ptr); });
  }
  absl::StatusOr<NativeUserObject> CreateUserObject(
      int device, UserObjectDestructor destroy, void* data) override {
    return Call(SimOp::kUserObjectCreate, device,
                [&] { return sim_.CreateUserObject(device, destroy, data); });
  }
  absl::Status RetainUserObjectByGraph(int device, NativeGraph graph,
                                       NativeUserObject object) override {
    return Call(SimOp::kUserObjectRetain, device, [&] {
      return sim_.RetainUserObjectByGraph(device, graph, object);
    });
  }
  absl::Status ReleaseUserObject(int device, NativeUserObject object) override {
    return Call(SimOp::kUserObjectRelease, device,
                [&] { return sim_.ReleaseUserObject(device, object); });
  }

 private:
  static const absl::Status& StatusOf(const absl::Status& status) {
    return status;
  }
  template <typename T>
  static const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
    return status_or.status();
  }

  bool PoisonedForChecks(int device) {
    absl::MutexLock lock(mu_);
    return health_ != nullptr ? health_->is_poisoned(device)
                              : sim_.is_poisoned(device);
  }

  template <typename Fn>
  auto Call(SimOp op, int device, Fn fn) -> decltype(fn()) {
    if (before_call_) before_call_(op, device);
    const bool valid = device >= 0 && device < device_count_;
    if (valid && PoisonedForChecks(device)) {
      violation_count_.fetch_add(1);
      std::string violation = absl::StrCat(SimOpName(op), " called on device ",
                                           device, " after it was poisoned");
      if (on_violation_) on_violation_(violation);
      absl::MutexLock lock(mu_);
      violations_.push_back(std::move(violation));
    }
    const bool sim_poisoned = valid && sim_.is_poisoned(device);
    auto result = fn();
    const absl::Status& status = StatusOf(result);
    // A poisoned device answers with its sticky status again: only the call
    // that consumed an injection counts, and only it can poison.
    if (status.ok() || sim_poisoned) return result;
    for (size_t i = 0; i < markers_.size(); ++i) {
      if (absl::StrContains(status.message(), markers_[i])) {
        counts_[i].fetch_add(1);
      }
    }
    if (valid && FaultOf(status) == Fault::kDevice) {
      sim_.PoisonDevice(device, status);
    }
    return result;
  }

  SimBackend& sim_;
  int device_count_ = 0;
  const std::vector<std::string> markers_;
  std::vector<std::atomic<int>> counts_;
  std::atomic<int64_t> violation_count_{0};
  std::atomic<bool> complete_on_synchronize_{false};
  std::function<void(absl::string_view)> on_violation_;
  std::function<void(SimOp, int)> before_call_;
  // On the heap and leaked in a fork()ed child: the child may destroy this
  // backend (with the pools that own it) while a parent thread held
  // Abseil's process-wide deadlock-detection lock, which ~absl::Mutex takes.
  const pid_t creator_ = getpid();
  absl::Mutex* const mu_ = new absl::Mutex;
  std::shared_ptr<const DeviceHealth> health_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpupool::testing

#endif  // GPUPOOL_TESTS_UTIL_CHECKING_BACKEND_H_
