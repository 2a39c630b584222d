#!/usr/bin/env bash
# The zero-code-change row of the demo: an unmodified PJRT-style client
# (tests/preload/pjrt_client.cc) over a stand-in runtime with MI300X
# latencies (3.4 ms per stream create, 3.3 ms per destroy; simulated, no GPU),
# run as is and under LD_PRELOAD=libgpupool_preload.so. Prints one row.
# The stand-in is HIP's where HIP's headers were found at build time, else
# the CUDA runtime's (built with CUDA's headers); the row names which.
#
# Usage: tools/preload_demo.sh BUILD_DIR [--quick]
set -euo pipefail

build="${1:?usage: tools/preload_demo.sh BUILD_DIR [--quick]}"
lifecycles=10
[[ "${2:-}" == "--quick" ]] && lifecycles=2
devices=8

client="$build/tests/preload/preload_pjrt_client_hip"
runtime="stand-in HIP runtime"
if [[ ! -e "$client" ]]; then
  client="$build/tests/preload/preload_pjrt_client_cuda"
  runtime="stand-in CUDA runtime, no HIP headers"
fi
preload="$build/src/preload/libgpupool_preload.so"
for file in "$client" "$preload"; do
  [[ -e "$file" ]] || { echo "preload_demo: $file is not built" >&2; exit 1; }
done

export GPUPOOL_STANDIN_CREATE_US=3400 GPUPOOL_STANDIN_DESTROY_US=3300
args=(--lifecycles="$lifecycles" --devices="$devices")

run() {  # prints "<seconds> <runtime stream creates>"
  local start end line
  start=$(date +%s.%N)
  line=$("$@" | head -1)
  end=$(date +%s.%N)
  echo "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }') $(sed -E 's/.*runtime created ([0-9]+) streams.*/\1/' <<<"$line")"
}

read -r raw_s raw_creates < <(run "$client" "${args[@]}")
read -r pre_s pre_creates < <(LD_PRELOAD="$preload" run "$client" "${args[@]}")

printf '\nZero code change (simulated: %s, MI300X latencies 3.4 ms create / 3.3 ms destroy)\n' "$runtime"
printf '%-34s %10s %16s\n' "unmodified client, $lifecycles x $devices devices" "wall (s)" "streams created"
printf '%-34s %10.2f %16d\n' "as is" "$raw_s" "$raw_creates"
printf '%-34s %10.2f %16d\n' "LD_PRELOAD=libgpupool_preload.so" "$pre_s" "$pre_creates"
printf '%-34s %9.1fx\n' "speed-up" "$(awk -v a="$raw_s" -v b="$pre_s" 'BEGIN { print a / b }')"
