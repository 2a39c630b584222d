# install() + export of gpupool::* targets, gpupoolConfig.cmake and pkg-config.
set(GPUPOOL_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/gpupool")

install(DIRECTORY include/gpupool DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT gpupoolTargets NAMESPACE gpupool:: DESTINATION ${GPUPOOL_CMAKE_DIR})

# GoogleTest helpers (gpupool::testing) are exported when built; their
# consumers then need GoogleTest too.
if(TARGET gpupool_testing)
  set(GPUPOOL_HAVE_TESTING ON)
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
        DESTINATION ${GPUPOOL_CMAKE_DIR})

# pkg-config: gpupool.pc for builds without CMake. The absl modules are those
# gpupool_base links publicly; the runtime libraries follow the backends.
set(GPUPOOL_PC_REQUIRES "absl_status absl_statusor absl_strings absl_str_format \
absl_synchronization absl_time absl_hash absl_flat_hash_map")
file(RELATIVE_PATH _gpupool_pc_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(GPUPOOL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  string(REGEX REPLACE "/$" "" _gpupool_pc_up "${_gpupool_pc_up}")
  set(GPUPOOL_PC_PREFIX "\${pcfiledir}/${_gpupool_pc_up}")
endif()
set(GPUPOOL_PC_BACKEND_LIBS "")
set(GPUPOOL_PC_RUNTIME_LIBS "")
# -L<dir> -l<name>, plus an rpath when <dir> is not a system directory.
function(_gpupool_pc_runtime_lib library)
  get_filename_component(dir "${library}" DIRECTORY)
  get_filename_component(name "${library}" NAME_WE)
  string(REGEX REPLACE "^lib" "" name "${name}")
  set(flags " -l${name}")
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    set(flags " -L${dir}${flags} -Wl,-rpath,${dir}")
  endif()
  set(GPUPOOL_PC_RUNTIME_LIBS "${GPUPOOL_PC_RUNTIME_LIBS}${flags}" PARENT_SCOPE)
endfunction()
if(GPUPOOL_HAVE_CUDA)
  string(APPEND GPUPOOL_PC_BACKEND_LIBS " -lgpupool_cuda")
  get_target_property(_gpupool_cudart CUDA::cudart IMPORTED_LOCATION)
  _gpupool_pc_runtime_lib("${_gpupool_cudart}")
endif()
if(GPUPOOL_HAVE_HIP)
  string(APPEND GPUPOOL_PC_BACKEND_LIBS " -lgpupool_hip")
  _gpupool_pc_runtime_lib("${GPUPOOL_HIP_LIBRARY}")
endif()
configure_file(cmake/gpupool.pc.in "${CMAKE_CURRENT_BINARY_DIR}/gpupool.pc" @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/gpupool.pc"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
