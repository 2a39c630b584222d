# gpupool_debian_changelog(<CHANGELOG.md> <output> <version> <maintainer>):
# writes the Debian changelog the packages ship (/usr/share/doc/<package>/
# changelog.gz), generated from the project's CHANGELOG.md so that the two
# never disagree:
#   - each release section `## [x.y.z] - YYYY-MM-DD` becomes the entry
#     `gpupool (x.y.z) unstable; urgency=medium`, dated that day;
#   - `## [Unreleased]`, when it lists anything, becomes the entry of the
#     version being built, distribution UNRELEASED, dated by
#     SOURCE_DATE_EPOCH if set, else by the last commit that changed
#     CHANGELOG.md, else by the file's time stamp;
#   - `### Added` and the like become `  Added:` lines, each bullet a `  * `
#     item wrapped to 78 columns, without Markdown emphasis, code marks and
#     link targets.
# The packages are native (the project packages itself): their version is the
# project version and the changelog is changelog.gz, not changelog.Debian.gz.

# Debian changelog trailer date ("Thu, 26 Nov 2026 10:55:08 +0000") of a
# POSIX time.
function(_gpupool_changelog_date epoch out)
  set(saved "$ENV{SOURCE_DATE_EPOCH}")
  set(ENV{SOURCE_DATE_EPOCH} "${epoch}")
  string(TIMESTAMP date "%a, %d %b %Y %H:%M:%S +0000" UTC)
  set(ENV{SOURCE_DATE_EPOCH} "${saved}")
  set(${out} "${date}" PARENT_SCOPE)
endfunction()

# POSIX time of midnight UTC on a proleptic Gregorian date (days_from_civil).
function(_gpupool_epoch_of_day year month day out)
  # Leading zeros would read as octal in math(EXPR).
  string(REGEX REPLACE "^0+([0-9])" "\\1" month "${month}")
  string(REGEX REPLACE "^0+([0-9])" "\\1" day "${day}")
  if(month LESS_EQUAL 2)
    math(EXPR year "${year} - 1")
  endif()
  math(EXPR era "${year} / 400")
  math(EXPR yoe "${year} - ${era} * 400")
  if(month GREATER 2)
    math(EXPR mp "${month} - 3")
  else()
    math(EXPR mp "${month} + 9")
  endif()
  math(EXPR doy "(153 * ${mp} + 2) / 5 + ${day} - 1")
  math(EXPR doe "${yoe} * 365 + ${yoe} / 4 - ${yoe} / 100 + ${doy}")
  math(EXPR days "${era} * 146097 + ${doe} - 719468")
  math(EXPR epoch "${days} * 86400")
  set(${out} ${epoch} PARENT_SCOPE)
endfunction()

# Appends `text` to the variable `body`, wrapped to 78 columns: the first
# line starts with `first`, the others with `rest`.
function(_gpupool_changelog_wrap body first rest text)
  string(REGEX MATCHALL "[^ ]+" words "${text}")
  set(result "${${body}}")
  set(line "${first}")
  set(empty_line ON)
  foreach(word IN LISTS words)
    string(LENGTH "${line} ${word}" width)
    if(NOT empty_line AND width GREATER 78)
      string(APPEND result "${line}\n")
      set(line "${rest}${word}")
    elseif(empty_line)
      string(APPEND line "${word}")
    else()
      string(APPEND line " ${word}")
    endif()
    set(empty_line OFF)
  endforeach()
  if(NOT empty_line)
    string(APPEND result "${line}\n")
  endif()
  set(${body} "${result}" PARENT_SCOPE)
endfunction()

function(gpupool_debian_changelog changelog_md output version maintainer)
  file(READ "${changelog_md}" text)
  # Markdown to plain text: link targets, emphasis and code marks go.
  string(REGEX REPLACE "\\[([^]\n]*)\\]\\([^)\n]*\\)" "\\1" text "${text}")
  string(REPLACE "**" "" text "${text}")
  string(REPLACE "`" "" text "${text}")
  # CMake lists split at `;` and group at brackets: stand-ins while listed.
  string(ASCII 1 semicolon)
  string(ASCII 2 open_bracket)
  string(ASCII 3 close_bracket)
  string(REPLACE ";" "${semicolon}" text "${text}")
  string(REPLACE "[" "${open_bracket}" text "${text}")
  string(REPLACE "]" "${close_bracket}" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")

  # Unreleased entry date.
  if(DEFINED ENV{SOURCE_DATE_EPOCH} AND NOT "$ENV{SOURCE_DATE_EPOCH}" STREQUAL "")
    set(unreleased_epoch "$ENV{SOURCE_DATE_EPOCH}")
  else()
    set(unreleased_epoch "")
    find_package(Git QUIET)
    if(GIT_FOUND)
      get_filename_component(dir "${changelog_md}" DIRECTORY)
      execute_process(COMMAND "${GIT_EXECUTABLE}" log -1 --format=%ct -- "${changelog_md}"
                      WORKING_DIRECTORY "${dir}" OUTPUT_VARIABLE unreleased_epoch
                      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0 OR NOT unreleased_epoch MATCHES "^[0-9]+$")
        set(unreleased_epoch "")
      endif()
    endif()
    if(unreleased_epoch STREQUAL "")
      file(TIMESTAMP "${changelog_md}" unreleased_epoch "%s" UTC)
    endif()
  endif()

  set(entries "")        # the finished entries
  set(entry_header "")   # the open entry's first line ("" before the first)
  set(entry_body "")
  set(entry_date "")
  set(bullet "")         # the open bullet's text
  set(bullet_first "")
  set(bullet_rest "")
  set(versions "")
  # A line past the last closes the open bullet and entry.
  list(APPEND lines "## ${open_bracket}end${close_bracket}")
  foreach(line IN LISTS lines)
    set(bullet_ends OFF)
    set(new_bullet "")
    if(line MATCHES "^## " OR line MATCHES "^### " OR line STREQUAL "")
      set(bullet_ends ON)
    elseif(line MATCHES "^- (.*)$")
      set(bullet_ends ON)
      set(new_bullet "${CMAKE_MATCH_1}")
      set(new_first "  * ")
      set(new_rest "    ")
    elseif(line MATCHES "^  +- (.*)$")
      set(bullet_ends ON)
      set(new_bullet "${CMAKE_MATCH_1}")
      set(new_first "    - ")
      set(new_rest "      ")
    endif()
    if(bullet_ends AND NOT bullet STREQUAL "")
      _gpupool_changelog_wrap(entry_body "${bullet_first}" "${bullet_rest}" "${bullet}")
      set(bullet "")
    endif()
    if(NOT new_bullet STREQUAL "")
      set(bullet "${new_bullet}")
      set(bullet_first "${new_first}")
      set(bullet_rest "${new_rest}")
      continue()
    endif()
    if(line MATCHES "^## ")
      # Close the open entry.
      if(NOT entry_header STREQUAL "" AND NOT entry_body STREQUAL "")
        string(REGEX REPLACE "\n+$" "" entry_body "${entry_body}")
        string(APPEND entries "${entry_header}\n\n${entry_body}\n\n"
                              " -- ${maintainer}  ${entry_date}\n\n")
      endif()
      set(entry_header "")
      set(entry_body "")
      set(pattern "^## ${open_bracket}([^${close_bracket}]+)${close_bracket}( - ([0-9][0-9][0-9][0-9])-([0-9][0-9])-([0-9][0-9]))?")
      if(NOT line MATCHES "${pattern}")
        message(FATAL_ERROR "${changelog_md}: a release heading reads `## [x.y.z] - YYYY-MM-DD`: ${line}")
      endif()
      set(name "${CMAKE_MATCH_1}")
      if(name STREQUAL "end")
        break()
      endif()
      if(name STREQUAL "Unreleased")
        set(entry_version "${version}")
        set(distribution UNRELEASED)
        _gpupool_changelog_date("${unreleased_epoch}" entry_date)
      else()
        if(NOT CMAKE_MATCH_3)
          message(FATAL_ERROR "${changelog_md}: release ${name} has no date (`## [${name}] - YYYY-MM-DD`)")
        endif()
        set(entry_version "${name}")
        set(distribution unstable)
        _gpupool_epoch_of_day(${CMAKE_MATCH_3} ${CMAKE_MATCH_4} ${CMAKE_MATCH_5} epoch)
        _gpupool_changelog_date(${epoch} entry_date)
      endif()
      set(entry_header "gpupool (${entry_version}) ${distribution}; urgency=medium")
    elseif(line MATCHES "^### (.*)$")
      if(NOT entry_header STREQUAL "")
        if(NOT entry_body STREQUAL "")
          string(APPEND entry_body "\n")
        endif()
        string(APPEND entry_body "  ${CMAKE_MATCH_1}:\n")
      endif()
    elseif(NOT bullet STREQUAL "")
      string(STRIP "${line}" continued)
      string(APPEND bullet " ${continued}")
    endif()
  endforeach()

  # The newest entry must be the version being built: a release section
  # for it, or an Unreleased section that lists something.
  if(NOT entries MATCHES "^gpupool \\(([^)]*)\\)")
    message(FATAL_ERROR "${changelog_md}: no entry for the Debian changelog")
  endif()
  if(NOT CMAKE_MATCH_1 STREQUAL "${version}")
    message(FATAL_ERROR "${changelog_md}: the newest entry is ${CMAKE_MATCH_1}, "
                        "the project version is ${version}")
  endif()
  string(REGEX MATCHALL "\ngpupool \\([^)]*\\)" later "\n${entries}")
  list(LENGTH later count)
  list(REMOVE_DUPLICATES later)
  list(LENGTH later unique)
  if(NOT count EQUAL unique)
    message(FATAL_ERROR "${changelog_md}: two entries for one version (${later}); "
                        "an Unreleased section needs a new project version")
  endif()
  string(REGEX REPLACE "\n+$" "\n" entries "${entries}")
  string(REPLACE "${semicolon}" ";" entries "${entries}")
  string(REPLACE "${open_bracket}" "[" entries "${entries}")
  string(REPLACE "${close_bracket}" "]" entries "${entries}")
  file(WRITE "${output}" "${entries}")
endfunction()
