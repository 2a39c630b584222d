// ReadableBytes; see readable_bytes.h.

#include "src/base/readable_bytes.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpupool::internal {

std::string ReadableBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024 && bytes > -1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = -1;
  while ((value >= 1024 || value <= -1024) && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", value, kUnits[unit]);
}

}  // namespace gpupool::internal
