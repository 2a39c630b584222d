# How gpupool's libraries are built as shared libraries, and how the preload
# carries private copies of them.
#
# A shared build (BUILD_SHARED_LIBS=ON) gives each library
#   - a SONAME carrying the ABI version: libgpupool.so.0 -> libgpupool.so.0.1.0
#     (GPUPOOL_SOVERSION moves on every ABI break, independently of the
#     project version; see docs/compatibility.md);
#   - the install RUNPATH $ORIGIN: installed libraries find each other in the
#     directory they were installed to, with no LD_LIBRARY_PATH;
#   - hidden visibility: only names marked GPUPOOL_EXPORT (the public API under
#     include/gpupool, gpupool/export.h) are exported; Abseil and standard
#     library code instantiated inside a library stays private.
# A static build is left as it is.

set(GPUPOOL_SOVERSION 0)

function(gpupool_shared_library_properties target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "OBJECT_LIBRARY" AND BUILD_SHARED_LIBS)
    # A layer whose objects go into a shared library.
    set_target_properties(${target} PROPERTIES
      CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
    return()
  endif()
  if(NOT type STREQUAL "SHARED_LIBRARY")
    return()
  endif()
  set_target_properties(${target} PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${GPUPOOL_SOVERSION}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    INSTALL_RPATH "$ORIGIN")
  # Every symbol a library uses resolves at its own link: a name left hidden
  # by mistake fails the build, not the consumer's start.
  if(NOT GPUPOOL_SANITIZE)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
endfunction()

# The gpupool libraries and layers `target` links, itself included.
function(_gpupool_library_closure target out)
  set(result ${target})
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue current)
    get_target_property(links ${current} LINK_LIBRARIES)
    get_target_property(interface ${current} INTERFACE_LINK_LIBRARIES)
    foreach(item IN LISTS links interface)
      string(REGEX REPLACE "^\\$<BUILD_INTERFACE:(.*)>$" "\\1" item "${item}")
      if(TARGET "${item}" AND item MATCHES "^gpupool_" AND
         NOT item STREQUAL "gpupool_compile_options")
        get_target_property(aliased ${item} ALIASED_TARGET)
        if(aliased)
          set(item ${aliased})
        endif()
        if(NOT item IN_LIST result)
          list(APPEND result ${item})
          list(APPEND queue ${item})
        endif()
      endif()
    endforeach()
  endwhile()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# The Abseil libraries (imported absl:: targets) the gpupool libraries in
# `libs` reach, transitively.
function(_gpupool_absl_closure out)
  set(result "")
  set(queue "")
  foreach(lib IN LISTS ARGN)
    get_target_property(links ${lib} LINK_LIBRARIES)
    get_target_property(interface ${lib} INTERFACE_LINK_LIBRARIES)
    foreach(item IN LISTS links interface)
      string(REGEX REPLACE "^\\$<BUILD_INTERFACE:(.*)>$" "\\1" item "${item}")
      list(APPEND queue ${item})
    endforeach()
  endforeach()
  while(queue)
    list(POP_FRONT queue item)
    if(NOT item MATCHES "^absl::" OR item IN_LIST result OR NOT TARGET ${item})
      continue()
    endif()
    list(APPEND result ${item})
    get_target_property(interface ${item} INTERFACE_LINK_LIBRARIES)
    if(interface)
      list(APPEND queue ${interface})
    endif()
  endwhile()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# A static copy of the shared library `target`, built from the same sources
# with the same flags, for the preload to link privately.
function(_gpupool_static_twin target twin)
  if(TARGET ${twin})
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(absolute "")
  foreach(source IN LISTS sources)
    if(IS_ABSOLUTE "${source}")
      list(APPEND absolute "${source}")
    else()
      list(APPEND absolute "${source_dir}/${source}")
    endif()
  endforeach()
  add_library(${twin} STATIC EXCLUDE_FROM_ALL ${absolute})
  foreach(property COMPILE_DEFINITIONS COMPILE_OPTIONS INCLUDE_DIRECTORIES
                   LINK_LIBRARIES)
    get_target_property(value ${target} ${property})
    if(value)
      set_property(TARGET ${twin} PROPERTY ${property} "${value}")
    endif()
  endforeach()
endfunction()

# Links `preload` with private copies of gpupool's libraries `libs` (and what
# they link) and of Abseil, wherever static Abseil archives exist: the
# preload then NEEDs only the C/C++ runtime and the loader. The libraries are
# linked by file (no transitive shared Abseil), inside one group.
function(gpupool_link_private preload)
  set(closure "")
  foreach(lib IN LISTS ARGN)
    _gpupool_library_closure(${lib} libs)
    list(APPEND closure ${libs})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set(files "")
  foreach(lib IN LISTS closure)
    get_target_property(type ${lib} TYPE)
    if(type STREQUAL "OBJECT_LIBRARY")
      continue()  # its objects are in the library that links it
    endif()
    if(type STREQUAL "SHARED_LIBRARY")
      _gpupool_static_twin(${lib} ${lib}_private)
      set(lib ${lib}_private)
    endif()
    add_dependencies(${preload} ${lib})
    list(APPEND files "$<TARGET_FILE:${lib}>")
  endforeach()
  _gpupool_absl_closure(absl_targets ${closure})
  set(archives "")
  set(shared_absl "")
  foreach(absl_target IN LISTS absl_targets)
    get_target_property(type ${absl_target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    get_target_property(location ${absl_target} LOCATION)
    string(REGEX REPLACE "\\.so(\\.[0-9]+)*$" ".a" archive "${location}")
    if(EXISTS "${archive}")
      list(APPEND archives "${archive}")
    else()
      # No static archive (an Abseil built shared only, as the TSan build's):
      # the preload NEEDs that Abseil library.
      list(APPEND shared_absl ${absl_target})
    endif()
  endforeach()
  target_include_directories(${preload} PRIVATE
    ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${preload} PRIVATE
    "-Wl,--start-group" ${files} ${archives} "-Wl,--end-group"
    ${shared_absl} Threads::Threads ${CMAKE_DL_LIBS})
  # Abseil's headers (their include directories, not their libraries).
  foreach(absl_target IN LISTS absl_targets)
    target_include_directories(${preload} PRIVATE
      $<TARGET_PROPERTY:${absl_target},INTERFACE_INCLUDE_DIRECTORIES>)
  endforeach()
endfunction()
