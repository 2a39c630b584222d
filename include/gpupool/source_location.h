// gpupool/source_location.h — where a lease was acquired, for leak reports.
//
// C++17 has no std::source_location; `SourceLocation::Current()` used as a
// default argument captures the caller's file and line through the
// __builtin_FILE/__builtin_LINE intrinsics (GCC and clang).

#ifndef GPUPOOL_SOURCE_LOCATION_H_
#define GPUPOOL_SOURCE_LOCATION_H_

#include <cstdint>

namespace gpupool {

class SourceLocation {
 public:
  static constexpr SourceLocation Current(
#if defined(__GNUC__) || defined(__clang__)
      const char* file = __builtin_FILE(), uint32_t line = __builtin_LINE()
#else
      const char* file = "unknown", uint32_t line = 0
#endif
  ) {
    return SourceLocation(file, line);
  }
  constexpr SourceLocation() = default;
  constexpr const char* file_name() const { return file_; }
  constexpr uint32_t line() const { return line_; }

 private:
  constexpr SourceLocation(const char* file, uint32_t line)
      : file_(file), line_(line) {}
  const char* file_ = "unknown";
  uint32_t line_ = 0;
};

}  // namespace gpupool

#endif  // GPUPOOL_SOURCE_LOCATION_H_
