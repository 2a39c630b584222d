# install() + export of gpupool::* targets, gpupoolConfig.cmake and pkg-config.
set(GPUPOOL_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/gpupool")

install(DIRECTORY include/gpupool DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT gpupoolTargets NAMESPACE gpupool:: DESTINATION ${GPUPOOL_CMAKE_DIR})

configure_package_config_file(
  cmake/gpupoolConfig.cmake.in "${CMAKE_CURRENT_BINARY_DIR}/gpupoolConfig.cmake"
  INSTALL_DESTINATION ${GPUPOOL_CMAKE_DIR})
write_basic_package_version_file(
  "${CMAKE_CURRENT_BINARY_DIR}/gpupoolConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/gpupoolConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/gpupoolConfigVersion.cmake"
        DESTINATION ${GPUPOOL_CMAKE_DIR})
