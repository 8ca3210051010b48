"""compare.py's build-duet gate: `compare.py --builds RUN`, one run of lockline
--duet-with=OLD (ci/regression.sh --against=OLD) answered from its window pairs, new build over
old (ci/REGRESSION.md, "The old build in duet")."""

import math
import os
import re
import statistics
import sys

from gate_common import (EXIT_BAD_INPUT, InputError, Parser, check_levels,
                         add_gate_options, effect_verdict, effects, expand_side_argument,
                         finish, gate_options, holm_adjust, interval_repetitions,
                         mark_equivalence, min_effect_for, new_row, physical_check, results,
                         record_failure, run_gate, scipy_stats, side_summary)

# The rate a window pair is compared by: ops per second of the threads' CPU time (the default: a
# preempted window's lost time is not in it) or of window wall time (pairs with an overrun
# window are left out).
BUILD_RATES = {"cpu": ("a_ops_per_cpu_s", "b_ops_per_cpu_s"),
               "wall": ("a_ops_per_s", "b_ops_per_s")}


# Multi-thread window pairs with a thread preempted (`off_cpu`, schedstat run delay) over this
# share of its window are left out: a spinner burns CPU on a descheduled holder. 2 % of 5 ms is
# 100 us: above a wake-up, below a time slice.
PREEMPTED_SHARE = 0.02


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _dict(x):
    return x if isinstance(x, dict) else {}


def load_build_pairs(paths, rate="cpu"):
    """Read a build-duet run (results/SCHEMA.md `details.build_duet`): "pairs" {key: [(label, old
    rate, new rate, (file, repetition_index))]}, overrun/preempted counts, "failed", "invariant",
    "old_binary", "finished", "timing", "looks" (_round_label), "swapped_runs" (runs of
    OLD --duet-with=NEW, read the other way round: _swapped). Raises InputError for an unreadable
    file, one without build-duet rows or a run of other builds."""
    side = {"pairs": {}, "overrun_pairs": {}, "preempted_pairs": {}, "failed": {},
            "repetitions": {}, "invariant": {}, "old_binary": None, "finished": True,
            "looks": {}, "timing": {}, "swapped_runs": 0}
    first, builds = {}, None
    for index, path in enumerate(paths):
        doc = results.read_document(path)
        lctx = _dict(_dict(doc.get("context")).get("lockline"))
        if not isinstance(lctx.get("build_duet"), dict):
            raise InputError(f"{path}: not a build-duet run (context.lockline.build_duet "
                             "missing); make one with lockline --duet-with=OLD_BINARY or "
                             "ci/regression.sh --against=OLD_BINARY")
        pair = _run_builds(doc, lctx)
        builds = builds or pair
        swapped = _swapped(path, pair, builds)
        side["swapped_runs"] += int(swapped)
        if not swapped:
            side["old_binary"] = lctx["build_duet"].get("old_binary")
        if lctx.get("finished") is not True:
            side["finished"] = False
        names = _regime_names(lctx)
        first = first or names
        for r in doc["benchmarks"]:
            if r.get("run_type") != "aggregate":
                _add_repetition(side, r, path, rate, _round_label(r, names, first, index),
                                swapped)
        # A swapped run is the other arm of the run before it (ci/regression.sh writes it to
        # DIR/swapped: a build against a copy of itself cannot tell the arms apart), not a look.
        second_arm = swapped or os.path.basename(
            os.path.dirname(path) if path.endswith(".json") else path.rstrip("/")) == "swapped"
        for key in {results.row_key(r) for r in doc["benchmarks"]} if index and not second_arm \
                else ():
            side["looks"][key] = side["looks"].get(key, 0) + 1
    if not side["pairs"] and not side["failed"]:
        raise InputError(f"{', '.join(paths)}: no build-duet rows")
    return side


def _run_builds(doc, lctx):
    """(the run's own binary, its --duet-with binary), each resolved to a real path: the new and
    the old build of a run that lockline NEW --duet-with=OLD made."""
    own = _dict(doc.get("context")).get("executable")
    old = lctx["build_duet"].get("old_binary")
    return tuple(os.path.realpath(x) if isinstance(x, str) and x else "" for x in (own, old))


def _swapped(path, pair, builds):
    """Whether a run is the crossover arm of the first one (ci/regression.sh): the old build ran
    it with the new build as its --duet-with, so its pairs' sides are the other way round. Raises
    InputError for a run of two other builds."""
    if pair == builds or "" in pair or "" in builds:
        return False
    if pair == builds[::-1]:
        return True
    raise InputError(f"{path}: a duet of {pair[0]} with {pair[1]}, not of the first run's "
                     f"builds {builds[0]} and {builds[1]} (either way round)")


def _regime_names(lctx):
    """{(PU pair, label): ns} of a run's coherence regimes (context.lockline.coherence_regimes)."""
    out = {}
    for entry in lctx.get("coherence_regimes") or []:
        for reg in _dict(entry).get("regimes") or []:
            if _number(_dict(reg).get("ns")) and isinstance(reg.get("label"), str):
                out[(tuple(entry.get("pus") or ()), reg["label"])] = reg["ns"]
    return out


def _round_label(r, names, first, index):
    """A row's coherence label in the first run's names: a label ranks the regimes of ONE run
    (results/SCHEMA.md), so a later round's regime is the first run's regime of the same PU
    pair within effects.SAME_REGIME_RATIO of its ns, else a regime of its own ("far@2")."""
    label = _dict(r.get("coherence")).get("label")
    label = label if isinstance(label, str) else ""
    if not index or label in effects.NO_REGIME or label in effects.NOT_A_REGIME:
        return label
    pair = tuple(_dict(r.get("coherence")).get("pair") or ())
    ns = names.get((pair, label), _dict(r.get("coherence")).get("regime_ns"))
    near = [(abs(math.log(ns / v)), lab) for (p, lab), v in first.items()
            if p == pair and _number(ns) and ns > 0 and v > 0]
    best = min(near, default=(math.inf, ""))
    return best[1] if best[0] <= math.log(effects.SAME_REGIME_RATIO) else f"{label}@{index + 1}"


def _add_repetition(side, r, path, rate, label, swapped=False):
    key = results.row_key(r)
    if record_failure(side, r, key):
        return
    duet = _dict(r.get("details")).get("build_duet")
    if not isinstance(duet, dict):
        return
    timing = _dict(r.get("timing"))
    if _number(timing.get("wall_s")) and _number(timing.get("window_s")):
        side["timing"].setdefault(key, []).append((timing["wall_s"], timing["window_s"]))
    side["repetitions"][key] = side["repetitions"].get(key, 0) + 1
    rep_index = r.get("repetition_index")
    unit = (path, rep_index if isinstance(rep_index, int) else side["repetitions"][key])
    got = side["pairs"].setdefault(key, [])
    threads = r.get("threads")
    for i, pair in enumerate(duet.get("pairs") if isinstance(duet.get("pairs"), list) else []):
        if not isinstance(pair, dict):
            continue
        a, b = (pair.get(k) for k in BUILD_RATES[rate])
        if not (_number(a) and _number(b)):
            continue
        if swapped:  # the old build measured here as "new", the new one as "old"
            a, b = b, a
        physical_check(path, key, f"window pair {i} {BUILD_RATES[rate][0]} (old build)", a)
        physical_check(path, key, f"window pair {i} {BUILD_RATES[rate][1]} (new build)", b)
        if pair.get("overrun") is True:
            side["overrun_pairs"][key] = side["overrun_pairs"].get(key, 0) + 1
            if rate == "wall":
                continue
        off = pair.get("off_cpu")
        if isinstance(threads, int) and threads >= 2 and _number(off) and off > PREEMPTED_SHARE:
            side["preempted_pairs"][key] = side["preempted_pairs"].get(key, 0) + 1
            continue
        got.append((label, float(a), float(b), unit))


def repetition_t_p(used):
    """Two-sided p-value of a one-sample t test that the repetitions' median log pair ratios are
    centred on 0 (the repetition is the unit); 1.0 under 2 repetitions or all at 0."""
    meds = [statistics.median(math.log(b / a) for a, b, _ in reps)
            for reps in results.grouped(used, lambda u: u[2]).values()]
    if len(meds) < 2 or not any(meds):
        return 1.0
    sd = statistics.stdev(meds)
    if sd == 0:
        return 0.0
    t = statistics.fmean(meds) / (sd / math.sqrt(len(meds)))
    return float(2.0 * scipy_stats().t.sf(abs(t), len(meds) - 1))


def _regime_candidates(pairs, key, min_effect_pct, look=0):
    """One candidate per coherence regime ("": unlabelled): its stats.compare_pairs, pairs,
    repetition_t_p and its alpha share at look k (stats.sequential_confidence)."""
    confidence = effects.sequential_confidence(look) if look else effects.CONFIDENCE
    labels = {lab for lab, _, _, _ in pairs}
    regimes = sorted(lab for lab in labels if lab not in effects.NO_REGIME + effects.NOT_A_REGIME)
    out = []
    for regime in regimes or [""]:
        sub = pairs if not regime else [p for p in pairs if p[0] == regime]
        comp = effects.compare_pairs(sub, label=key, min_effect=min_effect_pct / 100.0,
                                     confidence=confidence)
        # (old, new, repetition) of the regime compare_pairs chose ("": all but mixed).
        used = [(a, b, g) for lab, a, b, g in sub
                if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0
                and (lab == comp.regime if comp.regime else lab not in effects.NOT_A_REGIME)]
        out.append({"regime": comp.regime, "comp": comp, "used": used,
                    "p": repetition_t_p(used) if comp.ci is not None else None,
                    "p_adjusted": None, "look": look,
                    "alpha_share": (1.0 - confidence) / (1.0 - effects.CONFIDENCE)})
    out.sort(key=lambda c: (-len({g for _, _, g in c["used"]}), -len(c["used"]),
                            effects.regime_rank(c["regime"])))
    return out


def _regime_state(c, row, options):
    """A regime's answer: a significant change whose interval lies past T/2 and reaches the
    minimum effect T on its side is a regression (improvement): more than half of T for sure,
    and T not ruled out; "no change" when the interval is within +-T; else undecided
    (ci/REGRESSION.md "Roles" says why neither the estimate nor the interval alone)."""
    comp, eff = c["comp"], row["min_effect_pct"]
    if comp.ci is None:
        return "undecided"
    change = comp.effect * 100.0
    sign = -1.0 if change < 0 else 1.0
    far, near = (sign * x * 100.0 for x in (comp.ci if change < 0 else comp.ci[::-1]))
    significant = (c["p_adjusted"] is not None and
                   c["p_adjusted"] <= options["alpha"] * c["alpha_share"])
    if significant and far >= eff and near >= eff / 2.0:
        return effect_verdict({"change_pct": sign * far, "min_effect_pct": eff,
                               "direction": row["direction"]})
    if effects.is_equivalent(comp.ci, eff / 100.0):
        return "no change"
    return "undecided"


def _answer_build_row(row, cands, total_pairs, reps, options):
    """Answer one build-duet row: the first of regression, improvement, "no change" that a regime
    says, else "undecided" from the regime with most repetitions; names what the others said."""
    states = [_regime_state(c, row, options) for c in cands]
    chosen = next((states.index(w) for w in ("regression", "improvement", "no change")
                   if w in states), 0)
    c = cands[chosen]
    comp, used = c["comp"], c["used"]
    row["regime"] = c["regime"] or None
    row["dropped"] = total_pairs - len(used)
    row["units"] = len({g for _, _, g in used})
    for label, vals in (("baseline", [a for a, _, _ in used]),
                        ("current", [b for _, b, _ in used])):
        if vals:
            row[label] = side_summary(vals, repetitions=reps)
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
    row["verdict"] = states[chosen]
    if c["look"]:
        row["look"] = c["look"]
        row["notes"].append(f"measured again in {c['look']} later round(s) of the gate: "
                            f"{100 - 5 * c['alpha_share']:.1f} % interval, alpha x "
                            f"{c['alpha_share']:.2f} (stats.sequential_confidence)")
    _verdict_note(row, options["alpha"] * c["alpha_share"])


def _verdict_note(row, alpha):
    ci, eff = row["ci_pct"], row["min_effect_pct"]
    significant = row["p_adjusted"] <= alpha
    if row["verdict"] == "no change" and significant:
        row["notes"].append(f"significant change of {row['change_pct']:+.1f} %, below the "
                            f"{eff:g} % minimum effect")
    elif row["verdict"] == "undecided" and ci is None:
        row["notes"].append(f"{row['baseline']['n']} window pairs of {row['units']} "
                            f"repetition(s) in one regime: an interval needs "
                            f"{effects.MIN_PAIRS} pairs of {effects.MIN_PAIR_REPETITIONS} "
                            "repetitions")
    elif row["verdict"] == "undecided":
        row["notes"].append(f"the interval [{ci[0]:+.1f} %, {ci[1]:+.1f} %] is not "
                            f"within +-{eff:g} %" +
                            ("" if significant else " and the change is not significant"))


def compare_builds(side, options):
    """Answer every row of a build-duet run: per row and regime stats.compare_pairs of new/old
    and repetition_t_p, Holm-corrected over every regime of every row (builds_rule_text)."""
    rows = []
    pending = []  # (row, its regimes' candidates, its pairs, its repetitions)
    keys = sorted(set(side["pairs"]) | set(side["failed"]))
    if options["filter"] is not None:
        keys = [k for k in keys if options["filter"].search(k)]
    for key in keys:
        row = _new_build_row(key, side, options)
        rows.append(row)
        pairs = side["pairs"].get(key, [])
        failed = side["failed"].get(key, [])
        broken = _broken_note(key, side, pairs)
        if broken:
            row["verdict"] = "broken"
            row["notes"].append(broken)
            continue
        if failed:
            row["warnings"].append(f"{len(failed)} repetition(s) failed, e.g. {failed[0]!r}")
        pending.append((row, _regime_candidates(pairs, key, row["min_effect_pct"],
                                                side["looks"].get(key, 0)),
                        len(pairs), side["repetitions"].get(key, 0)))
    # Holm over every regime's test of every row: a row answered in two regimes takes two tests.
    tests = [c for _, cands, _, _ in pending for c in cands if c["p"] is not None]
    for c, adj in zip(tests, holm_adjust([c["p"] for c in tests])):
        c["p_adjusted"] = adj
    for row, cands, total, reps in pending:
        _answer_build_row(row, cands, total, reps, options)
    mark_equivalence(rows)
    notes = []
    if side["old_binary"]:
        notes.append(f"paired builds: baseline = the old build {side['old_binary']}, current = "
                     "this build, window by window on the same PUs" +
                     (f"; {side['swapped_runs']} of the runs with the roles swapped (the old "
                      "build's process measuring, the new build's serving its windows), so "
                      "what one role costs falls on both builds alike"
                      if side["swapped_runs"] else ""))
    return finish(rows, [], notes, options, "paired-builds",
                  lambda m: builds_rule_text(options, m))


def _broken_note(key, side, pairs):
    """Why a build-duet row is broken, or "": a broken invariant, every repetition failed, or
    no usable window pair."""
    broken, failed = side["invariant"].get(key), side["failed"].get(key, [])
    if broken:
        return (f"{len(broken)} of {side['repetitions'].get(key, 0) + len(failed)} repetitions "
                f"broke an invariant (e.g. {broken[0]!r})")
    if not pairs and failed:
        return f"every repetition failed, e.g. {failed[0]!r}"
    # Every pair left out as preempted (a starved machine) is no measurement, not a broken one.
    if not any(a > 0 and b > 0 and math.isfinite(b / a) for _, a, b, _ in pairs) and \
            (pairs or not side["preempted_pairs"].get(key)):
        return (f"no usable window pair: none of its {len(pairs)} window pairs has both builds' "
                "rates positive and finite")
    return ""


def _new_build_row(key, side, options):
    row = new_row(key, "build_ratio", "higher", min_effect_for(key, options),
                  method="build_pairs", unit="window pairs", matched=False)
    over = side["overrun_pairs"].get(key, 0)
    if over and options.get("rate") == "wall":
        row["warnings"].append(f"{over} window pair(s) with an overrun window left out")
    elif over:
        row["notes"].append(f"{over} window pair(s) with an overrun window (kept: compared "
                            "per CPU-second)")
    preempted = side["preempted_pairs"].get(key, 0)
    if preempted:
        row["notes"].append(f"{preempted} window pair(s) left out: a thread of a window was "
                            f"off its CPU for more than {PREEMPTED_SHARE:.0%} of it "
                            "(preempted while the others spun)")
    return row


def builds_rule_text(options, m):
    rule = (
        f"rule: paired builds (lockline --duet-with): change = median window-pair ratio new/old "
        f"- 1 of ops per {'CPU-second' if options.get('rate') != 'wall' else 'second'} over "
        f"the pairs of one coherence regime, 95 % interval from a two-level bootstrap "
        f"(repetitions, then their pairs; widened for few repetitions); significance a "
        f"two-sided one-sample t test over the repetitions' median log pair ratios, "
        f"Holm-corrected over every regime of {m} rows (alpha "
        f"{options['alpha']:g}); regression needs significance and an interval past half the "
        f"minimum effect {options['min_effect']:g} % that reaches it, on the change's side; "
        f"'no change larger than T %' needs the interval within +-T; a row answered in "
        f"several regimes takes the first of regression, improvement, no change that one of "
        f"them says; a row measured again in k later rounds spends alpha by "
        f"stats.sequential_confidence(k)")
    if options.get("max_undecided_pct"):
        rule += (f"; up to {options['max_undecided_pct']:g} % of the rows undecided pass the "
                 "gate (--max-undecided)")
    return rule


# A later round adds at most this many repetitions to a row: a row still undecided after that is
# one whose processes differ or whose machine is too noisy for the minimum effect.
MAX_ROUND_REPETITIONS = 30
# What one more round costs besides its rows' repetitions (its two arms' start-up, calibration).
ROUND_OVERHEAD_S = 5.0


def next_round(side, result, seconds_left):
    """The gate's next round (ci/regression.sh): "REPETITIONS WINDOW_MS FILTER" for the rows still
    undecided (interval_repetitions in their answering regime; no interval yet: as many again), or
    "" when none is or it would not fit in `seconds_left`."""
    add, keys = 0, []
    for r in result["rows"]:
        if r["verdict"] != "undecided" or r["key"] not in side["timing"]:
            continue
        keys.append(r["key"])
        units, total = r.get("units") or 0, side["repetitions"].get(r["key"], 1)
        more = total
        if r["ci_pct"] is not None and units:
            look = side["looks"].get(r["key"], 0) + 1
            wider = statistics.NormalDist().inv_cdf((1 + effects.sequential_confidence(look)) / 2)
            need = min(interval_repetitions(r, units, wider / 1.96), 1e6)
            more = math.ceil(max(need - units, 1) * total / units)
        add = max(add, min(max(more, effects.MIN_PAIR_REPETITIONS), MAX_ROUND_REPETITIONS))
    if not keys:
        return ""
    per_rep = sum(statistics.median(w for w, _ in side["timing"][k]) for k in keys)
    add = min(add, int((seconds_left - ROUND_OVERHEAD_S) // max(per_rep, 1e-3)))
    if add < effects.MIN_PAIR_REPETITIONS:
        return ""
    window = statistics.median(x for k in keys for _, x in side["timing"][k])
    pattern = "|".join(re.sub(r"([.^$|?*+()\[\]{}\\])", r"\\\1", k) for k in keys)
    return f"{add} {window * 1e3:.3f}ms ^({pattern})$"


def build_builds_parser():
    p = Parser(prog="compare.py --builds",
                description="Answer a build-duet run (lockline --duet-with=OLD, ci/regression.sh "
                            "--against=OLD) from its window pairs: exit 0 no row regressed "
                            "and at most --max-undecided %% of the rows undecided, 1 "
                            "regression or broken row, 2 bad input, 3 more rows undecided.")
    p.add_argument("run", help="the run directory or its lockline.json")
    add_gate_options(p)
    p.add_argument("--max-undecided", type=float, default=10.0, metavar="PCT",
                   help="undecided rows pass the gate (exit 0) while they are at most PCT %% "
                        "of the rows compared and no row regressed (default 10; 0: every row "
                        "must be decided)")
    p.add_argument("--next-round", type=float, metavar="SECONDS",
                   help="print the next round of ci/regression.sh instead of the table: "
                        "'REPETITIONS WINDOW FILTER' for the undecided rows, if it fits in "
                        "SECONDS (next_round), else nothing")
    p.add_argument("--rate", choices=sorted(BUILD_RATES), default="cpu",
                   help="compare pairs by ops per CPU-second of the windows' threads (cpu, the "
                        "default) or per second of window wall time (wall)")
    return p


def main_builds(argv):
    args = build_builds_parser().parse_args(argv)

    def gate():
        check_levels(args)
        if not 0 <= args.max_undecided <= 100:
            raise InputError(f"--max-undecided {args.max_undecided:g}: must be a percentage "
                             "from 0 to 100")
        options = gate_options(args, rate=args.rate, max_undecided_pct=args.max_undecided)
        side = load_build_pairs(expand_side_argument(args.run), args.rate)
        if not side["finished"] and not args.allow_unfinished:
            raise InputError(f"{args.run}: the run did not finish (finished: false); pass "
                             "--allow-unfinished to answer the rows it has")
        return side, compare_builds(side, options)

    if args.next_round is None:
        return run_gate(args, lambda: gate()[1])
    try:
        print(next_round(*gate(), args.next_round))
    except InputError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0
