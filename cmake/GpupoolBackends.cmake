# Detects the CUDA and HIP headers for the runtime backends. The backends load
# their runtime library at run time (src/backends/loader), so only the headers
# are a build-time need; the libraries found here are used by tests and
# benchmarks that call the runtime directly, never linked into gpupool.
#
# CUDA: CMake's CUDAToolkit (nvcc is not needed for the library). HIP:
# Debian's hip-config.cmake only configures when the hipcc package (and with
# it clang-15) is installed, so we locate the host API directly:
# hip/hip_runtime_api.h (and libamdhip64 for the tests), compiled as plain C++
# with __HIP_PLATFORM_AMD__. That keeps CI to libamdhip64-dev.

set(GPUPOOL_HAVE_CUDA OFF)
set(GPUPOOL_CUDA_REASON "disabled")
if(NOT GPUPOOL_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS "/usr/local/cuda")
    set(CUDAToolkit_ROOT "/usr/local/cuda")
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(GPUPOOL_HAVE_CUDA ON)
    set(GPUPOOL_CUDA_REASON "CUDA ${CUDAToolkit_VERSION} headers at ${CUDAToolkit_INCLUDE_DIRS}")
  elseif(GPUPOOL_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GPUPOOL_WITH_CUDA=ON but the CUDA toolkit was not found")
  else()
    set(GPUPOOL_CUDA_REASON "toolkit not found")
  endif()
endif()

set(GPUPOOL_HAVE_HIP OFF)
set(GPUPOOL_HIP_REASON "disabled")
if(NOT GPUPOOL_WITH_HIP STREQUAL "OFF")
  find_path(GPUPOOL_HIP_INCLUDE_DIR hip/hip_runtime_api.h
            HINTS ENV ROCM_PATH /opt/rocm PATH_SUFFIXES include)
  find_library(GPUPOOL_HIP_LIBRARY amdhip64
               HINTS ENV ROCM_PATH /opt/rocm PATH_SUFFIXES lib lib64)
  if(GPUPOOL_HIP_INCLUDE_DIR)
    set(GPUPOOL_HAVE_HIP ON)
    set(GPUPOOL_HIP_REASON "headers at ${GPUPOOL_HIP_INCLUDE_DIR}")
  elseif(GPUPOOL_WITH_HIP STREQUAL "ON")
    message(FATAL_ERROR "GPUPOOL_WITH_HIP=ON but hip/hip_runtime_api.h was not found")
  else()
    set(GPUPOOL_HIP_REASON "hip/hip_runtime_api.h not found")
  endif()
endif()

set(GPUPOOL_SUMMARY_BACKENDS "")
if(GPUPOOL_HAVE_CUDA)
  string(APPEND GPUPOOL_SUMMARY_BACKENDS " cuda")
endif()
if(GPUPOOL_HAVE_HIP)
  string(APPEND GPUPOOL_SUMMARY_BACKENDS " hip")
endif()
