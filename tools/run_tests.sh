#!/usr/bin/env bash
# The README's test command: installs missing dependencies, then configures,
# builds and runs the whole test suite (CTest) with the `default` preset.
# GPU suites (cuda, hip) skip with the runtime's reason when no device exists.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
cmake --workflow --preset default
# The fault-injection matrix prints its coverage into the test log; show it
# (and fail if the matrix did not run).
grep -a -h "fault matrix coverage" build/default/Testing/Temporary/LastTest.log
