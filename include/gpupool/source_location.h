// gpupool/source_location.h — where a lease was acquired, for leak reports.
//
// C++17 has no std::source_location; `SourceLocation::Current()` used as a
// default argument captures the caller's file and line through the
// __builtin_FILE/__builtin_LINE intrinsics (GCC and clang).

#ifndef GPUPOOL_SOURCE_LOCATION_H_
#define GPUPOOL_SOURCE_LOCATION_H_

#include <cstdint>

#include "gpupool/export.h"

namespace gpupool {

class GPUPOOL_EXPORT SourceLocation {
 public:
  static constexpr SourceLocation Current(
#if defined(__GNUC__) || defined(__clang__)
      const char* file = __builtin_FILE(), uint32_t line = __builtin_LINE()
#else
      const char* file = "unknown", uint32_t line = 0
#endif
  ) {
    // An explicit nullptr file would crash every leak report that prints or
    // compares it; keep the site, lose only the name.
    return SourceLocation(file != nullptr ? file : "unknown", line);
  }
  // The site gpupool itself uses for leases it holds on its own behalf (the
  // ready events the allocation cache keeps with cached blocks): listed as
  // outstanding, but never a user's leak.
  static constexpr SourceLocation Internal() {
    return SourceLocation(kInternalFile, 0);
  }
  constexpr SourceLocation() = default;
  constexpr const char* file_name() const { return file_; }
  constexpr uint32_t line() const { return line_; }
  bool is_internal() const {
    const char* a = file_;
    const char* b = kInternalFile;
    while (*a != '\0' && *a == *b) ++a, ++b;
    return *a == *b;
  }

 private:
  static constexpr char kInternalFile[] = "<gpupool internal>";
  constexpr SourceLocation(const char* file, uint32_t line)
      : file_(file), line_(line) {}
  const char* file_ = "unknown";
  uint32_t line_ = 0;
};

}  // namespace gpupool

#endif  // GPUPOOL_SOURCE_LOCATION_H_
