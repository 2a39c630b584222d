// gpupool/config.h — pool sizing and prewarming from one environment
// variable, GPUPOOL_CONF, in the style of PYTORCH_CUDA_ALLOC_CONF.
//
// `ProcessPools()` reads GPUPOOL_CONF once, when it creates the process-wide
// bundle: the options go to `Pools::Create` and the prewarm list runs right
// after. A malformed value makes `ProcessPools()` return the InvalidArgument
// from `ParsePoolsConfig`, which names the bad token and its position; the
// parser never crashes and never guesses.
//
// Grammar: comma-separated `key=value` tokens; spaces around tokens, keys and
// values are ignored, empty tokens are skipped, and a repeated key overrides
// the earlier one (except `prewarm`, which accumulates).
//
//   max_idle_per_key=<int >= 0>        streams and events (PoolOptions)
//   max_live_per_key=<int >= 0>        0 = unbounded
//   acquire_timeout=<duration>         absl::ParseDuration: 500ms, 2s, 1m
//   validate_on_acquire=<bool>         true|false|1|0
//   track_lease_sites=<bool>           true|false|1|0
//   max_cached_bytes=<size>            allocation cache, per device
//   max_cached_block_bytes=<size>      allocation cache, larger goes uncached
//   prewarm=<backend>:<device>:<stream config>:<count>   repeatable
//
// <size> is a non-negative integer with an optional unit: B, KiB, MiB, GiB,
// TiB (binary) or KB, MB, GB, TB (decimal). <backend> is cuda, hip, sim or any
// (a prewarm runs only when the bundle's backend matches). <stream config> is
// `default`, `non_blocking` or `blocking`, optionally followed by
// `+priority=<n>`, e.g. `non_blocking+priority=-1`.
//
// Thread safety: the functions are thread-safe (they share no state).
//
// Example:
//
//   // GPUPOOL_CONF="max_cached_bytes=2GiB,prewarm=cuda:0:non_blocking:14"
//   absl::StatusOr<gpupool::PoolsConfig> config =
//       gpupool::ParsePoolsConfig("max_idle_per_key=32,acquire_timeout=2s");
//   if (!config.ok()) return config.status();  // InvalidArgument, names token
//   absl::StatusOr<std::unique_ptr<gpupool::Pools>> pools =
//       gpupool::Pools::Create(std::move(backend), config->options);

#ifndef GPUPOOL_CONFIG_H_
#define GPUPOOL_CONFIG_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupool/backend.h"
#include "gpupool/export.h"
#include "gpupool/pools.h"

namespace gpupool {

// The environment variable `ProcessPools()` reads.
inline constexpr char kPoolsConfigEnvVar[] = "GPUPOOL_CONF";

// One `prewarm=` entry: create `count` idle streams of (device, config) when
// the bundle's backend is `backend` (or any backend for "any").
struct GPUPOOL_EXPORT PrewarmSpec {
  std::string backend = "any";  // "cuda" | "hip" | "sim" | "any"
  int device = 0;
  StreamConfig config;
  int count = 0;

  // True when this entry applies to a backend named `backend_name`.
  bool AppliesTo(absl::string_view backend_name) const;
  // The entry in GPUPOOL_CONF syntax: "cuda:0:non_blocking+priority=-1:4".
  std::string ToString() const;
};

// Everything GPUPOOL_CONF can set.
// What libgpupool_preload.so (the LD_PRELOAD library) pools; only it reads
// these. `preload=false` sends every call to the runtime untouched;
// `preload_streams=false` / `preload_events=false` switch off one kind.
struct GPUPOOL_EXPORT PreloadConfig {
  bool enabled = true;
  bool streams = true;
  bool events = true;
};

struct GPUPOOL_EXPORT PoolsConfig {
  // For Pools::Create. The PoolOptions keys set `streams` and `events`
  // alike; max_cached_bytes and max_cached_block_bytes set `allocations`.
  PoolsOptions options;
  // In the order given.
  std::vector<PrewarmSpec> prewarm;
  PreloadConfig preload;
};

// Parses `text` (the GPUPOOL_CONF grammar above). Empty or blank text gives
// the defaults. InvalidArgument for an unknown key, a token without '=', or a
// malformed or out-of-range value; the message names the token, its 1-based
// index and its column in `text`.
GPUPOOL_EXPORT absl::StatusOr<PoolsConfig> ParsePoolsConfig(
    absl::string_view text);

// Parses the GPUPOOL_CONF environment variable (defaults when unset or
// empty). Errors as ParsePoolsConfig, the message prefixed with
// "GPUPOOL_CONF: ".
GPUPOOL_EXPORT absl::StatusOr<PoolsConfig> PoolsConfigFromEnvironment();

// Parses a byte size: "4096", "512KiB", "2GiB", "1GB". InvalidArgument for a
// missing number, an unknown unit or a value that does not fit in size_t.
GPUPOOL_EXPORT absl::StatusOr<size_t> ParseByteSize(absl::string_view text);

// Runs every entry of `prewarm` that applies to `pools.backend()`, in order,
// with StreamPool::Prewarm (synchronously). Entries that fail do not stop the
// others; the result is OK, or the first failure prefixed with its entry
// (InvalidArgument for a device out of range, otherwise the runtime's status).
GPUPOOL_EXPORT absl::Status RunPrewarms(
    Pools& pools, const std::vector<PrewarmSpec>& prewarm);

}  // namespace gpupool

#endif  // GPUPOOL_CONFIG_H_
