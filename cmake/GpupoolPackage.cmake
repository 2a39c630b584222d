# Debian packages (cpack -G DEB) from a shared build, one per role:
#   libgpupool0            the runtime: libgpupool*.so.0 (SONAME) with their
#                          versioned files: the library, its base layer, the
#                          runtime loader and the sim/CUDA/HIP backends
#   libgpupool-dev         headers, the CMake package, gpupool.pc, the
#                          unversioned .so links and static libgpupool*.a
#   libgpupool-testing-dev the GoogleTest helpers (gpupool::testing): their
#                          header, static libraries, CMake component and
#                          pkg-config files
#   gpupool-preload        libgpupool_preload.so, the LD_PRELOAD plugin, in
#                          <libdir>/gpupool (no SONAME, out of the loader's
#                          search path)
# and libgpupool0-dbgsym, gpupool-preload-dbgsym: the shared objects' debug
# information (/usr/lib/debug/.build-id), split off the stripped binaries.
# Each package ships a DEP-5 copyright and the Debian changelog generated from
# CHANGELOG.md (cmake/GpupoolDebianChangelog.cmake); the runtime package runs
# ldconfig through a trigger. cmake/debian/finish_packages.cmake finishes
# what CPack cannot (see there).
# Configure with -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr, build,
# then `cpack -G DEB` in the build directory. tools/check_package.sh does
# that, runs lintian on every package, and installs, uses and purges them.
include(GpupoolDebianChangelog)

set(GPUPOOL_PACKAGE_MAINTAINER
    "gpupool maintainers <maintainers@users.noreply.a-seed-a27a71d2.example>"
    CACHE STRING "Maintainer field of the Debian packages: Name <address>")
if(NOT GPUPOOL_PACKAGE_MAINTAINER MATCHES "^[^<>@]+ <[^<>@ ]+@[^<>@ ]+>$")
  message(FATAL_ERROR "GPUPOOL_PACKAGE_MAINTAINER must read `Name <address>`: "
                      "'${GPUPOOL_PACKAGE_MAINTAINER}'")
endif()

set(CPACK_PACKAGE_NAME gpupool)
set(CPACK_PACKAGE_VENDOR "gpupool")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# CPack's DEB generator puts any summary but its own default line first in
# every component's description; each package has its own synopsis (the
# first line of CPACK_DEBIAN_<COMPONENT>_DESCRIPTION below).
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_NAME} built using CMake")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_COMPONENTS_ALL runtime development preload)
if(GPUPOOL_HAVE_TESTING)
  list(APPEND CPACK_COMPONENTS_ALL testing)
endif()
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GPUPOOL_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SOURCE gpupool)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Native packages (the project packages itself): version = project version.
set(CPACK_DEBIAN_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Every package's files live in multiarch paths or are the same on every
# architecture (headers, documentation): co-installable.
set(CPACK_GPUPOOL_DEB_MULTIARCH same)
set(CPACK_POST_BUILD_SCRIPTS "${PROJECT_SOURCE_DIR}/cmake/debian/finish_packages.cmake")

# Descriptions: the synopsis, then the extended description `apt show`
# prints (lines of at most 79 columns; an empty line is a paragraph break).
set(_gpupool_about
"gpupool keeps a process's GPU streams, events and device allocations for
the life of the process and lends them out, so that a program creates each
resource once instead of on every use. The CUDA and HIP backends load their
runtime library when first used: nothing links a vendor runtime, and a
machine without a GPU runs the simulated backend.")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME "libgpupool${GPUPOOL_SOVERSION}")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# The backends this build has: the simulated one always.
set(_gpupool_backends "")
if(GPUPOOL_HAVE_CUDA)
  list(APPEND _gpupool_backends CUDA)
endif()
if(GPUPOOL_HAVE_HIP)
  list(APPEND _gpupool_backends HIP)
endif()
list(APPEND _gpupool_backends simulated)
list(LENGTH _gpupool_backends _gpupool_count)
if(_gpupool_count EQUAL 1)
  set(_gpupool_backends "the simulated backend")
else()
  list(POP_BACK _gpupool_backends)
  list(JOIN _gpupool_backends ", " _gpupool_backends)
  set(_gpupool_backends "the ${_gpupool_backends} and simulated backends")
endif()
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
"process-lifetime GPU stream, event and allocation pools
${_gpupool_about}

This package holds the shared libraries: libgpupool, its base layer, the
runtime loader, and ${_gpupool_backends}.")
# Depends from the libraries' own NEEDED entries (dpkg-shlibdeps): libc6,
# libstdc++6, libgcc-s1 and the Abseil runtime package. The shlibs file
# lets dpkg-shlibdeps give programs linked against it
# `libgpupool0 (>= <version>)`; SOVERSION moves on every ABI break.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/cmake/debian/triggers")
set(CPACK_DEBIAN_RUNTIME_DEBUGINFO_PACKAGE ON)

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libgpupool-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
"development files for the gpupool GPU resource pools
${_gpupool_about}

This package holds the headers, the CMake package
(find_package(gpupool CONFIG)), the pkg-config module gpupool, the
links to the shared libraries and the static libraries.")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS
    "libgpupool${GPUPOOL_SOVERSION} (= ${PROJECT_VERSION}), libabsl-dev")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SUGGESTS "pkg-config")

set(CPACK_DEBIAN_TESTING_PACKAGE_NAME libgpupool-testing-dev)
set(CPACK_DEBIAN_TESTING_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TESTING_DESCRIPTION
"GoogleTest helpers for programs that use gpupool
${_gpupool_about}

This package holds gpupool::testing, for test suites built with GoogleTest:
an environment that creates the process's pools before the first test, a
per-test check that every lease was returned, and ScopedLeakGuard for part
of a test; gpupool::testing_main is GoogleTest's main() with those
installed. It provides the CMake component `testing`
(find_package(gpupool CONFIG COMPONENTS testing)) and the pkg-config
modules gpupool-testing and gpupool-testing-main.")
set(CPACK_DEBIAN_TESTING_PACKAGE_DEPENDS
    "libgpupool-dev (= ${PROJECT_VERSION}), libgtest-dev")

set(CPACK_DEBIAN_PRELOAD_PACKAGE_NAME gpupool-preload)
set(CPACK_DEBIAN_PRELOAD_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PRELOAD_DESCRIPTION
"LD_PRELOAD plugin pooling the GPU streams of unmodified programs
${_gpupool_about}

This package holds libgpupool_preload.so, loaded with LD_PRELOAD: it serves
an unmodified CUDA or HIP program's stream and event creates and destroys
from gpupool's pools and passes every other call to the runtime. It carries
its own copy of gpupool and Abseil and needs only the C and C++ runtime:

  LD_PRELOAD='/usr/$LIB/gpupool/libgpupool_preload.so' ./program")
set(CPACK_DEBIAN_PRELOAD_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PRELOAD_DEBUGINFO_PACKAGE ON)

# /usr/share/doc/<package>: copyright and changelog.gz. EXCLUDE_FROM_ALL:
# installed by the packages' component installs only, not by a plain
# `cmake --install`.
set(_gpupool_debian_dir "${PROJECT_BINARY_DIR}/debian")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             "${PROJECT_SOURCE_DIR}/CHANGELOG.md"
             "${PROJECT_SOURCE_DIR}/cmake/debian/copyright.in")
gpupool_debian_changelog("${PROJECT_SOURCE_DIR}/CHANGELOG.md"
                         "${_gpupool_debian_dir}/changelog" ${PROJECT_VERSION}
                         "${GPUPOOL_PACKAGE_MAINTAINER}")
find_program(GPUPOOL_GZIP gzip)
if(GPUPOOL_GZIP)
  # Maximum compression, no name or time stamp: the same bytes on every
  # architecture (Multi-Arch: same).
  execute_process(COMMAND "${GPUPOOL_GZIP}" -9nf "${_gpupool_debian_dir}/changelog"
                  RESULT_VARIABLE _gpupool_rc)
  if(NOT _gpupool_rc EQUAL 0)
    message(FATAL_ERROR "gzip ${_gpupool_debian_dir}/changelog failed: ${_gpupool_rc}")
  endif()
  set(GPUPOOL_DEB_COPYRIGHT_COMMENT "")
  configure_file(cmake/debian/copyright.in "${_gpupool_debian_dir}/copyright" @ONLY)
  set(GPUPOOL_DEB_COPYRIGHT_COMMENT
"Comment: libgpupool_preload.so carries a private static copy of Abseil,
 built from Debian's abseil source package: Copyright 2017 The Abseil
 Authors, under the same Apache-2.0 license.
")
  configure_file(cmake/debian/copyright.in "${_gpupool_debian_dir}/copyright.preload" @ONLY)
  foreach(_gpupool_component IN LISTS CPACK_COMPONENTS_ALL)
    string(TOUPPER ${_gpupool_component} _gpupool_upper)
    set(_gpupool_package ${CPACK_DEBIAN_${_gpupool_upper}_PACKAGE_NAME})
    set(_gpupool_copyright "${_gpupool_debian_dir}/copyright")
    if(_gpupool_component STREQUAL "preload")
      set(_gpupool_copyright "${_gpupool_debian_dir}/copyright.preload")
    endif()
    install(FILES "${_gpupool_copyright}" RENAME copyright
            DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_gpupool_package}
            COMPONENT ${_gpupool_component} EXCLUDE_FROM_ALL)
    install(FILES "${_gpupool_debian_dir}/changelog.gz"
            DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_gpupool_package}
            COMPONENT ${_gpupool_component} EXCLUDE_FROM_ALL)
  endforeach()
else()
  message(STATUS "gzip not found: the Debian packages would lack their changelog")
endif()
include(CPack)
