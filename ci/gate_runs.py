"""compare.py's run-against-run gate, `compare.py BASELINE CURRENT`: each row compares the
repetitions of one coherence regime of the two sides (ci/REGRESSION.md)."""

import argparse
import collections
import json
import math

from gate_common import (TIME_METRICS, InputError, Parser, check_levels,
                         effects, expand_side_argument, finish, gate_options, holm_adjust,
                         physical_check, mark_equivalence, min_attainable_p, scipy_stats,
                         effect_verdict, min_effect_for, new_row, record_failure, results,
                         run_gate, side_summary, add_gate_options)

# Across Google Benchmark 1.9.0 (lockline_results) time rows and a foreign file's threaded rates
# do not compare, but items/bytes_per_second, converted back; lockline's counters never changed.
GB_TIME_SEMANTICS_CHANGE = results.GB_THREADED_TIME_CHANGE
GB_PER_THREAD_RATES = results.PER_THREAD_RATES

# --alpha accepts MIN_ALPHA <= alpha < 1: below it (1e-320 is subnormal) Holm's threshold
# alpha / m underflows and no run could reach it.
MIN_ALPHA = 1e-12

# ---- metrics ------------------------------------------------------------------------------------


def metric_direction(name, declared=None):
    """"higher", "lower" or None: `declared` (--metric) first, then results/SCHEMA.md's
    table (pair_ratio: a duet row's B/A); never guessed from the data."""
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
    name, sep, direction = text.rpartition(":")
    if not sep or direction not in ("higher", "lower"):
        name, direction = text, metric_direction(text)
        if direction is None:
            raise InputError(f"--metric {text!r}: unknown metric direction; write NAME:higher "
                             "or NAME:lower")
    if not name:
        raise InputError(f"--metric {text!r}: empty metric name")
    return name, direction


# ---- loading ------------------------------------------------------------------------------------


def _file_samples(doc, path, side):
    """A file's iteration rows; a file of aggregates only gives its mean rows, with a note."""
    rows = doc["benchmarks"]
    names = {r["name"] for r in rows}
    samples = [r for r in rows if not results.is_aggregate(r, names)]
    if samples:
        return samples
    samples = [r for r in rows if r.get("aggregate_name") == "mean" or
               (r.get("run_type") is None and r["name"].endswith("_mean"))]
    if not samples:
        raise InputError(f"{path}: no iteration rows and no mean aggregates to compare")
    side["notes"].append(f"{path}: only aggregate rows; each mean row is used as a single "
                         "sample (statistics cannot decide; use --threshold-only)")
    return samples


def _sample_key(r):
    if r.get("run_type") is None and r["name"].endswith("_mean") and \
            r.get("aggregate_name") is None:
        return results.strip_decorations(r["name"][:-len("_mean")])
    return results.row_key(r)


def _sample(r, key, path, context):
    values = results.row_values(r, path)
    for name in results.PHYSICAL_METRICS:
        physical_check(path, key, name, values.get(name))
    for i, (a, b) in enumerate(results.row_duet_pairs(r)):
        physical_check(path, key, f"window pair {i} A ops/s", a)
        physical_check(path, key, f"window pair {i} B ops/s", b)
    params = r.get("params") if isinstance(r.get("params"), dict) else {}
    coherence = r.get("coherence")
    threads = r.get("threads", params.get("threads", 1))
    foreign = not isinstance(_context_value(context, "lockline"), dict)
    version = file_gb_version(context or {})
    if foreign and isinstance(threads, int) and threads > 1 and version is not None and \
            version >= GB_TIME_SEMANTICS_CHANGE:
        # Per thread from 1.9.0: back to the whole run's.
        values.update({n: values[n] * threads for n in GB_PER_THREAD_RATES if n in values})
    return {"values": values, "threads": threads, "foreign": foreign,
            "coherence": coherence.get("label") if isinstance(coherence, dict) else None,
            "placement": r.get("placement") if isinstance(r.get("placement"), dict) else None,
            "layout": params.get("layout"), "overrun": results.row_overrun(r),
            "identity": results.row_identity(r, context),
            "pairs": results.row_duet_pairs(r)}


def load_side(paths, label):
    """Load and pool the result files of one side: "rows" (key -> samples, _sample), "failed"
    and "invariant" (key -> messages of its failed or broken rows), "contexts", "emulated"
    (per file), "unfinished" (paths), "notes"."""
    side = {"label": label, "paths": list(paths), "contexts": [], "rows": {}, "notes": [],
            "emulated": [], "unfinished": [], "failed": {}, "invariant": {}}
    for path in paths:
        doc = results.read_document(path)
        if not doc["benchmarks"]:
            raise InputError(f"{path}: the \"benchmarks\" array is empty (did the run finish?)")
        side["contexts"].append(doc.get("context", {}))
        ll = _context_value(doc, "context", "lockline")
        ll = ll if isinstance(ll, dict) else {}
        side["emulated"].append(ll.get("emulated") is True or any(
            r.get("emulated") is True for r in doc["benchmarks"]))
        if ll.get("finished") is False:
            side["unfinished"].append(path)
        excluded = 0
        for r in _file_samples(doc, path, side):
            key = _sample_key(r)
            if record_failure(side, r, key):
                excluded += 1
                continue
            side["rows"].setdefault(key, []).append(_sample(r, key, path, doc.get("context")))
        if excluded:
            side["notes"].append(f"{path}: {excluded} row(s) with error_occurred or skipped "
                                 "excluded")
    return side


# ---- tests of significance ---------------------------------------------------------------------


def _two_sided_p(test):
    stats = scipy_stats()
    try:
        p = float(test(stats).pvalue)
    except ValueError:
        return 1.0
    return 1.0 if math.isnan(p) else p


def mann_whitney_p(a, b):
    """Two-sided Mann-Whitney U p-value: exact without ties up to 30 a side, else scipy's
    "auto"; 1.0 when undefined."""
    if len(a) < 1 or len(b) < 1:
        return 1.0
    ties = len(set(a) | set(b)) < len(a) + len(b)
    method = "exact" if not ties and max(len(a), len(b)) <= 30 else "auto"
    return _two_sided_p(lambda st: st.mannwhitneyu(a, b, alternative="two-sided", method=method))


def signed_rank_p(a, b):
    """Two-sided Wilcoxon signed-rank p-value of log(b[i] / a[i]) of matched samples; 1.0
    when every difference is 0 or the test is undefined."""
    diffs = [0.0 if x == y else math.log(y / x) for x, y in zip(a, b)
             if x == y or (x > 0 and y > 0)]
    return (_two_sided_p(lambda st: st.wilcoxon(diffs, alternative="two-sided"))
            if any(diffs) else 1.0)


# ---- comparison ---------------------------------------------------------------------------------


def _context_value(ctx, *path):
    for p in path:
        if not isinstance(ctx, dict) or p not in ctx:
            return None
        ctx = ctx[p]
    return ctx


# A plain file without context.library_version is from before 1.8.4: the old side of 1.9.0.
BEFORE_LIBRARY_VERSION = (1, 8, 3, "before 1.8.4")


def file_gb_version(ctx):
    """The Google Benchmark version of one file: context.lockline.versions.google_benchmark,
    a plain file's context.library_version, else BEFORE_LIBRARY_VERSION; None if unreadable."""
    lockline = _context_value(ctx, "lockline")
    if isinstance(lockline, dict):
        return results.parse_version(_context_value(lockline, "versions", "google_benchmark"))
    version = results.parse_version(_context_value(ctx, "library_version"))
    if version is not None:
        return version
    if isinstance(_context_value(ctx, "library_version"), str):
        return None  # written, but not a version we can read
    return BEFORE_LIBRARY_VERSION


def version_text(version):
    if version is None:
        return "unknown"
    if version == BEFORE_LIBRARY_VERSION:
        return "before 1.8.4 (no library_version)"
    return ".".join(str(v) for v in version[:3])


def straddles_gb_19(base_versions, cur_versions):
    known = {v for v in base_versions | cur_versions if v is not None}
    return (any(v < GB_TIME_SEMANTICS_CHANGE for v in known) and
            any(v >= GB_TIME_SEMANTICS_CHANGE for v in known))


def _short_diff(a, b, prefix="", limit=3):
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
    """(warnings, changed layout keys): what in the contexts makes the sides less comparable."""
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
    """Without --metric: pair_ratio for a duet row (its own ops_per_s mixes its two sides),
    else ops_per_s if any sample has it, else real_time."""
    both = base_samples + cur_samples
    if both and all("pair_ratio" in s["values"] for s in both):
        return "pair_ratio"
    return "ops_per_s" if any("ops_per_s" in s["values"] for s in both) else "real_time"


def _comparability_warnings(row, bs, cs, changed_layouts):
    """Warn of a different coherence label (unless the row compares one shared regime),
    placement, or changed layout between the row's sides."""
    blabels, clabels = (sorted({str(s["coherence"]) for s in x if s["coherence"] is not None})
                        for x in (bs, cs))
    one_regime = row["verdict"] is None and row.get("regime")
    if blabels and clabels and blabels != clabels and not one_regime:
        row["warnings"].append(f"coherence label {','.join(blabels)} (baseline) vs "
                               f"{','.join(clabels)} (current): cache-line transfer cost "
                               "differs, the change may be the machine's")
    bp, cp = ({json.dumps(s["placement"], sort_keys=True) for s in x if s["placement"]}
              for x in (bs, cs))
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
    """Refuse an emulated file against a non-emulated one, and unfinished runs unless
    --allow-unfinished."""
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
    """True when both sides hold the same repetitions in the same order (row_identity)."""
    return bool(bsamp) and len(bsamp) == len(csamp) and all(
        b.get("identity") is not None and b.get("identity") == c.get("identity")
        for b, c in zip(bsamp, csamp))


def choose_samples(bsamp, csamp, metric, min_effect):
    """The values a row compares and how: "method" "unpaired" (stats.select_regime; decide()
    computes the interval), "matched" (stats.compare_matched) or "pair_effects" (a duet row by
    pair_ratio), with the values used, all values, regime, counts and the stats.Comparison."""
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
    how = ("the same window pairs on both sides (identical rows), compared pair by pair"
           if choice["matched"] else
           "B/A per window pair, two-sample bootstrap of the change of the median")
    return (f"duet row: compared by its paired effect B/A (window pairs of {nb} / {nc} "
            f"repetitions; {how})")


def compare(base, cur, options):
    """A verdict per benchmark and metric of two loaded sides: finish()'s result. `options`:
    main_runs' dict."""
    check_sides(base, cur, options)
    warnings, changed_layouts = context_warnings(base, cur)
    notes = base["notes"] + cur["notes"]
    bver, cver = ({file_gb_version(c) for c in s["contexts"]} for s in (base, cur))
    ctx = {"options": options, "declared": dict(options["metrics"]), "cur": cur,
           "changed_layouts": changed_layouts, "bver": bver, "cver": cver,
           "straddle": straddles_gb_19(bver, cver),
           "unknown_versions": None in bver or None in cver, "threaded_time_rows": 0}
    rows = []
    for key in _compared_keys(base, cur, options):
        rows += _key_rows(key, base["rows"].get(key, []), cur["rows"].get(key, []), ctx)
    if ctx["threaded_time_rows"]:
        warnings.append(f"Google Benchmark version unknown for a side: "
                        f"{ctx['threaded_time_rows']} time-based row(s) with threads > 1 may not "
                        "be comparable (1.9.0 changed threaded time semantics); "
                        f"{ctx['instead']}")
    decide(rows, options)
    few_samples_cautions(rows)
    matched = [r for r in rows if r.get("matched") and r["paired"]]
    if matched:
        exact = sum(1 for r in matched if r.get("exact"))
        notes.append(f"{len(matched)} row(s) hold the same repetitions on both sides (identical "
                     "rows: a run compared with itself or a copy) and were compared one to one"
                     + (f"; {exact} of them identical in the metric compared: change exactly 0, "
                        "interval [0, 0]" if exact else ""))
    mode = "threshold-only" if options["threshold_only"] else "mann-whitney+holm"
    return finish(rows, warnings, notes, options, mode, lambda m: rule_text(options, m))


def _compared_keys(base, cur, options):
    keys = sorted(set(base["rows"]) | set(cur["rows"]) |
                  (set(cur.get("failed", {})) & set(base["rows"])) | set(cur.get("invariant", {})))
    if options["filter"] is not None:
        keys = [k for k in keys if options["filter"].search(k)]
    return keys


def _key_rows(key, bs, cs, ctx):
    """One row per metric of one key, or one "broken" row when a current repetition broke an
    invariant (whatever the options say)."""
    options = ctx["options"]
    metrics = [m for m, _ in options["metrics"]] or [default_metric(bs, cs)]
    broken = ctx["cur"].get("invariant", {}).get(key)
    if broken:
        note = (f"{len(broken)} of {len(cs) + len(broken)} current repetitions broke an "
                f"invariant (e.g. {broken[0]!r})")
        return [new_row(key, metrics[0], metric_direction(metrics[0], ctx["declared"]),
                        min_effect_for(key, options), notes=[note], verdict="broken")]
    rows = [_metric_row(key, metric, bs, cs, ctx) for metric in metrics]
    return [r for r in rows if r is not None]


def _metric_row(key, metric, bs, cs, ctx):
    bsamp = [s for s in bs if metric in s["values"]]
    csamp = [s for s in cs if metric in s["values"]]
    if not bsamp and not csamp:
        return None
    row = new_row(key, metric, metric_direction(metric, ctx["declared"]),
                  min_effect_for(key, ctx["options"]))
    measured = len(csamp)
    overruns = sum(1 for x in bsamp + csamp if x.get("overrun"))
    if overruns:
        bsamp = [x for x in bsamp if not x.get("overrun")]
        csamp = [x for x in csamp if not x.get("overrun")]
        row["warnings"].append(f"{overruns} repetition(s) with an overrun window excluded (the "
                               "window ran past its bound)")
    failed = ctx["cur"].get("failed", {}).get(key, [])
    if bsamp and not csamp and (failed or measured):
        return _no_usable_current(row, [x["values"][metric] for x in bsamp], failed, measured)
    if _stopped(metric, bsamp, csamp):
        row.update(verdict="broken", baseline=side_summary([x["values"][metric] for x in bsamp]))
        row["notes"].append(f"every current repetition ({len(csamp)}) did no operation "
                            f"({metric} 0) where the baseline's did")
        return row
    if not _fill_samples(row, bsamp, csamp, bs and cs):
        return row
    _gb_semantics(row, bs + cs, ctx)
    _comparability_warnings(row, bs, cs, ctx["changed_layouts"])
    if row["direction"] is None:
        row["verdict"] = "incomparable"
        row["notes"].append(f"metric {metric} has no declared direction; use --metric "
                            f"{metric}:higher|lower")
    return row


def _stopped(metric, bsamp, csamp):
    rate = metric_direction(metric) == "higher"
    return rate and bool(csamp) and all(x["values"][metric] == 0 for x in csamp) and any(
        x["values"][metric] > 0 for x in bsamp)


def _no_usable_current(row, base_values, failed, measured):
    row["verdict"] = "broken"
    row["notes"].append(f"every current repetition failed ({len(failed)} with an error, e.g. "
                        f"{failed[0]!r})" if failed else
                        f"every current repetition ({measured}) overran its window")
    row["baseline"] = side_summary(base_values)
    return row


def _fill_samples(row, bsamp, csamp, both_measured):
    """Fill the row's sides, change and interval; False when one side has none."""
    choice = choose_samples(bsamp, csamp, row["metric"], row["min_effect_pct"] / 100.0)
    row.update(method=choice["method"], unit=choice["unit"], matched=choice["matched"],
               regime=choice["regime"], dropped=choice["dropped"])
    bvals, cvals = choice["base"], choice["variant"]
    if bsamp and csamp and (not bvals or not cvals):
        bvals, cvals = choice["all_base"], choice["all_variant"]
        choice["comparison"] = None
        row["verdict"] = "undecided"
        row["notes"].append("no coherence regime common to both sides (baseline: "
                            + _regime_counts(bsamp) + "; current: " + _regime_counts(csamp)
                            + "): the change would be the machine's state")
    for label, vals, reps in (("baseline", bvals, len(bsamp)), ("current", cvals, len(csamp))):
        if vals:
            row[label] = side_summary(vals, repetitions=reps)
    if not bvals or not cvals:
        row["verdict"] = "only in current" if not bvals else "only in baseline"
        if both_measured:
            row["notes"].append(f"metric {row['metric']} missing on the other side")
        return False
    row["paired"] = True
    if choice["regime"] and choice["dropped"] and row["verdict"] is None:
        row["notes"].append(f"{choice['regime']} regime: {len(bvals)} / {len(cvals)} of "
                            f"{choice['total_base']} / {choice['total_variant']} "
                            f"{choice['unit']} used (others in other coherence regimes)")
    _fill_change(row, choice, len(bsamp), len(csamp))
    return True


def _fill_change(row, choice, nb, nc):
    """The change of medians in percent; matched or duet rows take change and interval from
    plots/stats.py."""
    bm, cm = row["baseline"]["median"], row["current"]["median"]
    row["change_pct"] = (cm - bm) / abs(bm) * 100.0 if bm != 0 else \
        (0.0 if cm == 0 else math.copysign(float("inf"), cm))
    comparison = choice["comparison"]
    if comparison is None:
        return
    if comparison.effect is not None:
        row["change_pct"] = comparison.effect * 100.0
    row["ci_pct"] = None if comparison.ci is None else \
        [comparison.ci[0] * 100.0, comparison.ci[1] * 100.0]
    row["exact"] = comparison.exact
    if choice["method"] == "pair_effects":
        row["notes"].append(_method_note(choice, nb, nc))


def _same_across_19(samples):
    """A metric every sample has that reads the same on both sides of 1.9.0, for the notes:
    lockline's own ops_per_s, or a foreign file's items/bytes_per_second (converted back in
    _sample); None when the files have none."""
    names = GB_PER_THREAD_RATES if any(s.get("foreign") for s in samples) else ("ops_per_s",)
    return next((n for n in names if all(n in s["values"] for s in samples)), None)


def _instead(metric):
    return (f"compare {metric} (--metric {metric}:higher)" if metric else
            "these files have no metric that reads the same across it (no ops_per_s, "
            "items_per_second or bytes_per_second): rerun both with one version")


def _gb_semantics(row, samples, ctx):
    """A time row or threaded foreign rate across Google Benchmark 1.9.0 is incomparable
    (unless --allow-gb-straddle); one of an unknown version is counted for a warning."""
    threads = max([s["threads"] for s in samples if isinstance(s["threads"], int)], default=1)
    metric = row["metric"]
    rate = (threads > 1 and metric not in GB_PER_THREAD_RATES
            and (metric.endswith(("per_second", "/s")) or metric_direction(metric) == "higher")
            and any(s.get("foreign") for s in samples))
    if metric not in TIME_METRICS and not rate:
        return
    what = "threaded rate" if rate else "time-based row"
    if ctx["straddle"] and not ctx["options"].get("allow_gb_straddle"):
        row["verdict"] = "incomparable"
        change = "threaded rates became per thread" if rate else \
            "threaded time semantics changed"
        row["notes"].append(f"{what} from Google Benchmark versions on both sides of 1.9.0 "
                            f"({change}; baseline {_versions_text(ctx['bver'])}, current "
                            f"{_versions_text(ctx['cver'])}); "
                            f"{_instead(_same_across_19(samples))} or pass --allow-gb-straddle")
    elif ctx["straddle"]:
        row["warnings"].append("Google Benchmark versions straddle 1.9.0: time semantics of "
                               "threaded rows differ (compared on request)")
    elif ctx["unknown_versions"] and threads > 1:
        ctx["threaded_time_rows"] += 1
        ctx["instead"] = _instead(_same_across_19(samples))


def _versions_text(versions):
    return ", ".join(sorted(version_text(v) for v in versions))


# Fewer repetitions a side and a claimed answer carries a caution: for n <= 8 the
# distribution-free 95 % interval of a median is (min, max) or wider, so one outlier moves it.
FEW_SAMPLES = 9


def few_samples_cautions(rows):
    for r in rows:
        if r["verdict"] in ("regression", "improvement", "no change") and r["paired"]:
            nb, nc = r["baseline"]["n"], r["current"]["n"]
            if min(nb, nc) < FEW_SAMPLES:
                r["warnings"].append(f"{r['verdict']} claimed from {nb} / {nc} repetitions "
                                     f"(baseline / current, fewer than {FEW_SAMPLES} a side): "
                                     "one outlier can move it; confirm with "
                                     f"--benchmark_repetitions={FEW_SAMPLES} or more")


def _regime_counts(samples):
    counts = collections.Counter(_regime_label(x) or "unlabelled" for x in samples)
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def _interval(row):
    """The bootstrap interval of the change in percent (stats.ratio_interval), or None."""
    b, c = row["baseline"]["samples"], row["current"]["samples"]
    if min(len(b), len(c)) < effects.MIN_REPETITIONS:
        return None
    try:
        _, lo, hi = effects.ratio_interval(b, c)
    except ValueError:
        return None
    return [(lo - 1.0) * 100.0, (hi - 1.0) * 100.0]


def decide(rows, options):
    """The verdict of every row not yet decided: significant (Holm over Mann-Whitney or
    signed-rank p-values) decides by the minimum effect; else "no change" needs the interval
    within +-T, else "undecided". --threshold-only: the minimum effect alone."""
    for r in rows:
        if r["paired"]:
            r["min_p"] = min_attainable_p(r["baseline"]["n"], r["current"]["n"])
            if r.get("method", "unpaired") == "unpaired":
                r["ci_pct"] = _interval(r)
    compared = [r for r in rows if r["verdict"] is None]
    if options["threshold_only"]:
        for r in compared:
            r["verdict"] = effect_verdict(r)
        mark_equivalence(rows)
        return
    alpha = options["alpha"]
    for r in compared:
        matched = r.get("method") == "matched" or (r.get("method") == "pair_effects" and
                                                   r.get("matched"))
        r["p_value"] = (signed_rank_p if matched else mann_whitney_p)(
            r["baseline"]["samples"], r["current"]["samples"])
    for r, adj in zip(compared, holm_adjust([r["p_value"] for r in compared])):
        r["p_adjusted"] = adj
    for r in compared:
        if r["p_adjusted"] <= alpha:
            r["verdict"] = effect_verdict(r)
            if r["verdict"] == "no change" and r["change_pct"] != 0:
                r["notes"].append(f"significant but below the {r['min_effect_pct']:g} % "
                                  "minimum effect")
            continue
        ci, eff = r["ci_pct"], r["min_effect_pct"]
        if ci is not None and effects.is_equivalent((ci[0] / 100.0, ci[1] / 100.0), eff / 100.0):
            r["verdict"] = "no change"
            continue
        r["verdict"] = "undecided"
        r["notes"].append(_undecided_note(r))
    mark_equivalence(rows)


def _undecided_note(r):
    ci = r["ci_pct"]
    if ci is None and r.get("unit") == "window pairs":
        return (f"{r['baseline']['n']} / {r['current']['n']} window pairs in one regime: an "
                f"interval needs {effects.MIN_PAIRS} a side")
    if ci is None:
        return (f"{r['baseline']['n']} / {r['current']['n']} repetitions: an interval needs "
                f"{effects.MIN_REPETITIONS} a side")
    return (f"not significant and the 95 % interval [{ci[0]:+.1f} %, {ci[1]:+.1f} %] is not "
            f"within +-{r['min_effect_pct']:g} %")


def rule_text(options, m):
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


def build_parser():
    p = Parser(
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
    add_gate_options(p)
    p.add_argument("--threshold-only", action="store_true",
                   help="decide on the minimum effect alone, without statistics (fallback for "
                        "too few repetitions)")
    p.add_argument("--metric", action="append", default=[], metavar="NAME[:higher|lower]",
                   help="compare this metric instead of the default (pair_ratio for duet rows, "
                        "else ops_per_s, else real_time); repeatable; unknown metrics need a "
                        "direction")
    p.add_argument("--allow-missing", action="store_true",
                   help="exit 0 (not 3) when benchmarks of the baseline are missing from the "
                        "current side (rows whose current repetitions all failed or overran "
                        "are 'broken' and fail regardless)")
    p.add_argument("--allow-gb-straddle", action="store_true",
                   help="compare time-based rows across Google Benchmark 1.9.0 anyway")
    return p


def main_runs(argv):
    args = build_parser().parse_args(argv)

    def gate():
        check_levels(args, MIN_ALPHA, (f", at least {MIN_ALPHA:g} (a smaller level needs more "
                                       "repetitions than any run holds)",
                                       " (inf or nan would disable the gate)"))
        options = gate_options(args, threshold_only=args.threshold_only,
                               metrics=[parse_metric_option(m) for m in args.metric],
                               allow_unfinished=args.allow_unfinished,
                               allow_missing=args.allow_missing,
                               allow_gb_straddle=args.allow_gb_straddle)
        base = load_side(expand_side_argument(args.baseline), "baseline")
        cur = load_side(expand_side_argument(args.current), "current")
        return compare(base, cur, options)

    return run_gate(args, gate)
