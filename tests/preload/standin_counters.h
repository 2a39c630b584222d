// What a stand-in runtime counted, as a C struct: each stand-in library
// exports gpupool_standin_<runtime>_counters(StandinCounters*) for the client
// programs of the preload tests.

#ifndef GPUPOOL_TESTS_PRELOAD_STANDIN_COUNTERS_H_
#define GPUPOOL_TESTS_PRELOAD_STANDIN_COUNTERS_H_

#include <stdint.h>

struct StandinCounters {
  int64_t streams_created = 0;
  int64_t streams_destroyed = 0;
  int64_t streams_live = 0;
  int64_t events_created = 0;
  int64_t events_destroyed = 0;
  int64_t events_live = 0;
  int64_t stream_queries = 0;
  int64_t stream_synchronizes = 0;
  int64_t event_records = 0;
  int64_t event_queries = 0;
  int64_t launches = 0;
  int64_t device_resets = 0;
  // Calls on a destroyed, reset-invalidated or foreign handle.
  int64_t misuse = 0;
};

#endif  // GPUPOOL_TESTS_PRELOAD_STANDIN_COUNTERS_H_
