#!/usr/bin/env bash
# README's test command (and what .ci/run calls): installs whatever is missing, builds warning-free
# (-Werror), then runs every test through ctest (unit, validation, ThreadSanitizer lock tests, the
# aarch64 compile check, smoke runs of every family, the Python tests). Then the 4s4n rehearsal
# (ci/rehearse.sh: lockline in an emulated 4-socket 4-node QEMU guest) and its checks
# (tests/python/test_rehearsal.py); LOCKLINE_REHEARSAL=0 skips it. Exit status: ctest's, or the
# rehearsal's when ctest passed (a guest that never boots is reported as not run).
set -euo pipefail
cd "$(dirname "$0")/.."
rehearsal=${LOCKLINE_REHEARSAL:-1}
LOCKLINE_WITH_TEST_EXTRAS=1 LOCKLINE_WITH_REHEARSAL=$rehearsal bash ci/install_deps.sh
build=${LOCKLINE_BUILD_DIR:-build}
jobs=$(nproc)
bash ci/configure.sh "$build" --werror
cmake --build "$build" -j"$jobs"
status=0
ctest --test-dir "$build" --output-on-failure --timeout 900 -j"$jobs" || status=$?
# The rehearsal runs after ctest, not beside the parallel tests: its 16 TCG vCPU threads and they
# would take the 2 host CPUs from each other, making its wall time unpredictable against its cap.
# Alone it adds 2-3 minutes (at most 12: the timeout below), keeping CI under 15 minutes.
if [[ "$rehearsal" == 1 ]]; then
  out="$build/rehearsal-4s4n-$(date -u +%Y%m%dT%H%M%SZ)"
  rstatus=0
  BUILD="$build" OUT="$out" REHEARSAL_CAP=${REHEARSAL_CAP:-240} \
    timeout 720 bash ci/rehearse.sh 4s4n || rstatus=$?
  if ((rstatus == 3)); then
    # QEMU or the host failed before lockline ran: like a test whose capability is missing,
    # not run; any failure once the guest is up fails CI.
    echo "ci/test.sh: rehearsal NOT RUN: the emulated 4s4n guest did not boot (see above)" >&2
    rstatus=0
  elif ((rstatus == 0)); then
    LOCKLINE_REHEARSAL_DIR="$out" timeout 300 /usr/bin/python3 -m pytest -q -p no:cacheprovider \
      tests/python/test_rehearsal.py || rstatus=$?
  fi
  ((status != 0)) || status=$rstatus
fi
exit "$status"
