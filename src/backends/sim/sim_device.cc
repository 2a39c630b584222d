// The simulated devices (sim_device.h): handle bookkeeping, the work-ticket
// model and idle waits of one device, and the device-wide primitives.

#include "src/backends/sim/sim_device.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "src/backends/sim/sim_handles.h"
#include "src/backends/sim/sim_support.h"

namespace gpupool {
namespace sim_internal {
namespace {

// Instance ids are process-wide and never reused, so a thread's current-device
// entry for a destroyed backend can never be mistaken for a new backend's.
std::atomic<uint64_t> next_instance_id{1};

// The calling thread's current device per SimBackend instance id.
absl::flat_hash_map<uint64_t, int>& ThreadCurrentDevices() {
  thread_local absl::flat_hash_map<uint64_t, int> current_devices;
  return current_devices;
}

absl::string_view HandleKindName(HandleKind kind) {
  return kind == HandleKind::kStream ? "stream" : "event";
}

absl::Status NoDeviceError() {
  return CallerError(absl::StatusCode::kFailedPrecondition,
                     "no simulated device (SimOptions::device_count is 0)");
}

}  // namespace

// --- DeviceState -------------------------------------------------------------

DeviceState::DeviceState(int device, uint64_t instance_tag)
    : device(device), instance_tag(instance_tag) {}

absl::Status DeviceState::PoisonStatus() const {
  absl::ReaderMutexLock lock(&mu);
  return poisoned ? sticky : absl::OkStatus();
}

absl::StatusOr<uintptr_t> DeviceState::NewHandleLocked(HandleKind kind) {
  if (poisoned) return sticky;
  if (next_handle_id > kMaxHandleId) {
    return FaultError(Fault::kOutOfMemory, absl::StatusCode::kResourceExhausted,
                      "sim: handle space of the device exhausted");
  }
  return EncodeHandle(device, instance_tag, next_handle_id++, kind);
}

std::string DeviceState::DiagnoseHandle(uintptr_t handle, HandleKind kind,
                                        absl::string_view op,
                                        bool destroying) const {
  absl::string_view kind_name = HandleKindName(kind);
  if (handle == 0) {
    return absl::StrCat(op, ": null ", kind_name, " on device ", device);
  }
  DecodedHandle decoded = DecodeHandle(handle);
  bool well_formed =
      (decoded.kind_bits == static_cast<uint64_t>(HandleKind::kStream) ||
       decoded.kind_bits == static_cast<uint64_t>(HandleKind::kEvent)) &&
      decoded.device >= 0 && decoded.id > 0;
  if (!well_formed) {
    return absl::StrCat(op, ": unknown ", kind_name, " ", Hex(handle),
                        " (not a handle of any SimBackend)");
  }
  if (decoded.instance_tag != instance_tag) {
    return absl::StrCat(op, ": foreign ", kind_name, " ", Hex(handle),
                        " (created by another SimBackend)");
  }
  if (decoded.kind_bits != static_cast<uint64_t>(kind)) {
    HandleKind actual = static_cast<HandleKind>(decoded.kind_bits);
    return absl::StrCat(op, ": ", HandleKindName(actual), " ", Hex(handle),
                        " passed as a ", kind_name);
  }
  if (decoded.device != device) {
    return absl::StrCat(op, ": wrong device: ", kind_name, " ", Hex(handle),
                        " belongs to device ", decoded.device,
                        " but was passed with device ", device);
  }
  if (decoded.id < next_handle_id) {
    return absl::StrCat(
        op, destroying ? ": double destroy of " : ": use after destroy of ",
        kind_name, " ", Hex(handle), " on device ", device);
  }
  return absl::StrCat(op, ": unknown ", kind_name, " ", Hex(handle),
                      " (never created on device ", device, ")");
}

absl::StatusOr<StreamState*> DeviceState::FindStream(
    NativeStream stream, absl::string_view op, SimMisuseLog::Reporter& misuse,
    bool destroying) {
  uintptr_t handle = HandleValue(stream);
  auto it = streams.find(handle);
  if (it != streams.end()) return &it->second;
  return misuse.Flag(
      DiagnoseHandle(handle, HandleKind::kStream, op, destroying));
}

absl::StatusOr<EventState*> DeviceState::FindEvent(
    NativeEvent event, absl::string_view op, SimMisuseLog::Reporter& misuse,
    bool destroying) {
  uintptr_t handle = HandleValue(event);
  auto it = events.find(handle);
  if (it != events.end()) return &it->second;
  return misuse.Flag(
      DiagnoseHandle(handle, HandleKind::kEvent, op, destroying));
}

bool DeviceState::Forget(HandleKind kind, uintptr_t handle) {
  if (kind == HandleKind::kStream) {
    if (streams.erase(handle) == 0) return false;
    streams_destroyed.fetch_add(1, std::memory_order_relaxed);
  } else {
    if (events.erase(handle) == 0) return false;
    events_destroyed.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

void DeviceState::AppendLeaks(LeakList* leaks) const {
  for (const auto& [handle, stream] : streams) {
    leaks->emplace_back(
        handle, absl::StrCat("stream ", Hex(handle), " on device ", device,
                             " (", stream.config.ToString(), ")"));
  }
  for (const auto& [handle, event] : events) {
    leaks->emplace_back(
        handle, absl::StrCat("event ", Hex(handle), " on device ", device, " (",
                             event.config.ToString(), ")"));
  }
}

void DeviceState::ResetLocked() {
  streams_destroyed.fetch_add(static_cast<int64_t>(streams.size()),
                              std::memory_order_relaxed);
  events_destroyed.fetch_add(static_cast<int64_t>(events.size()),
                             std::memory_order_relaxed);
  streams.clear();
  events.clear();
  CompleteAllTickets();
  poisoned = false;
  sticky = absl::OkStatus();
  changed.SignalAll();
}

uint64_t DeviceState::AddTicket(absl::Time deadline) {
  if (tickets_.size() >= sweep_at_) {
    absl::Time now = absl::Now();
    absl::erase_if(tickets_,
                   [now](const auto& ticket) { return ticket.second <= now; });
    sweep_at_ = std::max<size_t>(1024, 2 * tickets_.size());
  }
  uint64_t id = next_ticket_++;
  tickets_.emplace(id, deadline);
  return id;
}

bool DeviceState::PruneWork(std::vector<uint64_t>* work, absl::Time now,
                            absl::Time* latest) {
  *latest = absl::InfinitePast();
  // A plain loop rather than remove_if: lambdas hide the held lock from
  // clang's thread-safety analysis.
  size_t kept = 0;
  for (uint64_t id : *work) {
    auto it = tickets_.find(id);
    if (it == tickets_.end()) continue;
    if (it->second <= now) {
      tickets_.erase(it);
      continue;
    }
    *latest = std::max(*latest, it->second);
    (*work)[kept++] = id;
  }
  work->resize(kept);
  return !work->empty();
}

bool DeviceState::HasPendingWork(const std::vector<uint64_t>& work,
                                 absl::Time now) const {
  for (uint64_t id : work) {
    auto it = tickets_.find(id);
    if (it != tickets_.end() && it->second > now) return true;
  }
  return false;
}

void DeviceState::CompleteTickets(std::vector<uint64_t>* work) {
  for (uint64_t id : *work) tickets_.erase(id);
  work->clear();
  changed.SignalAll();
}

void DeviceState::CompleteAllTickets() {
  tickets_.clear();
  for (auto& [handle, stream] : streams) stream.work.clear();
  for (auto& [handle, event] : events) event.work.clear();
  changed.SignalAll();
}

void DeviceState::WaitUntil(absl::Time latest) {
  if (latest == absl::InfiniteFuture()) {
    changed.Wait(&mu);
  } else {
    changed.WaitWithDeadline(&mu, latest);
  }
}

WaitResult DeviceState::WaitStreamIdle(uintptr_t handle, bool stop_on_fault) {
  while (true) {
    if (poisoned) return WaitResult::kPoisoned;
    auto it = streams.find(handle);
    if (it == streams.end()) return WaitResult::kGone;
    if (stop_on_fault && !it->second.fault.ok()) return WaitResult::kFaulted;
    absl::Time latest;
    if (!PruneWork(&it->second.work, absl::Now(), &latest)) {
      return WaitResult::kIdle;
    }
    WaitUntil(latest);
  }
}

WaitResult DeviceState::WaitEventIdle(uintptr_t handle) {
  while (true) {
    if (poisoned) return WaitResult::kPoisoned;
    auto it = events.find(handle);
    if (it == events.end()) return WaitResult::kGone;
    absl::Time latest;
    if (!PruneWork(&it->second.work, absl::Now(), &latest)) {
      return WaitResult::kIdle;
    }
    WaitUntil(latest);
  }
}

// --- SimDevices --------------------------------------------------------------

SimDevices::SimDevices(int device_count, SimFaultInjector& faults,
                       SimMisuseLog& misuse)
    : faults_(faults),
      misuse_(misuse),
      instance_id_(next_instance_id.fetch_add(1, std::memory_order_relaxed)) {
  devices_.reserve(device_count);
  for (int i = 0; i < device_count; ++i) {
    devices_.push_back(
        std::make_unique<DeviceState>(i, instance_id_ & kInstanceTagMask));
  }
}

int SimDevices::DeviceOfHandle(const void* handle, absl::string_view op) {
  int device = DecodeHandle(HandleValue(handle)).device;
  if (handle != nullptr && ValidDevice(device)) return device;
  misuse_.Report(
      absl::StrCat(op, ": unknown handle ", Hex(HandleValue(handle))));
  return -1;
}

absl::Status SimDevices::FailDestroy(absl::Status status, int device,
                                     HandleKind kind, uintptr_t handle) {
  if (ValidDevice(device)) {
    DeviceState& d = *devices_[device];
    absl::MutexLock lock(&d.mu);
    d.Forget(kind, handle);
  }
  return status;
}

absl::StatusOr<int> SimDevices::DeviceCount() {
  absl::Status entered = faults_.EnterWithoutDevice(SimOp::kDeviceCount);
  if (!entered.ok()) return entered;
  if (device_count() == 0) return NoDeviceError();
  return device_count();
}

absl::StatusOr<int> SimDevices::GetCurrentDevice() {
  absl::Status entered = faults_.EnterWithoutDevice(SimOp::kGetCurrentDevice);
  if (!entered.ok()) return entered;
  if (device_count() == 0) return NoDeviceError();
  const auto& current = ThreadCurrentDevices();
  auto it = current.find(instance_id_);
  return it == current.end() ? 0 : it->second;
}

absl::Status SimDevices::SetCurrentDevice(int device) {
  absl::Status status = faults_.Enter(SimOp::kSetCurrentDevice, device);
  if (!status.ok()) return status;
  status = devices_[device]->PoisonStatus();
  if (!status.ok()) return status;
  ThreadCurrentDevices()[instance_id_] = device;
  return absl::OkStatus();
}

void SimDevices::PoisonDevice(int device, absl::Status sticky) {
  if (!ValidDevice(device)) {
    misuse_.Report(
        absl::StrCat("PoisonDevice: device ", device, " out of range"));
    return;
  }
  if (sticky.ok()) sticky = absl::InternalError("sim: device poisoned");
  DeviceState& d = *devices_[device];
  absl::MutexLock lock(&d.mu);
  d.poisoned = true;
  d.sticky = WithFault(std::move(sticky), Fault::kDevice);
  d.changed.SignalAll();
}

void SimDevices::CompleteAllWork() {
  for (const std::unique_ptr<DeviceState>& d : devices_) {
    absl::MutexLock lock(&d->mu);
    d->CompleteAllTickets();
  }
}

bool SimDevices::is_poisoned(int device) const {
  if (!ValidDevice(device)) return false;
  const DeviceState& d = *devices_[device];
  absl::ReaderMutexLock lock(&d.mu);
  return d.poisoned;
}

int64_t SimDevices::Sum(std::atomic<int64_t> DeviceState::*counter) const {
  int64_t sum = 0;
  for (const std::unique_ptr<DeviceState>& d : devices_) {
    sum += ((*d).*counter).load(std::memory_order_relaxed);
  }
  return sum;
}

}  // namespace sim_internal
}  // namespace gpupool
