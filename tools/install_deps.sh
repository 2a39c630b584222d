#!/usr/bin/env bash
# Installs the Debian packages gpupool needs, only those that are missing.
# Usage: tools/install_deps.sh [--no-hip] [extra packages...]
#   --no-hip  leave out libamdhip64-dev (the HIP headers and the ROCm runtime
#             with LLVM: about 59 MB to download, 256 MB installed on Debian
#             12) unless this machine has an AMD GPU driver (/dev/kfd). The
#             HIP backend is then not built; the CUDA and simulated ones are.
set -euo pipefail

hip=(libamdhip64-dev)
if [[ "${1:-}" == "--no-hip" ]]; then
  shift
  if [[ ! -e /dev/kfd ]]; then hip=(); fi
fi
packages=(cmake ninja-build g++ pkg-config libabsl-dev libgtest-dev libgmock-dev
          libbenchmark-dev "${hip[@]}" "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "gpupool: installing missing packages: ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update
"${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
