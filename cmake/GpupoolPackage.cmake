# Debian packages (cpack -G DEB) from a shared build:
#   libgpupool0     the runtime: libgpupool*.so.0 (SONAME) with their
#                   versioned files, and libgpupool_preload.so
#   libgpupool-dev  headers, the CMake package, pkg-config files, the
#                   unversioned .so links and static libgpupool*.a; Depends
#                   on libgpupool0 of the same version and on Abseil's headers
# Configure with -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr, build,
# then `cpack -G DEB` in the build directory (tools/check_package.sh does
# that and builds a consumer against the unpacked pair).
set(CPACK_PACKAGE_NAME gpupool)
set(CPACK_PACKAGE_VENDOR "gpupool")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
    "Process-lifetime pools of GPU streams, events and allocations over CUDA \
and HIP (runtimes loaded at run time), with a preload library that pools an \
unmodified program's streams and events.")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_COMPONENTS_ALL runtime development)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "gpupool developers")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME "libgpupool${GPUPOOL_SOVERSION}")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# Depends from the libraries' own NEEDED entries (dpkg-shlibdeps): libc6,
# libstdc++6, libgcc-s1 and the Abseil runtime package.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libgpupool-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS
    "libgpupool${GPUPOOL_SOVERSION} (= ${PROJECT_VERSION}), libabsl-dev")
# The `testing` component of the CMake package (gpupool::testing) and
# gpupool-testing.pc need GoogleTest.
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SUGGESTS "libgtest-dev, pkg-config")
include(CPack)
