// Per-device state of SimBackend: the work-ticket model and idle waits.

#include "src/backends/sim/sim_device.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/backends/sim/sim_handles.h"

namespace gpupool {
namespace sim_internal {

DeviceState::DeviceState(size_t memory_per_device) {
  absl::MutexLock lock(&mu);
  memory[KindIndex(MemoryKind::kDevice)].limit = memory_per_device;
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

}  // namespace sim_internal
}  // namespace gpupool
