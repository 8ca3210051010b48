#!/usr/bin/python3
"""Decide whether CURRENT regressed against BASELINE: lockline's CI regression check.

Usage: compare.py BASELINE CURRENT [options]. BASELINE and CURRENT are each a Google Benchmark
JSON file (lockline's or any other), a comma-separated list of such files (their repetitions are
pooled), or a run directory holding lockline.json.

Files are read through plots/lockline_results.py (the project's one reader of result files);
effects and intervals come from plots/stats.py. Each row compares the repetitions of ONE
coherence regime (the regime with most repetitions on both sides; rows naming no regime are
pooled); repetitions whose window overran are dropped.

A row regresses when its change is in the metric's bad direction, statistically significant
(two-sided Mann-Whitney U over the repetitions, Holm-corrected over all rows compared, alpha 0.05)
AND at least the minimum effect T (5 % by default). Equality is decided by an equivalence rule:
a row whose 95 % bootstrap interval of the change lies within +-T answers "no change larger than
T %" (verdict "no change"). A row that is neither is "undecided" (too few repetitions, too much
noise, or no common coherence regime), and the gate does not pass it silently. Improvements are
reported, never fail. Follows pyperf / gbench compare.py (significance plus a minimum effect) and
lkp-tests' compare table layout; see ci/REGRESSION.md for the reasoning.

How the two sides' samples are paired (issue 24), per row:
- the same repetitions on both sides (every row identical, in the same order: a run compared
  with itself, or with a copy): matched one to one (plots/stats.compare_matched; Wilcoxon
  signed-rank instead of Mann-Whitney). Identical values differ by exactly 0: the interval is
  [0, 0], so `compare.py RUN RUN` answers "no change larger than 5 %" for every row it can
  compare, with any number of repetitions;
- duet rows (family `duet`, key `duet/...`: two variants A and B alternating window by window,
  results/SCHEMA.md) are compared by their paired effect, metric `pair_ratio` (B's ops/s over
  A's, higher is better): the change of the median pair ratio B/A between the runs, its
  interval a two-sample bootstrap over both runs' window pairs of one coherence regime
  (plots/stats.compare_pair_effects). The machine's swings cancel within each pair, so two runs
  of the same build can answer equality where the sides' own ops/s cannot;
- every other row: the repetitions of each side as independent samples (as before).

A benchmark the baseline measured whose current repetitions all failed (error_occurred, e.g.
"mutual exclusion violated") or all overran is "broken" and fails the gate like a regression;
one missing from the current side is "only in baseline" and counts as undecided (exit 3) unless
--allow-missing.

Exit status: 0 every row decided and no regression, 1 regression or broken row, 2 bad or
incomparable input (one line on stderr), 3 undecided rows ("undecided: N rows; rerun with M
repetitions a side"; --allow-undecided turns it into 0) or baseline rows missing from the current
side (--allow-missing turns it into 0). `--builds` lets undecided rows pass while they are at most
--max-undecided % of the rows (default 10): a build duet on a noisy machine decides most rows,
rarely all, and each undecided row is listed with why.
"""

import argparse
import json
import math
import os
import re
import statistics
import sys

# scipy.stats is imported where the test runs: it takes a second or two to load, and input errors
# and --threshold-only should answer without it.

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "plots"))

import lockline_results as results  # noqa: E402  (the one reader of result files)
import stats as effects  # noqa: E402  (effects with intervals from one coherence regime)
import outputs  # noqa: E402  (the atomic writer of every tool's output files)

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_UNDECIDED = 0, 1, 2, 3

# Google Benchmark 1.9.0 changed how time is accounted for threaded runs, so time-based rows from
# either side of it do not compare (rate counters such as ops_per_s are unaffected).
GB_TIME_SEMANTICS_CHANGE = (1, 9, 0)

TIME_UNIT_NS = results.TIME_UNIT_NS
TIME_METRICS = ("real_time", "cpu_time")

VERDICTS = ("regression", "broken", "improvement", "no change", "undecided",
            "only in baseline", "only in current", "incomparable")

# --min-effect / --override accept 0 <= PCT < this: a larger (or inf, or nan) minimum effect
# would make every change "no change" and so switch the gate off silently (issue 27 item 10).
MAX_MIN_EFFECT_PCT = 1e6

# --alpha accepts MIN_ALPHA <= alpha < 1: below it (1e-320 is subnormal) Holm's threshold
# alpha / m underflows and no run could reach it (issue 36 R8).
MIN_ALPHA = 1e-12

# Bad input: the reader's error, carrying the one-line message main() prints (exit 2).
InputError = results.ResultError


# ---- metrics ------------------------------------------------------------------------------------


def metric_direction(name, declared=None):
    """Return "higher" or "lower" (the good direction of metric `name`), or None if unknown.

    `declared` maps names to directions given with --metric and wins over the built-in table,
    which follows results/SCHEMA.md: names ending in _per_s, _per_wall_s, _per_cpu_s or /s
    (faults_per_wall_s, the 2004 pre-zeroing table's column) and IPC (instructions per cycle)
    are higher-is-better; ns_per_op, real_time, cpu_time, wait_share, violations_per_million, *_ns and */op are
    lower-is-better. pair_ratio (a duet row's paired effect: B's ops/s over A's) is
    higher-is-better: a fall means B lost ground on A. Directions are declared, never guessed
    from the data.
    """
    if declared and name in declared:
        return declared[name]
    if name.endswith(("_per_s", "_per_wall_s", "_per_cpu_s", "/s")) or name in ("IPC",
                                                                                "pair_ratio"):
        return "higher"
    if (name in ("ns_per_op", "real_time", "cpu_time", "wait_share", "violations_per_million")
            or name.endswith("_ns") or name.endswith("/op")):
        return "lower"
    return None


def parse_metric_option(text):
    """Parse a --metric value "NAME" or "NAME:higher|lower" into (name, direction).

    Raises InputError when the direction is neither higher nor lower, or when NAME has no
    direction in the built-in table and none is given.
    """
    name, sep, direction = text.rpartition(":")
    if not sep or direction not in ("higher", "lower"):
        name, direction = text, metric_direction(text)
        if direction is None:
            raise InputError(f"--metric {text!r}: unknown metric direction; write NAME:higher "
                             "or NAME:lower")
    if not name:
        raise InputError(f"--metric {text!r}: empty metric name")
    return name, direction


def parse_override(text):
    """Parse an --override value "REGEX=PCT" into (compiled regex, percent as float).

    Raises InputError on a missing '=', a bad regular expression or a non-numeric/negative PCT.
    """
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
    """Compile `pattern`, turning a syntax error into an InputError naming `option`."""
    try:
        return re.compile(pattern)
    except re.error as e:
        raise InputError(f"{option} {pattern!r}: bad regular expression: {e}") from None


def parse_version(text):
    """Parse a version string like "1.7.1" or "v1.9.0-rc1" into an int tuple, or None."""
    if not isinstance(text, str):
        return None
    m = re.match(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip())
    if not m:
        return None
    return tuple(int(g or 0) for g in m.groups())


# ---- loading ------------------------------------------------------------------------------------


strip_decorations = results.strip_decorations
row_key = results.row_key
is_aggregate = results.is_aggregate
row_values = results.row_values


def read_json_file(path):
    """Read one result file through lockline_results.read_document; additionally refuse an
    empty "benchmarks" array. Raises InputError (= ResultError) naming the file."""
    doc = results.read_document(path)
    if not doc["benchmarks"]:
        raise InputError(f"{path}: the \"benchmarks\" array is empty (did the run finish?)")
    return doc


def file_emulated(doc):
    """True when a result file comes from an emulated machine (context.lockline.emulated or
    any row's "emulated": true; see results/SCHEMA.md)."""
    ll = doc.get("context", {}).get("lockline")
    return (isinstance(ll, dict) and ll.get("emulated") is True) or any(
        r.get("emulated") is True for r in doc["benchmarks"])


def file_finished(doc):
    """context.lockline.finished: False for an interrupted run, None when the file says nothing
    (foreign files)."""
    ll = doc.get("context", {}).get("lockline")
    value = ll.get("finished") if isinstance(ll, dict) else None
    return value if isinstance(value, bool) else None


def _row_overrun(row):
    windows = row.get("windows") if isinstance(row.get("windows"), list) else []
    return row.get("overrun") is True or any(isinstance(w, dict) and w.get("overrun") is True
                                             for w in windows)


INVARIANT_PREFIX = "invariant broken"


def _usable_pair(a, b):
    return a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b) and math.isfinite(b / a)


def invariant_broken(row, key):
    """What makes one iteration row a broken measurement, or "" when nothing does: a row whose
    verification failed (lockline's "verify" is not "ok", or its error message starts with
    "invariant broken": e.g. mutual exclusion violated), or a duet row (key duet/...) whose
    window pairs hold not one pair with both sides' ops/s positive and finite (an empty duet
    is broken, not missing)."""
    verify = row.get("verify")
    if isinstance(verify, str) and verify not in ("", "ok"):
        return f"invariant broken: {verify}"
    message = row.get("error_message")
    if isinstance(message, str) and message.startswith(INVARIANT_PREFIX):
        return message
    if (key.startswith("duet/") or row.get("family") == "duet") and \
            not row.get("error_occurred") and not row.get("skipped"):
        pairs = results.row_duet_pairs(row)
        if not any(_usable_pair(a, b) for a, b in pairs):
            return (f"empty duet: none of its {len(pairs)} window pairs has both sides' ops/s "
                    "positive and finite")
    return ""


def load_side(paths, label):
    """Load and pool the result files of one side ("baseline" or "current").

    Returns a dict: "label", "paths", "contexts" (one per file), "rows" (key -> list of sample
    dicts with "values", "threads", "coherence", "placement", "layout", "overrun", "identity"
    (lockline_results.row_identity: equal for the same measurement), "pairs" (a duet row's
    window pairs, (A ops/s, B ops/s), else [])), "failed"
    (key -> error messages of its rows with error_occurred or skipped), "notes"
    (excluded rows, aggregate fallbacks), "invariant" (key -> what each of its repetitions
    that broke an invariant says: invariant_broken), "emulated" (one bool per file), "unfinished" (paths
    of files with finished: false). Raises InputError for unreadable or malformed files.
    """
    side = {"label": label, "paths": list(paths), "contexts": [], "rows": {}, "notes": [],
            "emulated": [], "unfinished": [], "failed": {}, "invariant": {}}
    for path in paths:
        doc = read_json_file(path)
        side["contexts"].append(doc.get("context", {}))
        side["emulated"].append(file_emulated(doc))
        if file_finished(doc) is False:
            side["unfinished"].append(path)
        rows = doc["benchmarks"]
        names = {r["name"] for r in rows}
        samples = [r for r in rows if not is_aggregate(r, names)]
        if not samples:
            samples = [r for r in rows if r.get("aggregate_name") == "mean" or
                       (r.get("run_type") is None and r["name"].endswith("_mean"))]
            if not samples:
                raise InputError(f"{path}: no iteration rows and no mean aggregates to compare")
            side["notes"].append(f"{path}: only aggregate rows; each mean row is used as a "
                                 "single sample (statistics cannot decide; use --threshold-only)")
        excluded = 0
        for r in samples:
            key = row_key(r)
            if r.get("run_type") is None and r["name"].endswith("_mean") and \
                    r.get("aggregate_name") is None:
                key = strip_decorations(r["name"][:-len("_mean")])
            broken = invariant_broken(r, key)
            if broken:
                # Any repetition that broke an invariant (or a duet without one usable window
                # pair) fails the gate, whatever its other repetitions measured (issue 36 R4).
                side["invariant"].setdefault(key, []).append(broken)
            if r.get("error_occurred") or r.get("skipped") or broken:
                excluded += 1
                # Kept per key: a baseline key whose current rows all failed is a broken point,
                # never "only in baseline" (issue 27 item 4).
                message = broken or r.get("error_message")
                side["failed"].setdefault(key, []).append(
                    message if isinstance(message, str) and message else "error_occurred")
                continue
            params = r.get("params") if isinstance(r.get("params"), dict) else {}
            coherence = r.get("coherence")
            side["rows"].setdefault(key, []).append({
                "values": row_values(r, path),
                "threads": r.get("threads", params.get("threads", 1)),
                "coherence": coherence.get("label") if isinstance(coherence, dict) else None,
                "placement": r.get("placement") if isinstance(r.get("placement"), dict) else None,
                "layout": params.get("layout"),
                "overrun": _row_overrun(r),
                "identity": results.row_identity(r, doc.get("context")),
                "pairs": results.row_duet_pairs(r),
            })
        if excluded:
            side["notes"].append(f"{path}: {excluded} row(s) with error_occurred or skipped "
                                 "excluded")
    return side


def expand_side_argument(arg):
    """Turn a BASELINE/CURRENT argument into a list of file paths: comma-separated lists are
    split, and a directory means its lockline.json."""
    paths = []
    for part in arg.split(","):
        if not part:
            continue
        if os.path.isdir(part):
            part = os.path.join(part, "lockline.json")
        paths.append(part)
    if not paths:
        raise InputError(f"{arg!r}: no result file given")
    return paths


# ---- statistics ---------------------------------------------------------------------------------


def summarize(samples):
    """Return (n, mean, stddev as % of the mean) of a list of floats; stddev is the sample
    standard deviation (ddof 1), 0 for a single sample, and NaN % when the mean is 0."""
    n = len(samples)
    # Scaled by the largest magnitude: values near the float maximum (a hostile or broken
    # "ops_per_s": 1e308) would overflow the sums of fmean / stdev (issue 27 item 10).
    scale = max((abs(x) for x in samples), default=0.0) or 1.0
    scaled = [x / scale for x in samples]
    mean = statistics.fmean(scaled) * scale
    sd = statistics.stdev(scaled) * scale if n > 1 else 0.0
    pct = sd / abs(mean) * 100.0 if mean != 0 and math.isfinite(mean) else float("nan")
    return n, mean, pct


def min_attainable_p(n1, n2):
    """Smallest two-sided p-value an exact Mann-Whitney U test can give for sample sizes n1, n2:
    2 / C(n1+n2, n1) (complete separation), capped at 1. 3 vs 3: 0.1; 5 vs 5: 0.0079;
    9 vs 9: 4.1e-5."""
    if n1 < 1 or n2 < 1:
        return 1.0
    # In log space: C(n1+n2, n1) passes the float maximum beyond ~512 samples a side, where
    # 2 / comb() raised OverflowError (issue 36 R2); the p-value then underflows to 0.0.
    return math.exp(min(0.0, log_min_attainable_p(n1, n2)))


def log_min_attainable_p(n1, n2):
    """Natural log of 2 / C(n1+n2, n1) (lgamma: no overflow at any sample size); 0.0 when a
    side is empty."""
    if n1 < 1 or n2 < 1:
        return 0.0
    return (math.log(2.0) - math.lgamma(n1 + n2 + 1) + math.lgamma(n1 + 1)
            + math.lgamma(n2 + 1))


def repetitions_needed(alpha, m):
    """Smallest n such that n repetitions per side can reach significance for m rows under Holm:
    2 / C(2n, n) <= alpha / m (compared in log space, so an alpha near the float minimum ends
    the search instead of overflowing). alpha must be > 0."""
    target = math.log(alpha) - math.log(max(m, 1))
    n = 1
    while log_min_attainable_p(n, n) > target:
        n += 1
    return n


def mann_whitney_p(a, b):
    """Two-sided Mann-Whitney U p-value of samples a and b (scipy). Exact when there are no ties
    and both samples are small (<= 30), else scipy's "auto". Returns 1.0 when undefined (e.g.
    one sample per side or all values equal)."""
    if len(a) < 1 or len(b) < 1:
        return 1.0
    try:
        from scipy import stats  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise InputError(f"scipy is missing ({e}): run with Debian's /usr/bin/python3 "
                         "(apt-get install python3-scipy)") from e

    ties = len(set(a) | set(b)) < len(a) + len(b)
    method = "exact" if not ties and max(len(a), len(b)) <= 30 else "auto"
    try:
        p = float(stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)
    except ValueError:
        return 1.0
    return 1.0 if math.isnan(p) else p


def signed_rank_p(a, b):
    """Two-sided Wilcoxon signed-rank p-value of matched samples a[i], b[i] (the same
    repetitions or window pairs on both sides), on log(b[i] / a[i]) (equal values: 0). 1.0
    when every difference is 0 (identical sides: nothing to test) or the test is undefined."""
    diffs = []
    for x, y in zip(a, b):
        if x == y:
            diffs.append(0.0)
        elif x > 0 and y > 0:
            diffs.append(math.log(y / x))
    if not any(diffs):
        return 1.0
    try:
        from scipy import stats  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise InputError(f"scipy is missing ({e}): run with Debian's /usr/bin/python3 "
                         "(apt-get install python3-scipy)") from e
    try:
        p = float(stats.wilcoxon(diffs, alternative="two-sided").pvalue)
    except ValueError:
        return 1.0
    return 1.0 if math.isnan(p) else p


def holm_adjust(pvalues):
    """Holm-Bonferroni step-down adjusted p-values, in input order.

    For p sorted ascending p_(1..m): adj_(i) = max_{j<=i} min(1, (m-j+1) p_(j)). A row is
    significant at family-wise level alpha iff its adjusted p <= alpha. (scipy 1.10 has no
    false_discovery_control, and Holm controls the family-wise error, which is what a CI gate
    that fails a build needs.)
    """
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


# ---- comparison ---------------------------------------------------------------------------------


def _context_value(ctx, *path):
    """Return ctx[path[0]][path[1]]... or None when any level is missing."""
    for p in path:
        if not isinstance(ctx, dict) or p not in ctx:
            return None
        ctx = ctx[p]
    return ctx


# A plain Google Benchmark file without context.library_version was written by a version that
# did not write it yet (before 1.8.4): older than the 1.9.0 change, so it is known to be on the
# old side. Compares below (1, 8, 4) and (1, 9, 0); version_text() names it.
BEFORE_LIBRARY_VERSION = (1, 8, 3, "before 1.8.4")


def file_gb_version(ctx):
    """The Google Benchmark version (int tuple) that wrote one file's context: lockline files'
    context.lockline.versions.google_benchmark (None when a lockline file does not say), plain
    Google Benchmark files' context.library_version, and BEFORE_LIBRARY_VERSION for a plain
    file without it (Google Benchmark writes library_version since 1.8.4)."""
    lockline = _context_value(ctx, "lockline")
    if isinstance(lockline, dict):
        return parse_version(_context_value(lockline, "versions", "google_benchmark"))
    version = parse_version(_context_value(ctx, "library_version"))
    if version is not None:
        return version
    if isinstance(_context_value(ctx, "library_version"), str):
        return None  # written, but not a version we can read
    return BEFORE_LIBRARY_VERSION


def version_text(version):
    """'1.9.1', 'before 1.8.4 (no library_version)' or 'unknown'."""
    if version is None:
        return "unknown"
    if version == BEFORE_LIBRARY_VERSION:
        return "before 1.8.4 (no library_version)"
    return ".".join(str(v) for v in version[:3])


def side_gb_versions(side):
    """Return the set of Google Benchmark versions (int tuples, file_gb_version) of a side's
    files, with None for a file that does not say in a readable way."""
    return {file_gb_version(c) for c in side["contexts"]}


def straddles_gb_19(base_versions, cur_versions):
    """True when known versions lie on both sides of Google Benchmark 1.9.0 (between or within
    the two sides); unknown versions (None) never count."""
    known = {v for v in base_versions | cur_versions if v is not None}
    return (any(v < GB_TIME_SEMANTICS_CHANGE for v in known) and
            any(v >= GB_TIME_SEMANTICS_CHANGE for v in known))


def _short_diff(a, b, prefix="", limit=3):
    """List up to `limit` "path: a -> b" strings where the JSON values a and b differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                out += _short_diff(a.get(k), b.get(k), f"{prefix}{k}.", limit)
            if len(out) >= limit:
                break
        return out[:limit]
    return [f"{prefix.rstrip('.') or 'value'}: {json.dumps(a)} -> {json.dumps(b)}"]


def context_warnings(base, cur):
    """Warnings about run contexts that make the sides less comparable: a different host, CPU
    count, topology, compiler, placement policy, kernel release, CPU model, MHz, library
    versions; and layouts whose definition changed. None of these is an error.

    Returns (warnings, changed_layouts) where changed_layouts is the set of layout keys (from
    context.lockline.layouts) whose content differs between the sides.
    """
    warnings = []
    bc, cc = base["contexts"][0], cur["contexts"][0]
    for side, ctx in (("baseline", bc), ("current", cc)):
        if _context_value(ctx, "lockline", "counters", "fake_pmu"):
            warnings.append(f"the {side}'s hardware counters come from a FAKE PMU (test shim "
                            "tests/fake_pmu), not a CPU: counter rows compare made-up figures")
    checks = [("host", ("host_name",)), ("CPU count", ("num_cpus",)),
              ("topology", ("lockline", "topology")), ("compiler", ("lockline", "compiler")),
              ("compiler flags", ("lockline", "cxx_flags")), ("pinning", ("lockline", "pin")),
              ("memory placement", ("lockline", "mem")), ("kernel", ("lockline", "kernel")),
              ("CPU model", ("lockline", "cpu_model")), ("MHz", ("mhz_per_cpu",)),
              ("library versions", ("lockline", "versions")),
              ("Google Benchmark library", ("library_version",))]
    for what, path in checks:
        a, b = _context_value(bc, *path), _context_value(cc, *path)
        if a is not None and b is not None and a != b:
            detail = "; ".join(_short_diff(a, b))
            if what == "kernel":
                detail += " (printed, not an error: rerun the baseline on this kernel to compare "\
                          "like with like)"
            warnings.append(f"different {what}: {detail}")
    changed = set()
    la = _context_value(bc, "lockline", "layouts") or {}
    lb = _context_value(cc, "lockline", "layouts") or {}
    if isinstance(la, dict) and isinstance(lb, dict):
        for name in sorted(set(la) & set(lb)):
            if la[name] != lb[name]:
                changed.add(name)
                warnings.append(f"layout {name} changed between the sides: "
                                + "; ".join(_short_diff(la[name], lb[name])))
    return warnings, changed


def default_metric(base_samples, cur_samples):
    """The metric compared when no --metric is given: pair_ratio for a duet row (every sample of
    both sides has it: the row's own ops_per_s mixes its two sides), else ops_per_s if any
    sample of either side has it (higher is better), else real_time in ns (lower is better)."""
    both = base_samples + cur_samples
    if both and all("pair_ratio" in s["values"] for s in both):
        return "pair_ratio"
    for s in both:
        if "ops_per_s" in s["values"]:
            return "ops_per_s"
    return "real_time"


def _min_effect_for(key, options):
    """The minimum effect (percent) for benchmark `key`: the first --override whose regex
    matches (re.search), else --min-effect."""
    for regex, pct in options["overrides"]:
        if regex.search(key):
            return pct
    return options["min_effect"]


def _comparability_warnings(row, bs, cs, changed_layouts):
    """Add to row["warnings"] what makes this row's two sides less comparable: a different
    coherence label (cache-line transfer cost between the measured CPUs), a different placement,
    a layout whose definition changed. `bs`, `cs`: the row's samples per side. Different
    labels are not warned about when the row compares one regime both sides share (a note says
    how many repetitions that dropped)."""
    blabels = sorted({str(s["coherence"]) for s in bs if s["coherence"] is not None})
    clabels = sorted({str(s["coherence"]) for s in cs if s["coherence"] is not None})
    one_regime = row["verdict"] is None and row.get("regime")
    if blabels and clabels and blabels != clabels and not one_regime:
        row["warnings"].append(f"coherence label {','.join(blabels)} (baseline) vs "
                               f"{','.join(clabels)} (current): cache-line transfer cost "
                               "differs, the change may be the machine's")
    bp = {json.dumps(s["placement"], sort_keys=True) for s in bs if s["placement"]}
    cp = {json.dumps(s["placement"], sort_keys=True) for s in cs if s["placement"]}
    if bp and cp and bp != cp:
        row["warnings"].append("thread/memory placement differs between the sides")
    layouts = {s["layout"] for s in bs + cs if isinstance(s["layout"], str)}
    hit = sorted(n for n in changed_layouts if layouts & set(n.split("/")))
    if hit:
        row["warnings"].append("layout changed: " + ", ".join(hit))


def _regime_label(sample):
    label = sample.get("coherence")
    return label if isinstance(label, str) else ""


def check_sides(base, cur, options):
    """Refuse inputs that must not be compared (raises InputError, exit 2): an emulated file
    against a non-emulated one (QEMU/TCG timings are not a machine's), and files of runs that
    did not finish (context.lockline.finished false) unless options["allow_unfinished"]."""
    flags = set(base.get("emulated", [])) | set(cur.get("emulated", []))
    if flags == {True, False}:
        which = [f"{p} ({'emulated' if e else 'not emulated'})" for side in (base, cur)
                 for p, e in zip(side["paths"], side["emulated"])]
        raise InputError("cannot compare an emulated run with a non-emulated one (timings under "
                         "an emulator are not the machine's): " + ", ".join(which))
    unfinished = base.get("unfinished", []) + cur.get("unfinished", [])
    if unfinished and not options.get("allow_unfinished"):
        raise InputError(f"{unfinished[0]}: the run did not finish (context.lockline.finished is "
                         "false); rerun it, or pass --allow-unfinished to compare the points it "
                         "kept")


def matched_sides(bsamp, csamp):
    """True when the two sides hold the same repetitions in the same order: as many on each
    side and, at every position, the same row identity (lockline_results.row_identity: the
    same measurement, e.g. a run compared with itself or with a copy). Such sides are compared
    repetition by repetition (stats.compare_matched); any other pair of runs is compared as
    independent samples."""
    return bool(bsamp) and len(bsamp) == len(csamp) and all(
        b.get("identity") is not None and b.get("identity") == c.get("identity")
        for b, c in zip(bsamp, csamp))


def choose_samples(bsamp, csamp, metric, min_effect):
    """The values a row compares, and how (min_effect a fraction). Returns a dict:
    "method": "unpaired" (independent repetitions, one coherence regime: stats.select_regime;
    the interval is computed later by decide()), "matched" (the same repetitions on both sides:
    stats.compare_matched) or "pair_effects" (a duet row, metric pair_ratio, every repetition
    with its window pairs: the change of the paired effect B/A, stats.compare_pair_effects,
    matched when both sides hold the same rows); "unit" ("repetitions" or "window pairs");
    "base", "variant" (values used: the metric, or B/A per window pair), "all_base",
    "all_variant" (every value, whatever its regime), "regime", "dropped", "total_base",
    "total_variant" and "comparison" (the stats.Comparison, None for unpaired)."""
    matched = matched_sides(bsamp, csamp)
    if metric == "pair_ratio" and bsamp + csamp and all(x["pairs"] for x in bsamp + csamp):
        bp = [(_regime_label(x), a, b) for x in bsamp for a, b in x["pairs"]]
        cp = [(_regime_label(x), a, b) for x in csamp for a, b in x["pairs"]]
        comp = effects.compare_pair_effects(bp, cp, min_effect=min_effect, matched=matched)
        ratio = lambda pairs: [b / a for _, a, b in pairs if a > 0 and b > 0 and
                               math.isfinite(b / a)]
        return {"method": "pair_effects", "unit": "window pairs", "base": comp.used[0],
                "variant": comp.used[1], "all_base": ratio(bp), "all_variant": ratio(cp),
                "regime": comp.regime, "dropped": comp.dropped, "total_base": len(bp),
                "total_variant": len(cp), "comparison": comp, "matched": matched}
    bl = [(_regime_label(x), x["values"][metric]) for x in bsamp]
    cl = [(_regime_label(x), x["values"][metric]) for x in csamp]
    out = {"unit": "repetitions", "all_base": [v for _, v in bl],
           "all_variant": [v for _, v in cl], "total_base": len(bl), "total_variant": len(cl),
           "matched": matched}
    if matched:
        comp = effects.compare_matched(bl, cl, min_effect=min_effect)
        out.update(method="matched", base=comp.used[0], variant=comp.used[1],
                   regime=comp.regime, dropped=comp.dropped, comparison=comp)
        return out
    choice = effects.select_regime(bl, cl)
    out.update(method="unpaired", base=choice.base, variant=choice.variant,
               regime=choice.regime, dropped=choice.dropped, comparison=None)
    return out


def _method_note(choice, nb, nc):
    """The note naming how a duet row was compared."""
    how = ("the same window pairs on both sides (identical rows), compared pair by pair"
           if choice["matched"] else
           "B/A per window pair, two-sample bootstrap of the change of the median")
    return (f"duet row: compared by its paired effect B/A (window pairs of {nb} / {nc} "
            f"repetitions; {how})")


def compare(base, cur, options):
    """Compare two loaded sides (see load_side) and decide a verdict per benchmark and metric.

    `options`: alpha, min_effect (percent), overrides [(regex, pct)], threshold_only (bool),
    metrics [(name, direction)] (empty: default metric), filter (regex or None), and optional
    allow_undecided, allow_unfinished, allow_missing, allow_gb_straddle, allow_empty (bools).
    Each row uses the repetitions of one coherence regime (plots/stats.select_regime) without
    overrun windows. Returns a result dict: "rows" (list of row dicts, sorted worst change
    first), "warnings", "notes", "summary" (verdict counts, rows compared, exit_code, message,
    rule). Raises InputError for sides that must not be compared (check_sides).
    """
    check_sides(base, cur, options)
    warnings, changed_layouts = context_warnings(base, cur)
    notes = base["notes"] + cur["notes"]
    bver, cver = side_gb_versions(base), side_gb_versions(cur)
    straddle = straddles_gb_19(bver, cver)
    unknown_versions = None in bver or None in cver
    declared = dict(options["metrics"])
    rows = []
    invariant = cur.get("invariant", {})
    keys = sorted(set(base["rows"]) | set(cur["rows"]) |
                  (set(cur.get("failed", {})) & set(base["rows"])) | set(invariant))
    if options["filter"] is not None:
        keys = [k for k in keys if options["filter"].search(k)]
    threaded_time_rows = 0
    for key in keys:
        bs, cs = base["rows"].get(key, []), cur["rows"].get(key, [])
        metrics = [m for m, _ in options["metrics"]] or [default_metric(bs, cs)]
        if invariant.get(key):
            # A current repetition broke an invariant: the point is broken, whatever its other
            # repetitions, --threshold-only, --allow-undecided or --allow-missing say.
            broken = invariant[key]
            total = len(cs) + len(broken)
            rows.append({"key": key, "metric": metrics[0],
                         "direction": metric_direction(metrics[0], declared),
                         "min_effect_pct": _min_effect_for(key, options),
                         "notes": [f"{len(broken)} of {total} current repetitions broke an "
                                   f"invariant (e.g. {broken[0]!r})"],
                         "warnings": [], "regime": None, "dropped": 0, "ci_pct": None,
                         "baseline": None, "current": None, "change_pct": None,
                         "p_value": None, "p_adjusted": None, "min_p": None,
                         "verdict": "broken", "paired": False})
            continue
        for metric in metrics:
            bsamp = [s for s in bs if metric in s["values"]]
            csamp = [s for s in cs if metric in s["values"]]
            if not bsamp and not csamp:
                continue
            row = {"key": key, "metric": metric,
                   "direction": metric_direction(metric, declared),
                   "min_effect_pct": _min_effect_for(key, options), "notes": [],
                   "warnings": [], "regime": None, "dropped": 0, "ci_pct": None,
                   "baseline": None, "current": None, "change_pct": None, "p_value": None,
                   "p_adjusted": None, "min_p": None, "verdict": None, "paired": False}
            overruns = sum(1 for x in bsamp + csamp if x.get("overrun"))
            cur_overran = len(csamp)
            if overruns:
                bsamp = [x for x in bsamp if not x.get("overrun")]
                csamp = [x for x in csamp if not x.get("overrun")]
                row["warnings"].append(f"{overruns} repetition(s) with an overrun window "
                                       "excluded (the window ran past its bound)")
            if bsamp and not csamp:
                # The baseline measured it; the current run did not give one usable repetition.
                failed = cur["failed"].get(key, [])
                if failed or cur_overran:
                    row["verdict"] = "broken"
                    row["notes"].append(
                        f"every current repetition failed ({len(failed)} with an error, e.g. "
                        f"{failed[0]!r})" if failed else
                        f"every current repetition ({cur_overran}) overran its window")
                    n, mean, sd = summarize([x["values"][metric] for x in bsamp])
                    row["baseline"] = {"n": n, "mean": mean, "stddev_pct": sd,
                                       "samples": [x["values"][metric] for x in bsamp],
                                       "median": statistics.median(
                                           [x["values"][metric] for x in bsamp])}
                    rows.append(row)
                    continue
            choice = choose_samples(bsamp, csamp, metric, row["min_effect_pct"] / 100.0)
            row["method"], row["unit"] = choice["method"], choice["unit"]
            row["matched"] = choice["matched"]
            row["regime"], row["dropped"] = choice["regime"], choice["dropped"]
            bvals, cvals = choice["base"], choice["variant"]
            if bsamp and csamp and (not bvals or not cvals):
                # Both sides measured, but in no common coherence regime.
                bvals, cvals = choice["all_base"], choice["all_variant"]
                choice["comparison"] = None
                row["verdict"] = "undecided"
                row["notes"].append("no coherence regime common to both sides (baseline: "
                                    + _regime_counts(bsamp) + "; current: " + _regime_counts(csamp)
                                    + "): the change would be the machine's state")
            for label, vals, reps in (("baseline", bvals, len(bsamp)),
                                      ("current", cvals, len(csamp))):
                if vals:
                    n, mean, sd = summarize(vals)
                    row[label] = {"n": n, "mean": mean, "stddev_pct": sd, "samples": vals,
                                  "median": statistics.median(vals), "repetitions": reps}
            if not bvals or not cvals:
                row["verdict"] = "only in current" if not bvals else "only in baseline"
                if bs and cs:
                    row["notes"].append(f"metric {metric} missing on the other side")
                rows.append(row)
                continue
            row["paired"] = True
            if choice["regime"] and choice["dropped"] and row["verdict"] is None:
                row["notes"].append(f"{choice['regime']} regime: {len(bvals)} / {len(cvals)} of "
                                    f"{choice['total_base']} / {choice['total_variant']} "
                                    f"{choice['unit']} used (others in other coherence regimes)")
            bm, cm = row["baseline"]["median"], row["current"]["median"]
            row["change_pct"] = (cm - bm) / abs(bm) * 100.0 if bm != 0 else \
                (0.0 if cm == 0 else math.copysign(float("inf"), cm))
            comparison = choice["comparison"]
            if comparison is not None:
                # Matched repetitions or a duet row: the change and its interval come from
                # plots/stats.py (decide() does not recompute them).
                if comparison.effect is not None:
                    row["change_pct"] = comparison.effect * 100.0
                row["ci_pct"] = None if comparison.ci is None else \
                    [comparison.ci[0] * 100.0, comparison.ci[1] * 100.0]
                row["exact"] = comparison.exact
                if choice["method"] == "pair_effects":
                    row["notes"].append(_method_note(choice, len(bsamp), len(csamp)))
            threads = max([s["threads"] for s in bs + cs if isinstance(s["threads"], int)],
                          default=1)
            if metric in TIME_METRICS:
                if straddle and not options.get("allow_gb_straddle"):
                    row["verdict"] = "incomparable"
                    row["notes"].append("time-based row from Google Benchmark versions on both "
                                        "sides of 1.9.0 (threaded time semantics changed; "
                                        f"baseline {_versions_text(bver)}, current "
                                        f"{_versions_text(cver)}); compare ops_per_s or pass "
                                        "--allow-gb-straddle")
                elif straddle:
                    row["warnings"].append("Google Benchmark versions straddle 1.9.0: time "
                                           "semantics of threaded rows differ (compared on "
                                           "request)")
                elif unknown_versions and threads > 1:
                    threaded_time_rows += 1
            _comparability_warnings(row, bs, cs, changed_layouts)
            if row["direction"] is None:
                row["verdict"] = "incomparable"
                row["notes"].append(f"metric {metric} has no declared direction; use --metric "
                                    f"{metric}:higher|lower")
            rows.append(row)
    if threaded_time_rows:
        warnings.append(f"Google Benchmark version unknown for a side: {threaded_time_rows} "
                        "time-based row(s) with threads > 1 may not be comparable (1.9.0 changed "
                        "threaded time semantics); prefer ops_per_s")
    decide(rows, options)
    few_samples_cautions(rows)
    matched = [r for r in rows if r.get("matched") and r["paired"]]
    if matched:
        exact = sum(1 for r in matched if r.get("exact"))
        notes.append(f"{len(matched)} row(s) hold the same repetitions on both sides (identical "
                     "rows: a run compared with itself or a copy) and were compared one to one"
                     + (f"; {exact} of them identical in the metric compared: change exactly 0, "
                        "interval [0, 0]" if exact else ""))
    return finish(rows, warnings, notes, options)


def _versions_text(versions):
    return ", ".join(sorted(version_text(v) for v in versions))


# Fewer repetitions a side than this and a claimed regression, improvement or equivalence ("no
# change larger than T %") carries a caution:
# with 8 or fewer, the 95 % interval of a median rests on its extreme order statistics (for
# n <= 8 the distribution-free interval of a median is (min, max) or wider), so one outlier
# moves it.
FEW_SAMPLES = 9


def few_samples_cautions(rows):
    """Add a warning to every regression, improvement or equivalence ("no change") claimed from
    fewer than FEW_SAMPLES repetitions on a side (in place)."""
    for r in rows:
        if r["verdict"] in ("regression", "improvement", "no change") and r["paired"]:
            nb, nc = r["baseline"]["n"], r["current"]["n"]
            if min(nb, nc) < FEW_SAMPLES:
                r["warnings"].append(f"{r['verdict']} claimed from {nb} / {nc} repetitions "
                                     f"(baseline / current, fewer than {FEW_SAMPLES} a side): "
                                     "one outlier can move it; confirm with "
                                     f"--benchmark_repetitions={FEW_SAMPLES} or more")


def _regime_counts(samples):
    counts = {}
    for x in samples:
        label = _regime_label(x) or "unlabelled"
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def _effect_verdict(row):
    """"regression" or "improvement" by the direction of the row's change when it reaches the
    row's minimum effect, else "no change"."""
    change = row["change_pct"]
    if abs(change) < row["min_effect_pct"]:
        return "no change"
    bad = change < 0 if row["direction"] == "higher" else change > 0
    return "regression" if bad else "improvement"


def _interval(row):
    """95 % bootstrap interval of the change in percent (plots/stats.ratio_interval), or None
    with fewer than stats.MIN_REPETITIONS repetitions a side or a non-positive base."""
    b, c = row["baseline"]["samples"], row["current"]["samples"]
    if min(len(b), len(c)) < effects.MIN_REPETITIONS:
        return None
    try:
        _, lo, hi = effects.ratio_interval(b, c)
    except ValueError:
        return None
    return [(lo - 1.0) * 100.0, (hi - 1.0) * 100.0]


def decide(rows, options):
    """Fill p_value, p_adjusted, min_p, ci_pct and verdict of every compared row (in place).

    Compared rows are those with samples on both sides and no verdict yet. Statistical mode:
    Holm over the compared rows' Mann-Whitney p-values; a row is a regression (improvement)
    when significant, in the bad (good) direction and |change| >= its minimum effect
    ("no change" when significant but smaller). A row that is not significant is "no change"
    only when its 95 % interval lies within +-minimum effect, else "undecided" (with why).
    --threshold-only: the minimum effect alone decides every row.
    """
    for r in rows:
        if r["paired"]:
            r["min_p"] = min_attainable_p(r["baseline"]["n"], r["current"]["n"])
            if r.get("method", "unpaired") == "unpaired":
                r["ci_pct"] = _interval(r)
    compared = [r for r in rows if r["verdict"] is None]
    if options["threshold_only"]:
        for r in compared:
            r["verdict"] = _effect_verdict(r)
        _mark_equivalence(rows)
        return
    alpha = options["alpha"]
    for r in compared:
        if r.get("method") == "matched" or (r.get("method") == "pair_effects" and
                                            r.get("matched")):
            r["p_value"] = signed_rank_p(r["baseline"]["samples"], r["current"]["samples"])
        else:
            r["p_value"] = mann_whitney_p(r["baseline"]["samples"], r["current"]["samples"])
    for r, adj in zip(compared, holm_adjust([r["p_value"] for r in compared])):
        r["p_adjusted"] = adj
    for r in compared:
        if r["p_adjusted"] <= alpha:
            r["verdict"] = _effect_verdict(r)
            if r["verdict"] == "no change" and r["change_pct"] != 0:
                r["notes"].append(f"significant but below the {r['min_effect_pct']:g} % "
                                  "minimum effect")
            continue
        ci, eff = r["ci_pct"], r["min_effect_pct"]
        if ci is not None and effects.is_equivalent((ci[0] / 100.0, ci[1] / 100.0),
                                                    eff / 100.0):
            r["verdict"] = "no change"
            continue
        r["verdict"] = "undecided"
        if ci is None and r.get("unit") == "window pairs":
            r["notes"].append(f"{r['baseline']['n']} / {r['current']['n']} window pairs in one "
                              f"regime: an interval needs {effects.MIN_PAIRS} a side")
        elif ci is None:
            r["notes"].append(f"{r['baseline']['n']} / {r['current']['n']} repetitions: an "
                              f"interval needs {effects.MIN_REPETITIONS} a side")
        else:
            r["notes"].append(f"not significant and the 95 % interval [{ci[0]:+.1f} %, "
                              f"{ci[1]:+.1f} %] is not within +-{eff:g} %")
    _mark_equivalence(rows)


def equivalence_text(min_effect_pct):
    """The equivalence answer for a minimum effect in percent: 'no change larger than 5 %'."""
    return f"no change larger than {min_effect_pct:g} %"


def _mark_equivalence(rows):
    """Set every row's "equivalent" (bool) and "answer" (in place): a "no change" row whose 95 %
    interval lies within +-its minimum effect (stats.is_equivalent) answers "no change larger
    than T %" (equivalence_text); every other row's answer is its verdict. A "no change" without
    such an interval (significant but below the minimum effect, or --threshold-only) keeps the
    plain "no change"."""
    for r in rows:
        ci = r.get("ci_pct")
        r["equivalent"] = bool(
            r["verdict"] == "no change" and ci is not None and
            effects.is_equivalent((ci[0] / 100.0, ci[1] / 100.0), r["min_effect_pct"] / 100.0))
        r["answer"] = equivalence_text(r["min_effect_pct"]) if r["equivalent"] else r["verdict"]


def repetitions_to_decide(rows, options):
    """Repetitions a side that would likely decide every undecided row: enough for the exact U
    test to reach the Holm threshold, at least stats.MIN_REPETITIONS, and, for a row whose
    interval is too wide, n x (width / minimum effect)^2 (intervals shrink as 1/sqrt(n));
    capped at 200."""
    compared = [r for r in rows if r["paired"]]
    need = max(repetitions_needed(options["alpha"], len(compared)), effects.MIN_REPETITIONS)
    for r in rows:
        if r["verdict"] != "undecided" or not r["paired"]:
            continue
        # In repetitions a side (a duet row's n counts window pairs; its width shrinks with
        # the repetitions just the same).
        n = max(r["baseline"].get("repetitions", r["baseline"]["n"]),
                r["current"].get("repetitions", r["current"]["n"]))
        if r["ci_pct"] is not None:
            width = r["ci_pct"][1] - r["ci_pct"][0]
            ratio = width / max(r["min_effect_pct"], 0.1)
            # An unbounded interval (values near the float maximum) needs the cap.
            need = max(need, n + 1, 200 if not math.isfinite(ratio) or ratio > 1e3 else
                       math.ceil(n * ratio ** 2))
    return min(need, 200)


def _goodness(row):
    """Sort key: the change signed so that negative is worse (rows without a change last)."""
    if row["change_pct"] is None:
        return (1, 0.0, row["key"])
    sign = 1.0 if row["direction"] != "lower" else -1.0
    return (0, sign * row["change_pct"], row["key"])


def rule_text(options, m):
    """The decision rule in one line, for the console and the JSON summary."""
    if options["threshold_only"]:
        return (f"rule: threshold only (|change of medians| >= {options['min_effect']:g} %), no "
                "statistics")
    return (f"rule: two-sided Mann-Whitney U, Holm-corrected over {m} rows (alpha "
            f"{options['alpha']:g}), minimum effect {options['min_effect']:g} %; 'no change "
            f"larger than {options['min_effect']:g} %' (equivalence) needs the 95 % bootstrap "
            f"interval of the change within +-minimum effect; repetitions of one coherence "
            f"regime per row; the same repetitions on both sides (a run and itself) are "
            f"compared one to one (signed rank; identical: change exactly 0); duet rows by the "
            f"change of their paired effect B/A over window pairs")


def finish(rows, warnings, notes, options):
    """Sort rows worst first, count verdicts, add the repetitions advice and the exit code."""
    rows.sort(key=_goodness)
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    m = sum(1 for r in rows if r["paired"])
    message = ""
    need = None
    if counts["undecided"]:
        need = repetitions_to_decide(rows, options)
        have = sorted({(r["baseline"].get("repetitions", r["baseline"]["n"]),
                        r["current"].get("repetitions", r["current"]["n"])) for r in rows
                       if r["verdict"] == "undecided" and r["paired"]})
        warnings.append(f"{counts['undecided']} row(s) undecided ({', '.join(f'{a}/{b}' for a, b in have)} "
                        f"repetitions baseline/current): rerun with {need} repetitions a side, "
                        "compare fewer rows (--filter), or use --threshold-only")
    if counts["incomparable"]:
        exit_code = EXIT_BAD_INPUT
        first = next(r for r in rows if r["verdict"] == "incomparable")
        message = (f"{counts['incomparable']} row(s) incomparable, e.g. {first['key']} "
                   f"{first['metric']}: {first['notes'][-1]}")
    elif not m and not counts["broken"] and not options.get("allow_empty"):
        exit_code = EXIT_BAD_INPUT
        message = "no benchmark appears on both sides" + \
            (" after --filter" if options["filter"] is not None else "")
    elif counts["regression"] or counts["broken"]:
        exit_code = EXIT_REGRESSION
        if counts["broken"]:
            first = next(r for r in rows if r["verdict"] == "broken")
            message = (f"{counts['broken']} broken row(s) (a current repetition broke an "
                       "invariant, or measured in the baseline with no usable current "
                       f"repetition), e.g. {first['key']}: {first['notes'][-1]}")
    elif (counts["undecided"] and not options.get("allow_undecided") and
          100.0 * counts["undecided"] > options.get("max_undecided_pct", 0.0) * max(m, 1)):
        exit_code = EXIT_UNDECIDED
        message = (f"undecided: {counts['undecided']} rows; rerun with {need} repetitions a side "
                   "(or pass --allow-undecided)")
        if options.get("max_undecided_pct"):
            message += (f"; more than the {options['max_undecided_pct']:g} % of {m} rows "
                        "--max-undecided lets pass")
    elif counts["only in baseline"] and not options.get("allow_missing"):
        # A point the current run lost is not a pass (issue 27 item 4): undecided.
        exit_code = EXIT_UNDECIDED
        first = next(r for r in rows if r["verdict"] == "only in baseline")
        message = (f"{counts['only in baseline']} row(s) only in the baseline (missing from the "
                   f"current run), e.g. {first['key']}; run those points, restrict the "
                   "comparison with --filter, or pass --allow-missing")
    else:
        exit_code = EXIT_OK
    summary = dict(counts)
    summary.update({"equivalent": sum(1 for r in rows if r.get("equivalent")),
                    "rows_compared": m, "exit_code": exit_code, "message": message,
                    "mode": "threshold-only" if options["threshold_only"] else "mann-whitney+holm",
                    "rule": rule_text(options, m), "repetitions_needed": need,
                    "alpha": options["alpha"], "min_effect_pct": options["min_effect"]})
    return {"rows": rows, "warnings": warnings, "notes": notes, "summary": summary}


# ---- output -------------------------------------------------------------------------------------


def fmt_number(v):
    """Format a mean for the table: integers from 1e5, 6 significant digits below, an
    exponent outside [1e-3, 1e10)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if abs(v) >= 1e10 or (v != 0 and abs(v) < 1e-3):
        return f"{v:.4e}"
    if abs(v) >= 1e5:
        return f"{v:.0f}"
    return f"{v:.6g}"


def fmt_pct(v, signed=False):
    """Format a percentage ("±2%" style stddev, or "+5.1%" change), "-" when missing."""
    if v is None or math.isnan(v):
        return "-"
    if math.isinf(v):
        return "+inf%" if v > 0 else "-inf%"
    return f"{v:+.1f}%" if signed else f"±{v:.1f}%"


def equivalence_line(result):
    """'equivalence: 49 of 49 rows compared show no change larger than their minimum effect
    (5 %) ...', or "" when no row is equivalent."""
    s = result["summary"]
    if not s.get("equivalent"):
        return ""
    pcts = sorted({r["min_effect_pct"] for r in result["rows"] if r.get("equivalent")})
    return (f"equivalence: {s['equivalent']} of {s['rows_compared']} rows compared show "
            f"{equivalence_text(pcts[0]) if len(pcts) == 1 else 'no change larger than their minimum effect'}"
            " (95 % interval of the change within +-minimum effect)")


def summary_line(result):
    """One line: "2 regressions, 1 improvement, 40 no change, 3 undecided (of 46 rows
    compared)", followed by the other verdicts when present."""
    s = result["summary"]

    def plural(n, word):
        return f"{n} {word}" + ("s" if n != 1 and word in ("regression", "improvement") else "")

    parts = [plural(s["regression"], "regression"), plural(s["improvement"], "improvement"),
             f"{s['no change']} no change", f"{s['undecided']} undecided"]
    line = ", ".join(parts) + f" (of {s['rows_compared']} rows compared"
    extra = [f"{s[v]} {v}" for v in ("only in baseline", "only in current", "incomparable")
             if s[v]]
    line += ("; " + ", ".join(extra) if extra else "") + ")"
    if s["mode"] == "threshold-only":
        line += f"; threshold only ({s['min_effect_pct']:g} %), no statistics"
    return line


def _table_cells(r):
    """The display cells of one row: baseline median, %stddev, %change (of medians), 95 %
    interval, current median, %stddev, repetitions used baseline/current (+regime), verdict,
    metric, name."""
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
            r.get("answer") or r["verdict"], r["metric"] + ("[ns]" if r["metric"] in TIME_METRICS else ""),
            r["key"]]


TABLE_HEADER = ["baseline", "%stddev", "%change", "interval", "current", "%stddev", "reps",
                "verdict", "metric", "name"]


def format_table(result):
    """lkp-tests style plain-text table: numbers right-aligned, one row per benchmark and metric,
    worst change first, then notes, warnings and the summary line."""
    widths = [14, 9, 9, 19, 15, 9, 16]
    lines = []
    verdict_width = max([16] + [len(_table_cells(r)[7]) for r in result["rows"]])

    def line(cells):
        head = "".join(f"{c:>{w}}" for c, w in zip(cells[:7], widths))
        return f"{head}  {cells[7]:<{verdict_width}} {cells[8]}  {cells[9]}"

    lines.append(line(TABLE_HEADER))
    for r in result["rows"]:
        lines.append(line(_table_cells(r)))
    for r in result["rows"]:
        for n in r["notes"]:
            lines.append(f"note: {r['key']} {r['metric']}: {n}")
    lines += [f"note: {n}" for n in result["notes"]]
    for r in result["rows"]:
        for w in r["warnings"]:
            lines.append(f"warning: {r['key']} {r['metric']}: {w}")
    lines += [f"warning: {w}" for w in result["warnings"]]
    lines.append(result["summary"]["rule"] + "; reps = repetitions used baseline/current"
                 "@coherence regime (N=N: the same repetitions matched one to one; Np: window "
                 "pairs of a duet row)")
    equivalence = equivalence_line(result)
    if equivalence:
        lines.append(equivalence)
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"


def format_markdown(result):
    """Markdown for a CI comment: summary, the table (regressions in bold), warnings, notes."""
    out = [f"**lockline regression check:** {summary_line(result)}", ""]
    out.append("| " + " | ".join(TABLE_HEADER) + " |")
    out.append("|" + "---:|" * 7 + ":---|:---|:---|")
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
    if extra:
        out += [""] + extra
    return "\n".join(out) + "\n"


def format_json(result):
    """The full result as JSON (rows with samples, p-values and notes; warnings; summary)."""
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


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2) like every other input error."""

    def error(self, message):
        """Print "compare.py: error: MESSAGE (see --help)" and exit with status 2."""
        print(f"compare.py: error: {message} (see --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def build_parser():
    """The argparse parser of the command line (see the module docstring)."""
    p = _Parser(
        description="Compare Google Benchmark / lockline result files and fail on a real "
                    "regression (exit 0 every row decided, no regression; 1 regression; 2 bad "
                    "or incomparable input; 3 undecided rows).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Answers per row: regression / improvement (significant, Mann-Whitney U with "
               "Holm, and at least\n--min-effect), 'no change larger than T %' (equivalence: "
               "the 95 % interval of the change\nlies within +-T, T = --min-effect or its "
               "--override), or undecided (neither: rerun with more\nrepetitions). A run "
               "compared with itself (the same rows on both sides) is matched repetition by\n"
               "repetition: the change is exactly 0, interval [0, 0], so it answers 'no change "
               "larger than T %'\nwith any number of repetitions. Duet rows (duet/...) are "
               "compared by the change of their paired\neffect B/A (metric pair_ratio) over "
               "both runs' window pairs. Details: ci/REGRESSION.md.")
    p.add_argument("baseline", help="baseline file, comma-separated files, or a run directory")
    p.add_argument("current", help="current file, comma-separated files, or a run directory")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise significance level, Holm-corrected (default 0.05)")
    p.add_argument("--min-effect", type=float, default=5.0,
                   help="minimum change in percent for a regression, and the equivalence bound "
                        "T of 'no change larger than T %%' (default 5)")
    p.add_argument("--override", action="append", default=[], metavar="REGEX=PCT",
                   help="per-benchmark minimum effect; first matching regex wins (repeatable)")
    p.add_argument("--threshold-only", action="store_true",
                   help="decide on the minimum effect alone, without statistics (fallback for "
                        "too few repetitions)")
    p.add_argument("--format", choices=sorted(FORMATTERS), default="table")
    p.add_argument("--output", metavar="FILE", help="also write the output to FILE")
    p.add_argument("--metric", action="append", default=[], metavar="NAME[:higher|lower]",
                   help="compare this metric instead of the default (pair_ratio for duet rows, "
                        "else ops_per_s, else real_time); repeatable; unknown metrics need a "
                        "direction")
    p.add_argument("--filter", metavar="REGEX", help="compare only benchmarks matching REGEX")
    p.add_argument("--allow-undecided", action="store_true",
                   help="exit 0 (not 3) when rows are undecided and nothing regressed")
    p.add_argument("--allow-missing", action="store_true",
                   help="exit 0 (not 3) when benchmarks of the baseline are missing from the "
                        "current side (rows whose current repetitions all failed or overran "
                        "are 'broken' and fail regardless)")
    p.add_argument("--allow-unfinished", action="store_true",
                   help="compare files of runs that did not finish (finished: false)")
    p.add_argument("--allow-gb-straddle", action="store_true",
                   help="compare time-based rows across Google Benchmark 1.9.0 anyway")
    return p


def emit_result(result, args) -> int:
    """Print `result` in args.format, write it to args.output when given, say the summary's
    message on stderr, and return the exit code (EXIT_BAD_INPUT when --output cannot be
    written). Shared by the run-vs-run and the build-duet (--builds) paths."""
    text = FORMATTERS[args.format](result)
    sys.stdout.write(text)
    if args.output:
        try:
            # Created exclusively and renamed into place: a planted symlink at FILE is
            # replaced, never written through (plots/outputs.py; issue 27 item 10).
            outputs.write_atomic(args.output, text)
        except OSError as e:
            print(f"compare.py: error: --output {args.output}: {e.strerror}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if result["summary"]["message"]:
        print(f"compare.py: error: {result['summary']['message']}", file=sys.stderr)
    return result["summary"]["exit_code"]


def main(argv=None):
    """Run the command line; returns the exit status (0, 1, 2 or 3). Errors: one line on
    stderr. `compare.py --builds RUN ...` answers a build-duet run (main_builds)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "--builds":
        return main_builds(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if not MIN_ALPHA <= args.alpha < 1:
            raise InputError(f"--alpha {args.alpha:g}: must be between 0 and 1, at least "
                             f"{MIN_ALPHA:g} (a smaller level needs more repetitions than any "
                             "run holds)")
        if not 0 <= args.min_effect < MAX_MIN_EFFECT_PCT:
            raise InputError(f"--min-effect {args.min_effect:g}: must be a finite percentage "
                             f"from 0 to below {MAX_MIN_EFFECT_PCT:g} (inf or nan would disable "
                             "the gate)")
        options = {"alpha": args.alpha, "min_effect": args.min_effect,
                   "overrides": [parse_override(o) for o in args.override],
                   "threshold_only": args.threshold_only,
                   "metrics": [parse_metric_option(m) for m in args.metric],
                   "filter": compile_regex(args.filter, "--filter") if args.filter else None,
                   "allow_undecided": args.allow_undecided,
                   "allow_unfinished": args.allow_unfinished,
                   "allow_missing": args.allow_missing,
                   "allow_gb_straddle": args.allow_gb_straddle}
        base = load_side(expand_side_argument(args.baseline), "baseline")
        cur = load_side(expand_side_argument(args.current), "current")
        result = compare(base, cur, options)
    except InputError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return emit_result(result, args)


# ---- paired builds (issue 38): one run of lockline --duet-with=OLD --------------------------------


BUILD_RATES = {
    # the rate a window pair is compared by: ops per second of the threads' CPU time (the
    # default: what the code does while it runs; a preempted window's lost time is not in it)
    # or of window wall time (preemption included: pairs with an overrun window are left out)
    "cpu": ("a_ops_per_cpu_s", "b_ops_per_cpu_s"),
    "wall": ("a_ops_per_s", "b_ops_per_s"),
}


# A window pair of a multi-thread row in which some thread of either window spent more than this
# share of its window preempted (the pair's `off_cpu`: its run delay, runnable but not running,
# from /proc/thread-self/schedstat; a pthread_mutex waiter asleep in futex_wait is not counted) is
# left out: a spinning waiter then burns its CPU time on a lock whose holder is
# descheduled, which no rate of the pair corrects (issue 38: pair ratios of 0.05-38 on 2-thread
# lock rows of an A/A duet under load). 2 % of a 5 ms window is 100 us: far above a wake-up of
# another thread, far below a scheduler time slice.
PREEMPTED_SHARE = 0.02


def load_build_pairs(paths, rate="cpu"):
    """Read a build-duet run (lockline --duet-with=OLD; results/SCHEMA.md `details.build_duet`).
    Returns a dict: "pairs" {key: [(coherence label, old rate, new rate, repetition), ...] over
    every repetition (repetition: (file, repetition_index), the resampling unit); `rate` (BUILD_RATES) "cpu": ops per CPU-second, "wall": ops/s with window pairs
    holding an overrun window left out; pairs of a multi-thread row with a window preempted for
    more than PREEMPTED_SHARE of it left out}, "overrun_pairs" {key: n with an overrun window},
    "preempted_pairs" {key: n left out as preempted},
    "failed" {key: [error messages]}, "repetitions" {key: n}, "notes", "old_binary".
    Raises InputError (exit 2) for an unreadable file, an unfinished run (the caller may allow
    it) or a file without build-duet rows."""
    side = {"pairs": {}, "overrun_pairs": {}, "preempted_pairs": {}, "failed": {},
            "repetitions": {}, "notes": [],
            "old_binary": None, "finished": True}
    for path in paths:
        doc = results.read_document(path)
        ctx = doc.get("context", {})
        lctx = ctx.get("lockline") if isinstance(ctx.get("lockline"), dict) else {}
        bd = lctx.get("build_duet") if isinstance(lctx.get("build_duet"), dict) else None
        if bd is None:
            raise InputError(f"{path}: not a build-duet run (context.lockline.build_duet "
                             "missing); make one with lockline --duet-with=OLD_BINARY or "
                             "ci/regression.sh --against=OLD_BINARY")
        side["old_binary"] = bd.get("old_binary")
        if lctx.get("finished") is not True:
            side["finished"] = False
        for r in doc["benchmarks"]:
            if r.get("run_type") == "aggregate":
                continue
            key = results.row_key(r)
            if r.get("error_occurred") or r.get("skipped"):
                msg = r.get("error_message")
                side["failed"].setdefault(key, []).append(
                    msg if isinstance(msg, str) and msg else "error_occurred")
                continue
            details = r.get("details") if isinstance(r.get("details"), dict) else {}
            duet = details.get("build_duet") if isinstance(details.get("build_duet"),
                                                           dict) else None
            if duet is None:
                continue
            coherence = r.get("coherence") if isinstance(r.get("coherence"), dict) else {}
            label = coherence.get("label") if isinstance(coherence.get("label"), str) else ""
            side["repetitions"][key] = side["repetitions"].get(key, 0) + 1
            rep_index = r.get("repetition_index")
            unit = (path, rep_index if isinstance(rep_index, int)
                    else side["repetitions"][key])
            got = side["pairs"].setdefault(key, [])
            for pair in duet.get("pairs") if isinstance(duet.get("pairs"), list) else []:
                if not isinstance(pair, dict):
                    continue
                a, b = (pair.get(k) for k in BUILD_RATES[rate])
                if not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                           for x in (a, b)):
                    continue
                if pair.get("overrun") is True:
                    side["overrun_pairs"][key] = side["overrun_pairs"].get(key, 0) + 1
                    if rate == "wall":
                        continue
                off = pair.get("off_cpu")
                threads = r.get("threads")
                if (isinstance(threads, int) and threads >= 2 and isinstance(off, (int, float))
                        and not isinstance(off, bool) and off > PREEMPTED_SHARE):
                    side["preempted_pairs"][key] = side["preempted_pairs"].get(key, 0) + 1
                    continue
                got.append((label, float(a), float(b), unit))
    if not side["pairs"] and not side["failed"]:
        raise InputError(f"{', '.join(paths)}: no build-duet rows")
    return side


def _builds_used_pairs(pairs, regime):
    """The pairs of coherence regime `regime` (stats.compare_pairs' choice; "" for pairs without
    a label, `mixed` repetitions left out): [(old, new, repetition)]."""
    good = [(lab, a, b, g) for lab, a, b, g in pairs
            if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0]
    if regime:
        return [(a, b, g) for lab, a, b, g in good if lab == regime]
    return [(a, b, g) for lab, a, b, g in good if lab != effects.MIXED]


def repetition_t_p(used):
    """Two-sided p-value of a one-sample t test that the repetitions' median log pair ratios
    (new/old) are centred on 0: the repetition, not the window pair, is the unit (issue 38:
    the pairs of one repetition share its address layout and placement, so they are not
    independent evidence). `used`: [(old, new, repetition)]. 1.0 with fewer than 2
    repetitions or every repetition at exactly 0; 0.0 when they agree exactly on a non-zero
    value."""
    by = {}
    for a, b, g in used:
        by.setdefault(g, []).append(math.log(b / a))
    meds = [statistics.median(v) for v in by.values()]
    if len(meds) < 2 or not any(meds):
        return 1.0
    sd = statistics.stdev(meds)
    mean = statistics.fmean(meds)
    if sd == 0:
        return 0.0
    from scipy import stats  # pylint: disable=import-outside-toplevel
    t = mean / (sd / math.sqrt(len(meds)))
    return float(2.0 * stats.t.sf(abs(t), len(meds) - 1))


def _regime_candidates(pairs, key, min_effect_pct):
    """One candidate answer per coherence regime of a build-duet row's pairs: [{"regime",
    "comp" (stats.compare_pairs over that regime's pairs), "used" [(old, new, repetition)],
    "p" (repetition_t_p, None without an interval)}], the regime with most repetitions first.
    Pairs without a regime label (one-thread rows: "none"/"unknown") are one candidate;
    `mixed` repetitions none."""
    labels = {lab for lab, _, _, _ in pairs}
    regimes = sorted(lab for lab in labels if lab not in effects.NO_REGIME and lab != effects.MIXED)
    out = []
    for regime in regimes or [""]:
        sub = pairs if not regime else [p for p in pairs if p[0] == regime]
        comp = effects.compare_pairs(sub, label=key, min_effect=min_effect_pct / 100.0)
        used = _builds_used_pairs(sub, comp.regime)
        out.append({"regime": comp.regime, "comp": comp, "used": used,
                    "p": repetition_t_p(used) if comp.ci is not None else None,
                    "p_adjusted": None})
    out.sort(key=lambda c: (-len({g for _, _, g in c["used"]}), -len(c["used"]),
                            effects.regime_rank(c["regime"])))
    return out


def _answer_build_row(row, cands, total_pairs, reps, options):
    """Answer one build-duet row (in place) from its regimes' candidates (_regime_candidates,
    p_adjusted set): a regression or improvement when a regime's change is significant (Holm)
    and at least the minimum effect (a regression wins over an improvement); else "no change"
    when a regime's interval lies within +-T (the regime with most repetitions among them);
    else "undecided", from the regime with most repetitions. On this VM the far regime's
    2-thread rows differ by process (per repetition 0.72-1.10 of the old build, against
    0.98-1.01 near: issue 38), so a row the near regime decides is not held undecided by the
    far one; the row names its regime and what the others said."""
    eff = row["min_effect_pct"]

    def state(c):
        comp = c["comp"]
        if comp.ci is None:
            return "undecided"
        change = comp.effect * 100.0
        significant = c["p_adjusted"] is not None and c["p_adjusted"] <= options["alpha"]
        if significant and abs(change) >= eff:
            return _effect_verdict({"change_pct": change, "min_effect_pct": eff,
                                    "direction": row["direction"]})
        if effects.is_equivalent(comp.ci, eff / 100.0):
            return "no change"
        return "undecided"

    states = [state(c) for c in cands]
    chosen = 0
    for wanted in ("regression", "improvement", "no change"):
        if wanted in states:
            chosen = states.index(wanted)
            break
    c = cands[chosen]
    comp, used = c["comp"], c["used"]
    row["regime"] = c["regime"] or None
    row["dropped"] = total_pairs - len(used)
    row["units"] = len({g for _, _, g in used})
    for label, vals in (("baseline", [a for a, _, _ in used]),
                        ("current", [b for _, b, _ in used])):
        if vals:
            n, mean, sd = summarize(vals)
            row[label] = {"n": n, "mean": mean, "stddev_pct": sd, "samples": vals,
                          "median": statistics.median(vals), "repetitions": reps}
    if not used:
        row["verdict"] = "undecided"
        row["notes"].append("no usable window pair")
        return
    row["paired"] = True
    if comp.effect is not None:
        row["change_pct"] = comp.effect * 100.0
    row["ci_pct"] = None if comp.ci is None else [comp.ci[0] * 100.0, comp.ci[1] * 100.0]
    row["p_value"] = c["p"] if c["p"] is not None else repetition_t_p(used)
    row["p_adjusted"] = c["p_adjusted"] if c["p_adjusted"] is not None else 1.0
    if row["dropped"]:
        row["notes"].append(f"{c['regime'] or 'pooled'}: {len(used)} of {total_pairs} window "
                            "pairs used (others in other coherence regimes)")
    others = [f"{o['regime']}: {st}" for i, (o, st) in enumerate(zip(cands, states))
              if i != chosen and o["regime"]]
    if others:
        row["regimes"] = {o["regime"]: st for o, st in zip(cands, states) if o["regime"]}
        row["notes"].append("other regimes: " + "; ".join(others))
    verdict = states[chosen]
    row["verdict"] = verdict
    ci = row["ci_pct"]
    if verdict == "no change" and row["p_adjusted"] <= options["alpha"]:
        row["notes"].append(f"significant change of {row['change_pct']:+.1f} %, below the "
                            f"{eff:g} % minimum effect")
    if verdict == "undecided":
        if ci is None:
            row["notes"].append(f"{row['baseline']['n']} window pairs of {row['units']} "
                                f"repetition(s) in one regime: an interval needs "
                                f"{effects.MIN_PAIRS} pairs of {effects.MIN_PAIR_REPETITIONS} "
                                "repetitions")
        else:
            significant = row["p_adjusted"] <= options["alpha"]
            row["notes"].append(f"the 95 % interval [{ci[0]:+.1f} %, {ci[1]:+.1f} %] is "
                                f"not within +-{eff:g} %" +
                                ("" if significant else " and the change is not significant"))


def compare_builds(side, options):
    """Answer every row of a build-duet run from its window pairs (new build / old build).

    Per row and coherence regime: the window pairs of that regime's repetitions (overrun
    pairs kept per CPU-second, preempted pairs of multi-thread rows left out). The change is
    the median pair ratio new/old - 1 with its 95 % two-level bootstrap interval
    (stats.compare_pairs); significance a two-sided t test over the repetitions' median log
    ratios (repetition_t_p), Holm-corrected over every regime of every row (alpha). Each
    regime says "regression" / "improvement" when significant and at least the minimum effect
    T in that direction, "no change" (answer "no change larger than T %") when its interval
    lies within +-T, else "undecided" (also under stats.MIN_PAIRS pairs); the row takes the
    first of regression, improvement, no change that a regime says (_answer_build_row).
    A key whose every repetition failed is "broken". Returns the result dict of finish()."""
    rows = []
    pending = []  # (row, its regimes' candidates, its pairs, its repetitions)
    keys = sorted(set(side["pairs"]) | set(side["failed"]))
    if options["filter"] is not None:
        keys = [k for k in keys if options["filter"].search(k)]
    for key in keys:
        pairs = side["pairs"].get(key, [])
        row = {"key": key, "metric": "build_ratio", "direction": "higher",
               "min_effect_pct": _min_effect_for(key, options), "notes": [], "warnings": [],
               "regime": None, "dropped": 0, "ci_pct": None, "baseline": None,
               "current": None, "change_pct": None, "p_value": None, "p_adjusted": None,
               "min_p": None, "verdict": None, "paired": False, "method": "build_pairs",
               "unit": "window pairs", "matched": False}
        over = side["overrun_pairs"].get(key, 0)
        if over and options.get("rate") == "wall":
            row["warnings"].append(f"{over} window pair(s) with an overrun window left out")
        elif over:
            row["notes"].append(f"{over} window pair(s) with an overrun window (kept: compared "
                                "per CPU-second)")
        preempted = side.get("preempted_pairs", {}).get(key, 0)
        if preempted:
            row["notes"].append(f"{preempted} window pair(s) left out: a thread of a window was "
                                f"off its CPU for more than {PREEMPTED_SHARE:.0%} of it "
                                "(preempted while the others spun)")
        if not pairs:
            failed = side["failed"].get(key, [])
            row["verdict"] = "broken" if failed else "undecided"
            row["notes"].append(f"every repetition failed, e.g. {failed[0]!r}" if failed
                                else "no usable window pair")
            rows.append(row)
            continue
        if side["failed"].get(key):
            row["warnings"].append(f"{len(side['failed'][key])} repetition(s) failed, e.g. "
                                   f"{side['failed'][key][0]!r}")
        pending.append((row, _regime_candidates(pairs, key, row["min_effect_pct"]),
                        len(pairs), side["repetitions"].get(key, 0)))
        rows.append(row)
    # Holm over every regime's test of every row: a row answered in two regimes takes two tests.
    tests = [c for _, cands, _, _ in pending for c in cands if c["p"] is not None]
    for c, adj in zip(tests, holm_adjust([c["p"] for c in tests])):
        c["p_adjusted"] = adj
    for row, cands, total, reps in pending:
        _answer_build_row(row, cands, total, reps, options)
    _mark_equivalence(rows)
    notes = list(side["notes"])
    if side["old_binary"]:
        notes.append(f"paired builds: baseline = the old build {side['old_binary']}, current = "
                     "this build, window by window on the same PUs")
    result = finish(rows, [], notes, options)
    m = result["summary"]["rows_compared"]
    result["summary"]["mode"] = "paired-builds"
    result["summary"]["rule"] = (
        f"rule: paired builds (lockline --duet-with): change = median window-pair ratio new/old "
        f"- 1 of ops per {'CPU-second' if options.get('rate') != 'wall' else 'second'} over "
        f"the pairs of one coherence regime, 95 % interval from a two-level bootstrap "
        f"(repetitions, then their pairs; widened for few repetitions); significance a "
        f"two-sided one-sample t test over the repetitions' median log pair ratios, "
        f"Holm-corrected over every regime of {m} rows (alpha "
        f"{options['alpha']:g}); regression needs significance and at least the minimum effect "
        f"{options['min_effect']:g} %; 'no change larger than T %' needs the interval within "
        f"+-T; a row answered in several regimes takes the first of regression, improvement, "
        f"no change that one of them says")
    if options.get("max_undecided_pct"):
        result["summary"]["rule"] += (
            f"; up to {options['max_undecided_pct']:g} % of the rows undecided pass the gate "
            f"(--max-undecided)")
    return result


def build_builds_parser():
    """The parser of `compare.py --builds RUN [options]`."""
    p = _Parser(prog="compare.py --builds",
                description="Answer a build-duet run (lockline --duet-with=OLD, ci/regression.sh "
                            "--against=OLD) from its window pairs: exit 0 no row regressed "
                            "and at most --max-undecided %% of the rows undecided, 1 "
                            "regression or broken row, 2 bad input, 3 more rows undecided.")
    p.add_argument("run", help="the run directory or its lockline.json")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--min-effect", type=float, default=5.0)
    p.add_argument("--override", action="append", default=[], metavar="REGEX=PCT")
    p.add_argument("--filter", metavar="REGEX")
    p.add_argument("--format", choices=sorted(FORMATTERS), default="table")
    p.add_argument("--output", metavar="FILE")
    p.add_argument("--allow-undecided", action="store_true")
    p.add_argument("--max-undecided", type=float, default=10.0, metavar="PCT",
                   help="undecided rows pass the gate (exit 0) while they are at most PCT %% "
                        "of the rows compared and no row regressed (default 10; 0: every row "
                        "must be decided)")
    p.add_argument("--allow-unfinished", action="store_true")
    p.add_argument("--rate", choices=sorted(BUILD_RATES), default="cpu",
                   help="compare pairs by ops per CPU-second of the windows' threads (cpu, the "
                        "default) or per second of window wall time (wall)")
    return p


def main_builds(argv):
    """`compare.py --builds RUN [options]`: the paired-builds gate; returns the exit status."""
    args = build_builds_parser().parse_args(argv)
    try:
        if not 0 < args.alpha < 1:
            raise InputError(f"--alpha {args.alpha:g}: must be between 0 and 1")
        if not 0 <= args.min_effect < MAX_MIN_EFFECT_PCT:
            raise InputError(f"--min-effect {args.min_effect:g}: must be a finite percentage "
                             f"from 0 to below {MAX_MIN_EFFECT_PCT:g}")
        if not 0 <= args.max_undecided <= 100:
            raise InputError(f"--max-undecided {args.max_undecided:g}: must be a percentage "
                             "from 0 to 100")
        options = {"alpha": args.alpha, "min_effect": args.min_effect,
                   "overrides": [parse_override(o) for o in args.override],
                   "threshold_only": False, "metrics": [],
                   "filter": compile_regex(args.filter, "--filter") if args.filter else None,
                   "allow_undecided": args.allow_undecided, "allow_missing": False,
                   "rate": args.rate, "max_undecided_pct": args.max_undecided}
        side = load_build_pairs(expand_side_argument(args.run), args.rate)
        if not side["finished"] and not args.allow_unfinished:
            raise InputError(f"{args.run}: the run did not finish (finished: false); pass "
                             "--allow-unfinished to answer the rows it has")
        result = compare_builds(side, options)
    except InputError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return emit_result(result, args)


if __name__ == "__main__":
    sys.exit(main())
