#!/usr/bin/env bash
# gpupool beside CUB's caching allocator, in one command: builds
# allocator_peers_bench (default preset), runs it twice (or --runs=N times)
# with 5 interleaved repetitions each (every case, both cost models, and the
# trace replays; medians over all runs),
# and writes the JSON, the Markdown tables of docs/benchmarks.md ("Against
# other allocators") and the SVG chart.
#
# Usage: tools/run_peers.sh [--out_dir=out/peers] [--runs=2] [--no_build]
#            [any Google Benchmark flag ...]
# Results: <out_dir>/peers_run{1..N}.json, <out_dir>/peers.md,
#          <out_dir>/allocator_peers.svg.
# Environment: BUILD_DIR (default build/default) to use another build tree.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

out_dir="out/peers"
build=1
runs=2
extra=()
for arg in "$@"; do
  case "$arg" in
    --out_dir=*) out_dir="${arg#--out_dir=}" ;;
    --no_build) build=0 ;;
    --runs=*) runs="${arg#--runs=}" ;;
    *) extra+=("$arg") ;;
  esac
done
build_dir="${BUILD_DIR:-build/default}"

if ((build)); then
  if [[ "$build_dir" == "build/default" ]]; then
    cmake --preset default
  fi
  cmake --build "$build_dir" --target allocator_peers_bench
fi
bench="$build_dir/benchmarks/allocator_peers_bench"
if [[ ! -x "$bench" ]]; then
  echo "run_peers: $bench was not built (it needs the CUDA toolkit's CCCL" \
    "headers; see the configure output)" >&2
  exit 1
fi
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "run_peers: --runs wants a positive count, got '$runs'" >&2
  exit 2
fi
mkdir -p "$out_dir"
rm -f "$out_dir"/peers_run*.json
results=()
for ((run = 1; run <= runs; ++run)); do
  "$bench" --benchmark_min_time=0.2 --benchmark_repetitions=5 \
    --benchmark_enable_random_interleaving=true \
    --benchmark_out="$out_dir/peers_run$run.json" \
    --benchmark_out_format=json "${extra[@]}"
  results+=("$out_dir/peers_run$run.json")
done
tools/peer_report.py --svg="$out_dir/allocator_peers.svg" "${results[@]}" \
  >"$out_dir/peers.md"
echo "run_peers: tables in $out_dir/peers.md, chart in" \
  "$out_dir/allocator_peers.svg"
