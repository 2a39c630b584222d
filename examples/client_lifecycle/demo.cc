// gpupool_demo — the main job in one command: a PJRT-style client built and
// torn down N times with raw runtime calls and then from gpupool's pools, on
// the best backend present, with a short table of the result.
//
// Backend: the CUDA runtime when it reports a device, else HIP; with neither,
// the SimBackend twice — the RocmMi300x profile (latencies from the seed
// report's MI300X measurements) and the Cuda profile — and every simulated
// row says so. --quick (CI) uses the Instant and Cuda profiles and few
// lifecycles.
//
// Writes <out_dir>/demo_results.json and .csv; tools/plot_benchmarks.py turns
// them into a chart (tools/run_demo.sh does both).
//
// Usage: gpupool_demo [--out_dir=out/demo] [--quick]
// [--backend=auto|cuda|hip|sim]
//                     [--lifecycles=N]

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "examples/client_lifecycle/client_model.h"
#include "gpupool/allocation_cache.h"
#include "gpupool/backend.h"
#include "gpupool/event_pool.h"
#include "gpupool/sim_backend.h"
#include "gpupool/stream_pool.h"

ABSL_FLAG(std::string, out_dir, "out/demo",
          "Folder for demo_results.json and demo_results.csv (created).");
ABSL_FLAG(bool, quick, false,
          "CI mode: few lifecycles; with no GPU, the instant and cuda sim "
          "profiles instead of rocm_mi300x and cuda.");
ABSL_FLAG(std::string, backend, "auto",
          "auto (GPU if present, else simulated), cuda, hip or sim.");
ABSL_FLAG(int, lifecycles, 0,
          "Lifecycles per mode; 0 picks 20 where stream creation takes "
          "milliseconds (HIP, simulated MI300X) and 200 elsewhere.");

namespace gpupool::examples {
namespace {

// The simulated node: 8 devices, like the seed report's (112 streams =
// 8 devices x 14).
constexpr int kSimDevices = 8;

// One backend to measure, and how to describe it.
struct Target {
  std::unique_ptr<Backend> backend;
  std::string backend_name;  // "cuda", "hip", "sim"
  std::string profile;       // sim profile name; "" for a GPU
  bool simulated = false;
  bool slow_streams = false;  // stream create/destroy costs milliseconds
  std::string note;           // printed under the table
};

struct Row {
  std::string backend_name;
  std::string profile;
  bool simulated = false;
  std::string note;
  int devices = 0;
  int lifecycles = 0;
  double raw_ms_mean = 0;
  double pooled_first_ms = 0;
  double pooled_warm_ms_mean = 0;
  double speedup = 0;  // raw mean / pooled warm mean
  LifecycleCounts raw;
  int64_t pooled_streams_created = 0;
  int64_t pooled_events_created = 0;
  int64_t pooled_runtime_allocations = 0;
};

std::string SimNote(const std::string& profile) {
  if (profile == "rocm-mi300x") {
    return "simulated, latencies from published MI300X measurements (stream "
           "create 3.4 ms, destroy 3.3 ms)";
  }
  if (profile == "cuda") {
    return "simulated, CUDA-like latencies (about 1.5 us per stream create "
           "or destroy; an estimate, not a measurement)";
  }
  return "simulated, no runtime latency at all: creating a stream is free "
         "here, so pooling cannot win and the speed-up (below 1x) is the "
         "pools' own bookkeeping against nothing; a check that the demo runs, "
         "not a measurement";
}

Target SimTarget(SimProfile profile) {
  Target target;
  target.backend_name = "sim";
  target.profile = profile.name;
  target.simulated = true;
  target.slow_streams = profile.stream_create >= absl::Milliseconds(1);
  target.note = SimNote(profile.name);
  SimOptions options;
  options.device_count = kSimDevices;
  options.profile = std::move(profile);
  target.backend = std::make_unique<SimBackend>(std::move(options));
  return target;
}

// A GPU backend that reports at least one device, or why not.
absl::StatusOr<Target> GpuTarget(const std::string& name) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(name);
  if (!backend.ok()) return backend.status();
  absl::StatusOr<int> devices = (*backend)->DeviceCount();
  if (!devices.ok()) return devices.status();
  if (*devices <= 0) return absl::UnavailableError("0 devices");
  Target target;
  target.backend = *std::move(backend);
  target.backend_name = name;
  target.slow_streams = name == "hip";
  target.note =
      absl::StrCat("measured on a GPU through the ", name, " runtime");
  return target;
}

// The backends to measure, per --backend; prints why GPUs were passed over.
absl::StatusOr<std::vector<Target>> ChooseTargets(const std::string& choice,
                                                  bool quick) {
  std::vector<Target> targets;
  if (choice == "cuda" || choice == "hip") {
    absl::StatusOr<Target> gpu = GpuTarget(choice);
    if (!gpu.ok()) return gpu.status();
    targets.push_back(*std::move(gpu));
    return targets;
  }
  if (choice == "auto") {
    for (const char* name : {"cuda", "hip"}) {
      absl::StatusOr<Target> gpu = GpuTarget(name);
      if (gpu.ok()) {
        targets.push_back(*std::move(gpu));
        return targets;
      }
      std::printf("  %s: not used (%s)\n", name,
                  std::string(gpu.status().message()).c_str());
    }
    std::printf("  no GPU found: running on the simulator (SimBackend)\n");
  } else if (choice != "sim") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend=", choice, ": want auto, cuda, hip or sim"));
  }
  if (quick) {
    targets.push_back(SimTarget(SimProfile::Instant()));
  } else {
    targets.push_back(SimTarget(SimProfile::RocmMi300x()));
  }
  targets.push_back(SimTarget(SimProfile::Cuda()));
  return targets;
}

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

absl::StatusOr<Row> Measure(Target& target, int lifecycles) {
  Backend& backend = *target.backend;
  absl::StatusOr<int> device_count = backend.DeviceCount();
  if (!device_count.ok()) return device_count.status();
  Row row;
  row.backend_name = target.backend_name;
  row.profile = target.profile;
  row.simulated = target.simulated;
  row.note = target.note;
  row.devices = std::min(8, *device_count);
  row.lifecycles = lifecycles;
  const ClientShape shape;

  // Raw: every lifecycle creates and destroys everything.
  double raw_total_ms = 0;
  for (int i = 0; i < lifecycles; ++i) {
    auto start = std::chrono::steady_clock::now();
    absl::Status status =
        RunRawLifecycle(backend, row.devices, shape, &row.raw);
    raw_total_ms += MillisecondsSince(start);
    if (!status.ok()) return status;
  }
  row.raw_ms_mean = raw_total_ms / lifecycles;

  // Pooled: process-lifetime pools; only the first lifecycle creates.
  {
    StreamPool streams(backend);
    EventPool events(backend);
    AllocationCache allocations(backend, events);
    ClientPools pools{&streams, &events, &allocations};
    double warm_total_ms = 0;
    for (int i = 0; i < lifecycles; ++i) {
      auto start = std::chrono::steady_clock::now();
      absl::Status status = RunPooledLifecycle(pools, row.devices, shape);
      double ms = MillisecondsSince(start);
      if (!status.ok()) return status;
      if (i == 0) {
        row.pooled_first_ms = ms;
      } else {
        warm_total_ms += ms;
      }
    }
    row.pooled_warm_ms_mean =
        lifecycles > 1 ? warm_total_ms / (lifecycles - 1) : row.pooled_first_ms;
    row.pooled_streams_created = streams.GetStats().created;
    row.pooled_events_created = events.GetStats().created;
    row.pooled_runtime_allocations = allocations.GetStats().runtime_allocations;
  }
  row.speedup = row.pooled_warm_ms_mean > 0
                    ? row.raw_ms_mean / row.pooled_warm_ms_mean
                    : 0;

  // The simulator counted every runtime call independently of the pools:
  // check that it saw no leak or misuse.
  if (target.simulated) {
    auto& sim = static_cast<SimBackend&>(backend);
    absl::Status leaks = sim.CheckNoLeaks();
    if (!leaks.ok()) return leaks;
    if (sim.misuse_count() > 0) {
      return absl::InternalError(
          absl::StrCat("simulator saw misuse: ",
                       absl::StrJoin(sim.misuse_messages(), "; ")));
    }
    int64_t expected = row.raw.streams_created + row.pooled_streams_created;
    if (sim.streams_created() != expected) {
      return absl::InternalError(
          absl::StrCat("simulator counted ", sim.streams_created(),
                       " stream creations, the demo ", expected));
    }
  }
  return row;
}

std::string FormatMs(double ms) {
  if (ms >= 100) return absl::StrFormat("%.0f ms", ms);
  if (ms >= 1) return absl::StrFormat("%.2f ms", ms);
  return absl::StrFormat("%.1f us", ms * 1000);
}

void PrintTable(const std::vector<Row>& rows) {
  std::printf("\n%-16s %-12s %7s %5s %14s %14s %14s %9s %10s %8s\n", "backend",
              "profile", "devices", "runs", "raw/lifecycle", "pooled/lifec.",
              "pooled 1st", "speed-up", "streams:raw", "pooled");
  for (const Row& row : rows) {
    std::string backend = row.simulated
                              ? absl::StrCat(row.backend_name, " (simulated)")
                              : absl::StrCat(row.backend_name, " (GPU)");
    std::string speedup = row.speedup >= 10
                              ? absl::StrFormat("%.0fx", row.speedup)
                              : absl::StrFormat("%.1fx", row.speedup);
    std::printf("%-16s %-12s %7d %5d %14s %14s %14s %9s %10lld %8lld\n",
                backend.c_str(),
                row.profile.empty() ? "-" : row.profile.c_str(), row.devices,
                row.lifecycles, FormatMs(row.raw_ms_mean).c_str(),
                FormatMs(row.pooled_warm_ms_mean).c_str(),
                FormatMs(row.pooled_first_ms).c_str(), speedup.c_str(),
                static_cast<long long>(row.raw.streams_created),
                static_cast<long long>(row.pooled_streams_created));
  }
  std::printf(
      "\npooled/lifec. is the mean of lifecycles 2..N (the pools are warm); "
      "pooled 1st is the\nfirst lifecycle, which creates the pools' streams. "
      "speed-up = raw / pooled, same run.\n");
  if (!rows.empty()) {
    // streams:raw counts every device of every lifecycle; say so with the
    // first row's own numbers.
    const Row& row = rows.front();
    std::printf(
        "Each lifecycle builds the client on every device: streams:raw = "
        "devices x %d streams x runs\n(first row: %d x %d x %d = %lld); "
        "pooled = streams the pools created over all runs.\n",
        ClientShape().streams_per_device(), row.devices,
        ClientShape().streams_per_device(), row.lifecycles,
        static_cast<long long>(row.raw.streams_created));
  }
  for (const Row& row : rows) {
    std::printf("  %s%s%s: %s\n", row.backend_name.c_str(),
                row.profile.empty() ? "" : ":", row.profile.c_str(),
                row.note.c_str());
  }
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

absl::Status WriteResults(const std::vector<Row>& rows,
                          const std::string& out_dir) {
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", out_dir, ": ", error.message()));
  }
  const ClientShape shape;
  std::string date =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  std::vector<std::string> json_rows;
  std::string csv =
      "backend,profile,simulated,devices,lifecycles,raw_ms_mean,"
      "pooled_warm_ms_mean,pooled_first_ms,speedup,streams_created_raw,"
      "streams_created_pooled,events_created_raw,events_created_pooled,"
      "allocations_raw,allocations_pooled\n";
  for (const Row& row : rows) {
    json_rows.push_back(absl::StrFormat(
        "    {\"backend\": %s, \"profile\": %s, \"simulated\": %s, "
        "\"note\": %s, \"devices\": %d, \"lifecycles\": %d, "
        "\"raw_ms_mean\": %.6f, \"pooled_warm_ms_mean\": %.6f, "
        "\"pooled_first_ms\": %.6f, \"speedup\": %.3f, "
        "\"streams_created_raw\": %d, \"streams_created_pooled\": %d, "
        "\"events_created_raw\": %d, \"events_created_pooled\": %d, "
        "\"allocations_raw\": %d, \"allocations_pooled\": %d}",
        JsonString(row.backend_name), JsonString(row.profile),
        row.simulated ? "true" : "false", JsonString(row.note), row.devices,
        row.lifecycles, row.raw_ms_mean, row.pooled_warm_ms_mean,
        row.pooled_first_ms, row.speedup, row.raw.streams_created,
        row.pooled_streams_created, row.raw.events_created,
        row.pooled_events_created, row.raw.allocations_made,
        row.pooled_runtime_allocations));
    absl::StrAppendFormat(
        &csv, "%s,%s,%d,%d,%d,%.6f,%.6f,%.6f,%.3f,%d,%d,%d,%d,%d,%d\n",
        row.backend_name, row.profile, row.simulated ? 1 : 0, row.devices,
        row.lifecycles, row.raw_ms_mean, row.pooled_warm_ms_mean,
        row.pooled_first_ms, row.speedup, row.raw.streams_created,
        row.pooled_streams_created, row.raw.events_created,
        row.pooled_events_created, row.raw.allocations_made,
        row.pooled_runtime_allocations);
  }
  std::string json = absl::StrCat(
      "{\n  \"kind\": \"gpupool_demo\",\n  \"date\": ", JsonString(date),
      ",\n  \"client\": {\"streams_per_device\": ", shape.streams_per_device(),
      ", \"events_per_device\": ", shape.events,
      ", \"scratch_bytes\": ", shape.scratch_bytes, "},\n  \"rows\": [\n",
      absl::StrJoin(json_rows, ",\n"), "\n  ]\n}\n");
  for (const auto& [name, text] :
       {std::pair<std::string, const std::string*>{"demo_results.json", &json},
        std::pair<std::string, const std::string*>{"demo_results.csv", &csv}}) {
    std::string path = (std::filesystem::path(out_dir) / name).string();
    std::ofstream file(path);
    file << *text;
    if (!file) return absl::InternalError(absl::StrCat("cannot write ", path));
    std::printf("wrote %s\n", path.c_str());
  }
  return absl::OkStatus();
}

int Main() {
  const bool quick = absl::GetFlag(FLAGS_quick);
  const ClientShape shape;
  std::printf(
      "gpupool demo: a PJRT-style client (per device %d streams, %d events, "
      "a %zu MiB scratch buffer)\nbuilt and torn down N times with raw "
      "runtime calls, then from gpupool's pools.\n",
      shape.streams_per_device(), shape.events, shape.scratch_bytes >> 20);
  absl::StatusOr<std::vector<Target>> targets =
      ChooseTargets(absl::GetFlag(FLAGS_backend), quick);
  if (!targets.ok()) {
    std::fprintf(stderr, "gpupool_demo: %s\n",
                 targets.status().ToString().c_str());
    return 2;
  }
  std::vector<Row> rows;
  for (Target& target : *targets) {
    int lifecycles = absl::GetFlag(FLAGS_lifecycles);
    if (lifecycles <= 0) {
      lifecycles = quick ? 5 : (target.slow_streams ? 20 : 200);
    }
    std::printf("  measuring %s%s%s: %d lifecycles raw, %d pooled ...\n",
                target.backend_name.c_str(), target.profile.empty() ? "" : ":",
                target.profile.c_str(), lifecycles, lifecycles);
    std::fflush(stdout);
    absl::StatusOr<Row> row = Measure(target, lifecycles);
    if (!row.ok()) {
      std::fprintf(stderr, "gpupool_demo: %s: %s\n",
                   target.backend_name.c_str(),
                   row.status().ToString().c_str());
      return 1;
    }
    rows.push_back(*std::move(row));
  }
  PrintTable(rows);
  absl::Status written = WriteResults(rows, absl::GetFlag(FLAGS_out_dir));
  if (!written.ok()) {
    std::fprintf(stderr, "gpupool_demo: %s\n", written.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gpupool::examples

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "PJRT-style client lifecycle, raw runtime calls vs gpupool pools.");
  absl::ParseCommandLine(argc, argv);
  return gpupool::examples::Main();
}
