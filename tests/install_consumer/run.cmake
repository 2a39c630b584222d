# CTest driver: install the build tree into a scratch prefix, then configure,
# build and run the consumer project against it — with find_package(gpupool)
# and again with pkg-config. Also checks the drop-in promise: no installed
# library references a CUDA or HIP symbol, the package configures with
# GoogleTest and the CUDA toolkit hidden, and the consumer links no vendor
# runtime (ldd) and loads none at run time (it checks itself).
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed: ${rc}")
endif()

# No installed library may reference a vendor symbol at link time.
file(GLOB_RECURSE installed_libs "${WORK_DIR}/prefix/*.a" "${WORK_DIR}/prefix/*.so*")
if(NOT installed_libs)
  message(FATAL_ERROR "no library installed under ${WORK_DIR}/prefix")
endif()
foreach(lib IN LISTS installed_libs)
  execute_process(COMMAND nm --undefined-only "${lib}"
                  OUTPUT_VARIABLE undefined RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm --undefined-only ${lib} failed: ${rc}")
  endif()
  string(REGEX MATCHALL "U (cuda|hip|cu|hsa)[A-Z_][A-Za-z0-9_]*" vendor "${undefined}")
  if(vendor)
    message(FATAL_ERROR "${lib} references vendor symbols: ${vendor}")
  endif()
endforeach()
list(LENGTH installed_libs lib_count)
message(STATUS "no vendor symbol in ${lib_count} installed libraries")

# A vendor runtime in the output of ldd fails the check.
find_program(LDD_EXECUTABLE ldd)
function(check_no_vendor_runtime binary)
  if(NOT LDD_EXECUTABLE)
    message(FATAL_ERROR "ldd not found")
  endif()
  execute_process(COMMAND "${LDD_EXECUTABLE}" "${binary}" OUTPUT_VARIABLE deps
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ldd ${binary} failed: ${rc}")
  endif()
  if(deps MATCHES "libcudart|libcuda\\.so|libamdhip64|libhsa-runtime")
    message(FATAL_ERROR "${binary} links a vendor runtime:\n${deps}")
  endif()
endfunction()

# The default component needs neither GoogleTest nor a CUDA toolkit.
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/build"
                        -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}"
                        "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
                        -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
                        -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
                        -DCMAKE_DISABLE_FIND_PACKAGE_hip=ON
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer configure failed: ${rc}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build failed: ${rc}")
endif()
check_no_vendor_runtime("${WORK_DIR}/build/consumer")
execute_process(COMMAND "${CMAKE_COMMAND}" -E env GPUPOOL_BACKEND=sim
                        "${WORK_DIR}/build/consumer" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer run failed: ${rc}")
endif()

# The testing component, where installed, brings gpupool::testing (and needs
# GoogleTest); configuring is enough to prove the component resolves.
file(GLOB testing_targets "${WORK_DIR}/prefix/*/cmake/gpupool/gpupoolTestingTargets.cmake")
if(testing_targets)
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}"
                          -B "${WORK_DIR}/build_testing" -G "${GENERATOR}"
                          "-DCMAKE_CXX_COMPILER=${CXX}"
                          "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
                          -DCONSUMER_WITH_TESTING=ON
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer configure with COMPONENTS testing failed: ${rc}")
  endif()
  # The guide's test-harness recipe: a test binary on gpupool::testing_main.
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build_testing"
                          --target consumer_tests
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer_tests (gpupool::testing_main) build failed: ${rc}")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env GPUPOOL_BACKEND=sim
                          "${WORK_DIR}/build_testing/consumer_tests"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer_tests run failed: ${rc}")
  endif()
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
if(pc_flags MATCHES "cudart|amdhip64|cuda/lib|rocm")
  message(FATAL_ERROR "gpupool.pc names a vendor runtime: ${pc_flags}")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
execute_process(COMMAND "${CXX}" -std=c++17 "${SOURCE_DIR}/main.cc" ${pc_flags}
                        -o "${WORK_DIR}/consumer_pkg_config"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build with pkg-config failed: ${rc}")
endif()
check_no_vendor_runtime("${WORK_DIR}/consumer_pkg_config")
execute_process(COMMAND "${CMAKE_COMMAND}" -E env GPUPOOL_BACKEND=sim
                        "${WORK_DIR}/consumer_pkg_config" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer (pkg-config build) run failed: ${rc}")
endif()
