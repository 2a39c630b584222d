#!/usr/bin/env bash
# Installs the Debian packages gpupool needs, only those that are missing.
# Usage: tools/install_deps.sh [extra packages...]
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config libabsl-dev libgtest-dev libgmock-dev
          libbenchmark-dev libamdhip64-dev "$@")
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
