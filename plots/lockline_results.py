"""Load lockline result files (and any Google Benchmark JSON) into plain Python records.

lockline writes Google Benchmark's JSON format with additions (results/SCHEMA.md): each row has
`family`, `params`, `threads`, `placement`, `coherence` and flat metrics such as `ops_per_s`.
Files from plain Google Benchmark runs lack all of that, and older or newer library versions
differ (no `family_index`, `repetitions: 0`, `error_occurred` vs `skipped`, mixed `time_unit`,
aggregate rows in percent, thread counts passed as a benchmark argument). This module turns
either into `Point` records so the plotting code never looks at raw JSON.

Errors: every problem with an input file raises `ResultError` with one line naming the file and
what was wrong; callers print it and exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

# Seconds per Google Benchmark time unit.
TIME_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}

# Name segments Google Benchmark appends that are not parameters of the benchmark.
_GB_MODIFIER = re.compile(
    r"^(real_time|manual_time|process_time|iterations:\d+|repeats:\d+|min_time:[\d.]+s?|"
    r"min_warmup_time:[\d.]+s?)$")
_AGGREGATE_SUFFIX = re.compile(r"_(mean|median|stddev|cv|BigO|RMS)$")


class ResultError(Exception):
    """A result file cannot be read or holds nothing plottable (one-line message)."""


@dataclasses.dataclass
class Point:
    """One measured row, normalised.

    family: lockline family (`zone_lock`) or, for foreign files, the benchmark name's first
        segment without template arguments.
    bench: first segment of the row key (`page_free_race` inside family `page_free`).
    params: parameters other than the thread count, as strings (`{"layout": "...", "lock": ...}`).
    threads: thread (or worker) count, >= 1.
    metrics: flat numeric metrics; time-like values from foreign files are converted to
        `real_time_ns`/`cpu_time_ns`, and `throughput_per_s` (iterations/s) is added when the
        row has no `ops_per_s`/`items_per_second`.
    aggregate: None for a repetition, else the aggregate name (`mean`, `stddev`, ...).
    """

    family: str
    bench: str
    params: Dict[str, str]
    threads: int
    metrics: Dict[str, float]
    aggregate: Optional[str] = None
    repetition: int = 0
    placement: Dict[str, Any] = dataclasses.field(default_factory=dict)
    coherence: str = "unknown"

    @property
    def variant(self) -> Tuple[Tuple[str, str], ...]:
        """Sorted (key, value) pairs identifying the series this point belongs to."""
        return tuple(sorted(self.params.items()))


@dataclasses.dataclass
class Run:
    """One result file: its context (machine, provenance) and its points."""

    path: str
    context: Dict[str, Any]
    points: List[Point]
    skipped_rows: List[str]

    @property
    def lockline(self) -> Dict[str, Any]:
        """lockline's own context block (empty dict for foreign files)."""
        value = self.context.get("lockline")
        return value if isinstance(value, dict) else {}

    @property
    def host(self) -> str:
        """Host name, or the file name when the context has none."""
        return str(self.context.get("host_name") or os.path.basename(self.path))

    @property
    def commit(self) -> str:
        """Short lockline git commit, or '?' for foreign files."""
        return str(self.lockline.get("git_commit") or "?")[:12]

    @property
    def label(self) -> str:
        """`host@commit`, used to tell runs apart in overlaid figures."""
        return f"{self.host}@{self.commit}"

    def caption(self) -> str:
        """One line: machine, CPU model, date, placement policy and lockline commit."""
        ll = self.lockline
        parts = [f"host {self.host}"]
        if ll.get("cpu_model"):
            parts.append(str(ll["cpu_model"]))
        topo = ll.get("topology") if isinstance(ll.get("topology"), dict) else {}
        if topo:
            parts.append(f"{topo.get('packages', '?')} pkg / {topo.get('numa_nodes', '?')} NUMA / "
                         f"{topo.get('l3s', '?')} L3 / {topo.get('pus', '?')} PUs")
        parts.append(f"date {self.context.get('date', '?')}")
        parts.append(f"pin {ll.get('pin', 'n/a')}")
        parts.append(f"commit {self.commit}")
        return ", ".join(parts)

    def families(self) -> List[str]:
        """Families present, in first-seen order."""
        seen: Dict[str, None] = {}
        for p in self.points:
            seen.setdefault(p.family, None)
        return list(seen)


def _number(value: Any) -> Optional[float]:
    """`value` as a finite float, or None (bools, strings and NaN are not metrics)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _parse_name(name: str) -> Tuple[str, Dict[str, str], List[int]]:
    """Split a Google Benchmark name into (first segment, key:value params, positional ints).

    `BM_x<T>/8/real_time` -> ("BM_x<T>", {}, [8]); lockline keys give key:value params.
    Template arguments may contain '/', so splitting respects angle-bracket depth.
    """
    segments, depth, cur = [], 0, ""
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        if ch == "/" and depth == 0:
            segments.append(cur)
            cur = ""
        else:
            cur += ch
    segments.append(cur)
    head, params, positional = segments[0], {}, []
    for seg in segments[1:]:
        if _GB_MODIFIER.match(seg):
            continue
        if ":" in seg:
            key, _, value = seg.partition(":")
            params[key] = value
        elif re.fullmatch(r"-?\d+", seg):
            positional.append(int(seg))
        elif seg:
            params.setdefault("arg", seg)
    return head, params, positional


def _family_of(head: str, params: Dict[str, str]) -> str:
    """Family of a foreign row: `name<T, U>` -> family `name`, params['template'] = 'T, U'."""
    match = re.match(r"^([^<]*)<(.*)>$", head)
    if match:
        params["template"] = match.group(2)
        return match.group(1) or head
    return head


def _point_from_row(row: Dict[str, Any]) -> Optional[Point]:
    """Normalise one benchmark row; None for rows that carry no plottable value."""
    name = str(row.get("lockline_key") or row.get("run_name") or row.get("name") or "")
    if not name:
        return None
    aggregate = None
    if row.get("run_type") == "aggregate" or row.get("aggregate_name"):
        aggregate = str(row.get("aggregate_name") or "aggregate")
        if row.get("aggregate_unit") == "percentage":
            return None  # a coefficient of variation is not a throughput
        name = _AGGREGATE_SUFFIX.sub("", name)
    elif _AGGREGATE_SUFFIX.search(name) and "run_type" not in row:
        # Old format: aggregates recognised only by the name suffix.
        aggregate = _AGGREGATE_SUFFIX.search(name).group(1)
        name = _AGGREGATE_SUFFIX.sub("", name)
    if aggregate in ("BigO", "RMS", "cv"):
        return None

    head, parsed, positional = _parse_name(name)
    raw_params = row.get("params") if isinstance(row.get("params"), dict) else {}
    params = {str(k): str(v) for k, v in raw_params.items()} or parsed
    family = str(row.get("family") or "") or _family_of(head, params)
    threads = None
    if "threads" in params:
        try:
            threads = int(params.pop("threads"))
        except ValueError:
            threads = None
    row_threads = _number(row.get("threads"))
    if threads is None and row_threads is not None and row_threads > 1:
        threads = int(row_threads)
    if threads is None and positional:
        # Foreign files often pass the worker count as the last integer argument.
        threads = positional[-1]
        for i, value in enumerate(positional[:-1]):
            params[f"arg{i}"] = str(value)
    elif positional:
        for i, value in enumerate(positional):
            params[f"arg{i}"] = str(value)
    if threads is None:
        threads = int(row_threads) if row_threads else 1
    if threads < 1:
        return None

    metrics: Dict[str, float] = {}
    scale = TIME_UNIT_SECONDS.get(str(row.get("time_unit", "ns")))
    for key, value in row.items():
        num = _number(value)
        if num is None or key in ("family_index", "per_family_instance_index", "repetitions",
                                  "repetition_index", "threads"):
            continue
        if key in ("real_time", "cpu_time"):
            if scale is None or (aggregate and row.get("aggregate_unit") not in (None, "time")):
                continue
            metrics[f"{key}_ns"] = num * scale * 1e9
        else:
            metrics[key] = num
    if "real_time_ns" in metrics and metrics["real_time_ns"] > 0:
        if "ops_per_s" not in metrics and "items_per_second" not in metrics:
            metrics["throughput_per_s"] = 1e9 / metrics["real_time_ns"]
    if not metrics:
        return None
    coherence = row.get("coherence")
    return Point(
        family=family,
        bench=head if row.get("family") else family,
        params=params,
        threads=threads,
        metrics=metrics,
        aggregate=aggregate,
        repetition=int(_number(row.get("repetition_index")) or 0),
        placement=row.get("placement") if isinstance(row.get("placement"), dict) else {},
        coherence=str(coherence.get("label", "unknown")) if isinstance(coherence, dict) else "unknown",
    )


def _merge_single_point_families(points: List[Point]) -> None:
    """In foreign files, fold families with one variant at one thread count (plain
    `BM_Foo` benchmarks) into one family `benchmarks` (param `benchmark`), so they share one
    figure instead of one figure each."""
    shapes: Dict[str, set] = {}
    for p in points:
        shapes.setdefault(p.family, set()).add((p.variant, p.threads))
    single = {fam for fam, shape in shapes.items() if len(shape) == 1}
    if len(single) < 2:
        return
    for p in points:
        if p.family in single:
            p.params = {"benchmark": p.family, **p.params}
            p.family = p.bench = "benchmarks"


def resolve_paths(paths: Iterable[str]) -> List[str]:
    """Expand run directories into their result JSON files.

    A directory yields its `lockline.json` if present, else every `*.json` directly inside it.
    Raises ResultError for a missing path or a directory without JSON.
    """
    files: List[str] = []
    for path in paths:
        if os.path.isdir(path):
            main = os.path.join(path, "lockline.json")
            if os.path.isfile(main):
                files.append(main)
                continue
            found = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".json"))
            if not found:
                raise ResultError(f"{path}: directory has no lockline.json or other *.json file")
            files.extend(found)
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise ResultError(f"{path}: no such file or directory (expected a run directory or "
                              "a result JSON)")
    return files


def load_run(path: str) -> Run:
    """Read one result JSON (lockline or any Google Benchmark version) into a Run.

    Raises ResultError when the file is not JSON, has no `benchmarks` list, or no row has a
    usable value. Rows with `error_occurred` or `skipped` set are dropped and listed in
    `Run.skipped_rows`.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError) as err:
        raise ResultError(f"{path}: cannot read: {err}") from None
    except json.JSONDecodeError as err:
        raise ResultError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ResultError(f"{path}: not a Google Benchmark result (expected an object with a "
                          "'benchmarks' list)")
    context = data.get("context") if isinstance(data.get("context"), dict) else {}
    points, skipped = [], []
    for row in data["benchmarks"]:
        if not isinstance(row, dict):
            continue
        if row.get("error_occurred") or row.get("skipped"):
            skipped.append(f"{row.get('name', '?')}: {row.get('error_message') or row.get('skip_message') or 'skipped'}")
            continue
        try:
            point = _point_from_row(row)
        except (TypeError, ValueError, AttributeError, OverflowError) as err:
            # A row shaped by some other tool (params a list, threads a string, ...).
            skipped.append(f"{row.get('name', '?')}: malformed row ({err})")
            continue
        if point is not None:
            points.append(point)
    if not points:
        raise ResultError(f"{path}: no benchmark row has a plottable value "
                          f"({len(data['benchmarks'])} rows, {len(skipped)} with errors)")
    if not isinstance(context.get("lockline"), dict):
        _merge_single_point_families(points)
    return Run(path=path, context=context, points=points, skipped_rows=skipped)


def load_runs(paths: Iterable[str]) -> List[Run]:
    """load_run over resolve_paths(paths); raises ResultError if no path is given."""
    paths = list(paths)
    if not paths:
        raise ResultError("no result path given (expected run directories or result JSON files)")
    return [load_run(p) for p in resolve_paths(paths)]


@dataclasses.dataclass
class Stat:
    """Mean and standard deviation over repetitions (std 0 for a single value)."""

    mean: float
    std: float
    n: int
    shifted: bool = False


def summarize(points: Iterable[Point], metric: str) -> Dict[Tuple, Dict[int, Stat]]:
    """Group points by variant and thread count and reduce `metric` over repetitions.

    Returns {variant: {threads: Stat}}. Repetition rows are preferred; aggregate rows (`mean`,
    `stddev`) are used only for series that have no repetition rows. Points without the metric
    are ignored. `shifted` is set when any repetition was labelled `coherence: shifted`.
    """
    reps: Dict[Tuple, Dict[int, List[Point]]] = {}
    aggs: Dict[Tuple, Dict[int, Dict[str, float]]] = {}
    for p in points:
        if metric not in p.metrics:
            continue
        if p.aggregate is None:
            reps.setdefault(p.variant, {}).setdefault(p.threads, []).append(p)
        else:
            aggs.setdefault(p.variant, {}).setdefault(p.threads, {})[p.aggregate] = p.metrics[metric]
    out: Dict[Tuple, Dict[int, Stat]] = {}
    for variant, by_threads in reps.items():
        for n, pts in by_threads.items():
            values = [p.metrics[metric] for p in pts]
            mean = sum(values) / len(values)
            std = (math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
                   if len(values) > 1 else 0.0)
            out.setdefault(variant, {})[n] = Stat(mean, std, len(values),
                                                  any(p.coherence == "shifted" for p in pts))
    for variant, by_threads in aggs.items():
        if variant in out:
            continue
        for n, agg in by_threads.items():
            mean = agg.get("mean", agg.get("median"))
            if mean is not None:
                out.setdefault(variant, {})[n] = Stat(mean, agg.get("stddev", 0.0), 0)
    return out


def topology_markers(run: Run, thread_counts: Iterable[int]) -> List[Tuple[int, str]]:
    """Thread counts where the placement first uses SMT siblings, spans >1 L3/NUMA/package, or
    oversubscribes (more threads than usable PUs).

    Read from `context.lockline.plans` (thread count -> plan); falls back to the rows'
    `placement`. Returns [(threads, label)] sorted by threads, e.g. [(65, "2 L3s")].
    """
    plans: Dict[int, Dict[str, Any]] = {}
    raw = run.lockline.get("plans")
    if isinstance(raw, dict):
        for key, plan in raw.items():
            try:
                plans[int(key)] = plan if isinstance(plan, dict) else {}
            except ValueError:
                continue
    for p in run.points:
        if p.placement and p.threads not in plans:
            plans[p.threads] = p.placement
    wanted = set(thread_counts)
    markers: List[Tuple[int, str]] = []
    checks = [("smt_siblings", "SMT siblings"), ("l3s", "L3s"), ("numa_nodes", "NUMA nodes"),
              ("packages", "packages"), ("oversubscribed", "oversubscribed")]
    for field, text in checks:
        previous = None
        for n in sorted(plans):
            value = plans[n].get(field)
            if value is None:
                continue
            boolean = field in ("smt_siblings", "oversubscribed")
            crossed = bool(value) if boolean else bool(_number(value) and value > 1)
            if crossed and previous is False and n in wanted:
                label = text if boolean else f"{int(value)} {text}"
                markers.append((n, label))
            previous = bool(crossed)
            if crossed:
                break
    merged: Dict[int, List[str]] = {}
    for n, label in sorted(markers):
        merged.setdefault(n, []).append(label)
    return [(n, ", ".join(labels)) for n, labels in merged.items()]
