// The captures on leased streams pool_fuzzer begins and ends.

#include "tests/fuzz/capture_model.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "tests/fuzz/graph_model.h"

namespace gpupool::fuzz {

void CaptureModel::UserCaptureOrAttribute(StreamBusy busy) {
  const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
  NativeStream stream = leases_.PickUsableStream(device);
  if (stream == nullptr || busy(stream)) return;
  if (input_.ConsumeBool()) {
    // Refused on a device with a sticky error, as the runtimes do.
    if (!harness_.sim().BeginCapture(stream, SimCaptureMode::kGlobal).ok()) {
      return;
    }
    user_captures_.push_back(stream);  // never ended: the pool ends it
    harness_.NoteCapture();
  } else {
    harness_.sim().SetStreamAttribute(stream);
  }
}

void CaptureModel::BeginUnregistered() {
  const int device = input_.ConsumeIntegralInRange(0, kDevices - 1);
  NativeStream stream = PickIdleStream(device);
  if (stream == nullptr ||
      !harness_.sim().BeginCapture(stream, SimCaptureMode::kRelaxed).ok()) {
    return;
  }
  unregistered_[stream] = device;
  capturing_.push_back(stream);
  harness_.NoteCapture();
}

void CaptureModel::EndUnregistered() {
  if (unregistered_.empty()) return;
  EndCaptureOn(unregistered_.begin()->first, &unregistered_graphs_);
  unregistered_.erase(unregistered_.begin());
}

void CaptureModel::DestroyUnregisteredGraphs() {
  DestroyGraphs(harness_.sim(), unregistered_graphs_);
}

bool CaptureModel::IsCapturing(NativeStream stream) const {
  return std::find(capturing_.begin(), capturing_.end(), stream) !=
         capturing_.end();
}

NativeStream CaptureModel::PickIdleStream(int device) {
  NativeStream stream = leases_.PickUsableStream(device);
  if (stream == nullptr || IsCapturing(stream) ||
      std::find(user_captures_.begin(), user_captures_.end(), stream) !=
          user_captures_.end()) {
    return nullptr;
  }
  return stream;
}

void CaptureModel::EndCaptureOn(NativeStream stream,
                                std::vector<SimGraph>* graphs) {
  capturing_.erase(std::find(capturing_.begin(), capturing_.end(), stream));
  absl::StatusOr<SimGraph> graph = harness_.sim().EndCaptureToGraph(stream);
  if (graph.ok()) graphs->push_back(*graph);
}

void CaptureModel::Lost(NativeStream stream) {
  capturing_.erase(std::find(capturing_.begin(), capturing_.end(), stream));
}

void CaptureModel::ForgetDevice(int device) {
  for (auto it = unregistered_.begin(); it != unregistered_.end();) {
    if (it->second != device) {
      ++it;
      continue;
    }
    capturing_.erase(
        std::find(capturing_.begin(), capturing_.end(), it->first));
    it = unregistered_.erase(it);
  }
}

void CaptureModel::EndUnregisteredCaptures() {
  for (const auto& [stream, device] : unregistered_) {
    EndCaptureOn(stream, &unregistered_graphs_);
  }
  unregistered_.clear();
}

}  // namespace gpupool::fuzz
