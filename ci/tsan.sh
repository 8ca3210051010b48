#!/usr/bin/env bash
# ThreadSanitizer over the whole binary (families included): the duet points and a
# --duet-with run (this build against itself), tiny windows, nothing timed. Exit 1 on any
# report. Not run by ci/test.sh: the TSan build takes ~14 min on 2 busy vCPUs (ccache helps).
# Usage: ci/tsan.sh [BUILD_DIR (default build-tsan)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-tsan}
cmake -S . -B "$build" -DLOCKLINE_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
cmake --build "$build" -j2 --target lockline
work=$(mktemp -d /tmp/lockline-tsan.XXXXXX)
bin="$PWD/$build/lockline"
export TSAN_OPTIONS="log_path=$work/tsan halt_on_error=0"
"$bin" --window=2ms --benchmark_repetitions=1 --events=none --out="$work/duet" \
  '--benchmark_filter=^duet/' >"$work/duet.log" 2>&1 || true
"$bin" --duet-with="$bin" --window=2ms --benchmark_repetitions=1 --events=none \
  --out="$work/with" '--benchmark_filter=^locks/lock:ticket/cs:0/stats:off/threads:2$' \
  >"$work/with.log" 2>&1 || true
reports=$(cat "$work"/tsan.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
echo "tsan.sh: $reports report(s); logs in $work"
[[ $reports -eq 0 ]]
