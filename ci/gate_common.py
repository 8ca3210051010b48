"""What ci/compare.py's two gates share: run against run (gate_runs.py) and the build duet's
window pairs (gate_builds.py). Exit codes and option checks, the statistics both use, a row's
verdict and answer, the summary with its exit status (finish), and the table / markdown / JSON
output. The gates' rules: ci/REGRESSION.md."""

import argparse
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "plots"))

import lockline_results as results  # noqa: E402
import stats as effects  # noqa: E402
import outputs  # noqa: E402

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_UNDECIDED = 0, 1, 2, 3

TIME_METRICS = ("real_time", "cpu_time")

VERDICTS = ("regression", "broken", "improvement", "no change", "undecided",
            "only in baseline", "only in current", "incomparable")

# --min-effect / --override accept 0 <= PCT < this: a larger (or inf, or nan) minimum effect
# would make every change "no change" and so switch the gate off silently.
MAX_MIN_EFFECT_PCT = 1e6

InputError = results.ResultError


# ---- options and inputs -------------------------------------------------------------------------


def parse_override(text):
    """"REGEX=PCT" -> (compiled regex, percent)."""
    pattern, sep, pct = text.rpartition("=")
    if not sep or not pattern:
        raise InputError(f"--override {text!r}: expected REGEX=PCT, e.g. 'zone_lock/.*=10'")
    try:
        value = float(pct)
    except ValueError:
        raise InputError(f"--override {text!r}: {pct!r} is not a number of percent") from None
    if not 0 <= value < MAX_MIN_EFFECT_PCT:
        raise InputError(f"--override {text!r}: the minimum effect must be a finite percentage "
                         f"from 0 to below {MAX_MIN_EFFECT_PCT:g} (inf or nan would disable the "
                         "gate)")
    return compile_regex(pattern, "--override"), value


def compile_regex(pattern, option):
    try:
        return re.compile(pattern)
    except re.error as e:
        raise InputError(f"{option} {pattern!r}: bad regular expression: {e}") from None


class KeyFilter:
    """--filter REGEX in lockline's --benchmark_filter syntax: the keys REGEX finds (re.search),
    or with a leading '-' every key but those the rest finds (--filter=-zone_lock)."""

    def __init__(self, text):
        self.negated = text.startswith("-")
        self.regex = compile_regex(text[1:] if self.negated else text, "--filter")

    def search(self, key):
        return (self.regex.search(key) is None) == self.negated


def key_filter(text):
    return KeyFilter(text) if text else None


def min_effect_for(key, options):
    """The first matching --override's percent for `key`, else --min-effect."""
    return next((pct for regex, pct in options["overrides"] if regex.search(key)),
                options["min_effect"])


def expand_side_argument(arg):
    """A BASELINE/CURRENT/RUN argument's files: comma-separated, a directory's lockline.json."""
    paths = [os.path.join(part, "lockline.json") if os.path.isdir(part) else part
             for part in arg.split(",") if part]
    if not paths:
        raise InputError(f"{arg!r}: no result file given")
    return paths


def failure_message(row):
    message = row.get("error_message")
    return message if isinstance(message, str) and message else "error_occurred"


INVARIANT_PREFIX = "invariant broken"


def invariant_broken(row, key):
    """Why one iteration row is a broken measurement, or "": its "verify" is not "ok", its
    error message starts with "invariant broken", or it is a duet row without one usable
    window pair (an empty duet is broken, not missing)."""
    verify = row.get("verify")
    if isinstance(verify, str) and verify not in ("", "ok"):
        return f"invariant broken: {verify}"
    message = row.get("error_message")
    if isinstance(message, str) and message.startswith(INVARIANT_PREFIX):
        return message
    if (key.startswith("duet/") or row.get("family") == "duet") and \
            not row.get("error_occurred") and not row.get("skipped"):
        pairs = results.row_duet_pairs(row)
        if not any(a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)
                   and math.isfinite(b / a) for a, b in pairs):
            return (f"empty duet: none of its {len(pairs)} window pairs has both sides' ops/s "
                    "positive and finite")
    return ""


def record_failure(side, row, key):
    """True for a failed, skipped or broken row, its message kept in side["failed"][key] (and a
    broken one's in side["invariant"][key]): a key whose rows all failed is broken, not missing."""
    broken = invariant_broken(row, key)
    if broken:
        side["invariant"].setdefault(key, []).append(broken)
    if row.get("error_occurred") or row.get("skipped") or broken:
        side["failed"].setdefault(key, []).append(broken or failure_message(row))
        return True
    return False


def check_levels(args, min_alpha=0.0, why=("", "")):
    """InputError for an --alpha outside (0, 1) or below min_alpha, or a --min-effect outside [0,
    MAX_MIN_EFFECT_PCT); `why`: the gate's words after each message."""
    if not (0 < args.alpha < 1 and args.alpha >= min_alpha):
        raise InputError(f"--alpha {args.alpha:g}: must be between 0 and 1" + why[0])
    if not 0 <= args.min_effect < MAX_MIN_EFFECT_PCT:
        raise InputError(f"--min-effect {args.min_effect:g}: must be a finite percentage "
                         f"from 0 to below {MAX_MIN_EFFECT_PCT:g}" + why[1])


def gate_options(args, **extra):
    """The options both gates read from add_gate_options' flags, plus `extra`."""
    return {"alpha": args.alpha, "min_effect": args.min_effect,
            "overrides": [parse_override(o) for o in args.override],
            "filter": key_filter(args.filter), "allow_undecided": args.allow_undecided, **extra}


def physical_check(path, key, name, value):
    """Refuse a rate or time that is non-finite or outside lockline_results' physical range."""
    if isinstance(value, (int, float)) and (not math.isfinite(value) or (
            abs(value) > results.PHYSICAL_MAX or 0 < abs(value) < results.PHYSICAL_MIN)):
        raise InputError(f"{path}: {key} {name} = {value:g} is not a measurement (accepted: 0, "
                         f"or {results.PHYSICAL_MIN:g} to {results.PHYSICAL_MAX:g} in "
                         "magnitude)")


def new_row(key, metric, direction, min_effect_pct, **fields):
    return {"key": key, "metric": metric, "direction": direction,
            "min_effect_pct": min_effect_pct, "notes": [], "warnings": [], "regime": None,
            "dropped": 0, "ci_pct": None, "baseline": None, "current": None, "change_pct": None,
            "p_value": None, "p_adjusted": None, "min_p": None, "verdict": None, "paired": False,
            **fields}


# ---- statistics ---------------------------------------------------------------------------------


def scipy_stats():
    """scipy.stats, imported late: it takes seconds to load, and bad input needs none."""
    try:
        from scipy import stats  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise InputError(f"scipy is missing ({e}): run with Debian's /usr/bin/python3 "
                         "(apt-get install python3-scipy)") from e
    return stats


def summarize(samples):
    """(n, mean, sample stddev as % of the mean; NaN % for a mean of 0)."""
    n = len(samples)
    # Scaled: values near the float maximum would overflow the sums of fmean / stdev.
    scale = max((abs(x) for x in samples), default=0.0) or 1.0
    scaled = [x / scale for x in samples]
    mean = statistics.fmean(scaled) * scale
    sd = statistics.stdev(scaled) * scale if n > 1 else 0.0
    pct = sd / abs(mean) * 100.0 if mean != 0 and math.isfinite(mean) else float("nan")
    return n, mean, pct


def side_summary(values, **extra):
    n, mean, sd = summarize(values)
    return {"n": n, "mean": mean, "stddev_pct": sd, "samples": values,
            "median": statistics.median(values), **extra}


def min_attainable_p(n1, n2):
    """Smallest two-sided p-value of an exact Mann-Whitney U test for sizes n1, n2:
    2 / C(n1+n2, n1) (complete separation). 3 vs 3: 0.1; 5 vs 5: 0.0079; 9 vs 9: 4.1e-5.
    In log space: C(n1+n2, n1) overflows beyond ~512 samples a side."""
    return math.exp(min(0.0, log_min_attainable_p(n1, n2)))


def log_min_attainable_p(n1, n2):
    if n1 < 1 or n2 < 1:
        return 0.0
    return (math.log(2.0) - math.lgamma(n1 + n2 + 1) + math.lgamma(n1 + 1) + math.lgamma(n2 + 1))


def repetitions_needed(alpha, m):
    """Smallest n with 2 / C(2n, n) <= alpha / m (Holm over m rows; alpha > 0)."""
    target = math.log(alpha) - math.log(max(m, 1))
    n = 1
    while log_min_attainable_p(n, n) > target:
        n += 1
    return n


def holm_adjust(pvalues):
    """Holm-Bonferroni adjusted p-values in input order (p ascending: adj_(i) = max_{j<=i} min(1,
    (m-j+1) p_(j))): it controls the family-wise error, which a gate that fails builds needs."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


# ---- verdicts and the summary -------------------------------------------------------------------


def effect_verdict(row):
    change = row["change_pct"]
    if abs(change) < row["min_effect_pct"]:
        return "no change"
    bad = change < 0 if row["direction"] == "higher" else change > 0
    return "regression" if bad else "improvement"


def equivalence_text(min_effect_pct):
    return f"no change larger than {min_effect_pct:g} %"


def mark_equivalence(rows):
    """Set every row's "equivalent" and "answer": "no change larger than T %" for a "no change"
    row whose interval is stats.is_equivalent, else its verdict."""
    for r in rows:
        ci = r.get("ci_pct")
        r["equivalent"] = bool(
            r["verdict"] == "no change" and ci is not None and
            effects.is_equivalent((ci[0] / 100.0, ci[1] / 100.0), r["min_effect_pct"] / 100.0))
        r["answer"] = equivalence_text(r["min_effect_pct"]) if r["equivalent"] else r["verdict"]


def repetitions_to_decide(rows, options):
    """Repetitions a side that would likely decide every undecided row: enough for the exact U
    test to reach the Holm threshold, and for a too wide interval interval_repetitions."""
    compared = [r for r in rows if r["paired"]]
    need = max(repetitions_needed(options["alpha"], len(compared)), effects.MIN_REPETITIONS)
    for r in rows:
        if r["verdict"] != "undecided" or not r["paired"]:
            continue
        # In repetitions (a duet row's n counts window pairs).
        n = max(r["baseline"].get("repetitions", r["baseline"]["n"]),
                r["current"].get("repetitions", r["current"]["n"]))
        if r["ci_pct"] is not None:
            need = max(need, n + 1, math.ceil(min(interval_repetitions(r, n),
                                                  MAX_REPETITIONS_ADVISED)))
    return min(need, MAX_REPETITIONS_ADVISED)


def interval_repetitions(row, n, wider=1.0):
    """Repetitions under which the row's interval, resting on n and `wider` times as wide at
    its next look, would likely decide: n x (half width / room)^2 (intervals shrink as
    1/sqrt(n)); room: from the centre to +-T, or from a centre beyond T to 0."""
    lo, hi = row["ci_pct"]
    room = max(row["min_effect_pct"] - abs(lo + hi) / 2.0, abs(lo + hi) / 2.0, 1e-9)
    ratio = wider * (hi - lo) / 2.0 / room
    return n * ratio ** 2 if math.isfinite(ratio) and ratio <= 1e3 else math.inf


# The most repetitions a side the undecided advice names: past it, more of the same run is not
# the answer ("at least 200": a quieter machine, or the build duet, is).
MAX_REPETITIONS_ADVISED = 200


def _rerun_text(need):
    at_least = "at least " if need >= MAX_REPETITIONS_ADVISED else ""
    return f"rerun with {at_least}{need} repetitions a side"


def _goodness(row):
    if row["change_pct"] is None:
        return (1, 0.0, row["key"])
    sign = 1.0 if row["direction"] != "lower" else -1.0
    return (0, sign * row["change_pct"], row["key"])


def _first(rows, verdict):
    return next(r for r in rows if r["verdict"] == verdict)


def _exit_status(rows, counts, m, need, options):
    """(exit code, one-line message): see compare.py's docstring."""
    if counts["incomparable"]:
        first = _first(rows, "incomparable")
        return EXIT_BAD_INPUT, (f"{counts['incomparable']} row(s) incomparable, e.g. "
                                f"{first['key']} {first['metric']}: {first['notes'][-1]}")
    if not m and not counts["broken"]:
        return EXIT_BAD_INPUT, ("no benchmark appears on both sides" +
                                (" after --filter" if options["filter"] is not None else ""))
    if counts["regression"] or counts["broken"]:
        if not counts["broken"]:
            return EXIT_REGRESSION, ""
        first = _first(rows, "broken")
        return EXIT_REGRESSION, (f"{counts['broken']} broken row(s) (a current repetition broke "
                                 "an invariant, or measured in the baseline with no usable "
                                 f"current repetition), e.g. {first['key']}: "
                                 f"{first['notes'][-1]}")
    if (counts["undecided"] and not options.get("allow_undecided") and
            100.0 * counts["undecided"] > options.get("max_undecided_pct", 0.0) * max(m, 1)):
        message = (f"undecided: {counts['undecided']} rows; {_rerun_text(need)} (or pass "
                   "--allow-undecided)")
        if options.get("max_undecided_pct"):
            message += (f"; more than the {options['max_undecided_pct']:g} % of {m} rows "
                        "--max-undecided lets pass")
        return EXIT_UNDECIDED, message
    if counts["only in baseline"] and not options.get("allow_missing"):
        first = _first(rows, "only in baseline")
        return EXIT_UNDECIDED, (f"{counts['only in baseline']} row(s) only in the baseline "
                                f"(missing from the current run), e.g. {first['key']}; run "
                                "those points, restrict the comparison with --filter, or pass "
                                "--allow-missing")
    return EXIT_OK, ""


def finish(rows, warnings, notes, options, mode, rule):
    """Sort rows worst first, count verdicts, add the advice and the exit code; `rule(m)`
    says the gate's rule for m rows compared."""
    rows.sort(key=_goodness)
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    # An undecided row without a usable pair is still a row compared.
    m = sum(1 for r in rows if r["paired"] or r["verdict"] == "undecided")
    need = None
    if counts["undecided"]:
        need = repetitions_to_decide(rows, options)
        have = sorted({(r["baseline"].get("repetitions", r["baseline"]["n"]),
                        r["current"].get("repetitions", r["current"]["n"])) for r in rows
                       if r["verdict"] == "undecided" and r["paired"]})
        warnings.append(f"{counts['undecided']} row(s) undecided "
                        f"({', '.join(f'{a}/{b}' for a, b in have)} repetitions "
                        f"baseline/current): {_rerun_text(need)}, compare "
                        "fewer rows (--filter), or use --threshold-only")
    exit_code, message = _exit_status(rows, counts, m, need, options)
    summary = dict(counts)
    summary.update({"equivalent": sum(1 for r in rows if r.get("equivalent")),
                    "rows_compared": m, "exit_code": exit_code, "message": message,
                    "mode": mode, "rule": rule(m), "repetitions_needed": need,
                    "alpha": options["alpha"], "min_effect_pct": options["min_effect"]})
    return {"rows": rows, "warnings": warnings, "notes": notes, "summary": summary}


# ---- output -------------------------------------------------------------------------------------


def fmt_number(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if abs(v) >= 1e10 or (v != 0 and abs(v) < 1e-3):
        return f"{v:.4e}"
    if abs(v) >= 1e5:
        return f"{v:.0f}"
    return f"{v:.6g}"


def fmt_pct(v, signed=False):
    if v is None or math.isnan(v):
        return "-"
    if math.isinf(v):
        return "+inf%" if v > 0 else "-inf%"
    return f"{v:+.1f}%" if signed else f"±{v:.1f}%"


def equivalence_line(result):
    s = result["summary"]
    if not s.get("equivalent"):
        return ""
    pcts = sorted({r["min_effect_pct"] for r in result["rows"] if r.get("equivalent")})
    what = (equivalence_text(pcts[0]) if len(pcts) == 1 else
            "no change larger than their minimum effect")
    return (f"equivalence: {s['equivalent']} of {s['rows_compared']} rows compared show {what}"
            " (95 % interval of the change within +-minimum effect)")


def summary_line(result):
    """"2 regressions, 1 improvement, 40 no change, 3 undecided (of 46 rows compared)"."""
    s = result["summary"]
    parts = [f"{s[w]} {w}" + ("s" if s[w] != 1 else "") for w in ("regression", "improvement")]
    parts += [f"{s['no change']} no change", f"{s['undecided']} undecided"]
    line = ", ".join(parts) + f" (of {s['rows_compared']} rows compared"
    extra = [f"{s[v]} {v}" for v in ("only in baseline", "only in current", "incomparable")
             if s[v]]
    line += ("; " + ", ".join(extra) if extra else "") + ")"
    if s["mode"] == "threshold-only":
        line += f"; threshold only ({s['min_effect_pct']:g} %), no statistics"
    return line


def _table_cells(r):
    b, c = r["baseline"] or {}, r["current"] or {}
    ci = r.get("ci_pct")
    interval = f"[{ci[0]:+.1f},{ci[1]:+.1f}]%" if ci else "-"
    if r.get("unit") == "window pairs":
        reps = f"{b.get('n', 0)}p/{c.get('n', 0)}p"
    elif r.get("method") == "matched":
        reps = f"{b.get('n', 0)}={c.get('n', 0)}"
    else:
        reps = f"{b.get('n', 0)}/{c.get('n', 0)}"
    reps += f"@{r['regime']}" if r.get("regime") else ""
    return [fmt_number(b.get("median", b.get("mean"))), fmt_pct(b.get("stddev_pct")),
            fmt_pct(r["change_pct"], signed=True), interval,
            fmt_number(c.get("median", c.get("mean"))), fmt_pct(c.get("stddev_pct")), reps,
            r.get("answer") or r["verdict"],
            r["metric"] + ("[ns]" if r["metric"] in TIME_METRICS else ""), r["key"]]


TABLE_HEADER = ["baseline", "%stddev", "%change", "interval", "current", "%stddev", "reps",
                "verdict", "metric", "name"]


def format_table(result):
    """lkp-tests style plain-text table, then notes, warnings and the summary."""
    widths = [14, 9, 9, 19, 15, 9, 16]
    verdict_width = max([16] + [len(_table_cells(r)[7]) for r in result["rows"]])

    def line(cells):
        head = "".join(f"{c:>{w}}" for c, w in zip(cells[:7], widths))
        return f"{head}  {cells[7]:<{verdict_width}} {cells[8]}  {cells[9]}"

    lines = [line(TABLE_HEADER)] + [line(_table_cells(r)) for r in result["rows"]]
    lines += [f"note: {r['key']} {r['metric']}: {n}" for r in result["rows"] for n in r["notes"]]
    lines += [f"note: {n}" for n in result["notes"]]
    lines += [f"warning: {r['key']} {r['metric']}: {w}" for r in result["rows"]
              for w in r["warnings"]]
    lines += [f"warning: {w}" for w in result["warnings"]]
    lines.append(result["summary"]["rule"] + "; reps = repetitions used baseline/current"
                 "@coherence regime (N=N: the same repetitions matched one to one; Np: window "
                 "pairs of a duet row)")
    if equivalence_line(result):
        lines.append(equivalence_line(result))
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"


def format_markdown(result):
    out = [f"**lockline regression check:** {summary_line(result)}", "",
           "| " + " | ".join(TABLE_HEADER) + " |", "|" + "---:|" * 7 + ":---|:---|:---|"]
    for r in result["rows"]:
        cells = _table_cells(r)
        cells[9] = "`" + cells[9].replace("|", "\\|") + "`"
        if r["verdict"] == "regression":
            cells[7] = "**regression**"
        out.append("| " + " | ".join(cells) + " |")
    extra = [f"- warning: {w}" for w in result["warnings"]]
    extra += [f"- warning: `{r['key']}` {r['metric']}: {w}" for r in result["rows"]
              for w in r["warnings"]]
    extra += [f"- note: `{r['key']}` {r['metric']}: {n}" for r in result["rows"]
              for n in r["notes"]]
    extra += [f"- note: {n}" for n in result["notes"]]
    extra.append(f"- {result['summary']['rule']}")
    if equivalence_line(result):
        extra.append(f"- {equivalence_line(result)}")
    return "\n".join(out + [""] + extra) + "\n"


def format_json(result):
    def clean(v):
        if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v
    return json.dumps(clean(result), indent=1) + "\n"


FORMATTERS = {"table": format_table, "markdown": format_markdown, "json": format_json}


# ---- command line -------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """A usage error is one line on stderr (exit 2) like every other input error."""

    def error(self, message):
        print(f"compare.py: error: {message} (see --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def add_gate_options(p):
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise significance level, Holm-corrected (default 0.05)")
    p.add_argument("--min-effect", type=float, default=5.0,
                   help="minimum change in percent for a regression, and the equivalence bound "
                        "T of 'no change larger than T %%' (default 5)")
    p.add_argument("--override", action="append", default=[], metavar="REGEX=PCT",
                   help="per-benchmark minimum effect; first matching regex wins (repeatable)")
    p.add_argument("--filter", metavar="REGEX", help="compare only benchmarks matching REGEX")
    p.add_argument("--format", choices=sorted(FORMATTERS), default="table")
    p.add_argument("--output", metavar="FILE", help="also write the output to FILE")
    p.add_argument("--allow-undecided", action="store_true",
                   help="exit 0 (not 3) when rows are undecided and nothing regressed")
    p.add_argument("--allow-unfinished", action="store_true",
                   help="compare files of runs that did not finish (finished: false)")


def run_gate(args, compute):
    """Run the gate `compute()`, print and write (--output) its result, say its message on
    stderr; return the exit code (EXIT_BAD_INPUT for an InputError or an unwritable file)."""
    try:
        result = compute()
    except InputError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    text = FORMATTERS[args.format](result)
    sys.stdout.write(text)
    if args.output:
        try:
            outputs.write_atomic(args.output, text)
        except OSError as e:
            print(f"compare.py: error: --output {args.output}: {e.strerror}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if result["summary"]["message"]:
        print(f"compare.py: error: {result['summary']['message']}", file=sys.stderr)
    return result["summary"]["exit_code"]
