// The two handle kinds the keyed-pool engine is instantiated for: what
// creating, destroying and validating a stream or an event means.

#ifndef GPUPOOL_SRC_POOLS_RESOURCE_KINDS_H_
#define GPUPOOL_SRC_POOLS_RESOURCE_KINDS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/stream_pool.h"
#include "src/pools/keyed_pool.h"

namespace gpupool::internal {

struct StreamKind {
  using Config = StreamConfig;
  using Lease = PooledStream;
  static constexpr absl::string_view kName = "stream";
  static constexpr absl::string_view kPoolName = "stream pool";
  // A stream is validated at every return: it may capture, or carry
  // attributes to reset, whatever its caller saw.
  static constexpr bool kKnownIdleSkipsQuery = false;

  static absl::StatusOr<void*> Create(Backend& backend, int device,
                                      const Config& config) {
    return backend.CreateStream(device, config);
  }
  static absl::Status Destroy(Backend& backend, int device, void* stream) {
    return backend.DestroyStream(device, stream);
  }
  static absl::Status Query(Backend& backend, int device, void* stream) {
    return backend.QueryStream(device, stream);
  }
  // Return protocol, after a query that failed other than "pending": the
  // query of a capturing stream is refused (CUDA/HIP: a StreamCapture*
  // error; the simulator alike), so only now is the capture status worth a
  // call. A capturing stream is never reused: its capture is ended and the
  // graph discarded first, so destroying it cannot leak a half-built graph.
  static Check CheckFailedQuery(Backend& backend, int device, void* stream,
                                const absl::Status& query) {
    const Fault fault = FaultOf(query);
    if (fault == Fault::kDevice || fault == Fault::kShutdown) {
      return CheckFor(query);
    }
    absl::StatusOr<CaptureStatus> capture =
        backend.GetCaptureStatus(device, stream);
    if (!capture.ok()) {
      if (capture.status().code() == absl::StatusCode::kUnimplemented) {
        return CheckFor(query);
      }
      return CheckFor(capture.status());
    }
    if (*capture == CaptureStatus::kNone) return CheckFor(query);
    absl::Status ended = backend.EndCapture(device, stream);
    if (FaultOf(ended) == Fault::kDevice ||
        FaultOf(ended) == Fault::kShutdown) {
      return CheckFor(ended);
    }
    if (!ended.ok()) {
      // CUDA: only the thread that began a global or thread-local capture may
      // end it, else cudaErrorStreamCaptureWrongThread. Whether the refused
      // call still ends the capture depends on the runtime (CUDA 13.0 does),
      // so ask again: a stream that is no longer capturing can be destroyed;
      // destroying one that still is would be undefined, so that one leaks.
      absl::StatusOr<CaptureStatus> after =
          backend.GetCaptureStatus(device, stream);
      if (after.ok() && *after == CaptureStatus::kNone) {
        return {Reaction::kDestroy, ended};
      }
      return {Reaction::kLeak, ended};
    }
    return {Reaction::kDestroy,
            absl::FailedPreconditionError("returned while capturing")};
  }
  // Asked once per shard (a device attribute query at most, on CUDA).
  static bool HasResettableAttributes(Backend& backend, int device) {
    return backend.HasResettableStreamAttributes(device);
  }
  // Attributes go back to creation defaults (CUDA's L2 access-policy window).
  static Check ResetAttributes(Backend& backend, int device, void* stream) {
    absl::Status reset = backend.ResetStreamAttributes(device, stream);
    if (!reset.ok() && reset.code() != absl::StatusCode::kUnimplemented) {
      return CheckFor(reset);
    }
    return {};
  }
};

struct EventKind {
  using Config = EventConfig;
  using Lease = PooledEvent;
  static constexpr absl::string_view kName = "event";
  static constexpr absl::string_view kPoolName = "event pool";
  // An event whose last record its holder saw complete, and which it
  // recorded nothing on since, is idle: its query could only say so.
  static constexpr bool kKnownIdleSkipsQuery = true;

  static absl::StatusOr<void*> Create(Backend& backend, int device,
                                      const Config& config) {
    return backend.CreateEvent(device, config);
  }
  static absl::Status Destroy(Backend& backend, int device, void* event) {
    return backend.DestroyEvent(device, event);
  }
  static absl::Status Query(Backend& backend, int device, void* event) {
    return backend.QueryEvent(device, event);
  }
  // An event has no capture of its own and no attributes: the one query
  // at return decides.
  static Check CheckFailedQuery(Backend&, int, void*,
                                const absl::Status& query) {
    return CheckFor(query);
  }
  static bool HasResettableAttributes(Backend&, int) { return false; }
  static Check ResetAttributes(Backend&, int, void*) { return {}; }
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_POOLS_RESOURCE_KINDS_H_
