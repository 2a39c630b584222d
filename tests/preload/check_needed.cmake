# CTest driver: the preload NEEDs only the C/C++ runtime and the loader (no
# libgpupool, no libabsl: it carries private copies), and exports only the
# runtime entry points it interposes and dlsym.
#   cmake -DPRELOAD=<libgpupool_preload.so> [-DPRIVATE_ABSEIL=OFF] -P check_needed.cmake
# PRIVATE_ABSEIL=OFF (a build without a position-independent static Abseil)
# also allows the system's libabsl_* libraries.
find_program(READELF readelf REQUIRED)
execute_process(COMMAND "${READELF}" -d "${PRELOAD}" OUTPUT_VARIABLE dynamic
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${PRELOAD} failed: ${rc}")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]]*\\]" entries "${dynamic}")
set(needed "")
foreach(entry IN LISTS entries)
  string(REGEX REPLACE ".*\\[([^]]*)\\]" "\\1" name "${entry}")
  list(APPEND needed "${name}")
endforeach()
if(NOT needed)
  message(FATAL_ERROR "no NEEDED entry in ${PRELOAD}:\n${dynamic}")
endif()
# glibc (libc, libm, and libdl/libpthread before glibc 2.34), libstdc++ or
# libc++, libgcc_s, and the loader.
set(allowed "^(libc|libm|libdl|libpthread|librt|libstdc\\+\\+|libc\\+\\+|libc\\+\\+abi|libgcc_s)\\.so\\.[0-9]+$|^ld-linux")
if(DEFINED PRIVATE_ABSEIL AND NOT PRIVATE_ABSEIL)
  string(APPEND allowed "|^libabsl_[a-z0-9_]+\\.so\\.[0-9]+$")
endif()
foreach(name IN LISTS needed)
  if(NOT name MATCHES "${allowed}")
    message(FATAL_ERROR "${PRELOAD} NEEDs ${name} (all: ${needed})")
  endif()
endforeach()
list(JOIN needed " " needed_text)
message(STATUS "preload NEEDED: ${needed_text}")

# Exported names: interposed entry points and dlsym, nothing of gpupool's or
# Abseil's.
execute_process(COMMAND nm -D --defined-only "${PRELOAD}"
                OUTPUT_VARIABLE exported RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D ${PRELOAD} failed: ${rc}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${exported}")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^.* " "" symbol "${line}")
  if(NOT symbol MATCHES "^(hip|cuda|cu)[A-Za-z0-9_]*$|^dlsym$|^(GLIBC|_)")
    message(FATAL_ERROR "${PRELOAD} exports ${symbol}")
  endif()
endforeach()
message(STATUS "preload: ok")
