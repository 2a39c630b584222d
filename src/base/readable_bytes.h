// Byte counts for people: "512 B", "3.00 MiB", "1.25 GiB" (binary units, two
// decimals, exact below 1 KiB), as gpupool's stats, DebugString and
// out-of-memory messages print them.

#ifndef GPUPOOL_SRC_BASE_READABLE_BYTES_H_
#define GPUPOOL_SRC_BASE_READABLE_BYTES_H_

#include <cstdint>
#include <string>

#include "gpupool/export.h"

namespace gpupool::internal {

GPUPOOL_EXPORT std::string ReadableBytes(int64_t bytes);

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_BASE_READABLE_BYTES_H_
