#!/usr/bin/env bash
# The one CMake configuration of lockline's build directory, shared by README's two commands
# (ci/run_suite.sh, ci/test.sh) and ci/rehearse.sh, so they configure it alike and share it.
# Usage: bash ci/configure.sh BUILD_DIR [--werror]   (from the source tree's root)
# A new build directory uses Ninja when it is installed: it compiles the families while the
# harness library is still compiling, where Make finishes one target before starting the next
# (a faster first build). An existing build directory keeps its generator, and its own
# LOCKLINE_WERROR and CMAKE_BUILD_TYPE unless --werror is given (ci/test.sh: the tests build
# warning-free): a user's Release build that warns must still build for ci/run_suite.sh.
set -euo pipefail
build=${1:?usage: ci/configure.sh BUILD_DIR [--werror]}
werror=${2:-}
gen=()
flags=(-DLOCKLINE_BUILD_TESTS=ON)
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  if command -v ninja >/dev/null; then gen=(-G Ninja); fi
  flags+=(-DLOCKLINE_WERROR=ON)
elif [[ "$werror" == --werror ]]; then
  flags+=(-DLOCKLINE_WERROR=ON)
fi
exec cmake -S . -B "$build" "${gen[@]}" "${flags[@]}"
