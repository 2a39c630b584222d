#!/usr/bin/env bash
# Debian's Abseil rebuilt with -fsanitize=thread (see tools/build_abseil.sh).
# Usage: tools/build_tsan_abseil.sh [prefix]
exec "$(dirname "$0")/build_abseil.sh" tsan "$@"
