#!/usr/bin/env bash
# Builds Debian's own Abseil source, static and position-independent, in one
# of two flavours:
#   tsan  with -fsanitize=thread, installed into a prefix that the `tsan`
#         CMake preset puts first on CMAKE_PREFIX_PATH (tools/build_tsan_abseil.sh);
#   pic   plain, hidden visibility, only the libraries gpupool uses, left in
#         the build tree: the private Abseil that libgpupool_preload.so links
#         (GPUPOOL_PRELOAD_ABSEIL_DIR), since Debian's own libabsl_*.a are
#         not position-independent and cannot go into a shared object.
#
# Why tsan:
# Why: Debian's prebuilt libabsl is not TSan-instrumented, so TSan cannot see
# the happens-before edges inside absl::Mutex and reports a false race on every
# field an absl::Mutex guards. Rebuilding the very same source (same version,
# same Debian patches, so the same absl/base/options.h: absl::string_view
# distinct from std::string_view, inline namespace "debian3") with TSan fixes
# that without changing a single type our code sees.
#
# Usage: tools/build_abseil.sh tsan|pic [prefix]
#   prefix    default: build/_deps/absl-tsan (what CMakePresets.json expects)
#             or build/_deps/absl-pic
# Environment:
#   GPUPOOL_ABSEIL_SOURCE_CACHE  a directory holding abseil_<version>.dsc and
#                                its tarballs (skips the download)
#   CXX                          compiler (default g++, as the tsan preset)
#   JOBS                         parallel jobs (default: nproc)
# The result is cached: a second run with the same Debian version is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

flavour=${1:?usage: tools/build_abseil.sh tsan|pic [prefix]}
case $flavour in
  tsan | pic) ;;
  *) echo "build_abseil: unknown flavour $flavour (tsan or pic)" >&2; exit 2 ;;
esac
prefix=${2:-build/_deps/absl-$flavour}
deps=build/_deps
jobs=${JOBS:-$(nproc)}
cxx=${CXX:-g++}
mkdir -p "$deps"
prefix=$(realpath -m "$prefix")
deps=$(realpath "$deps")

version=$(dpkg-query -W -f='${Version}' libabsl-dev)
upstream=${version%-*}  # 20220623.1-1+deb12u2 -> 20220623.1
stamp="$prefix/.gpupool-$flavour-abseil"
if [[ -f $stamp && $(cat "$stamp") == "$version $cxx" ]]; then
  echo "$flavour abseil: $version already in $prefix"
  exit 0
fi
start=$(date +%s)

# --- 1. Debian's source package, patches applied ------------------------------
src="$deps/abseil-$upstream"
if [[ ! -f $src/.gpupool-extracted ]]; then
  rm -rf "$src" "$deps/abseil-src-download"
  mkdir -p "$deps/abseil-src-download"
  dsc="abseil_${version#*:}.dsc"
  if [[ -n ${GPUPOOL_ABSEIL_SOURCE_CACHE:-} &&
        -f $GPUPOOL_ABSEIL_SOURCE_CACHE/$dsc ]]; then
    cp "$GPUPOOL_ABSEIL_SOURCE_CACHE"/abseil_* "$deps/abseil-src-download/"
  else
    # apt-get source needs a deb-src entry; add Debian's own if none exists.
    if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list \
         /etc/apt/sources.list.d/; then
      sudo_cmd=()
      if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
      codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
      printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' \
        "Suites: $codename $codename-updates" 'Components: main' \
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' '' \
        'Types: deb-src' 'URIs: http://deb.debian.org/debian-security' \
        "Suites: $codename-security" 'Components: main' \
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
        "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/gpupool-deb-src.sources \
          >/dev/null
      "${sudo_cmd[@]}" apt-get update
    fi
    (cd "$deps/abseil-src-download" &&
       apt-get source --download-only "abseil=$version")
  fi
  # dpkg-source applies debian/patches (options.h, SONAME, CVE fixes).
  dpkg-source --no-check -x "$deps/abseil-src-download/$dsc" "$src"
  touch "$src/.gpupool-extracted"
fi

# --- 2. Build -------------------------------------------------------------------
if [[ $flavour == pic ]]; then
  # The libraries libgpupool_preload.so needs (gpupool_base's Abseil and what
  # they pull in), left in the build tree: the preload finds each
  # libabsl_<name>.a under the prefix.
  cmake -S "$src" -B "$prefix" -G Ninja \
    -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON \
    -DCMAKE_CXX_VISIBILITY_PRESET=hidden -DCMAKE_VISIBILITY_INLINES_HIDDEN=ON \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF \
    -DBUILD_TESTING=OFF -DABSL_BUILD_TESTING=OFF >/dev/null
  cmake --build "$prefix" -j "$jobs" --target status statusor \
    strings str_format_internal synchronization time hash raw_hash_set cord
  if ! diff -q /usr/include/absl/base/options.h \
         "$src/absl/base/options.h" >/dev/null; then
    echo "pic abseil: options.h differs from Debian's /usr/include copy" >&2
    exit 1
  fi
  echo "$version $cxx" >"$stamp"
  echo "pic abseil: $version built with $cxx into $prefix" \
       "in $(($(date +%s) - start)) s"
  exit 0
fi

# --- 2. Build with TSan and install --------------------------------------------
# Everything a TSan-built gpupool links must be instrumented; the library set
# is small enough that building all of it is simpler than picking targets
# (an install needs every target anyway). Tests off: they need GoogleTest
# sources and double the build time.
build="$deps/abseil-tsan-build"
cmake -S "$src" -B "$build" -G Ninja \
  -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF \
  -DBUILD_TESTING=OFF -DABSL_BUILD_TESTING=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build "$build" -j "$jobs"
rm -rf "$prefix"
cmake --install "$build" >/dev/null

# --- 3. Same configuration as the system headers ------------------------------
# Our code is compiled against whichever absl/base/options.h comes first; a
# mismatch (e.g. string_view aliasing std::string_view) would change types.
if ! diff -q /usr/include/absl/base/options.h \
       "$prefix/include/absl/base/options.h" >/dev/null; then
  echo "tsan abseil: options.h differs from Debian's /usr/include copy:" >&2
  diff /usr/include/absl/base/options.h \
    "$prefix/include/absl/base/options.h" >&2 || true
  exit 1
fi
echo "$version $cxx" >"$stamp"
echo "tsan abseil: $version built with $cxx -fsanitize=thread into $prefix" \
     "in $(($(date +%s) - start)) s"
