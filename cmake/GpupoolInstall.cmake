# install() + export of gpupool::* targets, gpupoolConfig.cmake and pkg-config.
set(GPUPOOL_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/gpupool")

# Install components, one per Debian package (cmake/GpupoolPackage.cmake):
#   runtime      the shared libraries (libgpupool0)
#   development  headers, the CMake package, gpupool.pc, the .so links and
#                static libraries (libgpupool-dev)
#   testing      the GoogleTest helpers: their header, static libraries,
#                CMake component and pkg-config files (libgpupool-testing-dev)
#   preload      libgpupool_preload.so (gpupool-preload; src/preload)
install(DIRECTORY include/gpupool DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT development PATTERN testing EXCLUDE)
install(EXPORT gpupoolTargets NAMESPACE gpupool:: DESTINATION ${GPUPOOL_CMAKE_DIR}
        COMPONENT development)

# GoogleTest helpers (gpupool::testing) are exported when built, as the
# package's `testing` component: only a consumer asking for it needs
# GoogleTest.
if(TARGET gpupool_testing)
  set(GPUPOOL_HAVE_TESTING ON)
  install(DIRECTORY include/gpupool/testing
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpupool COMPONENT testing)
  install(EXPORT gpupoolTestingTargets NAMESPACE gpupool::
          DESTINATION ${GPUPOOL_CMAKE_DIR} COMPONENT testing)
else()
  set(GPUPOOL_HAVE_TESTING OFF)
endif()

configure_package_config_file(
  cmake/gpupoolConfig.cmake.in "${CMAKE_CURRENT_BINARY_DIR}/gpupoolConfig.cmake"
  INSTALL_DESTINATION ${GPUPOOL_CMAKE_DIR})
write_basic_package_version_file(
  "${CMAKE_CURRENT_BINARY_DIR}/gpupoolConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/gpupoolConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/gpupoolConfigVersion.cmake"
        DESTINATION ${GPUPOOL_CMAKE_DIR} COMPONENT development)

# pkg-config: gpupool.pc for builds without CMake. The absl modules are those
# gpupool_base links publicly. gpupool::testing is CMake-only (it needs
# GoogleTest, which pkg-config users bring themselves: gpupool-testing.pc
# below names it).
set(GPUPOOL_PC_REQUIRES "absl_status absl_statusor absl_strings absl_str_format \
absl_synchronization absl_time absl_hash absl_flat_hash_map")
file(RELATIVE_PATH _gpupool_pc_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(GPUPOOL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  string(REGEX REPLACE "/$" "" _gpupool_pc_up "${_gpupool_pc_up}")
  set(GPUPOOL_PC_PREFIX "\${pcfiledir}/${_gpupool_pc_up}")
endif()
# The backends load their runtime library at run time: no vendor library on
# the link line, only the dynamic loader's (-ldl; part of libc on glibc 2.34+).
set(GPUPOOL_PC_BACKEND_LIBS "")
if(GPUPOOL_HAVE_CUDA)
  string(APPEND GPUPOOL_PC_BACKEND_LIBS " -lgpupool_cuda")
endif()
if(GPUPOOL_HAVE_HIP)
  string(APPEND GPUPOOL_PC_BACKEND_LIBS " -lgpupool_hip")
endif()
set(GPUPOOL_PC_DL_LIBS "")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND GPUPOOL_PC_DL_LIBS " -l${lib}")
endforeach()
configure_file(cmake/gpupool.pc.in "${CMAKE_CURRENT_BINARY_DIR}/gpupool.pc" @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/gpupool.pc"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)
# gpupool-testing.pc (the GoogleTest helpers) and gpupool-testing-main.pc
# (the same plus a main() that installs them), where they were built:
#   c++ test.cc $(pkg-config --cflags --libs gpupool-testing-main)
if(GPUPOOL_HAVE_TESTING)
  foreach(pc gpupool-testing gpupool-testing-main)
    configure_file(cmake/${pc}.pc.in "${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc" @ONLY)
    install(FILES "${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc"
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT testing)
  endforeach()
endif()

include(GpupoolPackage)
