// The scripted state of the fake runtime library (fake_runtime.cc): what the
// tests set before a call and what the fake observed. Shared by the library
// and tests/backends/loader/runtime_loader_test.cc, which reaches it with
// dlsym(handle, "gpupool_fake_runtime_state") on the library the backend
// loaded. No vendor header: the fake stands in for the runtime.
//
// Error codes are the runtime's own numbers, which CUDA and HIP share for
// every code used here.

#ifndef GPUPOOL_TESTS_BACKENDS_FAKE_RUNTIME_FAKE_RUNTIME_STATE_H_
#define GPUPOOL_TESTS_BACKENDS_FAKE_RUNTIME_FAKE_RUNTIME_STATE_H_

#include <cstddef>

namespace gpupool_fake {

enum Code : int {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kInsufficientDriver = 35,
  kNoDevice = 100,
  kInvalidDevice = 101,
  kInvalidHandle = 400,
  kNotReady = 600,
  kIllegalAddress = 700,
  kCaptureInvalidated = 901,
};

// Capture modes and statuses (CUDA and HIP agree on the numbering).
enum Capture : int {
  kModeGlobal = 0,
  kModeThreadLocal = 1,
  kModeRelaxed = 2,
  kStatusNone = 0,
  kStatusActive = 1,
  kStatusInvalidated = 2,
};

struct State {
  // Script: what the next calls return.
  int device_count = 2;
  int device_count_error = kSuccess;
  int driver_version = 13000;
  int runtime_version = 13000;
  int least_priority = 0;
  int greatest_priority = -5;
  int max_window_bytes = 0;
  int stream_create_error = kSuccess;
  int stream_query_error = kSuccess;
  int event_query_error = kSuccess;
  int malloc_error = kSuccess;
  int capture_status = kStatusNone;
  unsigned long long capture_id = 0;  // NOLINT(runtime/int)
  int end_capture_error = kSuccess;
  bool end_capture_yields_graph = false;
  size_t free_bytes = 1 << 20;
  size_t total_bytes = 1 << 24;

  // Observed.
  int current_device = 0;
  int last_error = kSuccess;
  int live_streams = 0;
  int live_events = 0;
  int live_device_allocations = 0;
  int live_host_allocations = 0;
  int live_graphs = 0;
  int streams_created = 0;
  int cu_mask_streams_created = 0;
  int events_recorded = 0;
  int waits = 0;
  int windows_cleared = 0;
  int set_device_calls = 0;
  int calls = 0;  // every entry point, for "was anything called"
  unsigned last_stream_flags = 0;
  int last_stream_priority = 0;
  unsigned last_event_flags = 0;
  int mode_at_last_query = -1;

  // IPC: what the fake saw. Its handle is the pointer's bytes followed by
  // kIpcMagic; an open of any other bytes fails with kInvalidValue.
  int ipc_handles_made = 0;
  int ipc_opens = 0;
  int ipc_closes = 0;
  unsigned last_ipc_open_flags = 0;

  // Graph user objects: a reference count each; a graph's references drop
  // when the graph is destroyed (the fake has no launches), and the
  // destructor runs at once when the count reaches 0.
  int live_user_objects = 0;
  int user_object_destructors_run = 0;
  unsigned last_user_object_flags = 0;
  unsigned last_retain_flags = 0;
};

inline constexpr unsigned char kIpcMagic = 0xA7;

}  // namespace gpupool_fake

// Exported by the fake library; reset to defaults by Reset.
extern "C" gpupool_fake::State* gpupool_fake_runtime_state();
extern "C" void gpupool_fake_runtime_reset();

#endif  // GPUPOOL_TESTS_BACKENDS_FAKE_RUNTIME_FAKE_RUNTIME_STATE_H_
