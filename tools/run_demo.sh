#!/usr/bin/env bash
# The main job in one command: builds gpupool (release preset) and runs the
# client-lifecycle demo — a PJRT-style client built and torn down N times with
# raw runtime calls vs from gpupool's pools — on the real GPU when the CUDA or
# HIP runtime reports one, otherwise on the simulator (labelled "simulated").
# Prints a table and writes <out_dir>/demo_results.{json,csv}; draws
# <out_dir>/demo.png when matplotlib is already installed, or with --plot.
# Adds the zero-code-change row (tools/preload_demo.sh: an unmodified client
# under LD_PRELOAD=libgpupool_preload.so over a stand-in runtime with MI300X
# latencies, simulated), also written to <out_dir>/preload_demo.txt. The
# stand-in is HIP's where HIP's headers are installed, else the CUDA
# runtime's where CUDA's are; with neither the demo says the row is skipped.
#
# The first run installs only the missing build packages (CMake, Ninja, g++,
# Abseil, GoogleTest, Google Benchmark; the HIP packages only on a machine
# with an AMD GPU driver). --plot also installs python3-matplotlib, which with
# its dependencies (NumPy, SciPy, ...) is about 59 MB to download and 357 MB
# installed on Debian 12: the table comes without it.
#
# Usage: tools/run_demo.sh [--plot] [--out_dir=DIR] [any other gpupool_demo flag]
#   e.g. tools/run_demo.sh --quick      (CI-sized: seconds)
#        tools/run_demo.sh --backend=sim
#        tools/run_demo.sh --plot       (installs matplotlib if missing)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

out_dir="out/demo"
plot=0
demo_args=()
for arg in "$@"; do
  case "$arg" in
    --plot) plot=1; continue ;;
    --out_dir=*) out_dir="${arg#--out_dir=}" ;;
  esac
  demo_args+=("$arg")
done

# Missing packages only; a machine without network or root still runs the
# demo if the build dependencies are there.
extra=()
if ((plot)) && ! tools/matplotlib_python.sh >/dev/null; then
  extra=(python3-matplotlib)
fi
if ! tools/install_deps.sh --no-hip "${extra[@]}"; then
  echo "run_demo: could not install every dependency; continuing" >&2
fi

cmake --preset release
cmake --build --preset release --target gpupool_demo
# The stand-in runtimes need their runtime's headers: HIP's, else CUDA's.
for standin_client in preload_pjrt_client_hip preload_pjrt_client_cuda; do
  if cmake --build --preset release --target gpupool_preload \
       "$standin_client" >/dev/null 2>&1; then
    have_preload_demo=1
    break
  fi
done

build/release/examples/client_lifecycle/gpupool_demo --out_dir="$out_dir" \
  "${demo_args[@]}"

# The zero-code-change row: an unmodified client under LD_PRELOAD.
if [[ -n "${have_preload_demo:-}" ]]; then
  quick=""
  for arg in "$@"; do [[ "$arg" == "--quick" ]] && quick="--quick"; done
  tools/preload_demo.sh build/release $quick | tee "$out_dir/preload_demo.txt"
else
  echo "zero-code-change row skipped: the stand-in runtimes need HIP's or CUDA's headers, and neither was found"
fi

python="$(tools/matplotlib_python.sh || true)"
if [[ -z "$python" ]]; then
  echo "chart skipped: matplotlib is not installed (tools/run_demo.sh --plot installs it)"
  exit 0
fi
"$python" tools/plot_benchmarks.py --out_dir "$out_dir" \
  --demo "$out_dir/demo_results.json"
