// An unmodified client program for the preload tests: the stream and event
// churn of a PJRT-style runtime (per client lifecycle, per device, 14 streams
// of mixed priority/flags (+ one CU-masked stream on HIP) and 16 events,
// all created, used and destroyed), with a device reset half way. It knows
// nothing of gpupool: it reaches the runtime either by direct linking or,
// built with GPUPOOL_CLIENT_DLOPEN, by dlopen + dlsym as XLA's stub loaders
// do. Run with and without LD_PRELOAD=libgpupool_preload.so, it must see the
// same results:
//   * every stream and event it holds at once is distinct;
//   * each stream reports the priority and flags it asked for;
//   * streams are idle after their work and destroy, as the runtime promises
//     (HIP: destroy returns once the work is done);
//   * the runtime saw no call on a destroyed or reset-invalidated handle.
// It exits 0 when all hold and the runtime's stream-create count is within
// --max_stream_creates (and at least --min_stream_creates; the same for
// events), printing one summary line either way.
//
// The runtime's C ABI is declared here (handles as void*, errors as int), as
// a program built against a runtime would see it; CLIENT_HIP or CLIENT_CUDA
// picks the names.

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "tests/preload/standin_counters.h"

#if defined(CLIENT_HIP)
#define RT(name) hip##name
#define RT_PREFIX "hip"
#define STANDIN(name) gpupool_standin_hip_##name
#define STANDIN_PREFIX "gpupool_standin_hip_"
#elif defined(CLIENT_CUDA)
#define RT(name) cuda##name
#define RT_PREFIX "cuda"
#define STANDIN(name) gpupool_standin_cudart_##name
#define STANDIN_PREFIX "gpupool_standin_cudart_"
#elif defined(CLIENT_CU)
#define STANDIN(name) gpupool_standin_cu_##name
#define STANDIN_PREFIX "gpupool_standin_cu_"
#else
#error "define CLIENT_HIP, CLIENT_CUDA or CLIENT_CU"
#endif

namespace {

constexpr unsigned kStreamDefault = 0;
constexpr unsigned kStreamNonBlocking = 1;
constexpr unsigned kEventDefault = 0;
constexpr unsigned kEventDisableTiming = 2;

// The calls the client makes, as function pointers filled by linking or by
// dlsym.
struct Api {
  int (*StreamCreate)(void**);
  int (*StreamCreateWithFlags)(void**, unsigned);
  int (*StreamCreateWithPriority)(void**, unsigned, int);
  int (*ExtStreamCreateWithCUMask)(void**, uint32_t, const uint32_t*);
  int (*StreamDestroy)(void*);
  int (*StreamQuery)(void*);
  int (*StreamGetPriority)(void*, int*);
  int (*StreamGetFlags)(void*, unsigned*);
  int (*EventCreate)(void**);
  int (*EventCreateWithFlags)(void**, unsigned);
  int (*EventDestroy)(void*);
  int (*EventRecord)(void*, void*);
  int (*EventQuery)(void*);
  int (*EventSynchronize)(void*);
  int (*SetDevice)(int);
  int (*GetDeviceCount)(int*);
  int (*DeviceReset)();
  int (*DeviceGetStreamPriorityRange)(int*, int*);
  void (*Counters)(StandinCounters*);
  int (*Launch)(void*, int64_t);
  int (*WorkPending)(void*);
};

}  // namespace

#if !defined(GPUPOOL_CLIENT_DLOPEN) && !defined(CLIENT_CU)
extern "C" {
int RT(StreamCreate)(void**);
int RT(StreamCreateWithFlags)(void**, unsigned);
int RT(StreamCreateWithPriority)(void**, unsigned, int);
#if defined(CLIENT_HIP)
int hipExtStreamCreateWithCUMask(void**, uint32_t, const uint32_t*);
#endif
int RT(StreamDestroy)(void*);
int RT(StreamQuery)(void*);
int RT(StreamGetPriority)(void*, int*);
int RT(StreamGetFlags)(void*, unsigned*);
int RT(EventCreate)(void**);
int RT(EventCreateWithFlags)(void**, unsigned);
int RT(EventDestroy)(void*);
int RT(EventRecord)(void*, void*);
int RT(EventQuery)(void*);
int RT(EventSynchronize)(void*);
int RT(SetDevice)(int);
int RT(GetDeviceCount)(int*);
int RT(DeviceReset)();
int RT(DeviceGetStreamPriorityRange)(int*, int*);
void STANDIN(counters)(StandinCounters*);
int STANDIN(launch)(void*, int64_t);
int STANDIN(work_pending)(void*);
}
#endif

namespace {

int failures = 0;

void Fail(const std::string& what) {
  if (++failures <= 10)
    std::fprintf(stderr, "pjrt_client: FAIL: %s\n", what.c_str());
}

void Check(int code, const char* call) {
  if (code != 0) Fail(std::string(call) + " returned " + std::to_string(code));
}

#if defined(GPUPOOL_CLIENT_DLOPEN) || defined(GPUPOOL_CLIENT_PROCADDRESS)
template <typename F>
void Resolve(void* library, const char* name, F* slot, bool required = true) {
  *slot = reinterpret_cast<F>(dlsym(library, name));
  if (*slot == nullptr && required) {
    std::fprintf(stderr, "pjrt_client: dlsym(%s): %s\n", name, dlerror());
    std::exit(2);
  }
}
#endif

#if defined(CLIENT_CU)
// The CUDA driver API, reached one of three ways: linked directly; dlopen +
// dlsym of every function; or, with GPUPOOL_CLIENT_PROCADDRESS, dlsym of
// cuGetProcAddress alone and every other function through it (what the
// static CUDA runtime does).
struct Driver {
  int (*cuInit)(unsigned);
  int (*cuDeviceGetCount)(int*);
  int (*cuDevicePrimaryCtxRetain)(void**, int);
  int (*cuDevicePrimaryCtxReset)(int);
  int (*cuCtxSetCurrent)(void*);
  int (*cuCtxGetDevice)(int*);
  int (*cuCtxGetStreamPriorityRange)(int*, int*);
  int (*cuStreamCreate)(void**, unsigned);
  int (*cuStreamCreateWithPriority)(void**, unsigned, int);
  int (*cuStreamDestroy)(void*);
  int (*cuStreamQuery)(void*);
  int (*cuStreamGetPriority)(void*, int*);
  int (*cuStreamGetFlags)(void*, unsigned*);
  int (*cuEventCreate)(void**, unsigned);
  int (*cuEventDestroy)(void*);
  int (*cuEventRecord)(void*, void*);
  int (*cuEventQuery)(void*);
  int (*cuEventSynchronize)(void*);
};
Driver cu;

#if !defined(GPUPOOL_CLIENT_DLOPEN) && !defined(GPUPOOL_CLIENT_PROCADDRESS)
extern "C" {
int cuInit(unsigned);
int cuDeviceGetCount(int*);
int cuDevicePrimaryCtxRetain(void**, int);
int cuDevicePrimaryCtxReset_v2(int);
int cuCtxSetCurrent(void*);
int cuCtxGetDevice(int*);
int cuCtxGetStreamPriorityRange(int*, int*);
int cuStreamCreate(void**, unsigned);
int cuStreamCreateWithPriority(void**, unsigned, int);
int cuStreamDestroy_v2(void*);
int cuStreamQuery(void*);
int cuStreamGetPriority(void*, int*);
int cuStreamGetFlags(void*, unsigned*);
int cuEventCreate(void**, unsigned);
int cuEventDestroy_v2(void*);
int cuEventRecord(void*, void*);
int cuEventQuery(void*);
int cuEventSynchronize(void*);
void gpupool_standin_cu_counters(StandinCounters*);
int gpupool_standin_cu_launch(void*, int64_t);
int gpupool_standin_cu_work_pending(void*);
}
#endif

int CuStreamCreateDefault(void** stream) {
  return cu.cuStreamCreate(stream, 0);
}
int CuEventCreateDefault(void** event) { return cu.cuEventCreate(event, 0); }
int CuSetDevice(int device) {
  void* context = nullptr;
  const int result = cu.cuDevicePrimaryCtxRetain(&context, device);
  return result != 0 ? result : cu.cuCtxSetCurrent(context);
}
int CuGetDeviceCount(int* count) {
  const int result = cu.cuInit(0);
  return result != 0 ? result : cu.cuDeviceGetCount(count);
}
int CuDeviceReset() {
  int device = 0;
  const int result = cu.cuCtxGetDevice(&device);
  return result != 0 ? result : cu.cuDevicePrimaryCtxReset(device);
}

Api LoadDriverApi(const char* library_path) {
#if defined(GPUPOOL_CLIENT_DLOPEN) || defined(GPUPOOL_CLIENT_PROCADDRESS)
  void* library = dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "pjrt_client: dlopen(%s): %s\n", library_path,
                 dlerror());
    std::exit(2);
  }
#if defined(GPUPOOL_CLIENT_PROCADDRESS)
  int (*get_proc)(const char*, void**, int, uint64_t, int*) = nullptr;
  Resolve(library, "cuGetProcAddress_v2", &get_proc);
  auto lookup = [&](const char* name, auto* slot) {
    void* function = nullptr;
    if (get_proc(name, &function, 13000, 0, nullptr) != 0 ||
        function == nullptr) {
      std::fprintf(stderr, "pjrt_client: cuGetProcAddress(%s) failed\n", name);
      std::exit(2);
    }
    *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(function);
  };
  // Through cuGetProcAddress, the un-suffixed names: the driver picks the
  // version (cuStreamDestroy -> cuStreamDestroy_v2).
#define CU_RESOLVE(field, name) lookup(name, &cu.field)
#endif
#endif
#if defined(GPUPOOL_CLIENT_PROCADDRESS)
  CU_RESOLVE(cuInit, "cuInit");
  CU_RESOLVE(cuDeviceGetCount, "cuDeviceGetCount");
  CU_RESOLVE(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  CU_RESOLVE(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset");
  CU_RESOLVE(cuCtxSetCurrent, "cuCtxSetCurrent");
  CU_RESOLVE(cuCtxGetDevice, "cuCtxGetDevice");
  CU_RESOLVE(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange");
  CU_RESOLVE(cuStreamCreate, "cuStreamCreate");
  CU_RESOLVE(cuStreamCreateWithPriority, "cuStreamCreateWithPriority");
  CU_RESOLVE(cuStreamDestroy, "cuStreamDestroy");
  CU_RESOLVE(cuStreamQuery, "cuStreamQuery");
  CU_RESOLVE(cuStreamGetPriority, "cuStreamGetPriority");
  CU_RESOLVE(cuStreamGetFlags, "cuStreamGetFlags");
  CU_RESOLVE(cuEventCreate, "cuEventCreate");
  CU_RESOLVE(cuEventDestroy, "cuEventDestroy");
  CU_RESOLVE(cuEventRecord, "cuEventRecord");
  CU_RESOLVE(cuEventQuery, "cuEventQuery");
  CU_RESOLVE(cuEventSynchronize, "cuEventSynchronize");
#elif defined(GPUPOOL_CLIENT_DLOPEN)
  Resolve(library, "cuInit", &cu.cuInit);
  Resolve(library, "cuDeviceGetCount", &cu.cuDeviceGetCount);
  Resolve(library, "cuDevicePrimaryCtxRetain", &cu.cuDevicePrimaryCtxRetain);
  Resolve(library, "cuDevicePrimaryCtxReset_v2", &cu.cuDevicePrimaryCtxReset);
  Resolve(library, "cuCtxSetCurrent", &cu.cuCtxSetCurrent);
  Resolve(library, "cuCtxGetDevice", &cu.cuCtxGetDevice);
  Resolve(library, "cuCtxGetStreamPriorityRange",
          &cu.cuCtxGetStreamPriorityRange);
  Resolve(library, "cuStreamCreate", &cu.cuStreamCreate);
  Resolve(library, "cuStreamCreateWithPriority",
          &cu.cuStreamCreateWithPriority);
  Resolve(library, "cuStreamDestroy_v2", &cu.cuStreamDestroy);
  Resolve(library, "cuStreamQuery", &cu.cuStreamQuery);
  Resolve(library, "cuStreamGetPriority", &cu.cuStreamGetPriority);
  Resolve(library, "cuStreamGetFlags", &cu.cuStreamGetFlags);
  Resolve(library, "cuEventCreate", &cu.cuEventCreate);
  Resolve(library, "cuEventDestroy_v2", &cu.cuEventDestroy);
  Resolve(library, "cuEventRecord", &cu.cuEventRecord);
  Resolve(library, "cuEventQuery", &cu.cuEventQuery);
  Resolve(library, "cuEventSynchronize", &cu.cuEventSynchronize);
#else
  (void)library_path;
  cu = Driver{&cuInit,
              &cuDeviceGetCount,
              &cuDevicePrimaryCtxRetain,
              &cuDevicePrimaryCtxReset_v2,
              &cuCtxSetCurrent,
              &cuCtxGetDevice,
              &cuCtxGetStreamPriorityRange,
              &cuStreamCreate,
              &cuStreamCreateWithPriority,
              &cuStreamDestroy_v2,
              &cuStreamQuery,
              &cuStreamGetPriority,
              &cuStreamGetFlags,
              &cuEventCreate,
              &cuEventDestroy_v2,
              &cuEventRecord,
              &cuEventQuery,
              &cuEventSynchronize};
#endif
#undef CU_RESOLVE
  Api api{};
  api.StreamCreate = &CuStreamCreateDefault;
  api.StreamCreateWithFlags = cu.cuStreamCreate;
  api.StreamCreateWithPriority = cu.cuStreamCreateWithPriority;
  api.StreamDestroy = cu.cuStreamDestroy;
  api.StreamQuery = cu.cuStreamQuery;
  api.StreamGetPriority = cu.cuStreamGetPriority;
  api.StreamGetFlags = cu.cuStreamGetFlags;
  api.EventCreate = &CuEventCreateDefault;
  api.EventCreateWithFlags = cu.cuEventCreate;
  api.EventDestroy = cu.cuEventDestroy;
  api.EventRecord = cu.cuEventRecord;
  api.EventQuery = cu.cuEventQuery;
  api.EventSynchronize = cu.cuEventSynchronize;
  api.SetDevice = &CuSetDevice;
  api.GetDeviceCount = &CuGetDeviceCount;
  api.DeviceReset = &CuDeviceReset;
  api.DeviceGetStreamPriorityRange = cu.cuCtxGetStreamPriorityRange;
#if defined(GPUPOOL_CLIENT_DLOPEN) || defined(GPUPOOL_CLIENT_PROCADDRESS)
  Resolve(library, STANDIN_PREFIX "counters", &api.Counters);
  Resolve(library, STANDIN_PREFIX "launch", &api.Launch);
  Resolve(library, STANDIN_PREFIX "work_pending", &api.WorkPending);
#else
  api.Counters = &gpupool_standin_cu_counters;
  api.Launch = &gpupool_standin_cu_launch;
  api.WorkPending = &gpupool_standin_cu_work_pending;
#endif
  return api;
}
#endif  // CLIENT_CU

#if defined(CLIENT_CU)
Api LoadApi(const char* library_path) { return LoadDriverApi(library_path); }
#else
Api LoadApi(const char* library_path) {
  Api api{};
#ifdef GPUPOOL_CLIENT_DLOPEN
  // As XLA's stub loaders do: open the runtime, look each symbol up in it.
  void* library = dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "pjrt_client: dlopen(%s): %s\n", library_path,
                 dlerror());
    std::exit(2);
  }
#define RESOLVE(field) Resolve(library, RT_PREFIX #field, &api.field)
  RESOLVE(StreamCreate);
  RESOLVE(StreamCreateWithFlags);
  RESOLVE(StreamCreateWithPriority);
#if defined(CLIENT_HIP)
  RESOLVE(ExtStreamCreateWithCUMask);
#endif
  RESOLVE(StreamDestroy);
  RESOLVE(StreamQuery);
  RESOLVE(StreamGetPriority);
  RESOLVE(StreamGetFlags);
  RESOLVE(EventCreate);
  RESOLVE(EventCreateWithFlags);
  RESOLVE(EventDestroy);
  RESOLVE(EventRecord);
  RESOLVE(EventQuery);
  RESOLVE(EventSynchronize);
  RESOLVE(SetDevice);
  RESOLVE(GetDeviceCount);
  RESOLVE(DeviceReset);
  RESOLVE(DeviceGetStreamPriorityRange);
#undef RESOLVE
  Resolve(library, STANDIN_PREFIX "counters", &api.Counters);
  Resolve(library, STANDIN_PREFIX "launch", &api.Launch);
  Resolve(library, STANDIN_PREFIX "work_pending", &api.WorkPending);
#else
  (void)library_path;
  api.StreamCreate = &RT(StreamCreate);
  api.StreamCreateWithFlags = &RT(StreamCreateWithFlags);
  api.StreamCreateWithPriority = &RT(StreamCreateWithPriority);
#if defined(CLIENT_HIP)
  api.ExtStreamCreateWithCUMask = &hipExtStreamCreateWithCUMask;
#endif
  api.StreamDestroy = &RT(StreamDestroy);
  api.StreamQuery = &RT(StreamQuery);
  api.StreamGetPriority = &RT(StreamGetPriority);
  api.StreamGetFlags = &RT(StreamGetFlags);
  api.EventCreate = &RT(EventCreate);
  api.EventCreateWithFlags = &RT(EventCreateWithFlags);
  api.EventDestroy = &RT(EventDestroy);
  api.EventRecord = &RT(EventRecord);
  api.EventQuery = &RT(EventQuery);
  api.EventSynchronize = &RT(EventSynchronize);
  api.SetDevice = &RT(SetDevice);
  api.GetDeviceCount = &RT(GetDeviceCount);
  api.DeviceReset = &RT(DeviceReset);
  api.DeviceGetStreamPriorityRange = &RT(DeviceGetStreamPriorityRange);
  api.Counters = &STANDIN(counters);
  api.Launch = &STANDIN(launch);
  api.WorkPending = &STANDIN(work_pending);
#endif
  return api;
}
#endif  // CLIENT_CU

struct StreamSpec {
  enum Call { kCreate, kWithFlags, kWithPriority, kCuMask } call;
  unsigned flags;
  int priority;  // the least priority when kLeast
  bool least = false;
};

struct Options {
  const char* library = nullptr;
  int lifecycles = 100;
  int devices = 8;
  int threads = 1;
  int64_t launch_us = 50;
  int64_t max_stream_creates = -1;
  int64_t min_stream_creates = -1;
  int64_t max_event_creates = -1;
  int64_t min_event_creates = -1;
  bool fork_child = false;
};

bool Flag(const char* arg, const char* name, const char** value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

// One client lifecycle on one device: create, check, use, destroy.
void RunClientOnDevice(const Api& api, const Options& options, int device,
                       int least, int greatest) {
  Check(api.SetDevice(device), "SetDevice");
  std::vector<StreamSpec> specs;
  for (int i = 0; i < 4; ++i)
    specs.push_back({StreamSpec::kCreate, kStreamDefault, 0});
  for (int i = 0; i < 4; ++i)
    specs.push_back({StreamSpec::kWithFlags, kStreamNonBlocking, 0});
  for (int i = 0; i < 3; ++i)
    specs.push_back({StreamSpec::kWithPriority, kStreamNonBlocking, greatest});
  for (int i = 0; i < 2; ++i)
    specs.push_back({StreamSpec::kWithPriority, kStreamNonBlocking, least});
  if (api.ExtStreamCreateWithCUMask != nullptr) {
    specs.push_back({StreamSpec::kCuMask, kStreamDefault, 0});
  } else {
    specs.push_back({StreamSpec::kWithPriority, kStreamDefault, greatest});
  }
  const uint32_t mask[2] = {0x0000ffffu, 0x0000ffffu};

  std::vector<void*> streams;
  for (const StreamSpec& spec : specs) {
    void* stream = nullptr;
    switch (spec.call) {
      case StreamSpec::kCreate:
        Check(api.StreamCreate(&stream), "StreamCreate");
        break;
      case StreamSpec::kWithFlags:
        Check(api.StreamCreateWithFlags(&stream, spec.flags),
              "StreamCreateWithFlags");
        break;
      case StreamSpec::kWithPriority:
        Check(api.StreamCreateWithPriority(&stream, spec.flags, spec.priority),
              "StreamCreateWithPriority");
        break;
      case StreamSpec::kCuMask:
        Check(api.ExtStreamCreateWithCUMask(&stream, 2, mask),
              "ExtStreamCreateWithCUMask");
        break;
    }
    streams.push_back(stream);
  }
  std::vector<void*> events;
  for (int i = 0; i < 16; ++i) {
    void* event = nullptr;
    if (i < 8) {
      Check(api.EventCreate(&event), "EventCreate");
    } else {
      Check(api.EventCreateWithFlags(&event, kEventDisableTiming),
            "EventCreateWithFlags");
    }
    events.push_back(event);
  }

  // Distinct handles held at once.
  std::set<void*> distinct(streams.begin(), streams.end());
  distinct.insert(events.begin(), events.end());
  if (distinct.size() != streams.size() + events.size() ||
      distinct.count(nullptr)) {
    Fail("handles held at once are not distinct (or null)");
  }
  // Each stream reports what was asked, and starts idle.
  for (size_t i = 0; i < streams.size(); ++i) {
    int priority = 99;
    unsigned flags = 99;
    Check(api.StreamGetPriority(streams[i], &priority), "StreamGetPriority");
    Check(api.StreamGetFlags(streams[i], &flags), "StreamGetFlags");
    if (priority != specs[i].priority) {
      Fail("stream priority " + std::to_string(priority) + ", asked " +
           std::to_string(specs[i].priority));
    }
    if (flags != specs[i].flags) {
      Fail("stream flags " + std::to_string(flags) + ", asked " +
           std::to_string(specs[i].flags));
    }
    if (api.StreamQuery(streams[i]) != 0) Fail("a new stream is not idle");
  }
  // Use them: work on each stream, an event recorded after it.
  for (size_t i = 0; i < events.size(); ++i) {
    void* stream = streams[i % streams.size()];
    Check(api.Launch(stream, options.launch_us), "launch");
    Check(api.EventRecord(events[i], stream), "EventRecord");
  }
  Check(api.EventSynchronize(events[0]), "EventSynchronize");
  Check(api.EventQuery(events[0]), "EventQuery");
  // Destroy with work still pending on some streams.
  for (size_t i = 0; i < streams.size(); ++i) {
    Check(api.Launch(streams[i], options.launch_us), "launch");
    Check(api.StreamDestroy(streams[i]), "StreamDestroy");
#if defined(CLIENT_HIP)
    // HIP's destroy returns once the stream's work is done.
    if (api.WorkPending(streams[i]))
      Fail("hipStreamDestroy returned with work pending");
#endif
  }
  for (void* event : events) Check(api.EventDestroy(event), "EventDestroy");
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const char* value = nullptr;
    if (Flag(argv[i], "--library", &value)) {
      options.library = value;
    } else if (Flag(argv[i], "--lifecycles", &value)) {
      options.lifecycles = std::atoi(value);
    } else if (Flag(argv[i], "--devices", &value)) {
      options.devices = std::atoi(value);
    } else if (Flag(argv[i], "--threads", &value)) {
      options.threads = std::atoi(value);
    } else if (Flag(argv[i], "--launch_us", &value)) {
      options.launch_us = std::atoll(value);
    } else if (Flag(argv[i], "--max_stream_creates", &value)) {
      options.max_stream_creates = std::atoll(value);
    } else if (Flag(argv[i], "--min_stream_creates", &value)) {
      options.min_stream_creates = std::atoll(value);
    } else if (std::strcmp(argv[i], "--fork") == 0) {
      options.fork_child = true;
    } else if (Flag(argv[i], "--max_event_creates", &value)) {
      options.max_event_creates = std::atoll(value);
    } else if (Flag(argv[i], "--min_event_creates", &value)) {
      options.min_event_creates = std::atoll(value);
    } else {
      std::fprintf(stderr, "pjrt_client: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  const Api api = LoadApi(options.library);
  int count = 0;
  Check(api.GetDeviceCount(&count), "GetDeviceCount");
  if (count < options.devices) {
    std::fprintf(stderr, "pjrt_client: %d devices, need %d\n", count,
                 options.devices);
    return 2;
  }
  int least = 0;
  int greatest = 0;
  Check(api.DeviceGetStreamPriorityRange(&least, &greatest),
        "DeviceGetStreamPriorityRange");

  for (int lifecycle = 0; lifecycle < options.lifecycles; ++lifecycle) {
    // A client owns every device; with --threads, devices are split over
    // threads that run at once (as a multi-GPU client's per-device threads).
    std::vector<std::thread> threads;
    for (int t = 0; t < options.threads; ++t) {
      threads.emplace_back([&, t] {
        for (int device = t; device < options.devices;
             device += options.threads) {
          RunClientOnDevice(api, options, device, least, greatest);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    if (lifecycle == options.lifecycles / 2) {
      // Half way: every device is reset; handles of the old context die.
      for (int device = 0; device < options.devices; ++device) {
        Check(api.SetDevice(device), "SetDevice");
        Check(api.DeviceReset(), "DeviceReset");
      }
      Check(api.SetDevice(0), "SetDevice");
    }
  }

  StandinCounters counters;
  api.Counters(&counters);
  if (options.fork_child) {
    // A forked child runs one more client lifecycle on every device: it must
    // work, with fresh handles from the runtime (pools refuse in a child),
    // and touch no handle the parent's pools hold.
    const pid_t child = fork();
    if (child == 0) {
      for (int device = 0; device < options.devices; ++device) {
        RunClientOnDevice(api, options, device, least, greatest);
      }
      StandinCounters after;
      api.Counters(&after);
      const int64_t created = after.streams_created - counters.streams_created;
      if (created != int64_t{options.devices} * 14) {
        Fail("the forked child created " + std::to_string(created) +
             " streams, expected one per stream asked");
      }
      if (after.misuse != 0)
        Fail("the forked child made calls on invalid handles");
      std::printf("pjrt_client: forked child %s\n",
                  failures == 0 ? "ok" : "FAILED");
      std::fflush(stdout);
      _exit(failures == 0 ? 0 : 1);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child ||
        !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      Fail("the forked child failed");
    }
  }
  const int64_t requested = int64_t{options.lifecycles} * options.devices * 14;
  std::printf(
      "pjrt_client: %d lifecycles x %d devices: %lld stream creates requested, "
      "runtime created %lld streams and %lld events, %lld misuse, %d "
      "failures\n",
      options.lifecycles, options.devices, static_cast<long long>(requested),
      static_cast<long long>(counters.streams_created),
      static_cast<long long>(counters.events_created),
      static_cast<long long>(counters.misuse), failures);
  if (counters.misuse != 0) Fail("the runtime saw calls on invalid handles");
  if (options.max_stream_creates >= 0 &&
      counters.streams_created > options.max_stream_creates) {
    Fail("more stream creates than --max_stream_creates");
  }
  if (options.min_stream_creates >= 0 &&
      counters.streams_created < options.min_stream_creates) {
    Fail("fewer stream creates than --min_stream_creates");
  }
  if (options.max_event_creates >= 0 &&
      counters.events_created > options.max_event_creates) {
    Fail("more event creates than --max_event_creates");
  }
  if (options.min_event_creates >= 0 &&
      counters.events_created < options.min_event_creates) {
    Fail("fewer event creates than --min_event_creates");
  }
  std::printf("pjrt_client: %s\n", failures == 0 ? "ok" : "FAILED");
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}
