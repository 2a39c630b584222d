# Runs one benchmark suite briefly and holds its counters to limits: what the
# benchmark smoke tests (tests/CMakeLists.txt) assert about what the
# benchmarks claim.
#
#   cmake -DBENCH=<suite binary> -DARGS="<arg>,<arg>" -DOUT=<json file>
#         -DCHECKS="<name regex>,<counter>,<max>|..." -P check_counters.cmake
#
# Every check must match at least one benchmark, and each matching
# benchmark's counter must be present and <= max. A benchmark that reported
# an error fails the run.

string(REPLACE "," ";" args "${ARGS}")
execute_process(
  COMMAND "${BENCH}" ${args} --benchmark_min_time=0.001
          "--benchmark_out=${OUT}" --benchmark_out_format=json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BENCH} exited with ${rc}")
endif()
file(READ "${OUT}" json)
string(JSON count LENGTH "${json}" benchmarks)
if(count EQUAL 0)
  message(FATAL_ERROR "no benchmark ran")
endif()
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON failed ERROR_VARIABLE no_field GET "${json}" benchmarks ${i}
         error_occurred)
  if(NOT no_field AND failed)
    string(JSON name GET "${json}" benchmarks ${i} name)
    message(FATAL_ERROR "${name}: ERROR OCCURRED")
  endif()
endforeach()

string(REPLACE "|" ";" checks "${CHECKS}")
foreach(check IN LISTS checks)
  string(REPLACE "," ";" parts "${check}")
  list(GET parts 0 regex)
  list(GET parts 1 counter)
  list(GET parts 2 max)
  set(matched 0)
  foreach(i RANGE ${last})
    string(JSON name GET "${json}" benchmarks ${i} name)
    if(NOT name MATCHES "${regex}")
      continue()
    endif()
    math(EXPR matched "${matched} + 1")
    string(JSON value ERROR_VARIABLE missing GET "${json}" benchmarks ${i}
           ${counter})
    if(missing)
      message(FATAL_ERROR "${name}: no counter ${counter}")
    endif()
    if(value GREATER max)
      message(FATAL_ERROR "${name}: ${counter} = ${value}, limit ${max}")
    endif()
    message(STATUS "ok  ${name}: ${counter} = ${value} (limit ${max})")
  endforeach()
  if(matched EQUAL 0)
    message(FATAL_ERROR "no benchmark matches ${regex}")
  endif()
endforeach()
