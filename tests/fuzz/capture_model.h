// Which leased streams capture, and for whom: captures registered with a
// graph pool's scope (begun and ended by graph_pool_model.cc), captures
// nobody registers (the cache detects them: detect_unregistered_captures)
// and the graphs they leave, and captures the user begins and never ends;
// and which stream an operation may begin a capture on or launch into.

#ifndef GPUPOOL_TESTS_FUZZ_CAPTURE_MODEL_H_
#define GPUPOOL_TESTS_FUZZ_CAPTURE_MODEL_H_

#include <map>
#include <vector>

#include "gpupool/backend.h"
#include "gpupool/sim_backend.h"
#include "tests/fuzz/harness.h"
#include "tests/fuzz/stream_event_model.h"

namespace gpupool::fuzz {

class CaptureModel {
 public:
  CaptureModel(Harness& harness, StreamEventModel& leases)
      : harness_(harness), leases_(leases) {}
  CaptureModel(const CaptureModel&) = delete;
  CaptureModel& operator=(const CaptureModel&) = delete;

  // The user starts a capture on a leased stream nothing else uses (never
  // ended: the pool ends it) or sets an attribute on it.
  void UserCaptureOrAttribute(StreamBusy busy);
  // A capture nobody registers begins, or one ends (the first by stream).
  void BeginUnregistered();
  void EndUnregistered();
  // The unregistered captures' graphs go.
  void DestroyUnregisteredGraphs();

  bool IsCapturing(NativeStream stream) const;
  // A stream of `device` the fuzzer may begin a capture on or launch into,
  // or nullptr.
  NativeStream PickIdleStream(int device);

  // A registered capture began on `stream`.
  void Began(NativeStream stream) { capturing_.push_back(stream); }
  // Ends the capture on `stream` (registered or not); keeps its graph.
  void EndCaptureOn(NativeStream stream, std::vector<SimGraph>* graphs);
  // A reset took the registered capture on `stream` with its device.
  void Lost(NativeStream stream);
  // A reset took the unregistered captures of `device`.
  void ForgetDevice(int device);

  // The end of an input: every unregistered capture ends (their graphs are
  // kept until DestroyUnregisteredGraphs).
  void EndUnregisteredCaptures();

 private:
  Harness& harness_;
  StreamEventModel& leases_;
  FuzzedDataProvider& input_ = harness_.input();
  // Streams capturing for a scope or for nobody, and the unregistered ones'
  // devices; streams the user began capturing on.
  std::vector<NativeStream> capturing_;
  std::map<NativeStream, int> unregistered_;
  std::vector<NativeStream> user_captures_;
  std::vector<SimGraph> unregistered_graphs_;
};

}  // namespace gpupool::fuzz

#endif  // GPUPOOL_TESTS_FUZZ_CAPTURE_MODEL_H_
