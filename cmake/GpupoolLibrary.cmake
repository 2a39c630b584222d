# Helpers that define gpupool's libraries (see src/CMakeLists.txt).
#
# gpupool_library(<name> <export_name> sources...): an installed, exported
# library, gpupool::<export_name>.
#
# gpupool_layer(<name> SOURCES ... [LINKS ...]): one layer of the pools'
# stack as an OBJECT library. Its objects are linked into libgpupool (the
# installed library does not change shape); LINKS names the layers and
# libraries *below* it, the only ones whose usage requirements it gets.

function(gpupool_library name export_name)
  add_library(${name} ${ARGN})
  add_library(gpupool::${export_name} ALIAS ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${export_name}
                                           OUTPUT_NAME ${name})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE $<BUILD_INTERFACE:gpupool_compile_options>)
  gpupool_shared_library_properties(${name})
  # GPUPOOL_EXPORT_SET and GPUPOOL_INSTALL_COMPONENT (set by src/testing)
  # put a library into another export set and install component: the CMake
  # package's `testing` component, the libgpupool-testing-dev package.
  if(NOT GPUPOOL_EXPORT_SET)
    set(GPUPOOL_EXPORT_SET gpupoolTargets)
  endif()
  if(NOT GPUPOOL_INSTALL_COMPONENT)
    set(GPUPOOL_INSTALL_COMPONENT development)
  endif()
  install(TARGETS ${name} EXPORT ${GPUPOOL_EXPORT_SET}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
                  COMPONENT ${GPUPOOL_INSTALL_COMPONENT}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                  NAMELINK_COMPONENT ${GPUPOOL_INSTALL_COMPONENT})
endfunction()

function(gpupool_layer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINKS" ${ARGN})
  add_library(${name} OBJECT ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                     PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_LINKS}
                        PRIVATE gpupool_compile_options)
  set_property(TARGET ${name} PROPERTY GPUPOOL_LAYER_LINKS ${ARG_LINKS})
  gpupool_shared_library_properties(${name})
endfunction()

# gpupool_layer_link_check(<layer>): links the layer's objects, with those of
# the layers below it and nothing above, into a throwaway shared library with
# --no-undefined. A call from the layer into a layer above it (a function
# defined only there) then fails the build, not just review. Skipped under
# sanitizers, whose runtimes leave shared objects with undefined symbols.
function(gpupool_layer_link_check layer)
  if(GPUPOOL_SANITIZE)
    return()
  endif()
  set(objects "")
  set(libraries "")
  set(pending ${layer})
  set(seen "")
  while(pending)
    list(POP_FRONT pending current)
    if(current IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${current})
    get_target_property(type ${current} TYPE)
    if(type STREQUAL "OBJECT_LIBRARY")
      list(APPEND objects $<TARGET_OBJECTS:${current}>)
      get_target_property(links ${current} GPUPOOL_LAYER_LINKS)
      if(links)
        list(APPEND pending ${links})
      endif()
    else()
      list(APPEND libraries ${current})
    endif()
  endwhile()
  add_library(${layer}_link_check SHARED ${objects})
  target_link_libraries(${layer}_link_check PRIVATE ${libraries})
  target_link_options(${layer}_link_check PRIVATE "LINKER:--no-undefined")
endfunction()
