#!/usr/bin/python3
"""Decide whether CURRENT regressed against BASELINE: lockline's CI regression check.

Usage: compare.py BASELINE CURRENT [options]. BASELINE and CURRENT are each a Google Benchmark
JSON file (lockline's or any other), a comma-separated list of such files (their repetitions are
pooled), or a run directory holding lockline.json.

A row regresses when its change is in the metric's bad direction, statistically significant
(two-sided Mann-Whitney U over the repetitions, Holm-corrected over all rows compared, alpha 0.05)
AND at least the minimum effect (5 % by default). When the repetitions are too few for any
p-value to clear the corrected alpha, the row says "cannot detect" instead of "no change".
Improvements are reported, never fail. Follows pyperf / gbench compare.py (significance plus a
minimum effect) and lkp-tests' compare table layout; see ci/REGRESSION.md for the reasoning.

Exit status: 0 no regression, 1 regression, 2 bad or incomparable input (one line on stderr).
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

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2

# Google Benchmark 1.9.0 changed how time is accounted for threaded runs, so time-based rows from
# either side of it do not compare (rate counters such as ops_per_s are unaffected).
GB_TIME_SEMANTICS_CHANGE = (1, 9, 0)

# Multipliers to nanoseconds for Google Benchmark's time_unit values.
TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
TIME_METRICS = ("real_time", "cpu_time")

# Run-name decorations Google Benchmark appends that do not change what is measured.
_DECORATION_RE = re.compile(
    r"/(manual_time|real_time|repeats:\d+|iterations:\d+|min_time:[^/]+|min_warmup_time:[^/]+)"
    r"(?=/|$)")
_AGGREGATE_SUFFIXES = ("_mean", "_median", "_stddev", "_cv", "_BigO", "_RMS")

VERDICTS = ("regression", "improvement", "no change", "cannot detect", "only in baseline",
            "only in current", "incomparable")


class InputError(Exception):
    """Bad input: carries the one-line message main() prints before exiting with status 2."""


# ---- metrics ------------------------------------------------------------------------------------


def metric_direction(name, declared=None):
    """Return "higher" or "lower" (the good direction of metric `name`), or None if unknown.

    `declared` maps names to directions given with --metric and wins over the built-in table,
    which follows results/SCHEMA.md: names ending in _per_s, _per_wall_s, _per_cpu_s or /s
    (faults_per_wall_s, the 2004 pre-zeroing table's column) are higher-is-better;
    ns_per_op, real_time, cpu_time, wait_share, violations_per_million, *_ns and */op are
    lower-is-better. Directions are declared, never guessed from the data.
    """
    if declared and name in declared:
        return declared[name]
    if name.endswith(("_per_s", "_per_wall_s", "_per_cpu_s", "/s")):
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
    if value < 0 or math.isnan(value):
        raise InputError(f"--override {text!r}: the minimum effect must be >= 0 percent")
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


def strip_decorations(name):
    """Strip Google Benchmark's run-name decorations (/manual_time, /real_time, /repeats:N,
    /iterations:N, /min_time:X, /min_warmup_time:X) so runs that differ only in how they were
    driven pair up (and lockline's aggregate rows, which carry no lockline_key, pair with it).

    Example: "BM_x/8/repeats:5/manual_time" -> "BM_x/8". Arguments and /threads:N stay.
    """
    return _DECORATION_RE.sub("", name)


def row_key(row):
    """Return the pairing key of one benchmark row: lockline_key when present, else the run name
    (run_name, or name for files older than run_name) with decorations stripped."""
    key = row.get("lockline_key")
    if isinstance(key, str) and key:
        return key
    run_name = row.get("run_name")
    if not isinstance(run_name, str) or not run_name:
        run_name = row["name"]
    return strip_decorations(run_name)


def is_aggregate(row, names):
    """True when `row` is an aggregate (mean/median/stddev/cv, _BigO/_RMS complexity) rather than
    one repetition. `names` is the set of row names in the file: an old file without run_type is
    recognised by an aggregate suffix on a name whose base also appears as a row."""
    run_type = row.get("run_type")
    if run_type is not None:
        return run_type == "aggregate"
    if "aggregate_name" in row:
        return True
    name = row["name"]
    for suffix in _AGGREGATE_SUFFIXES:
        if name.endswith(suffix) and (suffix in ("_BigO", "_RMS") or
                                      name[:-len(suffix)] in names):
            return True
    return False


def read_json_file(path):
    """Read and parse one result file; returns the top-level object.

    Raises InputError naming the file when it is missing, empty, not JSON, or has no
    "benchmarks" array of objects each with a string "name".
    """
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a JSON text file (not UTF-8)") from None
    if not text.strip():
        raise InputError(f"{path}: empty file, expected Google Benchmark JSON")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") \
            from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a JSON object with a \"benchmarks\" array")
    rows = doc.get("benchmarks")
    if not isinstance(rows, list):
        raise InputError(f"{path}: no \"benchmarks\" array (is this Google Benchmark JSON?)")
    if not rows:
        raise InputError(f"{path}: the \"benchmarks\" array is empty (did the run finish?)")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputError(f"{path}: benchmarks[{i}] is not an object")
        if not isinstance(row.get("name"), str) or not row["name"]:
            raise InputError(f"{path}: benchmarks[{i}] has no \"name\"")
    if not isinstance(doc.get("context", {}), dict):
        raise InputError(f"{path}: \"context\" is not an object")
    return doc


def row_values(row, path):
    """Return the numeric metrics of one row as {name: float}, time metrics in ns.

    Every top-level number except bookkeeping fields (iterations, threads, repetitions, indexes)
    is a metric candidate; nested objects (lockline's params, counters, ...) are not, nor are
    non-finite values (NaN, inf: a metric that could not be measured). Raises InputError on an
    unknown time_unit or a non-numeric time.
    """
    skip = {"iterations", "threads", "repetitions", "repetition_index", "family_index",
            "per_family_instance_index", "error_occurred"}
    out = {}
    for k, v in row.items():
        if k in skip or isinstance(v, bool) or not isinstance(v, (int, float)) or \
                not math.isfinite(v):
            continue
        out[k] = float(v)
    for k in TIME_METRICS:
        if k in row:
            v = row[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InputError(f"{path}: row {row['name']!r}: {k} {v!r} is not a number")
            unit = row.get("time_unit", "ns")
            if unit not in TIME_UNIT_NS:
                raise InputError(f"{path}: row {row['name']!r}: time_unit {unit!r} is not one of "
                                 "ns, us, ms, s")
            if math.isfinite(v):
                out[k] = float(v) * TIME_UNIT_NS[unit]
    return out


def load_side(paths, label):
    """Load and pool the result files of one side ("baseline" or "current").

    Returns a dict: "label", "paths", "contexts" (one per file), "rows" (key -> list of sample
    dicts with "values", "threads", "coherence", "placement", "layout"), "notes" (excluded rows,
    aggregate fallbacks). Raises InputError for unreadable or malformed files.
    """
    side = {"label": label, "paths": list(paths), "contexts": [], "rows": {}, "notes": []}
    for path in paths:
        doc = read_json_file(path)
        side["contexts"].append(doc.get("context", {}))
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
            if r.get("error_occurred") or r.get("skipped"):
                excluded += 1
                continue
            key = row_key(r)
            if r.get("run_type") is None and r["name"].endswith("_mean") and \
                    r.get("aggregate_name") is None:
                key = strip_decorations(r["name"][:-len("_mean")])
            params = r.get("params") if isinstance(r.get("params"), dict) else {}
            coherence = r.get("coherence")
            side["rows"].setdefault(key, []).append({
                "values": row_values(r, path),
                "threads": r.get("threads", params.get("threads", 1)),
                "coherence": coherence.get("label") if isinstance(coherence, dict) else None,
                "placement": r.get("placement") if isinstance(r.get("placement"), dict) else None,
                "layout": params.get("layout"),
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
    mean = statistics.fmean(samples)
    sd = statistics.stdev(samples) if n > 1 else 0.0
    pct = sd / abs(mean) * 100.0 if mean != 0 else float("nan")
    return n, mean, pct


def min_attainable_p(n1, n2):
    """Smallest two-sided p-value an exact Mann-Whitney U test can give for sample sizes n1, n2:
    2 / C(n1+n2, n1) (complete separation), capped at 1. 3 vs 3: 0.1; 5 vs 5: 0.0079;
    9 vs 9: 4.1e-5."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def repetitions_needed(alpha, m):
    """Smallest n such that n repetitions per side can reach significance for m rows under Holm:
    2 / C(2n, n) <= alpha / m."""
    n = 1
    while min_attainable_p(n, n) > alpha / max(m, 1):
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


def side_gb_versions(side):
    """Return the set of Google Benchmark versions (int tuples) of a side's files, with None for a
    file that does not say (only lockline files carry context.lockline.versions)."""
    return {parse_version(_context_value(c, "lockline", "versions", "google_benchmark"))
            for c in side["contexts"]}


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
    """Warnings about run contexts that make the sides less comparable: a different host,
    topology, compiler, placement policy, CPU count; and layouts whose definition changed.

    Returns (warnings, changed_layouts) where changed_layouts is the set of layout keys (from
    context.lockline.layouts) whose content differs between the sides.
    """
    warnings = []
    bc, cc = base["contexts"][0], cur["contexts"][0]
    checks = [("host", ("host_name",)), ("CPU count", ("num_cpus",)),
              ("topology", ("lockline", "topology")), ("compiler", ("lockline", "compiler")),
              ("compiler flags", ("lockline", "cxx_flags")), ("pinning", ("lockline", "pin")),
              ("memory placement", ("lockline", "mem")), ("kernel", ("lockline", "kernel")),
              ("CPU model", ("lockline", "cpu_model"))]
    for what, path in checks:
        a, b = _context_value(bc, *path), _context_value(cc, *path)
        if a is not None and b is not None and a != b:
            detail = "; ".join(_short_diff(a, b))
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
    """The metric compared when no --metric is given: ops_per_s if any sample of either side has
    it (higher is better), else real_time in ns (lower is better)."""
    for s in base_samples + cur_samples:
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
    a layout whose definition changed. `bs`, `cs`: the row's samples per side."""
    blabels = sorted({str(s["coherence"]) for s in bs if s["coherence"] is not None})
    clabels = sorted({str(s["coherence"]) for s in cs if s["coherence"] is not None})
    if blabels and clabels and blabels != clabels:
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


def compare(base, cur, options):
    """Compare two loaded sides (see load_side) and decide a verdict per benchmark and metric.

    `options`: alpha, min_effect (percent), overrides [(regex, pct)], threshold_only (bool),
    metrics [(name, direction)] (empty: default metric), filter (regex or None).
    Returns a result dict: "rows" (list of row dicts, sorted worst change first), "warnings",
    "notes", "summary" (verdict counts, rows compared, exit_code, message).
    """
    warnings, changed_layouts = context_warnings(base, cur)
    notes = base["notes"] + cur["notes"]
    bver, cver = side_gb_versions(base), side_gb_versions(cur)
    straddle = straddles_gb_19(bver, cver)
    unknown_versions = None in bver or None in cver
    declared = dict(options["metrics"])
    rows = []
    keys = sorted(set(base["rows"]) | set(cur["rows"]))
    if options["filter"] is not None:
        keys = [k for k in keys if options["filter"].search(k)]
    threaded_time_rows = 0
    for key in keys:
        bs, cs = base["rows"].get(key, []), cur["rows"].get(key, [])
        metrics = [m for m, _ in options["metrics"]] or [default_metric(bs, cs)]
        for metric in metrics:
            bvals = [s["values"][metric] for s in bs if metric in s["values"]]
            cvals = [s["values"][metric] for s in cs if metric in s["values"]]
            if not bvals and not cvals:
                continue
            row = {"key": key, "metric": metric,
                   "direction": metric_direction(metric, declared),
                   "min_effect_pct": _min_effect_for(key, options), "notes": [],
                   "warnings": [],
                   "baseline": None, "current": None, "change_pct": None, "p_value": None,
                   "p_adjusted": None, "min_p": None, "verdict": None}
            for label, vals in (("baseline", bvals), ("current", cvals)):
                if vals:
                    n, mean, sd = summarize(vals)
                    row[label] = {"n": n, "mean": mean, "stddev_pct": sd, "samples": vals}
            if not bvals or not cvals:
                row["verdict"] = "only in current" if not bvals else "only in baseline"
                if bs and cs:
                    row["notes"].append(f"metric {metric} missing on the other side")
                rows.append(row)
                continue
            bm, cm = row["baseline"]["mean"], row["current"]["mean"]
            row["change_pct"] = (cm - bm) / abs(bm) * 100.0 if bm != 0 else \
                (0.0 if cm == 0 else math.copysign(float("inf"), cm))
            threads = max([s["threads"] for s in bs + cs if isinstance(s["threads"], int)],
                          default=1)
            if metric in TIME_METRICS:
                if straddle:
                    row["verdict"] = "incomparable"
                    row["notes"].append("time-based row from Google Benchmark versions on both "
                                        "sides of 1.9.0 (threaded time semantics changed)")
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
    return finish(rows, warnings, notes, options)


def _effect_verdict(row):
    """"regression" or "improvement" by the direction of the row's change when it reaches the
    row's minimum effect, else "no change"."""
    change = row["change_pct"]
    if abs(change) < row["min_effect_pct"]:
        return "no change"
    bad = change < 0 if row["direction"] == "higher" else change > 0
    return "regression" if bad else "improvement"


def decide(rows, options):
    """Fill p_value, p_adjusted, min_p and verdict of every compared row (in place).

    Compared rows are those with samples on both sides and no verdict yet. Statistical mode:
    Holm over the compared rows' Mann-Whitney p-values; a row is a regression (improvement) when
    significant, in the bad (good) direction and |change| >= its minimum effect; "cannot detect"
    when not significant and its minimum attainable p exceeds its Holm threshold alpha/(m-k),
    where k is the number of significant rows whose p is below that minimum (the rank the row
    would take at its most extreme; k = 0 when all rows have the same repetitions, so the
    threshold is alpha/m); else "no change". --threshold-only: the minimum effect alone.
    """
    compared = [r for r in rows if r["verdict"] is None]
    for r in compared:
        r["min_p"] = min_attainable_p(r["baseline"]["n"], r["current"]["n"])
    if options["threshold_only"]:
        for r in compared:
            r["verdict"] = _effect_verdict(r)
        return
    alpha, m = options["alpha"], len(compared)
    for r in compared:
        r["p_value"] = mann_whitney_p(r["baseline"]["samples"], r["current"]["samples"])
    for r, adj in zip(compared, holm_adjust([r["p_value"] for r in compared])):
        r["p_adjusted"] = adj
    significant_p = [r["p_value"] for r in compared if r["p_adjusted"] <= alpha]
    for r in compared:
        if r["p_adjusted"] <= alpha:
            r["verdict"] = _effect_verdict(r)
            if r["verdict"] == "no change" and r["change_pct"] != 0:
                r["notes"].append(f"significant but below the {r['min_effect_pct']:g} % "
                                  "minimum effect")
            continue
        k = sum(1 for p in significant_p if p < r["min_p"])
        r["verdict"] = "cannot detect" if r["min_p"] > alpha / (m - k) else "no change"


def _goodness(row):
    """Sort key: the change signed so that negative is worse (rows without a change last)."""
    if row["change_pct"] is None:
        return (1, 0.0, row["key"])
    sign = 1.0 if row["direction"] != "lower" else -1.0
    return (0, sign * row["change_pct"], row["key"])


def finish(rows, warnings, notes, options):
    """Sort rows worst first, count verdicts, add the repetitions warning and the exit code."""
    rows.sort(key=_goodness)
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    compared = [r for r in rows if r["min_p"] is not None]
    m = len(compared)
    if counts["cannot detect"]:
        need = repetitions_needed(options["alpha"], m)
        have = sorted({(r["baseline"]["n"], r["current"]["n"]) for r in rows
                       if r["verdict"] == "cannot detect"})
        have_s = ", ".join(f"{a}/{b}" for a, b in have)
        warnings.append(
            f"{counts['cannot detect']} row(s) cannot be decided: with {m} rows compared at "
            f"alpha {options['alpha']:g} (Holm), each side needs >= {need} repetitions "
            f"(2/C(2n,n) <= alpha/m); they have {have_s} (baseline/current). Run more "
            "repetitions, compare fewer rows (--filter), or use --threshold-only.")
    message = ""
    if counts["incomparable"]:
        exit_code = EXIT_BAD_INPUT
        first = next(r for r in rows if r["verdict"] == "incomparable")
        message = (f"{counts['incomparable']} row(s) incomparable, e.g. {first['key']} "
                   f"{first['metric']}: {first['notes'][-1]}")
    elif not m and not options.get("allow_empty"):
        exit_code = EXIT_BAD_INPUT
        message = "no benchmark appears on both sides" + \
            (" after --filter" if options["filter"] is not None else "")
    elif counts["regression"]:
        exit_code = EXIT_REGRESSION
    else:
        exit_code = EXIT_OK
    summary = dict(counts)
    summary.update({"rows_compared": m, "exit_code": exit_code, "message": message,
                    "mode": "threshold-only" if options["threshold_only"] else "mann-whitney+holm",
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


def summary_line(result):
    """One line: "2 regressions, 1 improvement, 40 no change, 3 cannot detect (of 46 rows
    compared)", followed by the other verdicts when present."""
    s = result["summary"]

    def plural(n, word):
        return f"{n} {word}" + ("s" if n != 1 and word in ("regression", "improvement") else "")

    parts = [plural(s["regression"], "regression"), plural(s["improvement"], "improvement"),
             f"{s['no change']} no change", f"{s['cannot detect']} cannot detect"]
    line = ", ".join(parts) + f" (of {s['rows_compared']} rows compared"
    extra = [f"{s[v]} {v}" for v in ("only in baseline", "only in current", "incomparable")
             if s[v]]
    line += ("; " + ", ".join(extra) if extra else "") + ")"
    if s["mode"] == "threshold-only":
        line += f"; threshold only ({s['min_effect_pct']:g} %), no statistics"
    return line


def _table_cells(r):
    """The display cells of one row: baseline, %stddev, %change, current, %stddev, verdict,
    metric, name."""
    b, c = r["baseline"] or {}, r["current"] or {}
    return [fmt_number(b.get("mean")), fmt_pct(b.get("stddev_pct")),
            fmt_pct(r["change_pct"], signed=True), fmt_number(c.get("mean")),
            fmt_pct(c.get("stddev_pct")), r["verdict"],
            r["metric"] + ("[ns]" if r["metric"] in TIME_METRICS else ""), r["key"]]


TABLE_HEADER = ["baseline", "%stddev", "%change", "current", "%stddev", "verdict", "metric",
                "name"]


def format_table(result):
    """lkp-tests style plain-text table: numbers right-aligned, one row per benchmark and metric,
    worst change first, then notes, warnings and the summary line."""
    widths = [14, 9, 11, 15, 9, 16]
    lines = []

    def line(cells):
        head = "".join(f"{c:>{w}}" for c, w in zip(cells[:5], widths))
        return f"{head}  {cells[5]:<{widths[5]}} {cells[6]}  {cells[7]}"

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
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"


def format_markdown(result):
    """Markdown for a CI comment: summary, the table (regressions in bold), warnings, notes."""
    out = [f"**lockline regression check:** {summary_line(result)}", ""]
    out.append("| " + " | ".join(TABLE_HEADER) + " |")
    out.append("|" + "---:|" * 5 + ":---|:---|:---|")
    for r in result["rows"]:
        cells = _table_cells(r)
        cells[7] = "`" + cells[7].replace("|", "\\|") + "`"
        if r["verdict"] == "regression":
            cells[5] = "**regression**"
        out.append("| " + " | ".join(cells) + " |")
    extra = [f"- warning: {w}" for w in result["warnings"]]
    extra += [f"- warning: `{r['key']}` {r['metric']}: {w}" for r in result["rows"]
              for w in r["warnings"]]
    extra += [f"- note: `{r['key']}` {r['metric']}: {n}" for r in result["rows"]
              for n in r["notes"]]
    extra += [f"- note: {n}" for n in result["notes"]]
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
                    "regression (exit 0 none, 1 regression, 2 bad or incomparable input).")
    p.add_argument("baseline", help="baseline file, comma-separated files, or a run directory")
    p.add_argument("current", help="current file, comma-separated files, or a run directory")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise significance level, Holm-corrected (default 0.05)")
    p.add_argument("--min-effect", type=float, default=5.0,
                   help="minimum change in percent for a regression (default 5)")
    p.add_argument("--override", action="append", default=[], metavar="REGEX=PCT",
                   help="per-benchmark minimum effect; first matching regex wins (repeatable)")
    p.add_argument("--threshold-only", action="store_true",
                   help="decide on the minimum effect alone, without statistics (fallback for "
                        "too few repetitions)")
    p.add_argument("--format", choices=sorted(FORMATTERS), default="table")
    p.add_argument("--output", metavar="FILE", help="also write the output to FILE")
    p.add_argument("--metric", action="append", default=[], metavar="NAME[:higher|lower]",
                   help="compare this metric instead of the default (ops_per_s, else real_time); "
                        "repeatable; unknown metrics need a direction")
    p.add_argument("--filter", metavar="REGEX", help="compare only benchmarks matching REGEX")
    return p


def main(argv=None):
    """Run the command line; returns the exit status (0, 1 or 2). Errors: one line on stderr."""
    args = build_parser().parse_args(argv)
    try:
        if not 0 < args.alpha < 1:
            raise InputError(f"--alpha {args.alpha:g}: must be between 0 and 1")
        if args.min_effect < 0:
            raise InputError(f"--min-effect {args.min_effect:g}: must be >= 0 percent")
        options = {"alpha": args.alpha, "min_effect": args.min_effect,
                   "overrides": [parse_override(o) for o in args.override],
                   "threshold_only": args.threshold_only,
                   "metrics": [parse_metric_option(m) for m in args.metric],
                   "filter": compile_regex(args.filter, "--filter") if args.filter else None}
        base = load_side(expand_side_argument(args.baseline), "baseline")
        cur = load_side(expand_side_argument(args.current), "current")
        result = compare(base, cur, options)
    except InputError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    text = FORMATTERS[args.format](result)
    sys.stdout.write(text)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            print(f"compare.py: error: --output {args.output}: {e.strerror}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if result["summary"]["message"]:
        print(f"compare.py: error: {result['summary']['message']}", file=sys.stderr)
    return result["summary"]["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
