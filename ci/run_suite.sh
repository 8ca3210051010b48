#!/usr/bin/env bash
# README's main command: installs whatever is missing, builds, runs lockline's default suite on this
# machine and leaves a run directory with lockline.json, plots/ and report.html.
# Extra arguments go to lockline (e.g. --quick, --full, --budget=20m, --benchmark_filter=zone_lock,
# --runs=3: three independent runs, each the whole budget; the default is one run, ~4 minutes).
# A run directory is written even when some points fail; the exit status is lockline's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install_deps.sh
build=${LOCKLINE_BUILD_DIR:-build}
# ci/test.sh's configuration, so the two README commands share one build; only lockline here.
bash ci/configure.sh "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target lockline
out="results/$(hostname)-$(date -u +%Y%m%dT%H%M%SZ)"
calibrate_only=0
for arg in "$@"; do
  case "$arg" in
    --out=*) out=${arg#--out=} ;;
    --calibrate-only) calibrate_only=1 ;;
  esac
done
rc=0
"$build/lockline" --out="$out" "$@" || rc=$?
if [[ $calibrate_only == 1 ]]; then
  # A calibration run is an input to `lockline predict --target=`: no plots or report.
  echo "lockline: run directory $out (calibration rows for lockline predict --target=$out)"
elif [[ -f "$out/lockline.json" ]]; then
  /usr/bin/python3 plots/plot.py "$out" -o "$out/plots"
  /usr/bin/python3 plots/report.py "$out"
  echo "lockline: run directory $out (report: $out/report.html)"
elif [[ -f "$out/runs.json" ]]; then
  # --runs=N: N whole runs in $out/run-K; lockline already wrote $out/verdicts.json (each verdict
  # over all runs and in how many it held: plots/reproduce.py). Each run gets its plots and report.
  for run in "$out"/run-*/; do
    run=${run%/}
    [[ -f "$run/lockline.json" ]] || continue
    /usr/bin/python3 plots/plot.py "$run" -o "$run/plots"
    /usr/bin/python3 plots/report.py "$run"
  done
  echo "lockline: run directory $out ($out/verdicts.json over every run; reports: $out/run-*/report.html)"
fi
exit "$rc"
