#!/usr/bin/env bash
# Builds gpupool's CUDA-enabled tests and benchmarks on this machine (the CUDA
# toolkit is needed, a GPU is not) and stages a self-contained bundle that
# runs them on a machine with an NVIDIA driver and nothing else: no internet,
# compiler, CMake or source tree.
#
#   bundle/run_all.sh        the one script to run there (tests/gpu/run_all.sh)
#   bundle/bin/tests/*       every GoogleTest binary CTest knows, except those
#                            that need the build tree or sources at run time
#   bundle/bin/bench/*       every benchmark binary (benchmarks/*_bench)
#   bundle/traces/*.trace    the allocation traces allocator_peers_bench
#                            replays
#   bundle/bin/gpupool_cuda_probe
#   bundle/bin/runtime_call_probe   per-call runtime costs, capture rules
#   bundle/lib/libgpupool_preload.so  run over the real runtime by run_all.sh
#   bundle/lib/*             shared libraries a bare CUDA machine lacks
#                            (Abseil, Google Benchmark, cudart); never libcuda
#                            or other driver libraries, nor the C/C++ runtime
#   bundle/MANIFEST.txt      commit, toolchain, contents, sizes
#
# Usage: tools/gpu-bundle.sh [--run]
#   --run   also run bundle/run_all.sh here afterwards (OUT=out/gpu-bundle):
#           without a GPU every GPU check must skip and the run must pass.
# Environment: BUILD_DIR (default build/gpu-bundle), JOBS (default 2),
#   GPUPOOL_CUDA_ARCHITECTURES (default "80-real;90": Ampere and Hopper
#   machine code plus compute_90 PTX), BUNDLE_MAX_MIB (unset: no limit; else
#   fail when the bundle plus the working tree exceed it, for a copy that
#   must stay under a size).
# Then copy bundle/ to the GPU machine and run "bash bundle/run_all.sh" there
# (docs/backends.md, "GPU verification").
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build_dir="${BUILD_DIR:-build/gpu-bundle}"
jobs="${JOBS:-2}"
archs="${GPUPOOL_CUDA_ARCHITECTURES:-80-real;90}"
bundle="$repo/bundle"
limit_mib="${BUNDLE_MAX_MIB:-}"
run_after=0
for arg in "$@"; do
  case "$arg" in
    --run) run_after=1 ;;
    *)
      echo "usage: $0 [--run]" >&2
      exit 2
      ;;
  esac
done

# Test binaries that cannot run from the bundle, with the reason.
declare -A excluded=(
  [gtest_integration_test]="runs leaky_suite from the build tree and reads its source"
  [runtime_loader_test]="loads stand-in runtimes from the build tree"
  [cuda_loader_test]="loads stand-in runtimes from the build tree"
  [cuda_contract_fake_runtime_test]="loads a stand-in runtime from the build tree"
  [secure_env_test]="copies its probe binary from the build tree"
)
# Libraries every target machine has: the C and C++ runtimes, and the NVIDIA
# driver, which must match the machine's kernel module and is never bundled.
system_libs='^(linux-vdso|ld-linux|libc\.so|libm\.so|libstdc\+\+\.so|libgcc_s\.so|libpthread\.so|libdl\.so|librt\.so|libcuda\.so|libnvidia)'

echo "== configure $build_dir (Release, CUDA on, HIP off)"
mkdir -p "$build_dir"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [[ -f "$build_dir/CMakeCache.txt" ]]; then generator=(); fi
cmake -S . -B "$build_dir" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DGPUPOOL_WITH_CUDA=ON -DGPUPOOL_WITH_HIP=OFF \
  -DGPUPOOL_BUILD_TESTS=ON -DGPUPOOL_BUILD_BENCHMARKS=ON \
  -DGPUPOOL_BUILD_EXAMPLES=OFF -DGPUPOOL_WARNINGS_AS_ERRORS=OFF \
  -DGPUPOOL_SANITIZE= \
  "-DGPUPOOL_CUDA_ARCHITECTURES=$archs" >"$build_dir/configure.log" 2>&1 || {
  cat "$build_dir/configure.log"
  exit 1
}
grep -E "CUDA backend|tests/gpu" "$build_dir/configure.log" || true
if ! grep -q "tests/gpu: nvcc" "$build_dir/configure.log"; then
  echo "gpu-bundle: nvcc was not found or not usable: the illegal-address" \
    "test would be missing (see $build_dir.configure.log)" >&2
  exit 1
fi

echo "== build (-j$jobs)"
cmake --build "$build_dir" -j "$jobs"

# Every GoogleTest binary CTest runs (gtest_discover_tests registers each
# test case with --gtest_filter). Other CTest commands are left out: the
# install consumer runs cmake, the benchmark smokes are the benchmarks run
# below, and the stress test is a simulator-only driver with its own flags.
ctest --test-dir "$build_dir" -N -V 2>/dev/null |
  sed -n 's/^[0-9]*: Test command: //p' >"$build_dir/test_commands.txt"
mapfile -t test_bins < <(grep -e '--gtest_filter=' "$build_dir/test_commands.txt" |
  awk '{print $1}' | tr -d '"' | sort -u)
mapfile -t other_commands < <(grep -v -e '--gtest_filter=' \
  "$build_dir/test_commands.txt" | awk '{print $1}' | tr -d '"' | sort -u)
build_abs="$(cd "$build_dir" && pwd)"

echo "== stage $bundle"
rm -rf "$bundle"
mkdir -p "$bundle/bin/tests" "$bundle/bin/bench" "$bundle/lib"
staged=()
for bin in "${test_bins[@]}"; do
  [[ "$bin" == "$build_abs"/* && -x "$bin" ]] || continue
  [[ "$bin" == "$build_abs"/benchmarks/* ]] && continue  # run as benchmarks
  name="$(basename "$bin")"
  if [[ -n "${excluded[$name]:-}" ]]; then
    echo "   left out: $name (${excluded[$name]})"
    continue
  fi
  cp "$bin" "$bundle/bin/tests/"
  staged+=("$bundle/bin/tests/$name")
done
# The helper processes of the two-process IPC tests, found beside them.
for bin in "$build_dir"/tests/*_peer "$build_dir"/tests/gpu/*_peer; do
  [[ -x "$bin" ]] || continue
  cp "$bin" "$bundle/bin/tests/"
  staged+=("$bundle/bin/tests/$(basename "$bin")")
done
for bin in "$build_dir"/benchmarks/*_bench; do
  [[ -x "$bin" ]] || continue
  cp "$bin" "$bundle/bin/bench/"
  staged+=("$bundle/bin/bench/$(basename "$bin")")
done
cp "$build_dir/tests/gpu/gpupool_cuda_probe" "$bundle/bin/"
staged+=("$bundle/bin/gpupool_cuda_probe")
cp "$build_dir/benchmarks/runtime_call_probe" "$bundle/bin/"
staged+=("$bundle/bin/runtime_call_probe")
# The LD_PRELOAD library, run by run_all.sh over the real runtime.
cp "$build_dir/src/preload/libgpupool_preload.so" "$bundle/lib/"
staged+=("$bundle/lib/libgpupool_preload.so")
install -m 0755 tests/gpu/run_all.sh "$bundle/run_all.sh"
# The traces allocator_peers_bench replays.
mkdir -p "$bundle/traces"
cp benchmarks/peers/traces/*.trace "$bundle/traces/"
if [[ ! -x "$bundle/bin/tests/illegal_address_test" ]]; then
  echo "gpu-bundle: illegal_address_test was not built" >&2
  exit 1
fi

# Every library the binaries resolve here, except the system's.
declare -A libs=()
for bin in "${staged[@]}"; do
  while read -r soname path; do
    if [[ "$path" == "not found" ]]; then
      echo "gpu-bundle: $soname not found for $bin" >&2
      exit 1
    fi
    [[ "$soname" =~ $system_libs ]] && continue
    libs["$soname"]="$path"
  done < <(ldd "$bin" | sed -n 's/^[[:space:]]*\([^ ]*\) => \(not found\|[^ ]*\).*/\1 \2/p')
done
for soname in "${!libs[@]}"; do
  cp -L "${libs[$soname]}" "$bundle/lib/$soname"
done

# Check: with only the bundle's lib/ added, nothing outside the system set is
# needed any more.
status=0
for bin in "${staged[@]}"; do
  while read -r soname path; do
    [[ "$soname" =~ $system_libs || "$path" == "$bundle/lib/"* ]] && continue
    echo "gpu-bundle: ${bin#"$bundle"/} still needs $soname ($path)" >&2
    status=1
  done < <(LD_LIBRARY_PATH="$bundle/lib" ldd "$bin" |
    sed -n 's/^[[:space:]]*\([^ ]*\) => \(not found\|[^ ]*\).*/\1 \2/p')
done
((status == 0)) || exit 1

# The newest glibc / libstdc++ symbol versions needed: the GPU machine's
# C and C++ runtimes must be at least this new.
glibc_needed="$(objdump -T "${staged[@]}" "$bundle"/lib/* 2>/dev/null |
  grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
glibcxx_needed="$(objdump -T "${staged[@]}" "$bundle"/lib/* 2>/dev/null |
  grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)"

bundle_bytes=$(du -sb "$bundle" | cut -f1)
tree_bytes=$(git ls-files -z --cached --others --exclude-standard |
  xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
nvcc="$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
{
  echo "gpupool GPU bundle (tools/gpu-bundle.sh)"
  dirty="$(git status --porcelain -- CMakeLists.txt cmake src include tests benchmarks)"
  echo "commit: $(git rev-parse --short HEAD)${dirty:+ + uncommitted changes}"
  echo "built: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n)"
  echo "compiler: $(${CXX:-c++} --version | head -1)"
  echo "nvcc: $("$nvcc" --version | tail -2 | head -1)"
  echo "cuda architectures: $archs"
  echo "needs: NVIDIA driver for CUDA $(sed -n 's/.*CUDA backend *: ON (CUDA \([0-9.]*\).*/\1/p' "$build_dir/configure.log" | head -1)+ (cudart bundled), $glibc_needed, $glibcxx_needed"
  echo "size: $((bundle_bytes / 1024)) KiB (working tree besides: $((tree_bytes / 1024)) KiB)"
  echo
  echo "binaries:"
  for bin in "${staged[@]}"; do
    printf '  %-40s %8s KiB\n' "${bin#"$bundle"/}" $(($(stat -c %s "$bin") / 1024))
  done
  echo "libraries:"
  for lib in "$bundle"/lib/*; do
    printf '  %-40s %8s KiB\n' "lib/$(basename "$lib")" $(($(stat -c %s "$lib") / 1024))
  done
  for name in "${!excluded[@]}"; do
    echo "left out: $name (${excluded[$name]})"
  done
  for command in "${other_commands[@]}"; do
    [[ "$command" == "$build_abs"/benchmarks/* ]] && continue
    echo "left out: ${command#"$build_abs"/} (a CTest command, not a GoogleTest binary)"
  done
} >"$bundle/MANIFEST.txt"
cat "$bundle/MANIFEST.txt"

if [[ -n "$limit_mib" ]] &&
   ((bundle_bytes + tree_bytes > limit_mib * 1024 * 1024)); then
  echo "gpu-bundle: bundle + working tree exceed BUNDLE_MAX_MIB=$limit_mib MiB" >&2
  exit 1
fi

echo
echo "bundle ready: $((bundle_bytes / 1024)) KiB in bundle/."
echo "On the GPU machine (copy bundle/ there): bash bundle/run_all.sh"

if ((run_after)); then
  echo
  echo "== bash bundle/run_all.sh (OUT=out/gpu-bundle)"
  OUT="$repo/out/gpu-bundle" bash "$bundle/run_all.sh"
fi
