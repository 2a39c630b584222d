#!/usr/bin/env bash
# gpupool GPU bundle runner. tools/gpu-bundle.sh stages it as bundle/run_all.sh
# beside the binaries it runs (source: tests/gpu/run_all.sh).
#
# On any Linux x86-64 machine with an NVIDIA driver (no internet, compiler,
# CMake or source tree needed) it prints the device and driver, runs every
# test binary of the bundle with the CUDA backend (the illegal-address
# subprocess test among them), runs every benchmark with --backend=cuda, and
# writes a summary. Without a usable GPU every GPU check skips and the run
# still succeeds, saying so.
#
# Usage: bash bundle/run_all.sh [all|tests|bench]      (default: all)
# Environment:
#   OUT                results folder (default ./out): summary.txt,
#                      run_all.log and one <benchmark>.json per benchmark
#   TEST_TIMEOUT       seconds per test binary (default 120)
#   GTEST_FILTER       read by every test binary itself (GoogleTest), e.g.
#                      "-Suite.KnownHang" to leave a test out; the summary
#                      shows it
#   BENCH_TIMEOUT      seconds per benchmark binary (default 240)
#   BENCH_REPETITIONS  repetitions per benchmark, aggregates reported
#                      (default 3)
#   BENCH_FLAGS        extra Google Benchmark flags, e.g.
#                      "--benchmark_min_time=0.2 --benchmark_filter=stream"
# Exit status: 0 when nothing failed (passes, or skips for want of a GPU);
# 1 when a binary failed, crashed or timed out; 2 on bad usage; 3 when an
# NVIDIA GPU is visible but gpupool's CUDA backend cannot use it (every GPU
# check would only have skipped).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mode="${1:-all}"
case "$mode" in
  all | tests | bench) ;;
  *)
    echo "usage: $0 [all|tests|bench]" >&2
    exit 2
    ;;
esac

OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
test_timeout="${TEST_TIMEOUT:-120}"
bench_timeout="${BENCH_TIMEOUT:-240}"
bench_repetitions="${BENCH_REPETITIONS:-3}"
read -r -a bench_flags <<<"${BENCH_FLAGS:-}"

# The bundle's own Abseil, Google Benchmark and cudart come first; the
# binaries' RUNPATH (the build machine's CUDA) ranks below LD_LIBRARY_PATH.
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GPUPOOL_BACKEND=cuda
unset GPUPOOL_CONF GPUPOOL_STATS

summary="$OUT/summary.txt"
log="$OUT/run_all.log"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

section() { printf '\n===== %s\n' "$*"; }

main() {
  start_all=$(date +%s)

  # --- The machine ----------------------------------------------------------

  section "gpupool GPU bundle: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n)"
  echo "kernel: $(uname -sr), $(ldd --version 2>/dev/null | head -1)"
  if [[ -f "$here/MANIFEST.txt" ]]; then
    sed -n '1,12p' "$here/MANIFEST.txt"
  fi
  bundle_line="$(sed -n 's/^commit: //p' "$here/MANIFEST.txt" 2>/dev/null | head -1)"

  section "nvidia-smi"
  gpu_line="none (nvidia-smi not found: no NVIDIA driver)"
  gpu_visible=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi || true
    query="$(nvidia-smi --query-gpu=index,name,driver_version,memory.total \
      --format=csv,noheader 2>/dev/null)"
    if [[ -n "$query" ]]; then
      gpu_visible=1
      gpu_line="$(echo "$query" | tr '\n' ';' | sed 's/;$//')"
    else
      gpu_line="none (nvidia-smi lists no GPU)"
    fi
  else
    echo "$gpu_line"
  fi

  section "libraries"
  missing=0
  for bin in "$here"/bin/*/* "$here"/bin/gpupool_cuda_probe; do
    [[ -x "$bin" ]] || continue
    if ldd "$bin" 2>&1 | grep -q "not found"; then
      echo "MISSING for ${bin#"$here"/}:"
      ldd "$bin" | grep "not found"
      missing=1
    fi
  done
  ((missing)) || echo "every binary resolves its libraries (bundle lib/ + system)"

  section "gpupool_cuda_probe"
  probe_out="$("$here/bin/gpupool_cuda_probe" 2>&1)"
  probe_rc=$?
  echo "$probe_out"
  cuda_usable=0
  ((probe_rc == 0)) && cuda_usable=1
  cuda_line="$(echo "$probe_out" | grep '^gpupool cuda backend:' | head -1)"
  [[ -n "$cuda_line" ]] || cuda_line="gpupool cuda backend: probe failed (rc $probe_rc)"

  # --- Tests ----------------------------------------------------------------

  declare -a test_rows=()
  declare -a bench_rows=()
  failures=0
  illegal_line="not run"
  tot_ran=0 tot_passed=0 tot_skipped=0 tot_failed=0

  # gtest's closing counts; empty when absent.
  gtest_count() {  # file label
    sed -n "s/^\[  *$2 *\] \([0-9][0-9]*\) tests\{0,1\}[.,].*/\1/p" "$1" | tail -1
  }

  # "ok", "FAIL(rc N)", "TIMEOUT" or "CRASH(signal N)".
  verdict_of() {  # rc failed
    local rc=$1 failed=$2
    if ((rc == 124 || rc == 137)); then
      echo "TIMEOUT"
    elif ((rc > 128)); then
      echo "CRASH(signal $((rc - 128)))"
    elif ((rc != 0 || failed > 0)); then
      echo "FAIL(rc $rc)"
    else
      echo "ok"
    fi
  }

  if [[ "$mode" != bench ]]; then
    section "tests (GPUPOOL_BACKEND=cuda, --gtest_brief=1, ${test_timeout}s each${GTEST_FILTER:+, GTEST_FILTER=$GTEST_FILTER})"
    for bin in "$here"/bin/tests/*; do
      [[ -x "$bin" ]] || continue
      [[ "$bin" == *_peer ]] && continue  # helper processes the tests start
      name="$(basename "$bin")"
      echo "--- $name"
      t0=$(date +%s)
      timeout -k 10 "$test_timeout" "$bin" --gtest_brief=1 --gtest_color=no \
        >"$work/$name.txt" 2>&1
      rc=$?
      secs=$(($(date +%s) - t0))
      cat "$work/$name.txt"
      ran="$(sed -n 's/^\[==========\] \([0-9][0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' \
        "$work/$name.txt" | tail -1)"
      passed="$(gtest_count "$work/$name.txt" PASSED)"
      skipped="$(gtest_count "$work/$name.txt" SKIPPED)"
      failed="$(gtest_count "$work/$name.txt" FAILED)"
      ran=${ran:-0} passed=${passed:-0} skipped=${skipped:-0} failed=${failed:-0}
      verdict="$(verdict_of "$rc" "$failed")"
      if [[ "$verdict" == ok && "$ran" == 0 ]]; then verdict="FAIL(no tests ran)"; fi
      [[ "$verdict" == ok ]] || failures=$((failures + 1))
      tot_ran=$((tot_ran + ran)) tot_passed=$((tot_passed + passed))
      tot_skipped=$((tot_skipped + skipped)) tot_failed=$((tot_failed + failed))
      test_rows+=("$(printf '  %-34s %-16s %5s %7s %7s %6s %5ss' "$name" "$verdict" \
        "$ran" "$passed" "$skipped" "$failed" "$secs")")
      if [[ "$name" == illegal_address_test ]]; then
        if ((skipped > 0 && passed == 0)); then
          illegal_line="SKIPPED ($skipped of $ran: no usable CUDA device)"
        else
          illegal_line="$verdict: $passed passed, $skipped skipped, $failed failed of $ran"
        fi
      fi
    done
  fi

  # --- Benchmarks -----------------------------------------------------------

  # Sets verdict and detail from a benchmark's exit status and its JSON.
  judge_bench() {  # rc name
    local rc=$1 name=$2 errors results
    errors=$(grep -c '"error_occurred": true' "$OUT/$name.json" 2>/dev/null)
    results=$(grep -c '"run_name":' "$OUT/$name.json" 2>/dev/null)
    errors=${errors:-0} results=${results:-0}
    verdict="$(verdict_of "$rc" "$errors")"
    ((errors == 0)) || verdict="FAIL($errors errors)"
    [[ "$verdict" == ok ]] || failures=$((failures + 1))
    detail="$results results, $errors errors -> $name.json"
  }

  if [[ "$mode" != tests ]]; then
    section "benchmarks (--backend=cuda, ${bench_repetitions} repetitions, ${bench_timeout}s each)"
    for bin in "$here"/bin/bench/*; do
      [[ -x "$bin" ]] || continue
      name="$(basename "$bin")"
      echo "--- $name"
      t0=$(date +%s)
      if [[ "$name" == allocator_peers_bench ]]; then
        # gpupool beside CUB: its stand-in runtime counts every call and, on
        # a GPU, forwards it to the bundle's real libcudart; without one it
        # answers the calls itself (a smoke run: both allocators, every case).
        real_cudart="$(ls "$here"/lib/libcudart.so.* 2>/dev/null | head -1)"
        peers_flags=(--benchmark_repetitions="$bench_repetitions"
          --benchmark_enable_random_interleaving=true
          "--trace_dir=$here/traces" "${bench_flags[@]}")
        ((cuda_usable)) || peers_flags=("--trace_dir=$here/traces"
          --benchmark_min_time=0.001 --benchmark_filter='same_stream|replay')
        GPUPOOL_BENCH_CUDART_REAL="$( ((cuda_usable)) && echo "$real_cudart")" \
          timeout -k 10 "$bench_timeout" "$bin" "${peers_flags[@]}" \
          --benchmark_out="$OUT/$name.json" --benchmark_out_format=json \
          2>&1 | tee "$work/$name.txt"
        judge_bench "${PIPESTATUS[0]}" "$name"
        ((cuda_usable)) || detail="no usable CUDA device: stand-in smoke, $detail"
      elif ((cuda_usable)); then
        timeout -k 10 "$bench_timeout" "$bin" --backend=cuda \
          --mutex_deadlock_detection=off \
          --benchmark_repetitions="$bench_repetitions" \
          --benchmark_report_aggregates_only=true \
          --benchmark_out="$OUT/$name.json" --benchmark_out_format=json \
          "${bench_flags[@]}" 2>&1 | tee "$work/$name.txt"
        judge_bench "${PIPESTATUS[0]}" "$name"
      else
        # No GPU: show that the binary loads and reports why, then prove it
        # runs at all with a one-shot pass on the instant simulator.
        "$bin" --backend=cuda --benchmark_list_tests >"$work/$name.cuda.txt" 2>&1
        cuda_rc=$?
        cat "$work/$name.cuda.txt"
        timeout -k 10 "$bench_timeout" "$bin" --backend=sim \
          --sim_profile=instant --benchmark_min_time=0.001 \
          >"$work/$name.sim.txt" 2>&1
        rc=$?
        if ((cuda_rc == 2)) && grep -q "unusable\|no device" "$work/$name.cuda.txt" &&
          ((rc == 0)) && ! grep -q "ERROR OCCURRED" "$work/$name.sim.txt"; then
          verdict="skipped"
          detail="no usable CUDA device; sim smoke ok"
        elif ((cuda_rc == 0 && rc == 0)) && ! grep -q "ERROR OCCURRED" "$work/$name.sim.txt"; then
          # A simulator-only benchmark (ipc_bench): it ignores --backend and
          # lists its cases; the smoke is all there is to run here.
          verdict="ok"
          detail="simulator-only; sim smoke ok"
        else
          verdict="FAIL(cuda rc $cuda_rc, sim rc $rc)"
          detail="see run_all.log"
          tail -20 "$work/$name.sim.txt"
          failures=$((failures + 1))
        fi
      fi
      secs=$(($(date +%s) - t0))
      bench_rows+=("$(printf '  %-34s %-16s %5ss  %s' "$name" "$verdict" "$secs" "$detail")")
    done
    # Keep $OUT to a handful of files (easier to copy back from the GPU
    # machine): more than six benchmark JSON files go into one archive.
    shopt -s nullglob
    jsons=("$OUT"/*_bench.json)
    if ((${#jsons[@]} > 6)); then
      tar -C "$OUT" -cf "$OUT/benchmarks.tar" "${jsons[@]##*/}" && rm -f "${jsons[@]}"
      echo "packed ${#jsons[@]} benchmark JSON files into $OUT/benchmarks.tar"
    fi
    shopt -u nullglob
  fi

  # --- Extras: per-call runtime costs and the LD_PRELOAD library ----------
  extras_line="not run"
  if [[ "$mode" != tests ]] && ((cuda_usable)); then
    section "runtime_call_probe and libgpupool_preload.so over the real runtime"
    probe_rc=skipped preload_rc=skipped
    if [[ -x "$here/bin/runtime_call_probe" ]]; then
      timeout -k 10 "$bench_timeout" "$here/bin/runtime_call_probe" 2>&1 |
        tee "$OUT/runtime_call_probe.txt"
      probe_rc=${PIPESTATUS[0]}
    fi
    if [[ -f "$here/lib/libgpupool_preload.so" && -x "$here/bin/bench/runtime_calls_bench" ]]; then
      for preload in "" "$here/lib/libgpupool_preload.so"; do
        echo "--- runtime_calls_bench create_destroy, LD_PRELOAD=${preload:-none}"
        LD_PRELOAD="$preload" GPUPOOL_STATS=1 timeout -k 10 "$bench_timeout" \
          "$here/bin/bench/runtime_calls_bench" --backend=cuda \
          --benchmark_filter=create_destroy --benchmark_min_time=0.3
      done 2>&1 | tee "$OUT/preload_cuda.txt"
      preload_rc=${PIPESTATUS[0]}
    fi
    extras_line="runtime_call_probe rc $probe_rc; preload over cudart rc $preload_rc (see runtime_call_probe.txt, preload_cuda.txt)"
  fi

  # --- Summary --------------------------------------------------------------

  if ((failures > 0)); then
    verdict="FAIL: $failures binaries failed, crashed or timed out"
    status=1
  elif ((gpu_visible && !cuda_usable)); then
    verdict="FAIL: an NVIDIA GPU is visible but the CUDA backend is unusable"
    status=3
  elif ((!cuda_usable)); then
    verdict="PASS WITHOUT GPU: every GPU check skipped (${cuda_line#gpupool cuda backend: })"
    status=0
  else
    verdict="PASS on GPU"
    status=0
  fi

  {
    echo "gpupool GPU bundle run"
    echo "date:        $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host:        $(uname -n) ($(uname -sr))"
    echo "bundle:      ${bundle_line:-unknown} (MANIFEST.txt)"
    echo "command:     bash bundle/run_all.sh $mode   (OUT=$OUT)"
    echo "nvidia-smi:  $gpu_line"
    echo "probe:       $cuda_line"
    echo "$probe_out" | grep -E '^(cuda |device )' | sed 's/^/             /'
    if [[ "$mode" != bench ]]; then
      echo
      echo "tests (GPUPOOL_BACKEND=cuda, --gtest_brief=1${GTEST_FILTER:+, GTEST_FILTER=$GTEST_FILTER}):"
      printf '  %-34s %-16s %5s %7s %7s %6s %6s\n' binary status ran passed skipped \
        failed time
      printf '%s\n' "${test_rows[@]}"
      printf '  %-34s %-16s %5s %7s %7s %6s\n' total "" "$tot_ran" "$tot_passed" \
        "$tot_skipped" "$tot_failed"
      echo "illegal-address test: $illegal_line"
    fi
    if [[ "$mode" != tests ]]; then
      echo
      echo "benchmarks (--backend=cuda):"
      printf '%s\n' "${bench_rows[@]}"
      echo "extras:      $extras_line"
    fi
    echo
    echo "elapsed:     $(($(date +%s) - start_all)) s"
    echo "verdict:     $verdict"
  } >"$summary"

  section "summary ($summary)"
  cat "$summary"
  return "$status"
}

# Everything printed goes to the console and to run_all.log.
main 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
