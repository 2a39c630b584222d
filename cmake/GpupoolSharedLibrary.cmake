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

# The preload's private Abseil: a directory holding position-independent
# static libabsl_<name>.a archives (tools/build_abseil.sh pic builds them
# into build/_deps/absl-pic, found by default). Debian's own libabsl_*.a are
# not position-independent, so without it the preload NEEDs the shared
# libabsl_* libraries of the system.
set(_gpupool_pic_abseil "${PROJECT_SOURCE_DIR}/build/_deps/absl-pic")
if(EXISTS "${_gpupool_pic_abseil}/.gpupool-pic-abseil")
  set(_gpupool_pic_abseil_default "${_gpupool_pic_abseil}")
else()
  set(_gpupool_pic_abseil_default "")
endif()
set(GPUPOOL_PRELOAD_ABSEIL_DIR "${_gpupool_pic_abseil_default}" CACHE PATH
    "Position-independent static Abseil for libgpupool_preload.so (empty: the shared system Abseil)")

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
  # Only gpupool's own names leave the library (gpupool_exports.map), and
  # every symbol a library uses resolves at its own link: a name left hidden
  # by mistake fails the build, not the consumer's start.
  set(map "${PROJECT_SOURCE_DIR}/cmake/gpupool_exports.map")
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${map}")
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
  # Installed too, as lib<name>.a beside lib<name>.so: the development
  # package's static libraries.
  set_target_properties(${twin} PROPERTIES OUTPUT_NAME ${target})
  install(TARGETS ${twin} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          COMPONENT development)
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
  if(GPUPOOL_PRELOAD_ABSEIL_DIR)
    file(GLOB_RECURSE available "${GPUPOOL_PRELOAD_ABSEIL_DIR}/libabsl_*.a")
  endif()
  foreach(absl_target IN LISTS absl_targets)
    get_target_property(type ${absl_target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    get_target_property(location ${absl_target} LOCATION)
    if(location MATCHES "\\.a$")
      # An Abseil built static (as tools/build_abseil.sh builds them).
      list(APPEND archives "${location}")
      continue()
    endif()
    if(NOT GPUPOOL_PRELOAD_ABSEIL_DIR)
      list(APPEND shared_absl ${absl_target})
      continue()
    endif()
    get_filename_component(name "${location}" NAME)
    string(REGEX REPLACE "\\.so(\\.[0-9]+)*$" ".a" name "${name}")
    string(REPLACE "+" "\\+" pattern "/${name}$")
    set(found ${available})
    list(FILTER found INCLUDE REGEX "${pattern}")
    if(NOT found)
      message(FATAL_ERROR "GPUPOOL_PRELOAD_ABSEIL_DIR=${GPUPOOL_PRELOAD_ABSEIL_DIR} "
                          "has no ${name} (tools/build_abseil.sh pic builds it)")
    endif()
    list(GET found 0 archive)
    list(APPEND archives "${archive}")
  endforeach()
  # GPUPOOL_PRIVATE_ABSEIL: whether the preload carries its own Abseil
  # (tests/preload/check_needed.cmake then allows no libabsl_* NEEDED).
  if(shared_absl)
    set_target_properties(${preload} PROPERTIES GPUPOOL_PRIVATE_ABSEIL OFF)
    message(STATUS "libgpupool_preload.so: shared system Abseil "
                   "(tools/build_abseil.sh pic gives it a private copy)")
  else()
    set_target_properties(${preload} PROPERTIES GPUPOOL_PRIVATE_ABSEIL ON)
    message(STATUS "libgpupool_preload.so: private Abseil")
  endif()
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
