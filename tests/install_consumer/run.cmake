# CTest driver: install the build tree into a scratch prefix, then configure,
# build and run the consumer project against it — with find_package(gpupool)
# and again with pkg-config. Also checks the drop-in promise: no installed
# library references a CUDA or HIP symbol, the package configures with
# GoogleTest and the CUDA toolkit hidden, and the consumer links no vendor
# runtime (ldd) and loads none at run time (it checks itself).
#
# A shared build's libraries are checked too (SONAME with the ABI version,
# RUNPATH $ORIGIN, nothing but gpupool's names exported), and every consumer
# starts with LD_LIBRARY_PATH unset.
#   cmake -DBUILD_DIR=<build> -DSOURCE_DIR=<this folder> -DWORK_DIR=<scratch>
#         -DCXX=<c++> -DGENERATOR=<generator>
#         [-DPREFIX=<installed prefix> | -DSYSTEM=ON] [-DTESTING=ON] -P run.cmake
# PREFIX: an installed tree to check instead of installing BUILD_DIR (the
# unpacked .deb packages, tools/check_package.sh).
# SYSTEM: gpupool is installed in the system's own directories (the .deb
# packages installed by dpkg): the consumers are built with no prefix given
# (no CMAKE_PREFIX_PATH, PKG_CONFIG_PATH or -rpath) and run as installed; the
# libraries' own checks are left to the PREFIX run over the same files.
# TESTING: the testing component must be there (else: where installed).
file(REMOVE_RECURSE "${WORK_DIR}")
if(SYSTEM)
  set(prefix "")
elseif(PREFIX)
  set(prefix "${PREFIX}")
else()
  set(prefix "${WORK_DIR}/prefix")
  execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install failed: ${rc}")
  endif()
endif()
if(NOT SYSTEM AND (NOT IS_ABSOLUTE "${prefix}" OR prefix STREQUAL "/"))
  message(FATAL_ERROR "install consumer: bad prefix '${prefix}'")
endif()
# Consumers run as a user would start them: no LD_LIBRARY_PATH.
set(run_env "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH GPUPOOL_BACKEND=sim)
# Where the consumers look for gpupool: the prefix, or (SYSTEM) nowhere but
# the tools' own defaults.
set(prefix_path "")
if(NOT SYSTEM)
  set(prefix_path "-DCMAKE_PREFIX_PATH=${prefix}")
endif()

# The installed libraries (SYSTEM: checked by the PREFIX run over the same
# files).
if(NOT SYSTEM)
# No installed library may reference a vendor symbol at link time.
file(GLOB_RECURSE installed_libs "${prefix}/*.a" "${prefix}/*.so*")
if(NOT installed_libs)
  message(FATAL_ERROR "no library installed under ${prefix}")
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

# A shared build: each gpupool library has the SONAME lib<name>.so.<ABI> and
# the RUNPATH $ORIGIN, and exports only gpupool's names (no Abseil).
file(GLOB_RECURSE shared_libs "${prefix}/*/libgpupool*.so.*.*.*")
set(shared OFF)
foreach(lib IN LISTS shared_libs)
  set(shared ON)
  get_filename_component(file_name "${lib}" NAME)
  string(REGEX REPLACE "\\.so\\.([0-9]+)\\..*$" ".so.\\1" soname "${file_name}")
  execute_process(COMMAND readelf -d "${lib}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${lib} failed: ${rc}")
  endif()
  if(NOT dynamic MATCHES "\\(SONAME\\)[^\n]*\\[${soname}\\]")
    message(FATAL_ERROR "${lib}: SONAME is not ${soname}:\n${dynamic}")
  endif()
  if(NOT dynamic MATCHES "\\(RUNPATH\\)[^\n]*\\[\\$ORIGIN\\]")
    message(FATAL_ERROR "${lib}: RUNPATH is not $ORIGIN:\n${dynamic}")
  endif()
  if(dynamic MATCHES "libgpupool[a-z_]*\\.so[^.]")
    message(FATAL_ERROR "${lib} NEEDs an unversioned gpupool library:\n${dynamic}")
  endif()
  execute_process(COMMAND nm -D --defined-only -C "${lib}"
                  OUTPUT_VARIABLE exported RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm -D ${lib} failed: ${rc}")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${exported}")
  set(count 0)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[0-9a-f]* *[A-Za-z] " "" symbol "${line}")
    if(NOT symbol MATCHES "^((typeinfo|typeinfo name|vtable|VTT|guard variable) for |non-virtual thunk to )?gpupool::" AND
       NOT symbol MATCHES "^[A-Z_]+[0-9._]*$")
      message(FATAL_ERROR "${lib} exports ${symbol}")
    endif()
    math(EXPR count "${count} + 1")
  endforeach()
  message(STATUS "${file_name}: SONAME ${soname}, RUNPATH $ORIGIN, ${count} exported names, all gpupool's")
endforeach()
endif()

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
                        ${prefix_path}
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
execute_process(COMMAND ${run_env} "${WORK_DIR}/build/consumer" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer run failed: ${rc}")
endif()

# The testing component, where installed, brings gpupool::testing (and needs
# GoogleTest); configuring is enough to prove the component resolves.
set(testing_targets "")
if(NOT SYSTEM)
  file(GLOB_RECURSE testing_targets "${prefix}/*/gpupoolTestingTargets.cmake")
endif()
if(testing_targets OR TESTING)
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}"
                          -B "${WORK_DIR}/build_testing" -G "${GENERATOR}"
                          "-DCMAKE_CXX_COMPILER=${CXX}"
                          ${prefix_path}
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
if(SYSTEM)
  set(pc_env "${CMAKE_COMMAND}" -E env --unset=PKG_CONFIG_PATH)
else()
  file(GLOB_RECURSE pc_files "${prefix}/*/gpupool.pc")
  list(LENGTH pc_files pc_count)
  if(NOT pc_count EQUAL 1)
    message(FATAL_ERROR "expected one installed gpupool.pc, found: ${pc_files}")
  endif()
  get_filename_component(pc_dir "${pc_files}" DIRECTORY)
  set(pc_env "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${pc_dir}")
endif()
execute_process(COMMAND ${pc_env} "${PKG_CONFIG_EXECUTABLE}" --cflags --libs gpupool
                OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs gpupool failed: ${rc}")
endif()
message(STATUS "pkg-config --cflags --libs gpupool: ${pc_flags}")
# The GoogleTest helpers without CMake, where installed.
if(TESTING OR (NOT SYSTEM AND EXISTS "${pc_dir}/gpupool-testing-main.pc"))
  execute_process(COMMAND ${pc_env} "${PKG_CONFIG_EXECUTABLE}" --libs gpupool-testing-main
                  OUTPUT_VARIABLE testing_flags OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT testing_flags MATCHES "-lgpupool_testing_main -lgpupool_testing .*-lgpupool ")
    message(FATAL_ERROR "pkg-config --libs gpupool-testing-main: ${rc} ${testing_flags}")
  endif()
  message(STATUS "pkg-config --libs gpupool-testing-main: ${testing_flags}")
endif()
if(pc_flags MATCHES "cudart|amdhip64|cuda/lib|rocm")
  message(FATAL_ERROR "gpupool.pc names a vendor runtime: ${pc_flags}")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
# Against shared libraries outside the loader's default path, the program
# records where they are (-rpath), as any program linking them would.
set(rpath "")
if(shared)
  execute_process(COMMAND ${pc_env} "${PKG_CONFIG_EXECUTABLE}" --variable=libdir gpupool
                  OUTPUT_VARIABLE pc_libdir OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(rpath "-Wl,-rpath,${pc_libdir}")
endif()
execute_process(COMMAND "${CXX}" -std=c++17 "${SOURCE_DIR}/main.cc" ${pc_flags} ${rpath}
                        -o "${WORK_DIR}/consumer_pkg_config"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build with pkg-config failed: ${rc}")
endif()
check_no_vendor_runtime("${WORK_DIR}/consumer_pkg_config")
execute_process(COMMAND ${run_env} "${WORK_DIR}/consumer_pkg_config"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer (pkg-config build) run failed: ${rc}")
endif()
