#!/usr/bin/env bash
# Regression gate: run lockline's quick suite with enough repetitions for the Holm-corrected
# Mann-Whitney test to decide, compare with this machine's baseline, print the table, and exit
# with ci/compare.py's status (0 every row decided and no regression, 1 regression, 2 bad or
# incomparable input, 3 undecided rows: rerun with the repetitions it names; with --against,
# up to 10 % of the rows undecided still exit 0: compare.py --builds --max-undecided).
#
# Usage: ci/regression.sh [--update-baseline | --against=OLD_BINARY] [-- COMPARE_OPTIONS...]
#   --update-baseline   store this run as the baseline (replacing any) instead of gating; exit 0
#   --against=OLD_BINARY  no baseline file: run the quick suite as a build duet with an earlier
#                       lockline build (lockline --duet-with: the two builds' windows alternate on
#                       the same PUs) and answer each row from its window pairs
#                       (ci/compare.py --builds); for shared or noisy machines (ci/REGRESSION.md).
#                       Each pass has two arms, the second with the roles swapped (OLD
#                       --duet-with=this build, in OUT/swapped): OLD must take --duet-with too
#   after --             options passed to ci/compare.py (--min-effect, --override, ...)
# Environment (all optional):
#   BUILD     build directory holding the lockline binary     (default: build)
#   LOCKLINE  the binary                                      (default: $BUILD/lockline)
#   BASELINE  baseline result file  (default: results/baselines/quick-$(hostname -s).json)
#   REPS      repetitions per point; 9 lets up to 1215 rows reach alpha 0.05 under Holm; on a VM
#             whose coherence regime flips use 15+ (half land in each regime)  (default: 9;
#             with --against 10: each repetition holds 12 window pairs and is the unit, and
#             each regime of a 2-thread row needs 3 of them)
#   FILTER    --benchmark_filter regex ('-REGEX': all but), also the compared subset
#             (default: whole quick suite; with --against all but zeroing, MCS cs:0 and
#             page_free fastpath (UNPAIRED below), said in the output)
#   MORE_S    with --against: seconds the later rounds may take, which give the rows still
#             undecided more repetitions (compare.py --builds --next-round; default 120, 0: none)
#   OUT       run directory                               (default: $BUILD/regression-<date>)
#   LOCKLINE_ARGS  extra lockline flags, e.g. "--budget=5m --pin=cores" (word-split)
# Writes OUT/lockline.json and OUT/swapped/ (later rounds: OUT/round-K/), OUT/compare.txt,
# OUT/compare.md (for a CI comment), OUT/compare.json.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
update=0
against=""
compare_args=()
while (($#)); do
  case "$1" in
    --update-baseline) update=1 ;;
    --against=*) against=${1#--against=}
      if [[ -z "$against" || ! -f "$against" || ! -x "$against" ]]; then
        echo "regression.sh: error: --against='$against' is not an executable file;" \
             "accepted: the path of an earlier lockline binary" >&2
        exit 2
      fi ;;
    --) shift; compare_args=("$@"); break ;;
    -h|--help) sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "regression.sh: unknown argument '$1' (accepted: --update-baseline," \
            "--against=OLD_BINARY, -- OPTIONS)" >&2
       exit 2 ;;
  esac
  shift
done

if ((update)) && [[ -n "$against" ]]; then
  echo "regression.sh: error: --update-baseline and --against exclude each other (a build" \
       "duet needs no baseline file)" >&2
  exit 2
fi
BUILD=${BUILD:-$root/build}
LOCKLINE=${LOCKLINE:-$BUILD/lockline}
BASELINE=${BASELINE:-$root/results/baselines/quick-$(hostname -s).json}
if [[ -n "$against" ]]; then REPS=${REPS:-10}; else REPS=${REPS:-9}; fi
# Rows whose two processes differ whatever the duet does leave the duet's default rows
# (ci/REGRESSION.md); FILTER= (any FILTER) gates them again. zeroing: a memset of fresh pages,
# each process its own. MCS at cs:0: each process carries one offset for its whole life (its
# threads' nodes and lock line on its own pages), -12 to +39 % in role-swapped A/A duets.
# page_free fastpath: an offset that holds for a whole gate run, both arms and later rounds,
# and changes from run to run (-2.0 to +5.6 % on its 1-thread row in ten filtered runs): every
# false flag of the 40 crossover runs of 2026-12-07 was one of these rows.
UNPAIRED='^(zeroing/|locks/lock:mcs/cs:0/|page_free/variant:fastpath/)'
left_out=""
if [[ -n "$against" && -z "${FILTER+set}" ]]; then
  FILTER="-$UNPAIRED"
  left_out="rows ^zeroing/ left out of the gate's rows: a memset of fresh pages, whose"
  left_out+=" physical pages differ between the two builds' processes; rows ^locks/lock:mcs/cs:0/"
  left_out+=" too: a per-process offset of -12 to +39 % between two copies of one build; and"
  left_out+=" rows ^page_free/variant:fastpath/: a run-level offset of up to 5.6 % between the"
  left_out+=" two builds' processes that pairing and crossing do not cancel (set FILTER to choose)"
fi
FILTER=${FILTER:-}
MORE_S=${MORE_S:-120}
OUT=${OUT:-$BUILD/regression-$(date -u +%Y%m%dT%H%M%SZ)}
PYTHON=/usr/bin/python3   # Debian's interpreter: it sees python3-numpy/scipy

if [[ ! -x "$LOCKLINE" ]]; then
  echo "regression.sh: no lockline binary at $LOCKLINE (build it, or set BUILD or LOCKLINE)" >&2
  exit 2
fi
if ! [[ "$MORE_S" =~ ^[0-9]+$ ]]; then
  echo "regression.sh: MORE_S='$MORE_S' is not a number of seconds" >&2
  exit 2
fi
if ! [[ "$REPS" =~ ^[0-9]+$ ]] || ((REPS < 1)); then
  echo "regression.sh: REPS='$REPS' is not a positive integer" >&2
  exit 2
fi
if ((REPS < 9)) && [[ -z "$FILTER" && -z "$against" ]]; then
  echo "regression.sh: warning: REPS=$REPS; the whole quick suite needs about 9 for the" \
       "corrected alpha to be reachable (rows will be undecided: exit 3)" >&2
fi

# compare_and_exit AGAINST NOTE HINT COMPARE_COMMAND...: writes OUT/compare.{md,json,txt}; the
# table's status is the script's exit status.
compare_and_exit() {
  local against=$1 note=$2 hint=$3
  shift 3
  "$@" --format markdown --output "$OUT/compare.md" >/dev/null 2>&1 || true
  "$@" --format json --output "$OUT/compare.json" >/dev/null 2>&1 || true
  local status=0
  "$@" --format table --output "$OUT/compare.txt" || status=$?
  if [[ -n "$left_out" ]]; then
    echo "regression.sh: $left_out"
    echo "- note: $left_out" >>"$OUT/compare.md"
  fi
  case $status in
    0) echo "regression.sh: no regression against $against$note" ;;
    1) echo "regression.sh: REGRESSION against $against (see the table above)" ;;
    3) echo "regression.sh: UNDECIDED rows against $against: rerun with more repetitions" \
            "(REPS=...$hint) or pass -- --allow-undecided" ;;
    *) echo "regression.sh: the comparison could not be made (exit $status)" ;;
  esac
  exit "$status"
}

# FILTER is lockline's --benchmark_filter syntax (a leading '-': every point but those matching
# the rest), which compare.py --filter reads the same way: refused before the run when it is not.
filter_args=()
if [[ -n "$FILTER" ]]; then
  filter_args=("--filter=$FILTER")
  if ! error=$("$PYTHON" "$root/ci/compare.py" --check-filter="$FILTER" 2>&1); then
    echo "regression.sh: error: FILTER='$FILTER': ${error#compare.py: error: }" >&2
    exit 2
  fi
fi
run=("$LOCKLINE" --quick "--benchmark_repetitions=$REPS" "--out=$OUT")
[[ -n "$FILTER" ]] && run+=("--benchmark_filter=$FILTER")
if [[ -z "$against" ]]; then
  # shellcheck disable=SC2206  # word splitting of LOCKLINE_ARGS is the point
  [[ -n "${LOCKLINE_ARGS:-}" ]] && run+=(${LOCKLINE_ARGS})
  echo "regression.sh: ${run[*]}"
fi
if [[ -n "$against" ]]; then
  # A crossover (ci/REGRESSION.md "Roles"): the duet's two processes do not play alike (one
  # measures and serves the run, the other answers its windows), which read as offsets of up
  # to 1.5 % in A/A duets. So each pass is two arms: this build measuring with the old one
  # serving (OUT, REPS rounded up), then the old build measuring with this one serving
  # (OUT/swapped, the rest); compare.py turns the second arm's pairs round.
  new_bin=$(realpath "$LOCKLINE")
  old_bin=$(realpath "$against")
  # run_arm OWN OTHER REPS DIR [LOCKLINE FLAGS...]: OWN measuring with OTHER serving, its output
  # appended to $LOG (else on stderr); 0 when DIR/lockline.json was written.
  run_arm() {
    local own=$1 other=$2 reps=$3 dir=$4 rc=0
    shift 4
    local arm=("$own" --quick "--benchmark_repetitions=$reps" "--out=$dir"
               "--duet-with=$other" "$@")
    # shellcheck disable=SC2206  # word splitting of LOCKLINE_ARGS is the point
    [[ -n "${LOCKLINE_ARGS:-}" ]] && arm+=(${LOCKLINE_ARGS})
    echo "regression.sh: ${arm[*]}" >&2
    if [[ -n "${LOG:-}" ]]; then
      "${arm[@]}" >>"$LOG" 2>&1 || rc=$?
    else
      "${arm[@]}" >&2 || rc=$?
    fi
    # 2: refused before anything was created (another schema or suite); 1 (rows with errors)
    # is answered per row ("broken").
    arm_rc=$rc
    ((rc != 2)) && [[ -s "$dir/lockline.json" ]]
  }
  # duet_pass DIR REPS [LOCKLINE FLAGS...]: one pass, both arms; "DIR" or "DIR,DIR/swapped" on
  # stdout, nothing when the first arm wrote no results.
  duet_pass() {
    local dir=$1 reps=$2
    shift 2
    local first=$(((reps + 1) / 2)) second=$((reps / 2))
    if ! run_arm "$new_bin" "$old_bin" "$first" "$dir" "$@"; then
      echo "regression.sh: the build duet did not run (lockline exit $arm_rc)" >&2
      return 0
    fi
    local out=$dir
    if ((second > 0)); then
      echo "regression.sh: roles swapped:" >&2
      if run_arm "$old_bin" "$new_bin" "$second" "$dir/swapped" "$@"; then
        out+=",$dir/swapped"
      else
        echo "regression.sh: warning: the old build could not measure with this one serving" \
             "(exit $arm_rc): this pass is $first repetitions of one arm, roles not crossed" >&2
      fi
    fi
    echo "$out"
  }
  filter_flag=()
  [[ -n "$FILTER" ]] && filter_flag=("--benchmark_filter=$FILTER")
  runs=$(duet_pass "$OUT" "$REPS" ${filter_flag[@]+"${filter_flag[@]}"})
  [[ -n "$runs" ]] || exit 2
  # Later rounds (compare.py --next-round): the rows still undecided get more repetitions in new
  # processes, both arms again, while MORE_S seconds last; the answer pools every round.
  deadline=$((SECONDS + MORE_S))
  for round in 2 3 4; do
    plan=$("$PYTHON" "$root/ci/compare.py" --builds "$runs" --next-round=$((deadline - SECONDS)) \
      ${filter_args[@]+"${filter_args[@]}"} ${compare_args[@]+"${compare_args[@]}"} \
      2>/dev/null) || break
    read -r reps window filter <<<"$plan"
    [[ -n "${filter:-}" ]] || break
    rows=$(tr -cd '|' <<<"$filter" | wc -c)
    echo "regression.sh: round $round: $((rows + 1)) row(s) still undecided: $reps more" \
         "repetitions each, $window windows"
    more=$(LOG="$OUT/round-$round.log" duet_pass "$OUT/round-$round" "$reps" \
           "--window=$window" "--benchmark_filter=$filter")
    [[ -n "$more" ]] || break
    runs+=",$more"
  done
  compare_and_exit "$against" " (paired builds)" "" \
    "$PYTHON" "$root/ci/compare.py" --builds "$runs" ${filter_args[@]+"${filter_args[@]}"} \
    ${compare_args[@]+"${compare_args[@]}"}
fi
"${run[@]}"
current=$OUT/lockline.json
if [[ ! -s "$current" ]]; then
  echo "regression.sh: the run wrote no $current" >&2
  exit 2
fi

if ((update)); then
  mkdir -p "$(dirname "$BASELINE")"
  [[ -e "$BASELINE" ]] && verb=replaced || verb=created
  cp "$current" "$BASELINE"
  echo "regression.sh: baseline $verb: $BASELINE (commit it to gate later runs against it)"
  exit 0
fi
if [[ ! -e "$BASELINE" ]]; then
  echo "regression.sh: no baseline at $BASELINE; nothing to compare against."
  echo "regression.sh: to make this run the baseline: $0 --update-baseline" \
       "(or cp $current $BASELINE)"
  exit 0
fi

compare_and_exit "$BASELINE" "" ", see the message above" \
  "$PYTHON" "$root/ci/compare.py" "$BASELINE" "$current" ${filter_args[@]+"${filter_args[@]}"} \
  ${compare_args[@]+"${compare_args[@]}"}
