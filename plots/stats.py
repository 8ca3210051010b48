"""Statistics shared by report.py, plot.py, verdicts.py and ci/compare.py: what an effect is
(median(variant) / median(base) - 1, in the repetitions of one coherence regime) and when it is
resolved (its seeded bootstrap interval excludes 0, or lies within +-MIN_EFFECT). The model
(repetitions as the resampling unit, Hesterberg's widening, regimes) is docs/measurement.md's
"Intervals that cover the next run" (and why MIN_REPETITIONS is 4)."""

from __future__ import annotations

import collections
import dataclasses
import math
import re
import statistics
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

MIN_EFFECT = 0.05          # fraction: 5 %
MIN_REPETITIONS = 4        # same-regime repetitions per side for an interval
MIN_PAIR_REPETITIONS = 3   # repetitions (resampling units) holding a paired interval's pairs
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 4000
SEED = 20261201            # fixed: the same data always gives the same interval

NO_REGIME = ("none", "unknown", "")
MIXED = "mixed"  # the probes before and after the repetition fell in different regimes
# A probe whose one-way latency is the scheduler's, not a cache line's (harness/measure/
# coherence.cpp: > 5 us): its rows name no regime and, like mixed ones, are never used as one.
PREEMPTED = "preempted"
NOT_A_REGIME = (MIXED, PREEMPTED)
# Regimes of two runs (or rounds) whose latencies are within this ratio are one state of the
# machine: the ratio within which harness/measure/coherence.h merges two modes of one run's
# probes. A label ranks regimes within one run only (results/SCHEMA.md).
SAME_REGIME_RATIO = 1.4

Sample = Tuple[str, float]  # (coherence label, value)


# The bootstrap draws at most this many resampled values at once (8 bytes each, plus as many
# indices), so 100k window pairs x 4000 resamples do not ask for tens of GiB.
BOOTSTRAP_CHUNK_VALUES = 1 << 22


def resampled_medians(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Medians of `resamples` resamples of `values` with replacement, drawn in chunks above
    BOOTSTRAP_CHUNK_VALUES (below it the very draws of one call)."""
    n = int(values.size)
    rows = max(1, BOOTSTRAP_CHUNK_VALUES // max(n, 1))
    out = np.empty(resamples, dtype=float)
    for start in range(0, resamples, rows):
        k = min(rows, resamples - start)
        out[start:start + k] = np.median(values[rng.integers(0, n, size=(k, n))], axis=1)
    return out


def regime_rank(label: str) -> Tuple[int, int, str]:
    """Sort key of a regime label, fastest first: near, baseline (older files), far, regime3,
    ... (harness/measure/coherence.h ranks them by latency), shifted, then by name."""
    match = re.fullmatch(r"regime(\d+)", label)
    if label in _RANKS:
        return _RANKS[label] + (label,)
    return (2, int(match.group(1)), label) if match else (5, 0, label)


_RANKS = {"near": (0, 1), "baseline": (1, 0), "far": (2, 2), "shifted": (4, 0)}


def majority_regime(labels: Iterable[str]) -> str:
    """The regime held by most of `labels` (ties: the fastest); "" when none names one."""
    counts = collections.Counter(lab for lab in labels if lab not in NO_REGIME + NOT_A_REGIME)
    return min(counts, key=lambda r: (-counts[r], regime_rank(r))) if counts else ""


@dataclasses.dataclass
class RegimeChoice:
    """The values of two variants in one coherence regime ("": all pooled); the totals are
    before selection."""

    regime: str
    base: List[float]
    variant: List[float]
    total_base: int
    total_variant: int

    @property
    def dropped(self) -> int:
        return self.total_base + self.total_variant - len(self.base) - len(self.variant)


def select_regime(base: Sequence[Sample], variant: Sequence[Sample]) -> RegimeChoice:
    """The regime maximising min(n_base, n_variant), then their sum, then the fastest, and its
    values. A side naming no regime (foreign files, aggregate rows): all pooled (regime "");
    otherwise unlabelled samples are dropped, and `mixed` ones always."""
    regimes = {lab for lab, _ in list(base) + list(variant) if lab not in NO_REGIME + NOT_A_REGIME}
    labelled_b = any(lab not in NO_REGIME for lab, _ in base)
    labelled_v = any(lab not in NO_REGIME for lab, _ in variant)
    if labelled_b and labelled_v and not regimes:
        return RegimeChoice(MIXED, [], [], len(base), len(variant))
    if not regimes or not (labelled_b and labelled_v):
        return RegimeChoice("", [v for _, v in base], [v for _, v in variant], len(base),
                            len(variant))

    def score(regime: str):
        nb = sum(1 for lab, _ in base if lab == regime)
        nv = sum(1 for lab, _ in variant if lab == regime)
        return (-min(nb, nv), -(nb + nv), regime_rank(regime))

    best = min(regimes, key=score)
    return RegimeChoice(best, [v for lab, v in base if lab == best],
                        [v for lab, v in variant if lab == best], len(base), len(variant))


def ratio_interval(base: Sequence[float], variant: Sequence[float],
                   confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES,
                   seed: int = SEED) -> Tuple[float, float, float]:
    """(ratio of medians, lo, hi) of variant over base: percentile bootstrap, each side
    resampled independently (seeded). Raises ValueError for an empty side or a base median
    that is not positive."""
    b = np.asarray(base, dtype=float)
    v = np.asarray(variant, dtype=float)
    if b.size == 0 or v.size == 0:
        raise ValueError("a side has no repetitions")
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(v))):
        raise ValueError("non-finite values")
    mb = float(np.median(b))
    if mb <= 0:
        raise ValueError(f"base median {mb:g} is not positive")
    ratio = float(np.median(v)) / mb
    rng = np.random.default_rng(seed)
    med_b = resampled_medians(b, rng, resamples)
    med_v = resampled_medians(v, rng, resamples)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = med_v / med_b
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0 or not math.isfinite(ratio):
        raise ValueError("no finite ratio of medians (values near the float maximum)")
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail])
    return ratio, float(min(lo, ratio)), float(max(hi, ratio))


def small_sample_expansion(units: int, confidence: float = CONFIDENCE) -> float:
    """Factor (>= 1) widening each side of a percentile bootstrap interval resting on `units`
    repetitions: Hesterberg's expanded percentile rule, t_{units-1} * sqrt(units / (units - 1)) /
    z at the two-sided `confidence` (5 units: 1.58; 3: 2.69). Raises ValueError for units < 2."""
    if units < 2:
        raise ValueError(f"{units} resampling unit(s): an interval needs at least 2")
    from scipy import stats as scipy_stats  # Debian python3-scipy (ci/install_deps.sh)
    upper = 1.0 - (1.0 - confidence) / 2.0
    t = float(scipy_stats.t.ppf(upper, units - 1))
    z = statistics.NormalDist().inv_cdf(upper)
    return max(1.0, t * math.sqrt(units / (units - 1.0)) / z)


def _expand(med: float, lo: float, hi: float, factor: float) -> Tuple[float, float]:
    return med - factor * (med - lo), med + factor * (hi - med)


def hierarchical_bootstrap_medians(groups: Sequence[np.ndarray], resamples: int,
                                   rng: np.random.Generator) -> np.ndarray:
    """`resamples` two-level bootstrap medians of the pooled `groups` (one array per
    repetition): draw len(groups) groups with replacement, then within each drawn group as
    many values as it holds (each group keeps its own weight)."""
    n_groups = len(groups)
    sizes = np.asarray([a.size for a in groups])
    width = int(sizes.max())
    padded = np.full((n_groups, width), np.nan)
    for i, a in enumerate(groups):
        padded[i, :a.size] = a
    rows = max(1, BOOTSTRAP_CHUNK_VALUES // max(n_groups * width, 1))
    out = np.empty(resamples, dtype=float)
    for start in range(0, resamples, rows):
        k = min(rows, resamples - start)
        chosen = rng.integers(0, n_groups, size=(k, n_groups))
        size = sizes[chosen][:, :, None]
        within = np.floor(rng.random((k, n_groups, width)) * size).astype(int)
        values = padded[chosen[:, :, None], within]
        values[np.arange(width)[None, None, :] >= size] = np.nan
        out[start:start + k] = np.nanmedian(values.reshape(k, -1), axis=1)
    return out


def hierarchical_median_interval(groups: Sequence[Sequence[float]],
                                 confidence: float = CONFIDENCE,
                                 resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED,
                                 expand: bool = True) -> Tuple[float, float, float]:
    """(median, lo, hi) of the pooled `groups` (one per repetition) by a seeded two-level
    percentile bootstrap (carrying the spread between repetitions), widened by
    small_sample_expansion when `expand`; all values equal: (v, v, v). Raises ValueError with no
    values, or one group when expand."""
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not arrays:
        raise ValueError("no values")
    if expand and len(arrays) < 2:
        raise ValueError("one repetition: an interval needs at least 2")
    pooled = np.concatenate(arrays)
    med = float(np.median(pooled))
    if np.all(pooled == pooled[0]):
        return med, med, med
    boot = hierarchical_bootstrap_medians(arrays, resamples, np.random.default_rng(seed))
    tail = (1.0 - confidence) / 2.0
    lo, hi = (float(x) for x in np.quantile(boot, [tail, 1.0 - tail]))
    lo, hi = min(lo, med), max(hi, med)
    if expand:
        lo, hi = _expand(med, lo, hi, small_sample_expansion(len(arrays), confidence))
    return med, lo, hi


def ns_text(ns: float) -> str:
    """32.4, 156, 2354: never an exponent."""
    return f"{ns:.3g}" if abs(ns) < 100 else f"{ns:.0f}"


def pct(fraction: Optional[float]) -> str:
    """'+6 %', '-0.8 %', '+35 %' (one decimal below 10 %)."""
    if fraction is None or not math.isfinite(fraction):
        return "?"
    value = fraction * 100.0
    return f"{value:+.1f} %" if abs(value) < 10 else f"{value:+.0f} %"


@dataclasses.dataclass
class Comparison:
    """The effect (median(variant) / median(base) - 1, None without data) of a variant against
    a base at one point, its interval `ci`, the regime ("" pooled), the units used and dropped,
    and status "resolved", "not_resolved" or "too_few"."""

    label: str
    effect: Optional[float]
    ci: Optional[Tuple[float, float]]
    regime: str
    n_base: int
    n_variant: int
    dropped: int
    status: str
    total_base: int = 0
    total_variant: int = 0
    min_effect: float = MIN_EFFECT
    regime_ns: Optional[float] = None
    # "unpaired" repetitions (compare_samples), "paired" windows (compare_pairs), "matched"
    # repetitions (compare_matched) or "pair_effects" (compare_pair_effects).
    method: str = "unpaired"
    # The values the interval rests on (compare_matched, compare_pair_effects), for summaries.
    used: Optional[Tuple[List[float], List[float]]] = dataclasses.field(default=None, repr=False)
    # Identical matched sides: every paired difference 0, the interval exactly [0, 0].
    exact: bool = False
    # Resampling units (repetitions) and small_sample_expansion's factor for them.
    units: Optional[int] = None
    expansion: Optional[float] = None
    # "effect" (a confidence interval) or "rerun" (for_rerun; effect_ci keeps the effect's).
    interval: str = "effect"
    effect_ci: Optional[Tuple[float, float]] = None

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"

    @property
    def excludes_zero(self) -> bool:
        return self.ci is not None and (self.ci[0] > 0 or self.ci[1] < 0)

    @property
    def equivalent(self) -> bool:
        return self.ci is not None and is_equivalent(self.ci, self.min_effect)

    def regime_words(self) -> str:
        """'near-regime (32 ns)' / 'pooled'. A label ranks regimes within one run only, so
        the regime's ns is said with it when the rows carry it."""
        if not self.regime:
            return "pooled"
        return f"{self.regime}-regime" + (f" ({ns_text(self.regime_ns)} ns)"
                                          if self.regime_ns else "")

    def interval_text(self) -> str:
        return ("too few repetitions" if self.ci is None else
                f"{pct(self.effect)} [{pct(self.ci[0])}, {pct(self.ci[1])}]")

    def counts_text(self) -> str:
        if self.method == "paired":
            text = f"{self.n_base} {self.regime_words()} window pairs (paired windows)"
            if self.units and self.units != self.n_base:
                text += f" in {self.units} repetitions (resampled by repetition)"
        elif self.method == "matched":
            text = (f"{self.n_base} {self.regime_words()} repetitions matched one to one"
                    + (" (identical: exact)" if self.exact else ""))
        elif self.method == "pair_effects":
            text = (f"{self.n_base} / {self.n_variant} {self.regime_words()} window pairs "
                    "(change of the paired effect B/A)")
        elif self.n_base == self.n_variant:
            text = f"{self.n_base} {self.regime_words()} repetitions a side"
        else:
            text = f"{self.n_base} / {self.n_variant} {self.regime_words()} repetitions"
        if self.dropped:
            text += f", {self.dropped} in other regimes dropped"
        return text

    def text(self) -> str:
        head = f"{self.label}: " if self.label else ""
        if self.status == "too_few":
            where = f" in the {self.regime} regime" if self.regime else ""
            have = min(self.n_base, self.n_variant)
            total = max(self.total_base, self.total_variant)
            if (self.method == "paired" and self.units is not None
                    and self.units < MIN_PAIR_REPETITIONS and self.n_base >= MIN_PAIRS):
                return (f"{head}not resolved here: too few repetitions ({self.units}{where}, "
                        f"{self.n_base} window pairs; an interval that covers a rerun needs "
                        f"{MIN_PAIR_REPETITIONS})")
            if self.method in ("paired", "pair_effects"):
                return (f"{head}too few window pairs ({have} of {total}{where}; "
                        f"an interval needs {MIN_PAIRS})")
            if self.regime and self.regime_ns:
                where += f" ({ns_text(self.regime_ns)} ns)"
            return (f"{head}too few same-regime repetitions ({have} of {total}{where}; an "
                    f"interval needs {MIN_REPETITIONS} a side)")
        rerun = self.interval == "rerun"
        if self.status == "not_resolved":
            kind = "rerun interval" if rerun else "interval"
            return (f"{head}not resolved on this machine: {kind} [{pct(self.ci[0])}, "
                    f"{pct(self.ci[1])}] spans 0 (median {pct(self.effect)}, "
                    f"{self.counts_text()})")
        shown = self.interval_text() + (" for a rerun" if rerun else "")
        if self.excludes_zero and not self.equivalent:
            return f"{head}{shown}, {self.counts_text()}"
        return (f"{head}no effect of {self.min_effect * 100:g} % or more: "
                f"{shown}, {self.counts_text()}")


# Half-width floor (log ratio) of a rerun interval: A/A rows of one variant differ by up to ~1 %
# (docs/measurement.md).
RERUN_FLOOR = 0.01


def for_rerun(comp: Comparison) -> Comparison:
    """`comp` with a rerun interval (where an independent rerun puts its estimate, 95 % of the
    time; Cumming and Maillardet 2006): the estimate +- max(sqrt(2) h, RERUN_FLOOR) a side in log
    space, status recomputed. No interval, or exact: only `interval` changes."""
    out = dataclasses.replace(comp, interval="rerun", effect_ci=comp.ci)
    if comp.ci is None or comp.effect is None or comp.exact or comp.effect <= -1.0:
        return out
    lo, hi = comp.ci
    if lo <= -1.0:
        return out
    m = math.log1p(comp.effect)
    lo_log, hi_log = math.log1p(lo), math.log1p(hi)
    down = max(math.sqrt(2.0) * (m - lo_log), RERUN_FLOOR)
    up = max(math.sqrt(2.0) * (hi_log - m), RERUN_FLOOR)
    ci = (math.expm1(m - down), math.expm1(m + up))
    out.ci = ci
    if comp.status in ("resolved", "not_resolved"):
        out.status = "resolved" if is_resolved(ci, comp.min_effect) else "not_resolved"
    return out


def is_equivalent(ci: Tuple[float, float], min_effect: float = MIN_EFFECT) -> bool:
    """The interval of the effect lies within +-min_effect, bounds included: "no change larger
    than min_effect" (two one-sided tests at the interval's confidence)."""
    return -min_effect <= ci[0] and ci[1] <= min_effect


def is_resolved(ci: Tuple[float, float], min_effect: float = MIN_EFFECT) -> bool:
    """The one rule: the interval excludes 0 (an effect) or is_equivalent."""
    return ci[0] > 0 or ci[1] < 0 or is_equivalent(ci, min_effect)


def answer(ci: Optional[Tuple[float, float]], min_effect: float = MIN_EFFECT) -> str:
    """"equivalent" (is_equivalent: checked first), "effect" (excludes 0), "not_resolved", or
    "too_few" (no interval)."""
    if ci is None:
        return "too_few"
    if is_equivalent(ci, min_effect):
        return "equivalent"
    if ci[0] > 0 or ci[1] < 0:
        return "effect"
    return "not_resolved"


def sequential_confidence(look: int, alpha: float = 1.0 - CONFIDENCE) -> float:
    """Confidence of the interval at look `look` (1, 2, ...) of lockline --until-resolved: alpha
    spent as alpha * 6 / (pi^2 k^2), summing to alpha over all looks (1: 97.0 %, 2: 99.2 %)."""
    if look < 1:
        raise ValueError("look counts from 1")
    return 1.0 - alpha * 6.0 / (math.pi ** 2 * look ** 2)


def compare_samples(base: Sequence[Sample], variant: Sequence[Sample], label: str = "",
                    min_effect: float = MIN_EFFECT,
                    min_repetitions: int = MIN_REPETITIONS,
                    confidence: float = CONFIDENCE) -> Comparison:
    """Compare (coherence label, value) repetitions: select_regime, then ratio_interval;
    "too_few" under min_repetitions a side in that regime or a non-positive base median."""
    choice = select_regime(base, variant)
    common = dict(label=label, regime=choice.regime, n_base=len(choice.base),
                  n_variant=len(choice.variant), dropped=choice.dropped,
                  total_base=choice.total_base, total_variant=choice.total_variant,
                  min_effect=min_effect)
    if min(len(choice.base), len(choice.variant)) < min_repetitions:
        effect = (float(np.median(choice.variant) / np.median(choice.base)) - 1.0
                  if choice.base and choice.variant and np.median(choice.base) > 0 else None)
        return Comparison(effect=effect, ci=None, status="too_few", **common)
    try:
        ratio, lo, hi = ratio_interval(choice.base, choice.variant, confidence=confidence)
    except ValueError:
        return Comparison(effect=None, ci=None, status="too_few", **common)
    # Few repetitions: the percentile interval of a median is too narrow; widened for the
    # smaller side.
    units = min(len(choice.base), len(choice.variant))
    factor = small_sample_expansion(units, confidence) if units >= 2 else 1.0
    if lo > 0 and ratio > 0:
        llo, lhi = _expand(math.log(ratio), math.log(lo), math.log(hi), factor)
        lo, hi = math.exp(llo), math.exp(lhi)
    ci = (lo - 1.0, hi - 1.0)
    resolved = is_resolved(ci, min_effect)
    return Comparison(effect=ratio - 1.0, ci=ci,
                      status="resolved" if resolved else "not_resolved", units=units,
                      expansion=factor, **common)


def compare_points(base_points, variant_points, metric: str, label: str = "",
                   min_effect: float = MIN_EFFECT, confidence: float = CONFIDENCE) -> Comparison:
    """compare_samples over Point repetitions (overrun ones dropped)."""
    def used(points):
        return [p for p in points if p.aggregate is None and metric in p.metrics and not p.overrun]
    base_points, variant_points = used(base_points), used(variant_points)
    out = compare_samples([(p.regime, p.metrics[metric]) for p in base_points],
                          [(p.regime, p.metrics[metric]) for p in variant_points], label,
                          min_effect, confidence=confidence)
    ns = [p.regime_ns for p in list(base_points) + list(variant_points)
          if out.regime and p.regime == out.regime and p.regime_ns]
    out.regime_ns = float(np.median(ns)) if ns else None
    return out


MIN_PAIRS = 8  # same-regime window pairs for a paired interval


def compare_pairs(pairs: Sequence[Tuple], label: str = "",
                  min_effect: float = MIN_EFFECT, min_pairs: int = MIN_PAIRS,
                  resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED,
                  confidence: float = CONFIDENCE,
                  min_repetitions: int = MIN_PAIR_REPETITIONS) -> Comparison:
    """The effect of B against A from paired windows (harness/measure/duet.h): `pairs` are (label,
    A's ops/s, B's ops/s[, repetition]), one per window pair (a 3-tuple is a unit of its own).
    effect = exp(median(log(B / A))) - 1; interval: hierarchical_median_interval, widened by
    small_sample_expansion(repetitions). Pairs of the regime holding most repetitions, then most
    pairs; a side <= 0 or not finite: dropped. "too_few" under min_pairs pairs or min_repetitions
    repetitions."""
    rows = [(p[0], p[1], p[2], p[3] if len(p) > 3 else ("pair", i)) for i, p in enumerate(pairs)]
    good = [(lab, a, b, g) for lab, a, b, g in rows
            if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0]
    labels = [lab for lab, _, _, _ in good]
    # The regime holding the most repetitions (the resampling units), then the most pairs,
    # then the fastest: 64 pairs of one repetition do not outweigh 3 repetitions of 20.
    units_of: dict = {}
    for lab, _, _, g in good:
        if lab not in NO_REGIME + NOT_A_REGIME:
            units_of.setdefault(lab, set()).add(g)
    regime = min(units_of, key=lambda r: (-len(units_of[r]), -labels.count(r), regime_rank(r))
                 ) if units_of else ""
    if regime:
        used = [(a, b, g) for lab, a, b, g in good if lab == regime]
    elif any(lab in NOT_A_REGIME for lab in labels):
        used = [(a, b, g) for lab, a, b, g in good if lab not in NOT_A_REGIME]
    else:
        used = [(a, b, g) for _, a, b, g in good]
    groups: dict = {}
    for a, b, g in used:
        groups.setdefault(g, []).append(math.log(b / a))
    common = dict(label=label, regime=regime, n_base=len(used), n_variant=len(used),
                  dropped=len(pairs) - len(used), total_base=len(pairs),
                  total_variant=len(pairs), min_effect=min_effect, method="paired",
                  units=len(groups))
    if len(used) < max(1, min_pairs) or len(groups) < max(2, min_repetitions):
        effect = (float(np.exp(np.median([math.log(b / a) for a, b, _ in used]))) - 1.0
                  if used else None)
        return Comparison(effect=effect, ci=None, status="too_few", **common)
    med, lo, hi = hierarchical_median_interval(list(groups.values()), confidence, resamples, seed)
    return _from_logs(med, lo, hi, expansion=small_sample_expansion(len(groups), confidence),
                      **common)


def _from_logs(med: float, lo: float, hi: float, **common) -> Comparison:
    """The Comparison of a median log ratio and its interval (log space)."""
    ci = (math.exp(lo) - 1.0, math.exp(hi) - 1.0)
    status = "resolved" if is_resolved(ci, common["min_effect"]) else "not_resolved"
    return Comparison(effect=math.exp(med) - 1.0, ci=ci, status=status, **common)


def _bootstrap_median(values: np.ndarray, confidence: float, resamples: int,
                      seed: int) -> Tuple[float, float, float]:
    """(median, lo, hi): seeded percentile bootstrap of the median; all equal: (v, v, v)."""
    med = float(np.median(values))
    if np.all(values == values[0]):
        return med, med, med
    rng = np.random.default_rng(seed)
    boot = resampled_medians(values, rng, resamples)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(boot, [tail, 1.0 - tail])
    return med, min(float(lo), med), max(float(hi), med)


def _matched_log_ratio(base: float, variant: float) -> Optional[float]:
    """log(variant / base) of one matched pair; 0.0 when the two are equal (zeros included:
    the same measurement on both sides differs by nothing); None when the ratio is undefined
    (a side <= 0 or not finite, and the two differ)."""
    return 0.0 if base == variant and math.isfinite(base) else _pair_log_ratio(base, variant)


def _one_regime(labels: Sequence[str]) -> Tuple[str, List[int]]:
    """(regime, indexes used): the majority regime, else every index but the `mixed` ones."""
    regime = majority_regime(labels)
    if regime:
        return regime, [i for i, lab in enumerate(labels) if lab == regime]
    return "", [i for i, lab in enumerate(labels) if lab not in NOT_A_REGIME]


def compare_matched(base: Sequence[Sample], variant: Sequence[Sample], label: str = "",
                    min_effect: float = MIN_EFFECT,
                    min_repetitions: int = MIN_REPETITIONS,
                    confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = SEED) -> Comparison:
    """Compare two sides whose repetitions correspond one to one (a run against itself or a copy):
    effect = exp(median_i log(variant_i / base_i)) - 1, interval a seeded paired bootstrap of that
    median; identical sides give exactly 0 and [0, 0] (exact) whatever their number. One regime
    (_one_regime); undefined ratios dropped. Raises ValueError when the sides differ in length or
    in a label."""
    if len(base) != len(variant):
        raise ValueError(f"matched sides need the same number of repetitions ({len(base)} vs "
                         f"{len(variant)})")
    if any(lb != lv for (lb, _), (lv, _) in zip(base, variant)):
        raise ValueError("matched sides need the same coherence label at every repetition")
    regime, index = _one_regime([lab for lab, _ in base])
    used = [(base[i][1], variant[i][1], _matched_log_ratio(base[i][1], variant[i][1]))
            for i in index]
    used = [(b, v, lr) for b, v, lr in used if lr is not None]
    common = dict(label=label, regime=regime, n_base=len(used), n_variant=len(used),
                  dropped=2 * (len(base) - len(used)), total_base=len(base),
                  total_variant=len(variant), min_effect=min_effect, method="matched",
                  used=([b for b, _, _ in used], [v for _, v, _ in used]))
    logs = np.asarray([lr for _, _, lr in used], dtype=float)
    return _matched_result(logs, min_repetitions, confidence, resamples, seed, common)


def _matched_result(logs: np.ndarray, min_n: int, confidence: float, resamples: int,
                    seed: int, common: dict) -> Comparison:
    """Every log ratio 0 (identical sides): exactly 0 and [0, 0], whatever their number;
    under min_n: too few; else the bootstrap of their median."""
    if logs.size and bool(np.all(logs == 0.0)):
        return Comparison(effect=0.0, ci=(0.0, 0.0), status="resolved", exact=True, **common)
    if logs.size < max(1, min_n):
        effect = float(math.exp(np.median(logs))) - 1.0 if logs.size else None
        return Comparison(effect=effect, ci=None, status="too_few", **common)
    return _from_logs(*_bootstrap_median(logs, confidence, resamples, seed), **common)


def _pair_log_ratio(a: float, b: float) -> Optional[float]:
    return math.log(b / a) if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0 else None


def compare_pair_effects(base_pairs: Sequence[Tuple[str, float, float]],
                         current_pairs: Sequence[Tuple[str, float, float]], label: str = "",
                         min_effect: float = MIN_EFFECT, min_pairs: int = MIN_PAIRS,
                         matched: bool = False, confidence: float = CONFIDENCE,
                         resamples: int = BOOTSTRAP_RESAMPLES,
                         seed: int = SEED) -> Comparison:
    """The change of a paired effect B/A between one key's duet rows in two runs (pairs as
    labelled_duet_pairs gives them), a fraction: exp(median(log(B/A) current) - median(log(B/A)
    baseline)) - 1. Interval: seeded percentile bootstrap; matched=False resamples each run's pairs
    independently (4-tuples: by repetition, widened by small_sample_expansion), matched=True (the
    same windows on both sides) takes the per-pair differences with a paired bootstrap (identical
    pairs: exactly 0, [0, 0]). One regime; pairs with a side <= 0 or not finite dropped; "too_few"
    under min_pairs a run (unless exact). Raises ValueError for matched sides differing in length
    or labels."""
    common = dict(label=label, min_effect=min_effect, method="pair_effects",
                  total_base=len(base_pairs), total_variant=len(current_pairs))
    effects = _matched_pair_effects if matched else _unmatched_pair_effects
    return effects(base_pairs, current_pairs, min_pairs, confidence, resamples, seed, common)


def _matched_pair_effects(base_pairs: Sequence[Tuple], current_pairs: Sequence[Tuple],
                          min_pairs: int, confidence: float, resamples: int, seed: int,
                          common: dict) -> Comparison:
    if len(base_pairs) != len(current_pairs):
        raise ValueError(f"matched runs need the same window pairs ({len(base_pairs)} vs "
                         f"{len(current_pairs)})")
    if any(pb[0] != pc[0] for pb, pc in zip(base_pairs, current_pairs)):
        raise ValueError("matched runs need the same coherence label at every pair")
    regime, index = _one_regime([p[0] for p in base_pairs])
    rows = [(_pair_log_ratio(*base_pairs[i][1:3]), _pair_log_ratio(*current_pairs[i][1:3]))
            for i in index]
    rows = [(lb, lc) for lb, lc in rows if lb is not None and lc is not None]
    used = ([math.exp(lb) for lb, _ in rows], [math.exp(lc) for _, lc in rows])
    common.update(regime=regime, n_base=len(rows), n_variant=len(rows),
                  dropped=len(base_pairs) + len(current_pairs) - 2 * len(rows), used=used)
    diffs = np.asarray([lc - lb for lb, lc in rows], dtype=float)
    return _matched_result(diffs, min_pairs, confidence, resamples, seed, common)


def _unmatched_pair_effects(base_pairs: Sequence[Tuple], current_pairs: Sequence[Tuple],
                            min_pairs: int, confidence: float, resamples: int, seed: int,
                            common: dict) -> Comparison:
    def logs(pairs):
        out = [(p[0], _pair_log_ratio(p[1], p[2]), p[3] if len(p) > 3 else None) for p in pairs]
        return [x for x in out if x[1] is not None]
    lbase, lcur = logs(base_pairs), logs(current_pairs)
    choice = select_regime([(lab, lr) for lab, lr, _ in lbase], [(lab, lr) for lab, lr, _ in lcur])
    lb = np.asarray(choice.base, dtype=float)
    lc = np.asarray(choice.variant, dtype=float)
    common.update(regime=choice.regime, n_base=int(lb.size), n_variant=int(lc.size),
                  dropped=len(base_pairs) + len(current_pairs) - int(lb.size + lc.size),
                  used=([math.exp(x) for x in lb], [math.exp(x) for x in lc]))
    if min(lb.size, lc.size) < max(1, min_pairs):
        effect = (float(math.exp(np.median(lc) - np.median(lb))) - 1.0
                  if lb.size and lc.size else None)
        return Comparison(effect=effect, ci=None, status="too_few", **common)
    med = float(np.median(lc) - np.median(lb))
    rng = np.random.default_rng(seed)

    def grouped(logs_of_run):
        # The chosen regime's log ratios by repetition; None for 3-tuples.
        if any(g is None for _, _, g in logs_of_run):
            return None
        out: dict = {}
        for lab, lr, g in logs_of_run:
            if not choice.regime or lab == choice.regime:  # as select_regime chose
                out.setdefault(g, []).append(lr)
        return [np.asarray(v) for v in out.values()]
    gb, gc = grouped(lbase), grouped(lcur)
    if gb is not None and gc is not None and min(len(gb), len(gc)) >= 2:
        boot = (hierarchical_bootstrap_medians(gc, resamples, rng)
                - hierarchical_bootstrap_medians(gb, resamples, rng))
        factor = small_sample_expansion(min(len(gb), len(gc)), confidence)
        common.update(units=min(len(gb), len(gc)), expansion=factor)
    else:
        boot = (resampled_medians(lc, rng, resamples) - resampled_medians(lb, rng, resamples))
        factor = 1.0
    tail = (1.0 - confidence) / 2.0
    qlo, qhi = np.quantile(boot, [tail, 1.0 - tail])
    return _from_logs(med, *_expand(med, min(float(qlo), med), max(float(qhi), med), factor),
                      **common)


def wilson_interval(successes: int, trials: int,
                    confidence: float = CONFIDENCE) -> Tuple[float, float]:
    """Wilson score interval (lo, hi) of successes / trials: unlike Wald's, 0 of 40 gives
    [0, 8.8 %], not [0, 0]. Raises ValueError for trials < 1 or successes outside."""
    if trials < 1:
        raise ValueError("a proportion needs at least one trial")
    if not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes of {trials} trials")
    z = statistics.NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    p = successes / trials
    denom = 1.0 + z * z / trials
    centre = (p + z * z / (2.0 * trials)) / denom
    half = z * math.sqrt(p * (1.0 - p) / trials + z * z / (4.0 * trials * trials)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == trials else min(1.0, centre + half)
    return lo, hi


def stddev_from_aggregate(mean_time: float, stddev_time: float) -> Tuple[float, float]:
    """Rate mean and spread (1/s) from a time mean and stddev (s) by the delta method:
    sd(1 / t) ~= sd(t) / t^2 (1 / stddev is not a spread)."""
    if mean_time <= 0:
        raise ValueError("mean time must be positive")
    return 1.0 / mean_time, stddev_time / (mean_time * mean_time)
