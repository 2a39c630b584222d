#!/usr/bin/env bash
# The shared build as a distribution ships it, checked end to end:
#   1. Abseil for the preload: Debian's source built position-independent
#      and static (tools/build_abseil.sh pic, cached in build/_deps);
#   2. a shared build (BUILD_SHARED_LIBS=ON, prefix /usr, Debian's build
#      flags from dpkg-buildflags with hardening=+all), libraries and preload
#      only;
#   3. installed into a scratch prefix: the install-consumer checks
#      (SONAME, RUNPATH $ORIGIN, exported names, a CMake and a pkg-config
#      consumer started with no LD_LIBRARY_PATH), and the installed preload
#      NEEDs only the C/C++ runtime and the loader;
#   4. `cpack -G DEB`: libgpupool0, libgpupool-dev, libgpupool-testing-dev,
#      gpupool-preload and the -dbgsym packages of the first and the last;
#      their fields, exact dependencies and file lists, stripped binaries
#      whose debug information is in the -dbgsym packages, and `lintian` on
#      every package: any error or warning fails;
#   5. the packages unpacked together into a clean root (dpkg -x), and the
#      same consumer checks against it;
#   6. the packages installed into this machine's own root (apt-get
#      install), the consumers built with no prefix given and run, the
#      preload loaded from its installed path, then every package purged,
#      leaving no file of theirs (a trap purges them if a step fails).
#      Stops before installing if one of these packages is installed already.
# Needs root (or sudo) for step 6, and lintian (apt-get install lintian).
# Usage: tools/check_package.sh [build dir]   (default build/shared)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/shared}
jobs=${JOBS:-$(nproc)}
cxx=${CXX:-c++}
fail() {
  echo "check_package: $*" >&2
  exit 1
}
command -v lintian >/dev/null || fail "lintian not found (apt-get install lintian)"

tools/build_abseil.sh pic
# Debian's own build flags, hardening included (stack protector, fortified
# libc calls, relocations read-only and bound at load), as a distribution
# builds the packages.
flags() { DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$1"; }
ldflags=$(flags LDFLAGS)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="$(flags CPPFLAGS) $(flags CFLAGS)" \
  -DCMAKE_CXX_FLAGS="$(flags CPPFLAGS) $(flags CXXFLAGS)" \
  -DCMAKE_SHARED_LINKER_FLAGS="$ldflags" -DCMAKE_MODULE_LINKER_FLAGS="$ldflags" \
  -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_INSTALL_PREFIX=/usr \
  -DBUILD_SHARED_LIBS=ON -DGPUPOOL_WARNINGS_AS_ERRORS=ON \
  -DGPUPOOL_PRELOAD_ABSEIL_DIR="$PWD/build/_deps/absl-pic" \
  -DGPUPOOL_BUILD_TESTS=OFF -DGPUPOOL_BUILD_BENCHMARKS=OFF \
  -DGPUPOOL_BUILD_EXAMPLES=OFF
cmake --build "$build" -j "$jobs"

consumer() {  # consumer <work dir> [-DPREFIX=<installed tree> | -DSYSTEM=ON]
  local work=$1
  shift
  cmake -DBUILD_DIR="$build" -DSOURCE_DIR="$PWD/tests/install_consumer" \
    -DWORK_DIR="$work" -DCXX="$cxx" -DGENERATOR=Ninja "$@" \
    -P tests/install_consumer/run.cmake | tee "$work.log"
  grep -q "install consumer: ok" "$work.log"
}
preload_needed() {  # preload_needed <root>
  local preload
  preload=$(find "$1" -name libgpupool_preload.so)
  [[ $preload == */gpupool/libgpupool_preload.so ]] ||
    fail "preload not in a gpupool directory: '$preload'"
  cmake -DPRELOAD="$preload" -DPRIVATE_ABSEIL=ON -P tests/preload/check_needed.cmake
}
one() {  # one <pattern>: the single file matching it
  local matches=($1)
  ((${#matches[@]} == 1)) && [[ -f ${matches[0]} ]] ||
    fail "expected one file $1, found: ${matches[*]}"
  echo "${matches[0]}"
}
has() {  # has <text> <regex> <what>
  grep -q -- "$2" <<<"$1" || fail "$3"
}
lacks() {  # lacks <text> <regex> <what>
  if grep -q -- "$2" <<<"$1"; then fail "$3"; fi
}

echo "=== check_package: cmake --install + consumer"
consumer "$PWD/$build/install_consumer"
preload_needed "$build/install_consumer/prefix"

echo "=== check_package: cpack -G DEB"
rm -f "$build"/*.deb "$build"/*.ddeb
(cd "$build" && cpack -G DEB)
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
runtime_deb=$(one "$build/libgpupool0_${version}_$arch.deb")
dev_deb=$(one "$build/libgpupool-dev_${version}_$arch.deb")
testing_deb=$(one "$build/libgpupool-testing-dev_${version}_$arch.deb")
preload_deb=$(one "$build/gpupool-preload_${version}_$arch.deb")
runtime_dbg=$(one "$build/libgpupool0-dbgsym_${version}_$arch.ddeb")
preload_dbg=$(one "$build/gpupool-preload-dbgsym_${version}_$arch.ddeb")
debs=("$runtime_deb" "$dev_deb" "$testing_deb" "$preload_deb")
ddebs=("$runtime_dbg" "$preload_dbg")
[[ $(ls "$build"/*.deb "$build"/*.ddeb | wc -l) == 6 ]] ||
  fail "unexpected packages: $(ls "$build"/*.deb "$build"/*.ddeb)"

echo "=== check_package: fields"
for deb in "${debs[@]}" "${ddebs[@]}"; do
  fields=$(dpkg-deb --field "$deb")
  dpkg-deb --field "$deb" Package Version Architecture Multi-Arch Section Depends
  has "$fields" "^Multi-Arch: same$" "$deb: not Multi-Arch: same"
  has "$fields" "^Maintainer: [^<]* <[^@ ]*@[^@ ]*>$" "$deb: Maintainer without an address"
  has "$fields" "^Version: $version$" "$deb: version is not $version"
done
for deb in "${debs[@]}"; do
  # An extended description: lines after the synopsis.
  (($(dpkg-deb --field "$deb" Description | wc -l) > 3)) ||
    fail "$deb: no extended description"
done
depends() { dpkg-deb --field "$1" Depends; }
has "$(depends "$runtime_deb")" "libabsl" "libgpupool0 does not depend on Abseil"
lacks "$(depends "$runtime_deb")" "gtest" "libgpupool0 depends on GoogleTest"
has "$(depends "$dev_deb")" "^libgpupool0 (= $version), libabsl-dev$" \
  "libgpupool-dev: Depends is not libgpupool0 (= $version), libabsl-dev"
has "$(depends "$testing_deb")" "^libgpupool-dev (= $version), libgtest-dev$" \
  "libgpupool-testing-dev: Depends is not libgpupool-dev (= $version), libgtest-dev"
has "$(depends "$preload_deb")" "libc6" "gpupool-preload: no libc6 dependency"
lacks "$(depends "$preload_deb")" "libabsl\|libgpupool" \
  "gpupool-preload depends on Abseil or libgpupool (it carries its own)"
has "$(depends "$runtime_dbg")" "^libgpupool0 (= $version)$" "libgpupool0-dbgsym: Depends"
has "$(depends "$preload_dbg")" "^gpupool-preload (= $version)$" "gpupool-preload-dbgsym: Depends"
# ldconfig through the trigger, and no maintainer script.
[[ $(dpkg-deb --info "$runtime_deb" triggers) == *"activate-noawait ldconfig"* ]] ||
  fail "libgpupool0: no activate-noawait ldconfig trigger"
for deb in "${debs[@]}" "${ddebs[@]}"; do
  for script in preinst postinst prerm postrm; do
    if dpkg-deb --info "$deb" "$script" >/dev/null 2>&1; then
      fail "$deb has a $script"
    fi
  done
done

echo "=== check_package: which package holds what"
files() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's#^\./#/#'; }
runtime_files=$(files "$runtime_deb")
dev_files=$(files "$dev_deb")
testing_files=$(files "$testing_deb")
preload_files=$(files "$preload_deb")
libdir="/usr/lib/$multiarch"
for name in libgpupool libgpupool_base libgpupool_loader libgpupool_sim; do
  has "$runtime_files" "^$libdir/$name\.so\.[0-9]*\.[0-9]*\.[0-9]*$" "libgpupool0 lacks $name"
  has "$dev_files" "^$libdir/$name\.so$" "libgpupool-dev lacks the $name.so link"
  has "$dev_files" "^$libdir/$name\.a$" "libgpupool-dev lacks $name.a"
done
lacks "$runtime_files" "include/\|\.pc$\|/cmake/\|\.a$\|\.so$\|testing\|preload" \
  "libgpupool0 holds development, testing or preload files"
has "$dev_files" "^/usr/include/gpupool/gpupool.h$" "libgpupool-dev lacks gpupool.h"
has "$dev_files" "^$libdir/pkgconfig/gpupool.pc$" "libgpupool-dev lacks gpupool.pc"
has "$dev_files" "^$libdir/cmake/gpupool/gpupoolConfig.cmake$" "libgpupool-dev lacks gpupoolConfig.cmake"
lacks "$dev_files" "testing\|preload\|\.so\.[0-9]" "libgpupool-dev holds testing, preload or runtime files"
for file in /usr/include/gpupool/testing/gtest_integration.h \
            "$libdir/libgpupool_testing.a" "$libdir/libgpupool_testing_main.a" \
            "$libdir/pkgconfig/gpupool-testing.pc" "$libdir/pkgconfig/gpupool-testing-main.pc" \
            "$libdir/cmake/gpupool/gpupoolTestingTargets.cmake"; do
  has "$testing_files" "^$file$" "libgpupool-testing-dev lacks $file"
done
lacks "$testing_files" "\.so" "libgpupool-testing-dev holds a shared object"
has "$preload_files" "^$libdir/gpupool/libgpupool_preload.so$" \
  "gpupool-preload lacks $libdir/gpupool/libgpupool_preload.so"
lacks "$preload_files" "^$libdir/lib\|include/\|\.a$" "gpupool-preload holds library files"
for deb in "${debs[@]}"; do
  package=$(dpkg-deb --field "$deb" Package)
  for doc in copyright changelog.gz; do
    has "$(files "$deb")" "^/usr/share/doc/$package/$doc$" "$package lacks /usr/share/doc/$package/$doc"
  done
done

echo "=== check_package: lintian (any error or warning fails)"
lintian --fail-on error,warning --tag-display-limit 0 \
  "${debs[@]}" "${ddebs[@]}" || fail "lintian reported errors or warnings (above)"
echo "lintian: no error and no warning in ${#debs[@]} packages and ${#ddebs[@]} debug packages"

echo "=== check_package: the packages unpacked into a clean root + consumer"
root="$PWD/$build/deb_root"
debug_root="$PWD/$build/deb_debug_root"
rm -rf "$root" "$debug_root"
for deb in "${debs[@]}"; do dpkg -x "$deb" "$root"; done
for deb in "${ddebs[@]}"; do dpkg -x "$deb" "$debug_root"; done
consumer "$PWD/$build/deb_consumer" -DPREFIX="$root/usr" -DTESTING=ON
preload_needed "$root"
# Every shared object is stripped, and its debug information is in a -dbgsym
# package under its build ID.
shared_objects=$(find "$root" -name "*.so*" -type f)
[[ -n $shared_objects ]] || fail "no shared object in the packages"
for so in $shared_objects; do
  [[ $(file -b "$so") == *", stripped"* ]] || fail "$so is not stripped"
  id=$(readelf -n "$so" | sed -n 's/^ *Build ID: //p')
  debug="$debug_root/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
  [[ -n $id && -f $debug ]] || fail "no debug file for $so (build ID '$id')"
  has "$(readelf -S "$debug")" "\.debug_info" "$debug has no .debug_info"
done
echo "$(wc -w <<<"$shared_objects") shared objects stripped, each with its debug file"

echo "=== check_package: apt-get install into / + consumers with no prefix + purge"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
packages=()
for deb in "${debs[@]}" "${ddebs[@]}"; do
  packages+=("$(dpkg-deb --field "$deb" Package)")
done
status() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true; }
for package in "${packages[@]}"; do
  if [[ -n $(status "$package") && $(status "$package") != *" not-installed" ]]; then
    fail "$package is already installed here; purge it first (apt-get purge $package)"
  fi
done
purge() {
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get purge -y "${packages[@]}"
}
trap 'purge >/dev/null 2>&1 || true' EXIT
# Paths with a slash: apt installs these files, resolving their dependencies.
deb_paths=()
for deb in "${debs[@]}"; do deb_paths+=("$(realpath "$deb")"); done
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends \
  "${deb_paths[@]}"
# apt takes only .deb files: the debug packages through dpkg.
"${sudo_cmd[@]}" dpkg -i "${ddebs[@]}"
owned=$(dpkg-query -L "${packages[@]}" | sort -u)
# The trigger ran ldconfig: the loader's cache knows the library.
has "$(ldconfig -p)" "libgpupool\.so\.0 " "libgpupool.so.0 not in the ldconfig cache"
consumer "$PWD/$build/system_consumer" -DSYSTEM=ON -DTESTING=ON
# The preload from its installed path; $LIB is the loader's multiarch
# directory (lib/<multiarch> on Debian).
has "$(env LD_PRELOAD="/usr/\$LIB/gpupool/libgpupool_preload.so" cat /proc/self/maps)" \
  "$libdir/gpupool/libgpupool_preload.so" \
  "LD_PRELOAD=/usr/\$LIB/gpupool/libgpupool_preload.so did not load the preload"
# gdb finds the debug information of the installed library by its build ID.
so=$(readlink -f "$libdir/libgpupool.so.0")
id=$(readelf -n "$so" | sed -n 's/^ *Build ID: //p')
[[ -f /usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug ]] ||
  fail "no installed debug file for $so"
purge
trap - EXIT
for package in "${packages[@]}"; do
  if [[ -n $(status "$package") && $(status "$package") != *" not-installed" ]]; then
    fail "$package is still known to dpkg after purge: $(status "$package")"
  fi
done
left=()
while read -r path; do
  [[ -z $path || $path == "/." ]] && continue
  if [[ -L $path || (-e $path && ! -d $path) ]]; then
    left+=("$path")
  elif [[ -d $path ]] && ! dpkg-query -S "$path" >/dev/null 2>&1; then
    left+=("$path/")  # a directory of ours that no other package owns
  fi
done <<<"$owned"
((${#left[@]} == 0)) || fail "purge left: ${left[*]}"
lacks "$(ldconfig -p)" "libgpupool" "libgpupool still in the ldconfig cache after purge"
echo "installed, used and purged ${#packages[@]} packages: nothing of theirs is left"
echo "check_package: ok"
