// The state behind the stand-in GPU runtimes (libgpupool_standin_hip.so,
// libgpupool_standin_cudart.so): devices, streams, events, simulated work,
// latencies and misuse detection, shared by the thin files that export each
// runtime's C ABI. No GPU and no vendor runtime is needed; the preload tests
// run unmodified client programs against these libraries.
//
// Handles are heap objects that are never freed: a destroyed or
// reset-invalidated handle stays readable, so any later call on it is
// detected and counted as misuse (the tests assert the count is zero) rather
// than crashing.
//
// Environment:
//   GPUPOOL_STANDIN_DEVICES     device count (default 8)
//   GPUPOOL_STANDIN_CREATE_US   microseconds each stream create sleeps
//   GPUPOOL_STANDIN_DESTROY_US  microseconds each stream destroy sleeps
//
// Thread safety: every function takes one process-wide mutex, except the
// latency sleeps, which run outside it.

#ifndef GPUPOOL_TESTS_PRELOAD_STANDIN_RUNTIME_H_
#define GPUPOOL_TESTS_PRELOAD_STANDIN_RUNTIME_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/preload/standin_counters.h"

namespace gpupool_standin {

// Error numbers: CUDA and HIP share these values.
enum Code : int {
  kSuccess = 0,
  kInvalidValue = 1,
  kInvalidDevice = 101,
  kInvalidHandle = 400,
  kNotReady = 600,
};

using Clock = std::chrono::steady_clock;

struct Handle {
  static constexpr uint32_t kStreamMagic = 0x5354524d;  // "STRM"
  static constexpr uint32_t kEventMagic = 0x45564e54;   // "EVNT"
  uint32_t magic = 0;
  int device = 0;
  uint64_t generation = 0;
  bool destroyed = false;
  unsigned flags = 0;
  int priority = 0;
  std::vector<uint32_t> cu_mask;
  Clock::time_point work_done{};  // stream: its last work; event: recorded
  bool capturing = false;
};

struct Dialect {
  // HIP's stream destroy blocks until the stream's work is done; CUDA's
  // returns at once.
  bool destroy_blocks;
  int least_priority;
  int greatest_priority;
};

class Runtime {
 public:
  explicit Runtime(Dialect dialect) : dialect_(dialect) {
    device_count_ = EnvInt("GPUPOOL_STANDIN_DEVICES", 8);
    create_us_ = EnvInt("GPUPOOL_STANDIN_CREATE_US", 0);
    destroy_us_ = EnvInt("GPUPOOL_STANDIN_DESTROY_US", 0);
    generations_.assign(static_cast<size_t>(std::max(device_count_, 0)), 0);
  }

  int device_count() const { return device_count_; }
  const Dialect& dialect() const { return dialect_; }

  int GetDevice(int* device) {
    if (device == nullptr) return kInvalidValue;
    *device = current_device_;
    return kSuccess;
  }
  int SetDevice(int device) {
    if (device < 0 || device >= device_count_) return kInvalidDevice;
    current_device_ = device;
    return kSuccess;
  }

  int CreateStream(void** out, unsigned flags, int priority,
                   const uint32_t* mask, uint32_t mask_words) {
    if (out == nullptr) return kInvalidValue;
    Sleep(create_us_);
    Handle* handle = new Handle;
    handle->magic = Handle::kStreamMagic;
    handle->flags = flags;
    handle->priority = std::min(std::max(priority, dialect_.greatest_priority),
                                dialect_.least_priority);
    if (mask != nullptr) handle->cu_mask.assign(mask, mask + mask_words);
    std::lock_guard<std::mutex> lock(mu_);
    handles_.push_back(handle);
    handle->device = current_device_;
    handle->generation = generations_[current_device_];
    ++counters_.streams_created;
    ++counters_.streams_live;
    *out = handle;
    return kSuccess;
  }

  int DestroyStream(void* stream) {
    Clock::time_point done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Handle* handle = Valid(stream, Handle::kStreamMagic);
      if (handle == nullptr) return kInvalidHandle;
      handle->destroyed = true;
      done = handle->work_done;
      ++counters_.streams_destroyed;
      --counters_.streams_live;
    }
    if (dialect_.destroy_blocks) std::this_thread::sleep_until(done);
    Sleep(destroy_us_);
    return kSuccess;
  }

  int QueryStream(void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.stream_queries;
    if (stream == nullptr) return kSuccess;  // the null stream: idle
    Handle* handle = Valid(stream, Handle::kStreamMagic);
    if (handle == nullptr) return kInvalidHandle;
    return Clock::now() >= handle->work_done ? kSuccess : kNotReady;
  }

  int SynchronizeStream(void* stream) {
    Clock::time_point done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.stream_synchronizes;
      if (stream == nullptr) return kSuccess;
      Handle* handle = Valid(stream, Handle::kStreamMagic);
      if (handle == nullptr) return kInvalidHandle;
      done = handle->work_done;
    }
    std::this_thread::sleep_until(done);
    return kSuccess;
  }

  int StreamGetPriority(void* stream, int* priority) {
    std::lock_guard<std::mutex> lock(mu_);
    if (priority == nullptr) return kInvalidValue;
    Handle* handle = Valid(stream, Handle::kStreamMagic);
    if (handle == nullptr) return kInvalidHandle;
    *priority = handle->priority;
    return kSuccess;
  }

  int StreamGetFlags(void* stream, unsigned* flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (flags == nullptr) return kInvalidValue;
    Handle* handle = Valid(stream, Handle::kStreamMagic);
    if (handle == nullptr) return kInvalidHandle;
    *flags = handle->flags;
    return kSuccess;
  }

  // Capture is never begun by the tests; the calls only validate.
  int StreamIsCapturing(void* stream, bool* capturing) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stream == nullptr) {
      *capturing = false;
      return kSuccess;
    }
    Handle* handle = Valid(stream, Handle::kStreamMagic);
    if (handle == nullptr) return kInvalidHandle;
    *capturing = handle->capturing;
    return kSuccess;
  }

  int StreamWaitEvent(void* stream, void* event) {
    std::lock_guard<std::mutex> lock(mu_);
    Handle* s =
        stream == nullptr ? nullptr : Valid(stream, Handle::kStreamMagic);
    Handle* e = Valid(event, Handle::kEventMagic);
    if ((stream != nullptr && s == nullptr) || e == nullptr) {
      return kInvalidHandle;
    }
    if (s != nullptr) s->work_done = std::max(s->work_done, e->work_done);
    return kSuccess;
  }

  // Test hook: `micros` of work enqueued on `stream`.
  int Launch(void* stream, int64_t micros) {
    std::lock_guard<std::mutex> lock(mu_);
    Handle* handle = Valid(stream, Handle::kStreamMagic);
    if (handle == nullptr) return kInvalidHandle;
    const Clock::time_point start = std::max(Clock::now(), handle->work_done);
    handle->work_done = start + std::chrono::microseconds(micros);
    ++counters_.launches;
    return kSuccess;
  }

  // Test hook: 1 when `stream` (live or not) still has work pending. Not a
  // runtime call: never counted as misuse.
  int WorkPending(void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    const Handle* handle = static_cast<const Handle*>(stream);
    return handle != nullptr && Clock::now() < handle->work_done ? 1 : 0;
  }

  int CreateEvent(void** out, unsigned flags) {
    if (out == nullptr) return kInvalidValue;
    Handle* handle = new Handle;
    handle->magic = Handle::kEventMagic;
    handle->flags = flags;
    std::lock_guard<std::mutex> lock(mu_);
    handles_.push_back(handle);
    handle->device = current_device_;
    handle->generation = generations_[current_device_];
    ++counters_.events_created;
    ++counters_.events_live;
    *out = handle;
    return kSuccess;
  }

  int DestroyEvent(void* event) {
    std::lock_guard<std::mutex> lock(mu_);
    Handle* handle = Valid(event, Handle::kEventMagic);
    if (handle == nullptr) return kInvalidHandle;
    handle->destroyed = true;
    ++counters_.events_destroyed;
    --counters_.events_live;
    return kSuccess;
  }

  int RecordEvent(void* event, void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    Handle* e = Valid(event, Handle::kEventMagic);
    if (e == nullptr) return kInvalidHandle;
    Clock::time_point done = Clock::now();
    if (stream != nullptr) {
      Handle* s = Valid(stream, Handle::kStreamMagic);
      if (s == nullptr) return kInvalidHandle;
      done = std::max(done, s->work_done);
    }
    e->work_done = done;
    ++counters_.event_records;
    return kSuccess;
  }

  int QueryEvent(void* event) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.event_queries;
    Handle* handle = Valid(event, Handle::kEventMagic);
    if (handle == nullptr) return kInvalidHandle;
    return Clock::now() >= handle->work_done ? kSuccess : kNotReady;
  }

  int SynchronizeEvent(void* event) {
    Clock::time_point done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Handle* handle = Valid(event, Handle::kEventMagic);
      if (handle == nullptr) return kInvalidHandle;
      done = handle->work_done;
    }
    std::this_thread::sleep_until(done);
    return kSuccess;
  }

  int EventGetFlags(void* event, unsigned* flags) {
    std::lock_guard<std::mutex> lock(mu_);
    Handle* handle = Valid(event, Handle::kEventMagic);
    if (handle == nullptr) return kInvalidHandle;
    *flags = handle->flags;
    return kSuccess;
  }

  // Invalidates every stream and event of the current device.
  int DeviceReset() { return ResetDevice(current_device_); }
  int ResetDevice(int device) {
    if (device < 0 || device >= device_count_) return kInvalidDevice;
    std::lock_guard<std::mutex> lock(mu_);
    ++generations_[device];
    ++counters_.device_resets;
    // Live counts are recomputed lazily: the handles are gone for the
    // runtime, so the counters of live handles no longer include them.
    counters_.streams_live = 0;
    counters_.events_live = 0;
    return kSuccess;
  }

  StandinCounters counters() {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
  }

 private:
  static int EnvInt(const char* name, int fallback) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
  }
  static void Sleep(int micros) {
    if (micros > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }

  // The handle when it is a live handle of `magic`'s kind, else null with the
  // misuse counted (use after destroy, after a reset, wrong kind, garbage).
  Handle* Valid(void* pointer, uint32_t magic) {
    Handle* handle = static_cast<Handle*>(pointer);
    const char* what = nullptr;
    if (handle == nullptr || handle->magic != magic) {
      what = "not a handle of this kind";
    } else if (handle->destroyed) {
      what = "destroyed";
    } else if (handle->generation != generations_[handle->device]) {
      what = "invalidated by a device reset";
    }
    if (what == nullptr) return handle;
    ++counters_.misuse;
    if (counters_.misuse <= 5) {
      std::fprintf(stderr, "gpupool stand-in runtime: call on %p: %s\n",
                   pointer, what);
    }
    return nullptr;
  }

  const Dialect dialect_;
  int device_count_ = 0;
  int create_us_ = 0;
  int destroy_us_ = 0;
  std::mutex mu_;
  std::vector<uint64_t> generations_;
  // Every handle ever created (kept, so that a late call is detected, and
  // reachable, so that leak checkers do not report them).
  std::vector<Handle*> handles_;
  StandinCounters counters_;
  static thread_local int current_device_;
};

inline thread_local int Runtime::current_device_ = 0;

}  // namespace gpupool_standin

#endif  // GPUPOOL_TESTS_PRELOAD_STANDIN_RUNTIME_H_
