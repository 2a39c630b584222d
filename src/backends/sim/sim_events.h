// SimEvents: the simulator's event primitives (create, destroy, record,
// query, synchronize) and event inspection. Events live in their device's
// DeviceState (sim_device.h); this class holds the rules, and applies the
// capture model's (sim_capture.h) to events recorded inside a capture.
//
// Thread safety: all methods may be called concurrently; no state of its own.

#ifndef GPUPOOL_SRC_BACKENDS_SIM_SIM_EVENTS_H_
#define GPUPOOL_SRC_BACKENDS_SIM_SIM_EVENTS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "src/backends/sim/sim_capture.h"
#include "src/backends/sim/sim_device.h"
#include "src/backends/sim/sim_faults.h"
#include "src/backends/sim/sim_misuse.h"

namespace gpupool {
namespace sim_internal {

class SimEvents {
 public:
  SimEvents(const SimProfile& profile, SimFaultInjector& faults,
            SimDevices& devices, SimCaptureModel& captures,
            SimMisuseLog& misuse);
  SimEvents(const SimEvents&) = delete;
  SimEvents& operator=(const SimEvents&) = delete;

  // --- Backend primitives (SimBackend documents them) ----------------------
  absl::StatusOr<NativeEvent> CreateEvent(int device,
                                          const EventConfig& config);
  absl::Status DestroyEvent(int device, NativeEvent event);
  absl::Status RecordEvent(int device, NativeEvent event, NativeStream stream);
  absl::Status QueryEvent(int device, NativeEvent event);
  absl::Status SynchronizeEvent(int device, NativeEvent event);

  // --- Inspection ----------------------------------------------------------
  int live_events(int device) const;
  bool is_live_event(NativeEvent event) const;

 private:
  const SimProfile& profile_;
  SimFaultInjector& faults_;
  SimDevices& devices_;
  SimCaptureModel& captures_;
  SimMisuseLog& misuse_;
};

}  // namespace sim_internal
}  // namespace gpupool

#endif  // GPUPOOL_SRC_BACKENDS_SIM_SIM_EVENTS_H_
