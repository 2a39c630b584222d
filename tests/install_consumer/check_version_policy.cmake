# CTest driver: what the installed gpupoolConfigVersion.cmake accepts, as
# docs/compatibility.md states it. While the major version is 0 a minor
# release may break the API and ABI, so find_package(gpupool X.Y) must accept
# only X.Y.Z with Z at least the one asked for (SameMinorVersion).
#   cmake -DVERSION_FILE=<build>/gpupoolConfigVersion.cmake -DVERSION=<x.y.z> -P ...
if(NOT EXISTS "${VERSION_FILE}")
  message(FATAL_ERROR "no version file at ${VERSION_FILE}")
endif()
string(REPLACE "." ";" parts "${VERSION}")
list(GET parts 0 major)
list(GET parts 1 minor)
list(GET parts 2 patch)
math(EXPR next_minor "${minor} + 1")
math(EXPR next_major "${major} + 1")

# Each case: requested version, then whether it must be compatible.
set(cases
  "${major}.${minor}" TRUE
  "${major}.${minor}.0" TRUE
  "${major}.${minor}.${patch}" TRUE
  "${major}.${next_minor}" FALSE
  "${next_major}.0" FALSE)
if(minor GREATER 0)
  math(EXPR previous_minor "${minor} - 1")
  list(APPEND cases "${major}.${previous_minor}" FALSE)
endif()
math(EXPR next_patch "${patch} + 1")
list(APPEND cases "${major}.${minor}.${next_patch}" FALSE)

set(failures 0)
list(LENGTH cases count)
math(EXPR last "${count} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET cases ${i} requested)
  list(GET cases ${j} expected)
  # The variables find_package sets before it includes a version file.
  set(PACKAGE_FIND_VERSION "${requested}")
  string(REPLACE "." ";" req "${requested}")
  list(LENGTH req req_count)
  list(GET req 0 PACKAGE_FIND_VERSION_MAJOR)
  list(GET req 1 PACKAGE_FIND_VERSION_MINOR)
  set(PACKAGE_FIND_VERSION_PATCH 0)
  if(req_count GREATER 2)
    list(GET req 2 PACKAGE_FIND_VERSION_PATCH)
  endif()
  set(PACKAGE_FIND_VERSION_COUNT ${req_count})
  set(PACKAGE_FIND_VERSION_RANGE FALSE)
  unset(PACKAGE_VERSION_COMPATIBLE)
  unset(PACKAGE_VERSION_UNSUITABLE)
  include("${VERSION_FILE}")
  if(PACKAGE_VERSION_COMPATIBLE)
    set(got TRUE)
  else()
    set(got FALSE)
  endif()
  if(NOT got STREQUAL expected)
    message(SEND_ERROR "gpupool ${PACKAGE_VERSION} asked for ${requested}: "
                       "compatible=${got}, the policy says ${expected}")
    math(EXPR failures "${failures} + 1")
  else()
    message(STATUS "gpupool ${PACKAGE_VERSION} asked for ${requested}: compatible=${got}")
  endif()
endforeach()
if(failures EQUAL 0)
  message(STATUS "version policy: ok")
endif()
