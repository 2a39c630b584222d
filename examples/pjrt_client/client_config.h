// examples/pjrt_client/client_config.h — what the example PJRT-style client
// holds per device and how each resource is configured, shared by the raw
// (raw_client.h) and pooled (pooled_client.h) versions.
//
// Per device: 1 compute, 1 host-to-device, 4 device-to-host, 4
// device-to-device and 4 extra streams (14), 16 events and a scratch buffer.

#ifndef GPUPOOL_EXAMPLES_PJRT_CLIENT_CLIENT_CONFIG_H_
#define GPUPOOL_EXAMPLES_PJRT_CLIENT_CLIENT_CONFIG_H_

#include <cstddef>

#include "absl/status/status.h"
#include "gpupool/backend.h"

namespace pjrt_example {

struct ClientOptions {
  int devices = 1;
  size_t scratch_bytes = size_t{64} << 20;
};

inline constexpr int kStreamsPerDevice = 14;
inline constexpr int kEventsPerDevice = 16;

// Pools are keyed by (device, config): the compute stream asks for a higher
// priority and never receives a copy stream, and vice versa.
inline gpupool::StreamConfig ComputeStreamConfig() {
  gpupool::StreamConfig config;
  config.priority = -1;
  config.non_blocking = true;
  return config;
}
inline gpupool::StreamConfig CopyStreamConfig() {
  gpupool::StreamConfig config;
  config.priority = 0;
  config.non_blocking = true;
  return config;
}
inline gpupool::EventConfig ClientEventConfig() {
  gpupool::EventConfig config;
  config.disable_timing = true;
  return config;
}

}  // namespace pjrt_example

// The usual runtime-client helpers: return the error, or assign the value.
#define PJRT_RETURN_IF_ERROR(expr)               \
  do {                                           \
    const absl::Status pjrt_status_ = (expr);    \
    if (!pjrt_status_.ok()) return pjrt_status_; \
  } while (false)

#define PJRT_CONCAT_INNER(a, b) a##b
#define PJRT_CONCAT(a, b) PJRT_CONCAT_INNER(a, b)
#define PJRT_ASSIGN_OR_RETURN(lhs, expr) \
  PJRT_ASSIGN_OR_RETURN_IMPL(PJRT_CONCAT(pjrt_or_, __LINE__), lhs, expr)
#define PJRT_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                               \
  if (!statusor.ok()) return statusor.status();         \
  lhs = *std::move(statusor)

#endif  // GPUPOOL_EXAMPLES_PJRT_CLIENT_CLIENT_CONFIG_H_
