// Shared internals of SimBackend: entering a call, diagnosing bad handles,
// reporting misuse and collecting leaks (see sim_state.h).

#include "src/backends/sim/sim_state.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gpupool/backend.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_handles.h"

namespace gpupool {
namespace sim_internal {
namespace {

// Instance ids are process-wide and never reused, so a thread's current-device
// entry for a destroyed backend can never be mistaken for a new backend's.
std::atomic<uint64_t> next_instance_id{1};

// Sleeping overshoots by the kernel's timer slack (~50 µs on Linux), which
// would turn the Cuda profile's 1.5 µs into 50 µs; shorter latencies are spun.
constexpr absl::Duration kSpinBelow = absl::Microseconds(100);

absl::string_view HandleKindName(HandleKind kind) {
  return kind == HandleKind::kStream ? "stream" : "event";
}

void PrintMisuse(absl::string_view message) {
  std::fprintf(stderr, "gpupool sim misuse: %.*s\n",
               static_cast<int>(message.size()), message.data());
}

}  // namespace

void ChargeLatency(absl::Duration latency) {
  if (latency <= absl::ZeroDuration()) return;
  if (latency >= kSpinBelow) {
    absl::SleepFor(latency);
    return;
  }
  auto until =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(latency);
  while (std::chrono::steady_clock::now() < until) {
  }
}

std::string Hex(uintptr_t value) {
  return absl::StrCat("0x", absl::Hex(value));
}

absl::Status CallerError(absl::StatusCode code, absl::string_view message) {
  return FaultError(Fault::kCaller, code, absl::StrCat("sim: ", message));
}

absl::Status NotReady(absl::string_view what, uintptr_t handle) {
  return FaultError(
      Fault::kNotReady, absl::StatusCode::kUnavailable,
      absl::StrCat("sim: ", what, " ", Hex(handle), " not ready"));
}

absl::flat_hash_map<uint64_t, int>& ThreadCurrentDevices() {
  thread_local absl::flat_hash_map<uint64_t, int> current_devices;
  return current_devices;
}

}  // namespace sim_internal

using sim_internal::DecodedHandle;
using sim_internal::DecodeHandle;
using sim_internal::DeviceState;
using sim_internal::HandleKind;
using sim_internal::HandleKindName;
using sim_internal::HandleValue;
using sim_internal::Hex;

SimBackend::State::State(SimOptions opts)
    : options(std::move(opts)),
      instance_id(sim_internal::next_instance_id.fetch_add(
          1, std::memory_order_relaxed)),
      instance_tag(instance_id & sim_internal::kInstanceTagMask) {
  if (!options.on_misuse) options.on_misuse = sim_internal::PrintMisuse;
  // Fake addresses give each device two 2^56-byte regions in 64 bits.
  device_count =
      std::clamp(options.device_count, 0, sim_internal::kMaxAddressDevices);
  devices.reserve(device_count);
  for (int i = 0; i < device_count; ++i) {
    devices.push_back(std::make_unique<DeviceState>(options.memory_per_device));
  }
}

absl::optional<absl::Status> SimBackend::State::TakeInjected(SimOp op,
                                                             int device) {
  absl::MutexLock lock(&injection_mu);
  for (auto it = injected.begin(); it != injected.end(); ++it) {
    if (it->op == op && (it->device == -1 || it->device == device)) {
      absl::Status status = std::move(it->status);
      injected.erase(it);
      queued_failures.fetch_sub(1, std::memory_order_release);
      return status;
    }
  }
  return absl::nullopt;
}

void SimBackend::State::ReportMisuse(std::string message) {
  misuse_count.fetch_add(1, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&misuse_mu);
    misuse_messages.push_back(message);
  }
  options.on_misuse(message);
}

std::string SimBackend::State::DiagnoseHandle(const DeviceState& d, int device,
                                              uintptr_t handle, HandleKind kind,
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
  if (decoded.id < d.next_handle_id) {
    return absl::StrCat(
        op, destroying ? ": double destroy of " : ": use after destroy of ",
        kind_name, " ", Hex(handle), " on device ", device);
  }
  return absl::StrCat(op, ": unknown ", kind_name, " ", Hex(handle),
                      " (never created on device ", device, ")");
}

int SimBackend::State::DeviceOfHandle(const void* handle,
                                      absl::string_view op) {
  int device = DecodeHandle(HandleValue(handle)).device;
  if (handle != nullptr && ValidDevice(device)) return device;
  ReportMisuse(absl::StrCat(op, ": unknown handle ", Hex(HandleValue(handle))));
  return -1;
}

std::vector<std::string> SimBackend::State::CollectLeaks() const {
  std::vector<std::string> leaks;
  for (int device = 0; device < device_count; ++device) {
    const DeviceState& d = *devices[device];
    absl::ReaderMutexLock lock(&d.mu);
    if (d.poisoned) continue;
    std::vector<std::pair<uintptr_t, std::string>> found;
    for (const auto& [handle, stream] : d.streams) {
      found.emplace_back(
          handle, absl::StrCat("stream ", Hex(handle), " on device ", device,
                               " (", stream.config.ToString(), ")"));
    }
    for (const auto& [handle, event] : d.events) {
      found.emplace_back(
          handle, absl::StrCat("event ", Hex(handle), " on device ", device,
                               " (", event.config.ToString(), ")"));
    }
    for (const auto& [address, allocation] : d.allocations) {
      found.emplace_back(
          address,
          absl::StrCat("allocation ", Hex(address), " of ", allocation.bytes,
                       " bytes of ", MemoryKindName(allocation.kind),
                       " memory on device ", device));
    }
    for (const auto& [id, graph] : d.capture.graphs) {
      found.emplace_back(id, absl::StrCat("graph ", id, " on device ", device,
                                          " (", graph.launches, " launches)"));
    }
    std::sort(found.begin(), found.end());
    for (auto& entry : found) leaks.push_back(std::move(entry.second));
  }
  return leaks;
}

}  // namespace gpupool
