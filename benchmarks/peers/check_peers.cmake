# Smoke run of allocator_peers_bench: runs every benchmark once, briefly, and
# checks that each case and each trace ran for every peer and that the
# stand-in runtime counted their calls. Asserts nothing about time.
#
#   cmake -DBENCH=<allocator_peers_bench> -DOUT=<json file> -P check_peers.cmake

execute_process(
  COMMAND "${BENCH}" --benchmark_min_time=0.001
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

# name -> counter value, for the names below.
set(names "")
foreach(i RANGE ${last})
  string(JSON name GET "${json}" benchmarks ${i} name)
  string(JSON failed ERROR_VARIABLE no_field GET "${json}" benchmarks ${i}
         error_occurred)
  if(NOT no_field AND failed)
    message(FATAL_ERROR "${name}: ERROR OCCURRED")
  endif()
  list(APPEND names "${name}")
  foreach(counter calls_per_cycle queries_per_cycle runtime_mallocs
                  reserved_over_live)
    string(JSON value ERROR_VARIABLE missing GET "${json}" benchmarks ${i}
           ${counter})
    if(NOT missing)
      set("value_${name}_${counter}" "${value}")
    endif()
  endforeach()
endforeach()

# Sets `out` to `counter` of the one benchmark named `name` ("" when it
# reported none); fails when that benchmark did not run.
function(counter_of name counter out)
  list(FIND names "${name}" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "did not run: ${name}")
  endif()
  set(${out} "${value_${name}_${counter}}" PARENT_SCOPE)
endfunction()

# Holds `counter` of the one benchmark named `name` above zero.
function(expect_counted name counter)
  counter_of("${name}" "${counter}" value)
  if(value STREQUAL "" OR NOT value GREATER 0)
    message(FATAL_ERROR "${name}: ${counter} = '${value}', want > 0")
  endif()
  message(STATUS "ok  ${name}: ${counter} = ${value}")
endfunction()

# Holds `counter` of the one benchmark named `name` equal to `want`.
function(expect_value name counter want)
  counter_of("${name}" "${counter}" value)
  if(value STREQUAL "" OR NOT value EQUAL want)
    message(FATAL_ERROR "${name}: ${counter} = '${value}', want ${want}")
  endif()
  message(STATUS "ok  ${name}: ${counter} = ${value}")
endfunction()

set(peers gpupool cub_default cub_fair)
foreach(costs null profile)
  foreach(peer IN LISTS peers)
    foreach(case same_stream cross_stream mixed_sizes cold_start)
      expect_counted("peers/${case}/${costs}/${peer}/real_time"
                     calls_per_cycle)
    endforeach()
    foreach(threads 1 2 4 8)
      expect_counted(
        "peers/threads/${costs}/${peer}/real_time/threads:${threads}"
        calls_per_cycle)
    endforeach()
  endforeach()
endforeach()

# kWaitOnStream: the other stream waits on the block's event (the record
# and the wait), where the default queries it between two capture-mode
# exchanges.
foreach(costs null profile)
  expect_value("peers/cross_stream/${costs}/gpupool_wait/real_time"
               calls_per_cycle 2)
  expect_value("peers/cross_stream/${costs}/gpupool_wait/real_time"
               queries_per_cycle 0)
  expect_value("peers/cross_stream/${costs}/gpupool/real_time"
               calls_per_cycle 4)
endforeach()

set(traces "")
foreach(name IN LISTS names)
  if(name MATCHES "^replay/([^/]+)/raw/")
    list(APPEND traces "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(LENGTH traces trace_count)
if(trace_count LESS 3)
  message(FATAL_ERROR "replayed ${trace_count} traces, want at least 3")
endif()
foreach(trace IN LISTS traces)
  foreach(peer gpupool cub_default cub_fair raw)
    set(name "replay/${trace}/${peer}/iterations:1/real_time")
    expect_counted("${name}" runtime_mallocs)
    expect_counted("${name}" reserved_over_live)
  endforeach()
endforeach()
