# CTest driver: install the build tree into a scratch prefix, then configure,
# build and run the consumer project against it — with find_package(gpupool)
# and again with pkg-config.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/build"
                        -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}"
                        "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer configure failed: ${rc}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build failed: ${rc}")
endif()
execute_process(COMMAND "${WORK_DIR}/build/consumer" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer run failed: ${rc}")
endif()

# The same consumer built without CMake, from the installed gpupool.pc:
#   c++ main.cc $(pkg-config --cflags --libs gpupool)
find_program(PKG_CONFIG_EXECUTABLE pkg-config)
if(NOT PKG_CONFIG_EXECUTABLE)
  message(FATAL_ERROR "pkg-config not found (tools/install_deps.sh installs it)")
endif()
file(GLOB_RECURSE pc_files "${WORK_DIR}/prefix/*/gpupool.pc")
list(LENGTH pc_files pc_count)
if(NOT pc_count EQUAL 1)
  message(FATAL_ERROR "expected one installed gpupool.pc, found: ${pc_files}")
endif()
get_filename_component(pc_dir "${pc_files}" DIRECTORY)
execute_process(COMMAND "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${pc_dir}"
                        "${PKG_CONFIG_EXECUTABLE}" --cflags --libs gpupool
                OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs gpupool failed: ${rc}")
endif()
message(STATUS "pkg-config --cflags --libs gpupool: ${pc_flags}")
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
execute_process(COMMAND "${CXX}" -std=c++17 "${SOURCE_DIR}/main.cc" ${pc_flags}
                        -o "${WORK_DIR}/consumer_pkg_config"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build with pkg-config failed: ${rc}")
endif()
execute_process(COMMAND "${WORK_DIR}/consumer_pkg_config" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer (pkg-config build) run failed: ${rc}")
endif()
