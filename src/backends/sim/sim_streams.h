// SimStreams: the simulator's stream primitives (create, destroy, query,
// synchronize, reset attributes, wait on an event), the stream test controls
// (fault a stream, submit and complete work, dirty an attribute) and stream
// inspection. Streams live in their device's DeviceState (sim_device.h);
// this class holds the rules, and applies the capture model's
// (sim_capture.h) to capturing streams.
//
// Thread safety: all methods may be called concurrently; no state of its own.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_STREAMS_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_STREAMS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_capture.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_faults.h"
#include "src/backends/sim/sim_misuse.h"

namespace gpupool {
namespace sim_internal {

class SimStreams {
 public:
  SimStreams(const SimProfile& profile, SimFaultInjector& faults,
             SimDevices& devices, SimCaptureModel& captures,
             SimMisuseLog& misuse);
  SimStreams(const SimStreams&) = delete;
  SimStreams& operator=(const SimStreams&) = delete;

  // --- Backend primitives (SimBackend documents them) ----------------------
  absl::StatusOr<NativeStream> CreateStream(int device,
                                            const StreamConfig& config);
  absl::Status DestroyStream(int device, NativeStream stream);
  absl::Status QueryStream(int device, NativeStream stream);
  absl::Status SynchronizeStream(int device, NativeStream stream);
  absl::Status ResetStreamAttributes(int device, NativeStream stream);
  absl::Status StreamWaitEvent(int device, NativeStream stream,
                               NativeEvent event);

  // --- Test controls and inspection ---------------------------------------
  void FaultStream(NativeStream stream, absl::Status status);
  void SubmitWork(NativeStream stream, absl::Duration duration);
  void CompleteWork(NativeStream stream);
  void SetStreamAttribute(NativeStream stream);
  int live_streams(int device) const;
  bool is_live_stream(NativeStream stream) const;
  bool has_pending_work(NativeStream stream) const;
  bool attributes_dirty(NativeStream stream) const;

 private:
  const SimProfile& profile_;
  SimFaultInjector& faults_;
  SimDevices& devices_;
  SimCaptureModel& captures_;
  SimMisuseLog& misuse_;
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_STREAMS_H_
