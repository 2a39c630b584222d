// The stream-order fence of the allocation cache; see
// stream_fence.h.

#include "src/allocation/stream_fence.h"

#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/lifetime/fault_reaction.h"
#include "src/pools/event_lease_access.h"

namespace gpupool::internal {
namespace {

// Gives events the caller just saw complete back to their pool, which then
// keeps them without a query of its own.
void ReleaseCompleted(BlockEvents* events) {
  for (PooledEvent& event : *events) EventLeaseAccess::ReleaseKnownIdle(event);
  events->clear();
}

}  // namespace

BlockState StreamOrderFence::RecordReadyEvents(AllocationBlock* block) {
  // Re-recording an event is allowed whatever its previous record's state,
  // and nothing else waits on these.
  block->release_stream = nullptr;
  if (ABSL_PREDICT_TRUE(block->uses.size() == 1 && block->events.size() == 1)) {
    // The steady same-stream cycle: the event of the block's last release,
    // kept through its hit, is re-recorded where it is.
    NativeStream stream = block->uses.front();
    absl::Status status = backend_.RecordEvent(
        block->device, block->events.front().get(), stream);
    if (ABSL_PREDICT_TRUE(status.ok())) {
      block->release_stream = stream;
      return BlockState::kPending;
    }
    return SpareNotRecorded(block, stream, status);
  }
  return RecordOnEveryStream(block);
}

BlockState StreamOrderFence::SpareNotRecorded(AllocationBlock* block,
                                              NativeStream stream,
                                              const absl::Status& status) {
  absl::StatusOr<PooledEvent> event = std::move(block->events.front());
  block->events.clear();
  if (std::optional<BlockState> state =
          NoReadyEvent(block, stream, event, status)) {
    return *state;
  }
  return BlockState::kIdle;
}

BlockState StreamOrderFence::RecordOnEveryStream(AllocationBlock* block) {
  const int device = block->device;
  // The block's own events are re-recorded where they are, one on each
  // stream of its uses; a stream beyond them gets one from the EventPool.
  BlockEvents& events = block->events;
  NativeStream single_stream = nullptr;
  size_t recorded = 0;  // events[0, recorded) are recorded
  for (NativeStream stream : block->uses) {
    absl::StatusOr<PooledEvent> event;
    absl::Status status;
    if (recorded < events.size()) {
      status = backend_.RecordEvent(device, events[recorded].get(), stream);
      if (status.ok()) {
        single_stream = stream;
        ++recorded;
        continue;
      }
      event = std::move(events[recorded]);
      events.erase(events.begin() + recorded);
    } else {
      event = events_.Acquire(device, event_config_, absl::ZeroDuration(),
                              SourceLocation::Internal());
      status = event.status();
      if (event.ok()) {
        status = backend_.RecordEvent(device, event->get(), stream);
        if (status.ok()) {
          single_stream = stream;
          events.push_back(*std::move(event));
          ++recorded;
          continue;
        }
      }
    }
    if (std::optional<BlockState> state =
            NoReadyEvent(block, stream, event, status)) {
      return *state;
    }
  }
  // Unused events (a merge may have handed the block several) are its
  // spares: its shard keeps them for leases that have none, where an
  // EventPool return would query each and an acquire draw from the pool
  // again.
  while (events.size() > recorded) {
    block->spare_events.push_back(std::move(events.back()));
    events.pop_back();
  }
  if (events.size() == 1) block->release_stream = single_stream;
  return events.empty() ? BlockState::kIdle : BlockState::kPending;
}

absl::StatusOr<CaptureInfo> StreamOrderFence::CaptureOf(int device,
                                                        NativeStream stream) {
  absl::StatusOr<CaptureInfo> info = backend_.GetCaptureInfo(device, stream);
  if (info.ok() || info.status().code() != absl::StatusCode::kUnimplemented) {
    return info;
  }
  absl::StatusOr<CaptureStatus> status =
      backend_.GetCaptureStatus(device, stream);
  if (status.ok()) return CaptureInfo{*status, 0};
  if (status.status().code() == absl::StatusCode::kUnimplemented) {
    return CaptureInfo{CaptureStatus::kNone, 0};
  }
  return status.status();
}

std::optional<BlockState> StreamOrderFence::NoReadyEvent(
    AllocationBlock* block, NativeStream stream,
    absl::StatusOr<PooledEvent>& event, const absl::Status& status) {
  const int device = block->device;
  if (event.ok() && FaultOf(status) != Fault::kDevice) event->Discard();
  BlockState state = ReactTo(device, status);
  // Discarding the event may itself have met a sticky fault: then the
  // device is dead and nothing more may be called on it.
  if (health_.is_poisoned(device)) state = BlockState::kDrop;
  if (state == BlockState::kDrop || state == BlockState::kLeak) {
    block->events.clear();
    return state;
  }
  // No event: make sure this stream's work is done the slow way.
  absl::Status synced = backend_.SynchronizeStream(device, stream);
  if (!synced.ok()) {
    state = ReactTo(device, synced);
    block->events.clear();
    // The work may still touch the memory and we cannot tell when it
    // stops: never reuse or free it.
    return state == BlockState::kDrop ? BlockState::kDrop : BlockState::kLeak;
  }
  return std::nullopt;
}

BlockState StreamOrderFence::QueryEvents(AllocationBlock* block,
                                         Consumed consumed) {
  for (PooledEvent& event : block->events) {
    absl::Status status = backend_.QueryEvent(block->device, event.get());
    if (status.ok()) continue;
    if (FaultOf(status) == Fault::kNotReady) return BlockState::kPending;
    return ReactToEventFault(block, status);
  }
  if (consumed == Consumed::kToPool) ReleaseCompleted(&block->events);
  return BlockState::kIdle;
}

BlockState StreamOrderFence::SynchronizeEvents(AllocationBlock* block) {
  for (PooledEvent& event : block->events) {
    absl::Status status = backend_.SynchronizeEvent(block->device, event.get());
    if (!status.ok()) return ReactToEventFault(block, status);
  }
  ReleaseCompleted(&block->events);
  return BlockState::kIdle;
}

BlockState StreamOrderFence::MakeStreamWait(AllocationBlock* block,
                                            NativeStream stream,
                                            Consumed consumed) {
  for (PooledEvent& event : block->events) {
    absl::Status status =
        backend_.StreamWaitEvent(block->device, stream, event.get());
    if (status.ok()) continue;
    if (status.code() == absl::StatusCode::kUnimplemented) {
      return QueryEvents(block, consumed);
    }
    BlockState state = ReactTo(block->device, status);
    return state == BlockState::kIdle ? BlockState::kPending : state;
  }
  if (consumed == Consumed::kToPool) block->events.clear();
  return BlockState::kIdle;
}

BlockState StreamOrderFence::ReactToEventFault(AllocationBlock* block,
                                               const absl::Status& status) {
  BlockState state = ReactTo(block->device, status);
  if (state == BlockState::kIdle) {
    // A bad event (kResource): the work it guarded cannot be observed any
    // more. Never reuse or free memory we cannot prove idle.
    for (PooledEvent& event : block->events) event.Discard();
    state = BlockState::kLeak;
  }
  block->events.clear();
  return state;
}

BlockState StreamOrderFence::ReactTo(int device, const absl::Status& status) {
  switch (ReactionTo(status)) {
    case Reaction::kPoison:
      health_.Poison(device, status);
      return BlockState::kDrop;
    case Reaction::kLeak:
      return BlockState::kLeak;
    case Reaction::kProceed:
    case Reaction::kDestroy:
      return BlockState::kIdle;
  }
  return BlockState::kIdle;
}

}  // namespace gpupool::internal
