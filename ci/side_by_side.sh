#!/usr/bin/env bash
# Side by side: lockline's real-kernel fault rows against will-it-scale's page_fault1
# (ci/page_fault1.c: will-it-scale is not packaged), interleaved in one session: each round runs
# page_fault1, the kernel_lru / kernel_zone / fault rows of each tasks shape at 1 and 2 tasks,
# then page_fault1 again, and divides each lockline rate by the mean of the two (kernel_zone: by
# page_fault1 mapping its own batch). Prints per row the median ratio over rounds, its range and
# the evidence windows' cost (docs/kernel-ab.md). Not a unit test: it measures, for minutes.
#
# Usage: ci/side_by_side.sh [OPTION=VALUE...]
#   --rounds    interleaved rounds (default 3)
#   --seconds   page_fault1's measured interval per run (default 3)
#   --window    lockline's window (default 1s; 2 repetitions per row)
#   --lockline  the binary (default build/lockline of this tree)
#   --keep      keep the run directories and raw results under DIR
#   --families  comma-separated subset of kernel_lru,kernel_zone,fault
# Needs: cc, /usr/bin/python3, a built lockline; root for the kernel evidence (not the rates).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=3
seconds=3
window=1s
lockline="$root/build/lockline"
keep=""
families="kernel_lru,kernel_zone,fault"
for a in "$@"; do
  case "$a" in
    --rounds=*) rounds=${a#*=} ;;
    --seconds=*) seconds=${a#*=} ;;
    --window=*) window=${a#*=} ;;
    --lockline=*) lockline=${a#*=} ;;
    --keep=*) keep=${a#*=} ;;
    --families=*) families=${a#*=} ;;
    *)
      echo "side_by_side.sh: error: unknown argument '$a' (accepted: --rounds=N," \
        "--seconds=S, --window=DURATION, --lockline=PATH, --keep=DIR, --families=LIST)" >&2
      exit 2
      ;;
  esac
done
for opt in rounds seconds; do
  [[ "${!opt}" =~ ^[1-9][0-9]?$ ]] || {
    echo "side_by_side.sh: error: --$opt=${!opt}: expected 1-99" >&2
    exit 2
  }
done
[[ -x "$lockline" ]] || {
  echo "side_by_side.sh: error: no lockline binary at $lockline (build it, or --lockline=PATH)" >&2
  exit 2
}

if [[ -n "$keep" ]]; then
  mkdir -p "$keep"
  work=$(cd "$keep" && pwd)
else
  work=$(mktemp -d /tmp/lockline-side-by-side.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi

cc -O2 -Wall -Wextra -pthread -o "$work/page_fault1" "$here/page_fault1.c"
nohuge=""
if grep -q '\[always\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then
  nohuge="-n"  # lockline's loops use MADV_NOHUGEPAGE; match them
fi

raw="$work/raw.tsv"
unmeasured=0
: >"$raw"
pf1() {  # mode tasks [pages] -> "pages/s,pages/CPU-s"
  "$work/page_fault1" -t "$2" -m "$1" -s "$seconds" $nohuge ${3:+-p "$3"} |
    sed -n 's/^pages_per_s=\([0-9.]*\).*pages_per_cpu_s=\([0-9.]*\).*/\1,\2/p'
}

# kernel_zone maps 2 x pcp high_max per batch: page_fault1 maps as many (-p) for its rows, the
# size read from one short kernel_zone point's batch_pages.
zone_pages=""
if [[ ",$families," == *,kernel_zone,* ]]; then
  "$lockline" --full --threads=1 --window=0.05s --benchmark_repetitions=1 \
    --benchmark_filter='^kernel_zone/batch:2xhigh/high_fraction:default/tasks:threads/threads:1$' \
    --out="$work/zone-size" >"$work/zone-size.log" 2>&1 || true
  zone_pages=$(/usr/bin/python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from lockline_results import read_document
for b in read_document(sys.argv[2])["benchmarks"]:
    if b.get("batch_pages"):
        print(int(b["batch_pages"])); break' "$root/plots" "$work/zone-size/lockline.json" \
    2>/dev/null || true)
  [[ -n "$zone_pages" ]] || {
    echo "side_by_side.sh: error: could not read kernel_zone's batch_pages" \
      "(see $work/zone-size.log)" >&2
    exit 1
  }
  echo "side_by_side.sh: kernel_zone maps $zone_pages pages per batch;" \
    "its page_fault1 runs map as many" >&2
fi

for round in $(seq 1 "$rounds"); do
  for mode in threads processes; do
    for n in 1 2; do
      before=$(pf1 "$mode" "$n")
      zbefore=""
      [[ -n "$zone_pages" ]] && zbefore=$(pf1 "$mode" "$n" "$zone_pages")
      out="$work/r${round}-${mode}-${n}"
      rm -rf "$out"
      # kernel_zone's processes point and kernel_lru's are in the full suite.
      alts=()
      [[ ",$families," == *,kernel_lru,* ]] &&
        alts+=("kernel_lru/case:anon_fault/file:none/pages:32768/tasks:${mode}")
      [[ ",$families," == *,kernel_zone,* ]] &&
        alts+=("kernel_zone/batch:2xhigh/high_fraction:default/tasks:${mode}")
      # fault: the default suite's 128 MiB, page_fault1's MEMSIZE.
      [[ ",$families," == *,fault,* ]] &&
        alts+=("fault/mode:plain/tasks:${mode}/start:warm/mb:128")
      ((${#alts[@]})) || {
        echo "side_by_side.sh: error: --families=$families: expected a subset of kernel_lru,kernel_zone,fault" >&2
        exit 2
      }
      filter="^($(IFS='|'; echo "${alts[*]}"))/threads:${n}$"
      "$lockline" --full --threads=1,2 --window="$window" \
        --benchmark_repetitions=2 --benchmark_filter="$filter" \
        --out="$out" >"$out.log" 2>&1 || {
        status=$?
        # Exit 1 with a result file: some rows are errors (e.g. sysctl.lock held), the others
        # measured: say which, keep the rest for the table; anything else ends the script.
        if [[ $status -ne 1 || ! -s "$out/lockline.json" ]]; then
          echo "side_by_side.sh: lockline failed (round $round, $mode, $n):" >&2
          tail -5 "$out.log" >&2
          exit 1
        fi
        unmeasured=1
        echo "side_by_side.sh: round $round, $mode, $n: rows not measured (the table has the" \
          "others):" >&2
        /usr/bin/python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from lockline_results import read_document
for b in read_document(sys.argv[2])["benchmarks"]:
    if b.get("error_occurred"):
        print("  " + b["name"] + ": " + str(b.get("error_message", "")))' "$root/plots" \
          "$out/lockline.json" >&2 || true
      }
      after=$(pf1 "$mode" "$n")
      zafter=""
      [[ -n "$zone_pages" ]] && zafter=$(pf1 "$mode" "$n" "$zone_pages")
      echo -e "$round\t$mode\t$n\t$before\t$after\t$out/lockline.json\t$zbefore\t$zafter" >>"$raw"
    done
  done
done

/usr/bin/python3 - "$raw" "$root/plots" <<'PY'
import statistics, sys
sys.path.insert(0, sys.argv[2])
from lockline_results import read_document  # the one reader of result files

rows = {}
CPU_METRIC = {"fault": "faults_per_cpu_s", "kernel_lru": "ops_per_cpu_s",
              "kernel_zone": "ops_per_cpu_s"}


def wall_cpu(pair):
    """page_fault1's "pages/s,pages/CPU-s" (an older build printed pages/s alone)."""
    wall, _, cpu = pair.partition(",")
    return float(wall), float(cpu) if cpu else None


def mean2(x, y):
    return (x + y) / 2 if x is not None and y is not None else None


for line in open(sys.argv[1]):
    rnd, mode, n, before, after, path, zbefore, zafter = line.rstrip("\n").split("\t")
    (bw, bc), (aw, ac) = wall_cpu(before), wall_cpu(after)
    pf128, pf128cpu = (bw + aw) / 2, mean2(bc, ac)
    pfzone = pfzonecpu = None
    if zbefore and zafter:
        (zbw, zbc), (zaw, zac) = wall_cpu(zbefore), wall_cpu(zafter)
        pfzone, pfzonecpu = (zbw + zaw) / 2, mean2(zbc, zac)
    res = read_document(path)
    per_key = {}
    for b in res["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration" or b.get("error_message"):
            continue
        fam = b.get("family", b["name"].split("/")[0])
        rate = (b.get("pages_per_s_as_page_fault1") or b.get("pages_per_wall_s")
                if fam == "fault" else b.get("ops_per_s"))
        if not rate:
            continue
        e = b.get("evidence_throughput_ratio")
        per_key.setdefault(fam, []).append((rate, e, b.get(CPU_METRIC.get(fam, ""))))
    for fam, vals in per_key.items():
        rate = statistics.mean(v[0] for v in vals)
        evs = [v[1] for v in vals if v[1]]
        cpus = [v[2] for v in vals if v[2]]
        zone = fam == "kernel_zone" and pfzone
        pf = pfzone if zone else pf128
        pfcpu = pfzonecpu if zone else pf128cpu
        cpu_ratio = statistics.mean(cpus) / pfcpu if cpus and pfcpu else None
        rows.setdefault((fam, mode, int(n)), []).append(
            (rate, pf, rate / pf, statistics.mean(evs) if evs else None, cpu_ratio))

print("lockline vs page_fault1 (ci/page_fault1.c), interleaved; ratio = lockline / "
      "mean(page_fault1 before, after)")
print(f"{'family':<12}{'tasks':<11}{'n':>2}  {'lockline/s':>11}  {'pf1/s':>9}  "
      f"{'ratio med':>9}  {'range':>13}  {'per CPU-s':>9}  {'range':>13}  {'evidence':>9}  "
      "rounds")
for key in sorted(rows):
    fam, mode, n = key
    v = rows[key]
    ratios = [x[2] for x in v]
    evs = [x[3] for x in v if x[3]]
    ev = f"{statistics.median(evs):.2f}x" if evs else "-"
    cpu = [x[4] for x in v if x[4]]
    cpu_med = f"{statistics.median(cpu):.2f}x" if cpu else "-"
    cpu_rng = f"{min(cpu):.2f}-{max(cpu):.2f}x" if cpu else "-"
    print(f"{fam:<12}{mode:<11}{n:>2}  {statistics.median(x[0] for x in v):>11.0f}  "
          f"{statistics.median(x[1] for x in v):>9.0f}  {statistics.median(ratios):>8.2f}x  "
          f"{min(ratios):>5.2f}-{max(ratios):<5.2f}x  {cpu_med:>9}  {cpu_rng:>13}  {ev:>9}  "
          f"{len(v)}")
print("kernel_zone is divided by page_fault1 mapping kernel_zone's batch (2 x pcp high_max) "
      "instead of 128 MiB")
print("evidence = the evidence windows' throughput over the timed windows' (same "
      "repetition); the timed windows carry no tracepoint and no sampling")
print("per CPU-s = the same ratio per CPU-second of the tasks (lockline's ops_per_cpu_s or "
      "faults_per_cpu_s, getrusage; page_fault1's pages_per_cpu_s, the tasks' thread CPU "
      "clocks): what a loaded machine's CPU share does not change")
PY
if ((unmeasured)); then
  echo "side_by_side.sh: some rows were not measured (said above); the table lacks them" >&2
  exit 1
fi
