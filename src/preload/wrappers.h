// The preload's exported entry points, written once for every runtime. Each
// operation below (create a stream with flags, destroy an event, reset a
// device, ...) is a template over a runtime's traits; each runtime (HIP, the
// CUDA runtime, the CUDA driver) lists its exported names and the operation
// each one performs in a table (wrappers.cc), as the backends are one
// RuntimeBackend<Api> over a traits struct. A table row
//
//   X(hipStreamCreateWithFlags, StreamCreateWithFlags)
//
// becomes, through GPUPOOL_PRELOAD_WRAPPER, the exported C function
// `int hipStreamCreateWithFlags(void** stream, unsigned flags)`, which finds
// the runtime's own function on first use (RealFunction) and hands the call
// to the runtime's PooledRuntime with that function as the fallback; and,
// through GPUPOOL_PRELOAD_SYMBOL, its entry in the runtime's InterposedSymbol
// table (what dlsym and cuGetProcAddress hand out).
//
// The C ABI is spelled in plain types (handles void*, errors int, devices
// int), as every runtime shares it; runtime_flags.h has the flag values. No
// vendor header.
//
// A Traits struct provides
//   static constexpr Runtime kRuntime;
//   static constexpr RuntimeDescription kDescription;  // pooled_runtime.h
//
// Thread safety: every wrapper is safe to call concurrently (PooledRuntime
// and RealFunction are).

#ifndef GPUPOOL_SRC_PRELOAD_WRAPPERS_H_
#define GPUPOOL_SRC_PRELOAD_WRAPPERS_H_

#include <cstdint>
#include <type_traits>

#include "gpupool/backend.h"
#include "src/preload/pooled_runtime.h"
#include "src/preload/real_symbols.h"
#include "src/preload/runtime_flags.h"

namespace gpupool::preload_internal {

// The engine of the runtime `Traits` describes, built on first use and never
// destroyed (a lease may come back from a static destructor).
template <typename Traits>
PooledRuntime& PooledRuntimeOf() {
  static PooledRuntime* const runtime = new PooledRuntime(Traits::kDescription);
  return *runtime;
}

// What a cuGetProcAddress-style lookup found for the caller (`*function`),
// replaced by the preload's wrapper of the same exported function when
// `runtime`'s table has one: the runtime's answer is named by the symbol it
// is (cuStreamDestroy_v2 for a "cuStreamDestroy" request from a CUDA 4+
// caller), and that name picks the wrapper, so the caller keeps the version
// it would have got. Inside gpupool's own calls the real function stays.
void InterposeProcAddress(Runtime runtime, void** function);

// --- The operations: each one's C signature, and what it does --------------

// A stream of the default config: blocking, priority 0.
struct StreamCreate {
  using Function = int(void**);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, void** stream) {
    return PooledRuntimeOf<Traits>().CreateStream(
        stream, StreamConfigOf(0, 0),
        [&] { return real.CallOr(kErrorNotInitialized, stream); });
  }
};

// Flags the pools do not key on go to the runtime unchanged.
struct StreamCreateWithFlags {
  using Function = int(void**, unsigned);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, void** stream, unsigned flags) {
    auto fallback = [&] {
      return real.CallOr(kErrorNotInitialized, stream, flags);
    };
    if (!PoolableStreamFlags(flags)) return fallback();
    return PooledRuntimeOf<Traits>().CreateStream(
        stream, StreamConfigOf(flags, 0), fallback);
  }
};

struct StreamCreateWithPriority {
  using Function = int(void**, unsigned, int);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, void** stream, unsigned flags,
                  int priority) {
    auto fallback = [&] {
      return real.CallOr(kErrorNotInitialized, stream, flags, priority);
    };
    if (!PoolableStreamFlags(flags)) return fallback();
    return PooledRuntimeOf<Traits>().CreateStream(
        stream, StreamConfigOf(flags, priority), fallback);
  }
};

// hipExtStreamCreateWithCUMask: a blocking, normal-priority stream with the
// mask (what the runtime's call creates).
struct StreamCreateWithCuMask {
  using Function = int(void**, uint32_t, const uint32_t*);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, void** stream, uint32_t words,
                  const uint32_t* mask) {
    auto fallback = [&] {
      return real.CallOr(kErrorNotInitialized, stream, words, mask);
    };
    if (words == 0 || mask == nullptr) return fallback();
    StreamConfig config = StreamConfigOf(0, 0);
    config.cu_mask.assign(mask, mask + words);
    return PooledRuntimeOf<Traits>().CreateStream(stream, config, fallback);
  }
};

struct StreamDestroy {
  using Function = int(void*);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, void* stream) {
    return PooledRuntimeOf<Traits>().DestroyStream(
        stream, [&] { return real.CallOr(kErrorNotInitialized, stream); });
  }
};

struct EventCreate {
  using Function = int(void**);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, void** event) {
    return PooledRuntimeOf<Traits>().CreateEvent(event, EventConfigOf(0), [&] {
      return real.CallOr(kErrorNotInitialized, event);
    });
  }
};

// Interprocess events (and unknown flags) go to the runtime unchanged.
struct EventCreateWithFlags {
  using Function = int(void**, unsigned);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, void** event, unsigned flags) {
    auto fallback = [&] {
      return real.CallOr(kErrorNotInitialized, event, flags);
    };
    if (!PoolableEventFlags(flags)) return fallback();
    return PooledRuntimeOf<Traits>().CreateEvent(event, EventConfigOf(flags),
                                                 fallback);
  }
};

struct EventDestroy {
  using Function = int(void*);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, void* event) {
    return PooledRuntimeOf<Traits>().DestroyEvent(
        event, [&] { return real.CallOr(kErrorNotInitialized, event); });
  }
};

// hipDeviceReset, cudaDeviceReset: the calling thread's current device.
struct CurrentDeviceReset {
  using Function = int();
  template <typename Traits>
  static int Call(RealFunction<Function>& real) {
    return PooledRuntimeOf<Traits>().ResetDevice(
        /*device=*/-1, [&] { return real.CallOr(kErrorNotInitialized); });
  }
};

// cuDevicePrimaryCtxReset: a device named by the caller.
struct DeviceReset {
  using Function = int(int);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, int device) {
    return PooledRuntimeOf<Traits>().ResetDevice(
        device, [&] { return real.CallOr(kErrorNotInitialized, device); });
  }
};

// cuGetProcAddress: the real lookup, then InterposeProcAddress.
struct GetProcAddress {
  using Function = int(const char*, void**, int, uint64_t);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, const char* symbol,
                  void** function, int version, uint64_t flags) {
    const int result =
        real.CallOr(kErrorNotInitialized, symbol, function, version, flags);
    if (result == 0 && function != nullptr) {
      InterposeProcAddress(Traits::kRuntime, function);
    }
    return result;
  }
};

// cuGetProcAddress_v2: the same with the lookup's status.
struct GetProcAddressWithStatus {
  using Function = int(const char*, void**, int, uint64_t, int*);
  template <typename Traits>
  static int Call(RealFunction<Function>& real, const char* symbol,
                  void** function, int version, uint64_t flags, int* status) {
    const int result = real.CallOr(kErrorNotInitialized, symbol, function,
                                   version, flags, status);
    if (result == 0 && function != nullptr) {
      InterposeProcAddress(Traits::kRuntime, function);
    }
    return result;
  }
};

// `Op` for the runtime `Traits` with its real function bound: what an
// exported wrapper calls with its own arguments.
template <typename Op, typename Traits>
struct BoundOperation {
  RealFunction<typename Op::Function>& real;
  template <typename... Args>
  int operator()(Args... args) const {
    return Op::template Call<Traits>(real, args...);
  }
};

}  // namespace gpupool::preload_internal

// Each operation's C parameter list and the names it passes on, for the
// exported definition (a function cannot be defined from its type).
#define GPUPOOL_PRELOAD_SIGNATURE_StreamCreate (void** stream), (stream)
#define GPUPOOL_PRELOAD_SIGNATURE_StreamCreateWithFlags \
  (void** stream, unsigned flags), (stream, flags)
#define GPUPOOL_PRELOAD_SIGNATURE_StreamCreateWithPriority \
  (void** stream, unsigned flags, int priority), (stream, flags, priority)
#define GPUPOOL_PRELOAD_SIGNATURE_StreamCreateWithCuMask \
  (void** stream, uint32_t words, const uint32_t* mask), (stream, words, mask)
#define GPUPOOL_PRELOAD_SIGNATURE_StreamDestroy (void* stream), (stream)
#define GPUPOOL_PRELOAD_SIGNATURE_EventCreate (void** event), (event)
#define GPUPOOL_PRELOAD_SIGNATURE_EventCreateWithFlags \
  (void** event, unsigned flags), (event, flags)
#define GPUPOOL_PRELOAD_SIGNATURE_EventDestroy (void* event), (event)
#define GPUPOOL_PRELOAD_SIGNATURE_CurrentDeviceReset (), ()
#define GPUPOOL_PRELOAD_SIGNATURE_DeviceReset (int device), (device)
#define GPUPOOL_PRELOAD_SIGNATURE_GetProcAddress                      \
  (const char* symbol, void** function, int version, uint64_t flags), \
      (symbol, function, version, flags)
#define GPUPOOL_PRELOAD_SIGNATURE_GetProcAddressWithStatus           \
  (const char* symbol, void** function, int version, uint64_t flags, \
   int* status),                                                     \
      (symbol, function, version, flags, status)

// Defines the exported C function `name` performing `Op` for `Traits` (at
// global scope).
#define GPUPOOL_PRELOAD_WRAPPER(Traits, name, Op)  \
  GPUPOOL_PRELOAD_WRAPPER_EXPAND(Traits, name, Op, \
                                 GPUPOOL_PRELOAD_SIGNATURE_##Op)
#define GPUPOOL_PRELOAD_WRAPPER_EXPAND(...) \
  GPUPOOL_PRELOAD_WRAPPER_DEFINE(__VA_ARGS__)
#define GPUPOOL_PRELOAD_WRAPPER_DEFINE(Traits, name, Op, parameters,         \
                                       arguments)                            \
  extern "C" __attribute__((visibility("default"))) int name parameters {    \
    static_assert(std::is_same_v<decltype(name),                             \
                                 ::gpupool::preload_internal::Op::Function>, \
                  "the signature macro and the operation disagree");         \
    static ::gpupool::preload_internal::RealFunction<                        \
        ::gpupool::preload_internal::Op::Function>                           \
        real(Traits::kRuntime, #name);                                       \
    return ::gpupool::preload_internal::BoundOperation<                      \
        ::gpupool::preload_internal::Op, Traits>{real} arguments;            \
  }

// The InterposedSymbol entry of the exported `name` (in a table's braces).
#define GPUPOOL_PRELOAD_SYMBOL(Traits, name, Op) \
  {#name, reinterpret_cast<void*>(&::name), Traits::kRuntime},

#endif  // GPUPOOL_SRC_PRELOAD_WRAPPERS_H_
