#!/usr/bin/env bash
# The one CMake configuration of lockline's build directory, shared by README's two commands
# (ci/run_suite.sh, ci/test.sh) and ci/rehearse.sh, so they configure it alike and share it.
# Usage: bash ci/configure.sh BUILD_DIR   (from the source tree's root)
# A new build directory uses Ninja when it is installed: it compiles the families while the
# harness library is still compiling, where Make finishes one target before starting the next
# (issue 28: the first build). An existing build directory keeps its generator.
set -euo pipefail
build=${1:?usage: ci/configure.sh BUILD_DIR}
gen=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
exec cmake -S . -B "$build" "${gen[@]}" -DLOCKLINE_WERROR=ON -DLOCKLINE_BUILD_TESTS=ON
