// The stream and event pools' model: the stream and event leases pool_fuzzer
// holds (acquire, release, discard, moved-from), prewarming, and what the
// user does with leased streams (submit and complete work, record an event,
// fault a stream); and the check that no handle is in two leases and every
// lease of a device that was not reset holds a handle the runtime knows.

#ifndef GPUPOOL_TESTS_FUZZ_STREAM_EVENT_MODEL_H_
#define GPUPOOL_TESTS_FUZZ_STREAM_EVENT_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/stream_pool.h"
#include "tests/fuzz/harness.h"
#include "tests/fuzz/held_lease.h"

namespace gpupool::fuzz {

// Whether something other than its lease still uses a stream (an
// allocation, a capture, a replay): such a lease must stay out.
using StreamBusy = absl::FunctionRef<bool(NativeStream)>;

class StreamEventModel {
 public:
  explicit StreamEventModel(Harness& harness) : harness_(harness) {}
  StreamEventModel(const StreamEventModel&) = delete;
  StreamEventModel& operator=(const StreamEventModel&) = delete;

  // Forgets released leases (before every step).
  void Compact();

  // The operations (pool_fuzzer.cc's Step names their codes).
  void AcquireStream();
  void ReleaseStream(bool discard, StreamBusy busy);
  void AcquireEvent();
  void ReleaseEvent(bool discard);
  void SubmitWork();
  void CompleteWork();
  void Prewarm();
  void RecordEvent();
  void FaultStream();
  void MoveStreamLease(StreamBusy busy);

  // A live (not reset) stream lease of `device`, or nullptr.
  NativeStream PickUsableStream(int device);

  // `device` was reset: its leases hold dead handles.
  void MarkDeviceReset(int device);

  // Checks that no handle is in two leases and that the leases of a device
  // that was not reset hold live handles; returns the stream leases out.
  int64_t CheckHandles();
  int64_t events_out() const;

  // Releases every lease: events, then streams (the end of an input).
  void ReleaseAll();

 private:
  Harness& harness_;
  FuzzedDataProvider& input_ = harness_.input();
  // Released before the pools go (a late release would leak).
  std::vector<Held<PooledStream>> streams_held_;
  std::vector<Held<PooledEvent>> events_held_;
  // A member, so that a check allocates nothing once warm.
  std::vector<void*> scratch_handles_;
};

}  // namespace gpupool::fuzz

#endif  // GPUPOOL_TESTS_FUZZ_STREAM_EVENT_MODEL_H_
