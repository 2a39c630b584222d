# CPack post-build script (CPACK_POST_BUILD_SCRIPTS, cmake/GpupoolPackage.cmake):
# finishes each .deb and -dbgsym .ddeb that `cpack -G DEB` wrote, where
# CPack's DEB generator cannot be told what Debian policy asks:
#   - the postinst/postrm CPack writes for a package with libraries in the
#     loader's directories only run `ldconfig`; they go, and the package's
#     `activate-noawait ldconfig` trigger (cmake/debian/triggers, required
#     here) does that job once per dpkg run;
#   - the control file gets its Multi-Arch field (CPACK_GPUPOOL_DEB_MULTIARCH);
#   - as dh_strip does: static archives lose their debug sections
#     (deterministic archives), and static archives and the shared objects
#     CPack stripped lose the .comment and .note sections;
#   - a -dbgsym package's debug files are not executable, its documentation
#     directory is a link to that of the package it belongs to (which it
#     depends on, same version), as debhelper makes it;
#   - md5sums lists every file by its path in the package (CPack's -dbgsym
#     md5sums names the build tree's paths);
#   - the package is rebuilt with root as owner of every file.
# Any other maintainer script, or a library package without the trigger,
# fails the build.

find_program(GPUPOOL_DPKG_DEB dpkg-deb REQUIRED)
find_program(GPUPOOL_STRIP strip REQUIRED)
if(NOT CPACK_GPUPOOL_DEB_MULTIARCH)
  message(FATAL_ERROR "finish_packages: CPACK_GPUPOOL_DEB_MULTIARCH is not set")
endif()

# The .debs, and the -dbgsym .ddeb beside each where CPack made one.
set(packages "")
foreach(file IN LISTS CPACK_PACKAGE_FILES)
  if(NOT file MATCHES "\\.deb$")
    continue()
  endif()
  list(APPEND packages "${file}")
  get_filename_component(dir "${file}" DIRECTORY)
  get_filename_component(name "${file}" NAME)
  string(REGEX REPLACE "^([^_]+)_(.*)\\.deb$" "\\1-dbgsym_\\2.ddeb" ddeb "${name}")
  if(EXISTS "${dir}/${ddeb}")
    list(APPEND packages "${dir}/${ddeb}")
  endif()
endforeach()
if(NOT packages)
  message(FATAL_ERROR "finish_packages: no .deb among CPACK_PACKAGE_FILES (${CPACK_PACKAGE_FILES})")
endif()

foreach(package IN LISTS packages)
  get_filename_component(name "${package}" NAME)
  set(tree "${CPACK_TOPLEVEL_DIRECTORY}/finish/${name}")
  file(REMOVE_RECURSE "${tree}")
  file(MAKE_DIRECTORY "${CPACK_TOPLEVEL_DIRECTORY}/finish")
  execute_process(COMMAND "${GPUPOOL_DPKG_DEB}" --raw-extract "${package}" "${tree}"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dpkg-deb --raw-extract ${package}: ${rc}")
  endif()

  # ldconfig runs from the trigger, not from maintainer scripts.
  foreach(script postinst postrm preinst prerm)
    if(NOT EXISTS "${tree}/DEBIAN/${script}")
      continue()
    endif()
    file(READ "${tree}/DEBIAN/${script}" body)
    if(NOT body MATCHES "^#!/bin/sh\n+set -e\n+if \\[ \"\\$1\" = \"(configure|remove)\" \\]; then\n\tldconfig\nfi\n*$")
      message(FATAL_ERROR "${name}: unexpected ${script}:\n${body}")
    endif()
    file(REMOVE "${tree}/DEBIAN/${script}")
  endforeach()
  file(GLOB public_libraries
       "${tree}/usr/lib/*/lib*.so.*" "${tree}/usr/lib/lib*.so.*"
       "${tree}/lib/*/lib*.so.*" "${tree}/lib/lib*.so.*")
  if(public_libraries)
    set(triggers "")
    if(EXISTS "${tree}/DEBIAN/triggers")
      file(READ "${tree}/DEBIAN/triggers" triggers)
    endif()
    if(NOT triggers MATCHES "(^|\n)activate-noawait ldconfig\n")
      message(FATAL_ERROR "${name} ships shared libraries but no "
                          "`activate-noawait ldconfig` trigger")
    endif()
  endif()

  # Shared objects (stripped by CPack when it split off their debug
  # information): no compiler comment sections either.
  file(GLOB_RECURSE shared_objects "${tree}/usr/lib/*.so" "${tree}/usr/lib/*.so.*")
  list(FILTER shared_objects EXCLUDE REGEX "^${tree}/usr/lib/debug/")
  foreach(shared_object IN LISTS shared_objects)
    if(IS_SYMLINK "${shared_object}")
      continue()
    endif()
    execute_process(COMMAND "${GPUPOOL_STRIP}" --remove-section=.comment
                            --remove-section=.note "${shared_object}"
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "strip --remove-section=.comment ${shared_object}: ${rc}")
    endif()
  endforeach()

  # Static archives: debug sections stripped, members without time stamps.
  file(GLOB_RECURSE archives "${tree}/usr/*.a")
  foreach(archive IN LISTS archives)
    execute_process(COMMAND "${GPUPOOL_STRIP}" --strip-debug
                            --remove-section=.comment --remove-section=.note
                            --enable-deterministic-archives "${archive}"
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "strip --strip-debug ${archive}: ${rc}")
    endif()
  endforeach()

  # A -dbgsym package.
  if(name MATCHES "^(.+)-dbgsym_[^_]+_[^_]+\\.ddeb$")
    set(owner "${CMAKE_MATCH_1}")
    file(GLOB_RECURSE debug_files "${tree}/usr/lib/debug/*.debug")
    foreach(debug_file IN LISTS debug_files)
      file(CHMOD "${debug_file}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
    endforeach()
    file(MAKE_DIRECTORY "${tree}/usr/share/doc")
    file(CREATE_LINK "${owner}" "${tree}/usr/share/doc/${owner}-dbgsym" SYMBOLIC)
  endif()

  file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${tree}" "${tree}/*")
  list(FILTER files EXCLUDE REGEX "^DEBIAN/")
  list(SORT files)
  set(md5sums "")
  foreach(file IN LISTS files)
    if(IS_SYMLINK "${tree}/${file}")
      continue()
    endif()
    file(MD5 "${tree}/${file}" sum)
    string(APPEND md5sums "${sum}  ${file}\n")
  endforeach()
  file(WRITE "${tree}/DEBIAN/md5sums" "${md5sums}")

  # Multi-Arch, after Architecture.
  file(READ "${tree}/DEBIAN/control" control)
  if(NOT control MATCHES "(^|\n)Multi-Arch:")
    string(REGEX REPLACE "(^|\n)(Architecture: [^\n]*\n)"
           "\\1\\2Multi-Arch: ${CPACK_GPUPOOL_DEB_MULTIARCH}\n" control "${control}")
    if(NOT control MATCHES "\nMulti-Arch: ")
      message(FATAL_ERROR "${name}: no Architecture field in the control file")
    endif()
    file(WRITE "${tree}/DEBIAN/control" "${control}")
  endif()

  execute_process(COMMAND "${GPUPOOL_DPKG_DEB}" --root-owner-group --build "${tree}" "${package}"
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dpkg-deb --build ${tree}: ${rc}")
  endif()
  file(REMOVE_RECURSE "${tree}")
  message(STATUS "gpupool: finished ${name}")
endforeach()
