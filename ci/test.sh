#!/usr/bin/env bash
# README's test command (and what .ci/run calls): installs whatever is missing, builds warning-free
# (-Werror), then runs every test through ctest: unit and validation tests, the ThreadSanitizer lock
# tests, the aarch64 compile check, smoke runs of every family, and the Python tests (plots,
# report, regression check). Exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCKLINE_WITH_TEST_EXTRAS=1 bash ci/install_deps.sh
build=${LOCKLINE_BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build" -DLOCKLINE_WERROR=ON -DLOCKLINE_BUILD_TESTS=ON
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" --output-on-failure --timeout 900 -j"$jobs"
