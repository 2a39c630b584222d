#!/usr/bin/env bash
# The main job in one command: builds gpupool (release preset) and runs the
# client-lifecycle demo — a PJRT-style client built and torn down N times with
# raw runtime calls vs from gpupool's pools — on the real GPU when the CUDA or
# HIP runtime reports one, otherwise on the simulator (labelled "simulated").
# Prints a table, writes <out_dir>/demo_results.{json,csv} and, when
# matplotlib is available, <out_dir>/demo.png. Where HIP's headers are
# installed, adds the zero-code-change row (tools/preload_demo.sh: an
# unmodified client under LD_PRELOAD=libgpupool_preload.so over a stand-in
# runtime with MI300X latencies, simulated) to <out_dir>/preload_demo.txt.
#
# Usage: tools/run_demo.sh [--out_dir=DIR] [any other gpupool_demo flag]
#   e.g. tools/run_demo.sh --quick      (CI-sized: seconds)
#        tools/run_demo.sh --backend=sim
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

out_dir="out/demo"
for arg in "$@"; do
  case "$arg" in
    --out_dir=*) out_dir="${arg#--out_dir=}" ;;
  esac
done

# Missing packages only; a machine without network or root still runs the
# demo if the build dependencies are there (the plot is then skipped).
if ! tools/install_deps.sh python3-matplotlib; then
  echo "run_demo: could not install every dependency; continuing" >&2
fi

cmake --preset release
cmake --build --preset release --target gpupool_demo
# The stand-in HIP runtime needs HIP's headers; without them, no row.
if cmake --build --preset release --target gpupool_preload \
     preload_pjrt_client_hip >/dev/null 2>&1; then
  have_preload_demo=1
fi

build/release/examples/client_lifecycle/gpupool_demo --out_dir="$out_dir" "$@"

# The zero-code-change row: an unmodified client under LD_PRELOAD.
if [[ -n "${have_preload_demo:-}" ]]; then
  quick=""
  for arg in "$@"; do [[ "$arg" == "--quick" ]] && quick="--quick"; done
  tools/preload_demo.sh build/release $quick | tee "$out_dir/preload_demo.txt"
fi

python="$(tools/matplotlib_python.sh || true)"
if [[ -z "$python" ]]; then
  echo "plot skipped: matplotlib is not installed (tools/install_deps.sh python3-matplotlib)"
  exit 0
fi
"$python" tools/plot_benchmarks.py --out_dir "$out_dir" \
  --demo "$out_dir/demo_results.json"
