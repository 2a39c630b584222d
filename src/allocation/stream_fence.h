// The stream-order fence of the allocation cache: proves, with ready events,
// that the GPU work which used a block is done before the block is handed to
// another stream or freed. At release a ready event is recorded on every
// stream that used the block; a later request checks them (query), waits on
// them (stream wait, no host sync) or, when freeing, synchronizes on them.
// Faults are read through the one table in fault_reaction.h.
//
// Thread safety: stateless apart from its references; a block is in the
// hands of one thread while the fence works on it.

#ifndef GPUPOOL_SRC_ALLOCATION_STREAM_FENCE_H_
#define GPUPOOL_SRC_ALLOCATION_STREAM_FENCE_H_

#include <optional>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/device_health.h"
#include "gpupool/event_pool.h"
#include "src/allocation/block.h"

namespace gpupool::internal {

class StreamOrderFence {
 public:
  // All three must outlive the fence.
  StreamOrderFence(Backend& backend, EventPool& events, DeviceHealth& health,
                   const EventConfig& event_config)
      : backend_(backend),
        events_(events),
        health_(health),
        event_config_(event_config) {}

  // Records a ready event on every stream that used the block (Allocate's
  // stream and RecordUse's): one of the block's spare events (kept from a
  // same-stream hit) when it has any, else one from the EventPool, taken
  // without waiting (a full bounded pool must not stall a release for its
  // acquire_timeout). With no event to be had, that stream is synchronized
  // instead. kIdle: nothing is
  // pending (no event recorded); kPending: events recorded; kDrop / kLeak:
  // the block must be forgotten.
  BlockState RecordReadyEvents(AllocationBlock* block);
  // Whether `stream` captures: its capture info, from GetCaptureInfo, or
  // from GetCaptureStatus (id 0) on a backend written before capture ids;
  // kNone on a backend with neither (it cannot capture). An error is the
  // caller's to react to: the capture is unknown.
  absl::StatusOr<CaptureInfo> CaptureOf(int device, NativeStream stream);
  // What becomes of a block's events once they are proven complete or
  // waited on: back to the EventPool, or kept on the block as spares that
  // its next release re-records (no EventPool round trip: the block is about
  // to be leased). An event proven complete goes back as known idle
  // (ReturnAs::kKnownIdle: the pool keeps it without querying it again); a
  // waited-on one as any return (the pool queries it).
  enum class Consumed { kToPool, kKeepAsSpares };
  // kIdle when every event of `block` completed, kPending while any is
  // pending.
  BlockState QueryEvents(AllocationBlock* block,
                         Consumed consumed = Consumed::kToPool);
  // Blocks until every event of `block` completed.
  BlockState SynchronizeEvents(AllocationBlock* block);
  // Makes `stream` wait on every event of `block` (no host sync). Falls back
  // to a query on backends without StreamWaitEvent. Re-recording a waited-on
  // event later is allowed: the wait took the record's state when made.
  BlockState MakeStreamWait(AllocationBlock* block, NativeStream stream,
                            Consumed consumed = Consumed::kToPool);

 private:
  // Device faults poison the device (kDrop), shutdown means leak; anything
  // else is left to the caller (kIdle).
  BlockState ReactTo(int device, const absl::Status& status);
  // After `stream` got no ready event (`status`: why; `event`, when there
  // was one, is discarded unless the device faulted): its work is waited
  // for the slow way. Returns kDrop or kLeak when the block must not be
  // reused, else nullopt (the stream's work is done).
  std::optional<BlockState> NoReadyEvent(AllocationBlock* block,
                                         NativeStream stream,
                                         absl::StatusOr<PooledEvent>& event,
                                         const absl::Status& status);
  BlockState ReactToEventFault(AllocationBlock* block,
                               const absl::Status& status);
  // RecordReadyEvents out of its steady cycle (out of line, so that the
  // cycle's own path stays small): the re-record of the one spare event
  // failed with `status`; or the block has no single spare event for its
  // single stream.
  ABSL_ATTRIBUTE_NOINLINE BlockState SpareNotRecorded(
      AllocationBlock* block, NativeStream stream, const absl::Status& status);
  ABSL_ATTRIBUTE_NOINLINE BlockState
  RecordOnEveryStream(AllocationBlock* block);

  Backend& backend_;
  EventPool& events_;
  DeviceHealth& health_;
  const EventConfig& event_config_;
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_ALLOCATION_STREAM_FENCE_H_
