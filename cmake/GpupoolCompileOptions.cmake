# Warnings, sanitizers and clang thread-safety analysis for gpupool targets.
add_library(gpupool_compile_options INTERFACE)
target_compile_options(gpupool_compile_options INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wno-unused-parameter
                                   -Wno-missing-field-initializers>
  $<$<BOOL:${GPUPOOL_WARNINGS_AS_ERRORS}>:-Werror>)
if(GPUPOOL_THREAD_SAFETY_ANALYSIS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GPUPOOL_THREAD_SAFETY_ANALYSIS needs clang")
  endif()
  target_compile_options(gpupool_compile_options INTERFACE
    -Wthread-safety -Werror=thread-safety)
endif()
if(GPUPOOL_SANITIZE)
  # Applied to everything we build so that tests and library agree.
  add_compile_options(-fsanitize=${GPUPOOL_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${GPUPOOL_SANITIZE})
endif()
if(GPUPOOL_COMPRESS_DEBUG_INFO)
  # Each of the ~100 test and benchmark binaries links the static library
  # with its debug information; compressed (zlib) they take a third of the
  # disk. gdb and the sanitizers' symbolizers read compressed sections.
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-gz")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-gz")
  check_cxx_source_compiles("int main() { return 0; }" GPUPOOL_HAVE_GZ)
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(GPUPOOL_HAVE_GZ)
    add_compile_options(-gz)
    add_link_options(-gz)
  else()
    message(STATUS "gpupool: -gz not supported; debug sections uncompressed")
  endif()
endif()
