// GPUPOOL_CONF parsing and the prewarm list; see gpupool/config.h.

#include "gpupool/config.h"

#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace gpupool {
namespace {

// A prewarm larger than this is almost certainly a typo (every entry creates
// that many streams at startup).
constexpr int kMaxPrewarmCount = 4096;
// The trace's bound: 10^7 events is about 1 GB of host memory.
constexpr int kMaxTraceEvents = 10'000'000;

constexpr absl::string_view kKnownKeys =
    "max_idle_per_key, max_live_per_key, acquire_timeout, "
    "validate_on_acquire, track_lease_sites, max_cached_bytes, "
    "max_cached_block_bytes, give_back_above_percent, trace, lease_times, "
    "defer_same_stream_fences, "
    "prewarm, "
    "preload, preload_streams, "
    "preload_events";

// A comma-separated item of the configuration text and where it starts.
struct Token {
  absl::string_view text;  // trimmed
  int index = 0;           // 1-based, counting empty items
  size_t column = 0;       // 1-based column of `text` in the whole input
};

absl::Status TokenError(const Token& token, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("token ", token.index, " \"",
                                                 token.text, "\" (column ",
                                                 token.column, "): ", reason));
}

// An optional sign and at least one digit, nothing else: an integer,
// whether or not it fits.
bool IsIntegerText(absl::string_view value) {
  if (!value.empty() && (value[0] == '-' || value[0] == '+')) {
    value.remove_prefix(1);
  }
  if (value.empty()) return false;
  for (char c : value) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// Value checks return a reason on error; the caller adds the token.
absl::StatusOr<int> ParseInt(absl::string_view value, int min, int max) {
  value = absl::StripAsciiWhitespace(value);  // as SimpleAtoi allows
  int parsed = 0;
  if (!IsIntegerText(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", value, "\" is not an integer"));
  }
  if (!absl::SimpleAtoi(value, &parsed)) {  // does not fit in an int
    return absl::InvalidArgumentError(
        absl::StrCat(value, " is out of range [", min, ", ", max, "]"));
  }
  if (parsed < min || parsed > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(parsed, " is out of range [", min, ", ", max, "]"));
  }
  return parsed;
}

absl::StatusOr<bool> ParseBool(absl::string_view value) {
  const std::string lower = absl::AsciiStrToLower(value);
  if (lower == "true" || lower == "1") return true;
  if (lower == "false" || lower == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", value, "\" is not a boolean (expected true, false, 1 or 0)"));
}

absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view value) {
  absl::Duration duration;
  if (!absl::ParseDuration(value, &duration)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", value,
                     "\" is not a duration (expected a number with a unit, "
                     "e.g. 500ms, 2s, 1m)"));
  }
  if (duration < absl::ZeroDuration() || duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", value,
                     "\" must be finite and not negative (acquires never "
                     "block forever)"));
  }
  return duration;
}

absl::StatusOr<StreamConfig> ParseStreamConfig(absl::string_view value) {
  std::vector<absl::string_view> parts = absl::StrSplit(value, '+');
  StreamConfig config;
  if (parts[0] == "default" || parts[0] == "non_blocking") {
    config.non_blocking = true;
  } else if (parts[0] == "blocking") {
    config.non_blocking = false;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown stream config \"", parts[0],
                     "\" (expected default, non_blocking or blocking)"));
  }
  bool have_priority = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    absl::string_view modifier = parts[i];
    if (!absl::ConsumePrefix(&modifier, "priority=")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown stream config modifier \"", parts[i],
                       "\" (expected +priority=<n>)"));
    }
    if (have_priority) {
      return absl::InvalidArgumentError("priority given twice");
    }
    absl::StatusOr<int> priority =
        ParseInt(modifier, std::numeric_limits<int>::min(),
                 std::numeric_limits<int>::max());
    if (!priority.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("priority: ", priority.status().message()));
    }
    config.priority = *priority;
    have_priority = true;
  }
  return config;
}

absl::StatusOr<PrewarmSpec> ParsePrewarm(absl::string_view value) {
  std::vector<absl::string_view> fields = absl::StrSplit(value, ':');
  if (fields.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected <backend>:<device>:<stream config>:<count>, got ",
        fields.size(), " field", fields.size() == 1 ? "" : "s"));
  }
  PrewarmSpec spec;
  if (fields[0] != "cuda" && fields[0] != "hip" && fields[0] != "sim" &&
      fields[0] != "any") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown backend \"", fields[0],
                     "\" (expected cuda, hip, sim or any)"));
  }
  spec.backend = std::string(fields[0]);
  absl::StatusOr<int> device =
      ParseInt(fields[1], 0, std::numeric_limits<int>::max());
  if (!device.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device: ", device.status().message()));
  }
  spec.device = *device;
  absl::StatusOr<StreamConfig> config = ParseStreamConfig(fields[2]);
  if (!config.ok()) return config.status();
  spec.config = *std::move(config);
  absl::StatusOr<int> count = ParseInt(fields[3], 0, kMaxPrewarmCount);
  if (!count.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("count: ", count.status().message()));
  }
  spec.count = *count;
  return spec;
}

// Applies one `key=value` token to `config`.
absl::Status ApplyToken(const Token& token, PoolsConfig* config) {
  const size_t equals = token.text.find('=');
  if (equals == absl::string_view::npos) {
    return TokenError(token, "expected key=value");
  }
  const absl::string_view key =
      absl::StripAsciiWhitespace(token.text.substr(0, equals));
  const absl::string_view value =
      absl::StripAsciiWhitespace(token.text.substr(equals + 1));
  if (key.empty()) return TokenError(token, "missing key before '='");
  if (value.empty()) {
    return TokenError(token, absl::StrCat("missing value for ", key));
  }
  // Wraps a value error with the token.
  auto fail = [&](const absl::Status& status) {
    return TokenError(token, absl::StrCat(key, ": ", status.message()));
  };
  PoolOptions& streams = config->options.streams;
  PoolOptions& events = config->options.events;

  if (key == "max_idle_per_key" || key == "max_live_per_key") {
    absl::StatusOr<int> parsed =
        ParseInt(value, 0, std::numeric_limits<int>::max());
    if (!parsed.ok()) return fail(parsed.status());
    int PoolOptions::*field = key == "max_idle_per_key"
                                  ? &PoolOptions::max_idle_per_key
                                  : &PoolOptions::max_live_per_key;
    streams.*field = events.*field = *parsed;
  } else if (key == "acquire_timeout") {
    absl::StatusOr<absl::Duration> parsed = ParseTimeout(value);
    if (!parsed.ok()) return fail(parsed.status());
    streams.acquire_timeout = events.acquire_timeout = *parsed;
  } else if (key == "lease_times") {
    // The allocation cache records when each lease began (snapshots' ages).
    absl::StatusOr<bool> parsed = ParseBool(value);
    if (!parsed.ok()) return fail(parsed.status());
    config->options.allocations.record_lease_times = *parsed;
  } else if (key == "validate_on_acquire" || key == "track_lease_sites") {
    absl::StatusOr<bool> parsed = ParseBool(value);
    if (!parsed.ok()) return fail(parsed.status());
    bool PoolOptions::*field = key == "validate_on_acquire"
                                   ? &PoolOptions::validate_on_acquire
                                   : &PoolOptions::track_lease_sites;
    streams.*field = events.*field = *parsed;
  } else if (key == "max_cached_bytes") {
    absl::StatusOr<size_t> parsed = ParseByteSize(value);
    if (!parsed.ok()) return fail(parsed.status());
    config->options.allocations.max_cached_bytes = *parsed;
  } else if (key == "max_cached_block_bytes") {
    absl::StatusOr<size_t> parsed = ParseByteSize(value);
    if (!parsed.ok()) return fail(parsed.status());
    if (*parsed == 0) return fail(absl::InvalidArgumentError("must be > 0"));
    config->options.allocations.max_cached_block_bytes = *parsed;
  } else if (key == "trace") {
    // Events kept by the allocation cache's trace; 0 turns it off.
    absl::StatusOr<int> parsed = ParseInt(value, 0, kMaxTraceEvents);
    if (!parsed.ok()) return fail(parsed.status());
    config->options.allocations.trace_capacity = static_cast<size_t>(*parsed);
  } else if (key == "defer_same_stream_fences") {
    absl::StatusOr<bool> parsed = ParseBool(value);
    if (!parsed.ok()) return fail(parsed.status());
    config->options.allocations.defer_same_stream_fences = *parsed;
  } else if (key == "give_back_above_percent") {
    // A percentage of the bytes in use; -1 turns the give-back off.
    absl::StatusOr<int> parsed = ParseInt(value, -1, 1000000);
    if (!parsed.ok()) return fail(parsed.status());
    config->options.allocations.give_back_above_percent = *parsed;
  } else if (key == "preload" || key == "preload_streams" ||
             key == "preload_events") {
    absl::StatusOr<bool> parsed = ParseBool(value);
    if (!parsed.ok()) return fail(parsed.status());
    bool PreloadConfig::*field = key == "preload" ? &PreloadConfig::enabled
                                 : key == "preload_streams"
                                     ? &PreloadConfig::streams
                                     : &PreloadConfig::events;
    config->preload.*field = *parsed;
  } else if (key == "prewarm") {
    absl::StatusOr<PrewarmSpec> parsed = ParsePrewarm(value);
    if (!parsed.ok()) return fail(parsed.status());
    config->prewarm.push_back(*std::move(parsed));
  } else {
    return TokenError(token, absl::StrCat("unknown key \"", key,
                                          "\" (known keys: ", kKnownKeys, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

bool PrewarmSpec::AppliesTo(absl::string_view backend_name) const {
  return backend == "any" || backend == backend_name;
}

std::string PrewarmSpec::ToString() const {
  std::string out =
      absl::StrCat(backend, ":", device, ":",
                   config.non_blocking ? "non_blocking" : "blocking");
  if (config.priority != 0) {
    absl::StrAppend(&out, "+priority=", config.priority);
  }
  absl::StrAppend(&out, ":", count);
  return out;
}

absl::StatusOr<size_t> ParseByteSize(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(text[digits])) ++digits;
  if (digits == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a size (expected e.g. 4096, 512KiB, 2GiB)"));
  }
  uint64_t number = 0;
  if (!absl::SimpleAtoi(text.substr(0, digits), &number)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is too large"));
  }
  const absl::string_view unit =
      absl::StripLeadingAsciiWhitespace(text.substr(digits));
  if (absl::StartsWith(unit, ".")) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text,
                     "\": fractional sizes are not supported (use a smaller "
                     "unit, e.g. 1536MiB)"));
  }
  struct Unit {
    absl::string_view name;
    uint64_t multiplier;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"kib", uint64_t{1} << 10},
      {"mib", uint64_t{1} << 20},
      {"gib", uint64_t{1} << 30},
      {"tib", uint64_t{1} << 40},
      {"kb", 1000},
      {"mb", 1000 * 1000},
      {"gb", 1000 * 1000 * 1000},
      {"tb", uint64_t{1000} * 1000 * 1000 * 1000},
  };
  const std::string lower = absl::AsciiStrToLower(unit);
  for (const Unit& candidate : kUnits) {
    if (lower != candidate.name) continue;
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(number, candidate.multiplier, &bytes) ||
        bytes > std::numeric_limits<size_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", text, "\" is too large"));
    }
    return static_cast<size_t>(bytes);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\": unknown unit \"", unit,
                   "\" (expected B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"));
}

absl::StatusOr<PoolsConfig> ParsePoolsConfig(absl::string_view text) {
  PoolsConfig config;
  int index = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == absl::string_view::npos) end = text.size();
    const absl::string_view raw = text.substr(start, end - start);
    const absl::string_view trimmed = absl::StripAsciiWhitespace(raw);
    ++index;
    if (!trimmed.empty()) {
      Token token;
      token.text = trimmed;
      token.index = index;
      token.column = static_cast<size_t>(trimmed.data() - text.data()) + 1;
      absl::Status status = ApplyToken(token, &config);
      if (!status.ok()) return status;
    }
    start = end + 1;
  }
  return config;
}

absl::StatusOr<PoolsConfig> PoolsConfigFromEnvironment() {
  const char* env = secure_getenv(kPoolsConfigEnvVar);
  if (env == nullptr) return PoolsConfig{};
  absl::StatusOr<PoolsConfig> config = ParsePoolsConfig(env);
  if (!config.ok()) {
    return absl::Status(
        config.status().code(),
        absl::StrCat(kPoolsConfigEnvVar, ": ", config.status().message()));
  }
  return config;
}

absl::Status RunPrewarms(Pools& pools,
                         const std::vector<PrewarmSpec>& prewarm) {
  const std::string backend_name(pools.backend().name());
  absl::Status first_error;
  for (const PrewarmSpec& spec : prewarm) {
    if (!spec.AppliesTo(backend_name)) continue;
    absl::Status status =
        pools.streams().Prewarm(spec.device, spec.config, spec.count);
    if (!status.ok() && first_error.ok()) {
      first_error = absl::Status(
          status.code(),
          absl::StrCat("prewarm=", spec.ToString(), " on ", backend_name, ": ",
                       MessageWithoutFault(status)));
    }
  }
  return first_error;
}

}  // namespace gpupool
