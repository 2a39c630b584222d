# Fails when a file in src/ reads the environment with plain getenv: every
# GPUPOOL_* variable is read with secure_getenv, which returns nothing in a
# setuid, setgid or capability-raised process (AT_SECURE), so that a caller
# cannot steer a privileged program (a runtime library to dlopen, a backend,
# a config).
#
#   cmake -DROOT=<source tree> -P check_secure_getenv.cmake
#
# Prints each offending line, then "secure getenv: N plain reads" and fails;
# prints "secure getenv: ok" otherwise.

cmake_minimum_required(VERSION 3.25)

if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source tree> -P check_secure_getenv.cmake")
endif()

file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/src/*.cc ${ROOT}/src/*.h)
set(found 0)
foreach(source IN LISTS sources)
  file(STRINGS ${ROOT}/${source} lines REGEX "getenv")
  foreach(line IN LISTS lines)
    # std::getenv, ::getenv, getenv("...") — not secure_getenv, and not a
    # parameter that happens to be called getenv.
    if(line MATCHES "(std::getenv|[^_a-z]::getenv|[^_a-z.]getenv\\(\")" OR
       line MATCHES "^getenv\\(")
      message("${source}: ${line}")
      math(EXPR found "${found} + 1")
    endif()
  endforeach()
endforeach()
if(found GREATER 0)
  message(FATAL_ERROR "secure getenv: ${found} plain reads")
endif()
message("secure getenv: ok")
