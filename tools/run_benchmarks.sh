#!/usr/bin/env bash
# Builds the benchmark suites (release preset) and runs them on one backend,
# writing Google Benchmark JSON and PNG charts; docs/benchmarks.md quotes
# figures produced by this script.
#
# Usage: tools/run_benchmarks.sh [--backend=sim|cuda|hip|null]
#            [--sim_profile=instant|cuda|rocm_mi300x] [--out_dir=out/bench]
#            [--suites="stream event allocation client_lifecycle contention"]
#            [--no_build] [any Google Benchmark or suite flag ...]
# Results: <out_dir>/<backend>[-<profile>]/<suite>.json and charts beside them.
# Environment: BUILD_DIR (default build/release) to use another build tree.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

backend="sim"
profile="cuda"
out_dir="out/bench"
suites="stream event allocation client_lifecycle contention"
build=1
extra=()
for arg in "$@"; do
  case "$arg" in
    --backend=*) backend="${arg#--backend=}" ;;
    --sim_profile=*) profile="${arg#--sim_profile=}" ;;
    --out_dir=*) out_dir="${arg#--out_dir=}" ;;
    --suites=*) suites="${arg#--suites=}" ;;
    --no_build) build=0 ;;
    *) extra+=("$arg") ;;
  esac
done
build_dir="${BUILD_DIR:-build/release}"

if ((build)); then
  tools/install_deps.sh python3-matplotlib ||
    echo "run_benchmarks: could not install every dependency; continuing" >&2
  if [[ "$build_dir" == "build/release" ]]; then
    cmake --preset release
  fi
  targets=()
  for suite in $suites; do targets+=("${suite}_bench"); done
  cmake --build "$build_dir" --target "${targets[@]}"
fi

tag="$backend"
if [[ "$backend" == "sim" ]]; then tag="sim-${profile//_/-}"; fi
dest="$out_dir/$tag"
mkdir -p "$dest"
# Three repetitions, medians reported: the machines this runs on are shared.
for suite in $suites; do
  echo "== ${suite}_bench --backend=$backend --sim_profile=$profile ${extra[*]:-}"
  "$build_dir/benchmarks/${suite}_bench" --backend="$backend" \
    --sim_profile="$profile" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="$dest/$suite.json" --benchmark_out_format=json \
    "${extra[@]}"
done

python="$(tools/matplotlib_python.sh || true)"
if [[ -z "$python" ]]; then
  python3 tools/plot_benchmarks.py --summary --no_plots "$dest"/*.json
  echo "plot skipped: matplotlib is not installed (tools/install_deps.sh python3-matplotlib)"
  exit 0
fi
"$python" tools/plot_benchmarks.py --summary --out_dir "$dest" "$dest"/*.json
