// The trace ring of trace_ring.h.

#include "src/allocation/trace_ring.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace gpupool::internal {
namespace {

thread_local bool runtime_malloc_mark = false;

}  // namespace

void MarkRuntimeMalloc() { runtime_malloc_mark = true; }

bool TakeRuntimeMallocMark() {
  const bool marked = runtime_malloc_mark;
  runtime_malloc_mark = false;
  return marked;
}

TraceRing::TraceRing(size_t capacity, int devices)
    : capacity_(std::max<size_t>(capacity, 1)),
      devices_(std::max(devices, 1)),
      start_ns_(absl::GetCurrentTimeNanos()),
      totals_(static_cast<size_t>(std::max(devices, 1)) * 2) {}

TraceRing::Totals& TraceRing::TotalsOf(int device, MemoryKind kind) {
  const int index = std::clamp(device, 0, devices_ - 1) * 2 +
                    (kind == MemoryKind::kDevice ? 0 : 1);
  return totals_[static_cast<size_t>(index)];
}

void TraceRing::Push(TraceEvent event, const Totals& totals) {
  event.t_ns = absl::GetCurrentTimeNanos() - start_ns_;
  event.reserved_bytes =
      static_cast<uint64_t>(std::max<int64_t>(0, totals.reserved));
  event.in_use_bytes =
      static_cast<uint64_t>(std::max<int64_t>(0, totals.in_use));
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(event));
    return;
  }
  ring_[next_] = std::move(event);
  next_ = (next_ + 1) % capacity_;
}

void TraceRing::Allocated(int device, MemoryKind kind, size_t bytes,
                          const void* ptr, uint64_t lease_id,
                          SourceLocation site, bool reused) {
  MutexLock lock(&mu_);
  Totals& totals = TotalsOf(device, kind);
  totals.in_use += static_cast<int64_t>(bytes);
  TraceEvent event;
  event.op = reused ? TraceOp::kReuse : TraceOp::kAllocate;
  event.device = device;
  event.kind = kind;
  event.bytes = bytes;
  event.address = reinterpret_cast<uintptr_t>(ptr);
  event.lease_id = lease_id;
  event.site = site;
  Push(std::move(event), totals);
}

void TraceRing::Released(int device, MemoryKind kind, size_t bytes,
                         const void* ptr, uint64_t lease_id) {
  MutexLock lock(&mu_);
  Totals& totals = TotalsOf(device, kind);
  totals.in_use -= static_cast<int64_t>(bytes);
  TraceEvent event;
  event.op = TraceOp::kRelease;
  event.device = device;
  event.kind = kind;
  event.bytes = bytes;
  event.address = reinterpret_cast<uintptr_t>(ptr);
  event.lease_id = lease_id;
  Push(std::move(event), totals);
}

void TraceRing::RuntimeMalloc(int device, MemoryKind kind, size_t bytes,
                              const void* ptr) {
  MutexLock lock(&mu_);
  Totals& totals = TotalsOf(device, kind);
  totals.reserved += static_cast<int64_t>(bytes);
  runtime_bytes_[reinterpret_cast<uintptr_t>(ptr)] = bytes;
  TraceEvent event;
  event.op = TraceOp::kRuntimeMalloc;
  event.device = device;
  event.kind = kind;
  event.bytes = bytes;
  event.address = reinterpret_cast<uintptr_t>(ptr);
  Push(std::move(event), totals);
}

void TraceRing::RuntimeFree(int device, MemoryKind kind, const void* ptr) {
  MutexLock lock(&mu_);
  size_t bytes = 0;
  if (auto it = runtime_bytes_.find(reinterpret_cast<uintptr_t>(ptr));
      it != runtime_bytes_.end()) {
    bytes = it->second;
    runtime_bytes_.erase(it);
  }
  Totals& totals = TotalsOf(device, kind);
  totals.reserved -= static_cast<int64_t>(bytes);
  TraceEvent event;
  event.op = TraceOp::kRuntimeFree;
  event.device = device;
  event.kind = kind;
  event.bytes = bytes;
  event.address = reinterpret_cast<uintptr_t>(ptr);
  Push(std::move(event), totals);
}

void TraceRing::Note(TraceOp op, int device, MemoryKind kind, size_t bytes) {
  Transition(op, /*what=*/{}, device, kind, bytes, /*ptr=*/nullptr);
}

void TraceRing::Transition(TraceOp op, absl::string_view what, int device,
                           MemoryKind kind, size_t bytes, const void* ptr,
                           int64_t graph_pool) {
  MutexLock lock(&mu_);
  TraceEvent event;
  event.op = op;
  event.what = what;
  event.device = device;
  event.kind = kind;
  event.bytes = bytes;
  event.address = reinterpret_cast<uintptr_t>(ptr);
  event.graph_pool = graph_pool;
  Push(std::move(event), TotalsOf(device, kind));
}

std::vector<TraceEvent> TraceRing::Events() const {
  MutexLock lock(&mu_);
  std::vector<TraceEvent> out;
  out.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) {
    out.push_back(ring_[(next_ + i) % ring_.size()]);
  }
  return out;
}

}  // namespace gpupool::internal
