#!/usr/bin/env bash
# The shared build as a distribution ships it, checked end to end:
#   1. Abseil for the preload: Debian's source built position-independent
#      and static (tools/build_abseil.sh pic, cached in build/_deps);
#   2. a shared build (BUILD_SHARED_LIBS=ON, prefix /usr), libraries and
#      preload only;
#   3. installed into a scratch prefix: the install-consumer checks
#      (SONAME, RUNPATH $ORIGIN, exported names, a CMake and a pkg-config
#      consumer started with no LD_LIBRARY_PATH), and the installed preload
#      NEEDs only the C/C++ runtime and the loader;
#   4. `cpack -G DEB`: libgpupool0 and libgpupool-dev, unpacked together into
#      a clean root (dpkg -x), and the same consumer checks against it.
# Usage: tools/check_package.sh [build dir]   (default build/shared)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/shared}
jobs=${JOBS:-$(nproc)}
cxx=${CXX:-c++}

tools/build_abseil.sh pic
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_INSTALL_PREFIX=/usr \
  -DBUILD_SHARED_LIBS=ON -DGPUPOOL_WARNINGS_AS_ERRORS=ON \
  -DGPUPOOL_PRELOAD_ABSEIL_DIR="$PWD/build/_deps/absl-pic" \
  -DGPUPOOL_BUILD_TESTS=OFF -DGPUPOOL_BUILD_BENCHMARKS=OFF \
  -DGPUPOOL_BUILD_EXAMPLES=OFF
cmake --build "$build" -j "$jobs"

consumer() {  # consumer <work dir> [-DPREFIX=<installed tree>]
  local work=$1
  shift
  cmake -DBUILD_DIR="$build" -DSOURCE_DIR="$PWD/tests/install_consumer" \
    -DWORK_DIR="$work" -DCXX="$cxx" -DGENERATOR=Ninja "$@" \
    -P tests/install_consumer/run.cmake
}
preload_needed() {  # preload_needed <root>
  local preload
  preload=$(find "$1" -name libgpupool_preload.so)
  cmake -DPRELOAD="$preload" -DPRIVATE_ABSEIL=ON -P tests/preload/check_needed.cmake
}

echo "=== check_package: cmake --install + consumer"
consumer "$PWD/$build/install_consumer" | tee "$build/install_consumer.log"
grep -q "install consumer: ok" "$build/install_consumer.log"
preload_needed "$build/install_consumer/prefix"

echo "=== check_package: cpack -G DEB"
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB)
runtime_deb=$(ls "$build"/libgpupool0_*.deb)
dev_deb=$(ls "$build"/libgpupool-dev_*.deb)
for deb in "$runtime_deb" "$dev_deb"; do
  dpkg-deb --field "$deb" Package Version Depends
done
grep -q "libgpupool0 (= " <<<"$(dpkg-deb --field "$dev_deb" Depends)"
grep -q "libabsl" <<<"$(dpkg-deb --field "$runtime_deb" Depends)"
# The runtime package holds the versioned libraries and the preload, the
# development package the links, headers, CMake package and pkg-config.
runtime_files=$(dpkg-deb -c "$runtime_deb")
dev_files=$(dpkg-deb -c "$dev_deb")
grep -q "libgpupool.so.0.[0-9]*.[0-9]*$" <<<"$runtime_files"
grep -q "libgpupool_preload.so$" <<<"$runtime_files"
if grep -q "include/\|\.pc$\|cmake/\|\.a$" <<<"$runtime_files"; then
  echo "check_package: libgpupool0 holds development files" >&2
  exit 1
fi
grep -q "include/gpupool/gpupool.h$" <<<"$dev_files"
grep -q "pkgconfig/gpupool.pc$" <<<"$dev_files"
grep -q "cmake/gpupool/gpupoolConfig.cmake$" <<<"$dev_files"
grep -q "/libgpupool.a$" <<<"$dev_files"

echo "=== check_package: the .deb pair unpacked into a clean root + consumer"
root="$PWD/$build/deb_root"
rm -rf "$root"
dpkg -x "$runtime_deb" "$root"
dpkg -x "$dev_deb" "$root"
consumer "$PWD/$build/deb_consumer" -DPREFIX="$root/usr" |
  tee "$build/deb_consumer.log"
grep -q "install consumer: ok" "$build/deb_consumer.log"
preload_needed "$root"
echo "check_package: ok"
