# Fails when an #include in src/ or include/gpupool/ runs against the
# layering (docs/design.md, "Layers"): a layer may include its own headers
# and those of the layers below it, never one above. The allocation core's
# rooms (graph/, ipc/) sit above the core: the core includes neither, they
# include the core, and neither includes the other.
#
#   cmake -DROOT=<source tree> -P check_layering.cmake
#
# Prints every offending include as `file:line: layer X includes layer Y`,
# then "layering: N back edges" and fails; prints "layering: ok" otherwise.

cmake_minimum_required(VERSION 3.25)

if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source tree> -P check_layering.cmake")
endif()

# The layer of a path under the tree ("" for a path outside every layer).
function(layer_of path out)
  set(layer "")
  if(path MATCHES "^include/gpupool/")
    set(layer public)
  elseif(path MATCHES "^src/backends/")
    set(layer backends)
  elseif(path MATCHES "^src/allocation/(graph|ipc)/")
    set(layer allocation_${CMAKE_MATCH_1})
  elseif(path MATCHES "^src/([a-z_]+)/")
    set(layer ${CMAKE_MATCH_1})
  endif()
  set(${out} ${layer} PARENT_SCOPE)
endfunction()

# What each layer may include (besides public headers, which any layer may).
set(allowed_public "")
set(allowed_base base)
set(allowed_backends base backends)
set(allowed_lifetime base lifetime)
set(allowed_pools base lifetime pools)
set(allowed_allocation base lifetime pools allocation)
set(allowed_allocation_graph base lifetime pools allocation allocation_graph)
set(allowed_allocation_ipc base lifetime pools allocation allocation_ipc)
set(rooms allocation allocation_graph allocation_ipc)
set(allowed_process base lifetime pools ${rooms} backends process)
set(allowed_testing base lifetime pools ${rooms} backends process testing)
set(allowed_preload base lifetime pools ${rooms} backends process preload)
set(known_layers public base backends lifetime pools ${rooms} process testing
    preload)

file(GLOB_RECURSE files RELATIVE "${ROOT}"
     "${ROOT}/src/*.h" "${ROOT}/src/*.cc" "${ROOT}/include/gpupool/*.h")
set(back_edges 0)
foreach(file IN LISTS files)
  layer_of("${file}" from)
  if(NOT from IN_LIST known_layers)
    message(SEND_ERROR "${file}: folder is in no layer; add it to ${CMAKE_CURRENT_LIST_FILE}")
    math(EXPR back_edges "${back_edges} + 1")
    continue()
  endif()
  file(STRINGS "${ROOT}/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
      continue()
    endif()
    set(target "${CMAKE_MATCH_1}")
    if(target MATCHES "^gpupool/")
      continue()  # a public header: allowed everywhere
    endif()
    if(NOT target MATCHES "^src/")
      continue()  # a third-party or vendor header
    endif()
    layer_of("${target}" to)
    if(from STREQUAL "public" OR NOT to IN_LIST allowed_${from})
      message("${file}: layer '${from}' includes '${target}' (layer '${to}')")
      math(EXPR back_edges "${back_edges} + 1")
    endif()
  endforeach()
endforeach()

list(LENGTH files count)
if(back_edges GREATER 0)
  message(FATAL_ERROR "layering: ${back_edges} back edges in ${count} files")
endif()
message("layering: ok (${count} files)")
