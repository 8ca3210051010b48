"""Load lockline result files (results/SCHEMA.md) and any Google Benchmark JSON into `Point`
records. Every problem with an input file raises a one-line `ResultError`; callers exit 2."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

_GB_MODIFIER = re.compile(
    r"^(real_time|manual_time|process_time|iterations:\d+|repeats:\d+|min_time:[\d.]+s?|"
    r"min_warmup_time:[\d.]+s?)$")
_AGGREGATE_SUFFIX = re.compile(r"_(mean|median|stddev|cv|BigO|RMS)$")


class ResultError(Exception):
    """A result file cannot be read or holds nothing plottable (one-line message)."""


def error_status(prog: str, err: Exception, writing: str = "") -> int:
    """Print one `PROG: error:` line for a ResultError, or an OSError while `writing`; 2."""
    text = err if isinstance(err, ResultError) else f"cannot write {writing}: {err}"
    print(f"{prog}: error: {text}", file=sys.stderr)
    return 2


# Longer integer literals or deeper nesting is a corrupt or hostile file (a float holds about
# 308 digits; lockline writes about 6 levels).
MAX_INT_DIGITS = 40
MAX_DEPTH = 64

STRING_FIELDS = ("name", "run_name", "lockline_key", "family", "run_type", "aggregate_name",
                 "aggregate_unit", "time_unit", "error_message", "skip_message", "label",
                 "description")
_DECORATION_RE = re.compile(
    r"/(manual_time|real_time|repeats:\d+|iterations:\d+|min_time:[^/]+|min_warmup_time:[^/]+)"
    r"(?=/|$)")
TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
# Coherence labels that name no regime: such rows are pooled (see stats.select_regime).
NO_REGIME = ("none", "unknown", "")


class _BigInt(ValueError):
    pass


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _BigInt(f"an integer of {digits} digits")
    return int(text)


def read_document(path: str) -> Dict[str, Any]:
    """Parse one result file and check its shape (`benchmarks` a list of objects with a string
    `name`, `context` an object; the list may be empty): the one parser of result files.
    Raises ResultError only, never OverflowError, RecursionError or TypeError."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as err:
        raise ResultError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ResultError(f"{path}: not valid JSON (not UTF-8 text)") from None
    if not text.strip():
        raise ResultError(f"{path}: empty file, expected Google Benchmark JSON")
    # Bound nesting before parsing: json's C scanner recurses per level.
    depth = 0
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        tok = match.group(0)
        if tok in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ResultError(f"{path}: arrays/objects nested deeper than {MAX_DEPTH} "
                                  "levels (not a result file)")
        elif tok in "]}":
            depth -= 1
    try:
        data = json.loads(text, parse_int=_parse_int)
    except _BigInt as err:
        raise ResultError(f"{path}: {err} (a result file holds at most {MAX_INT_DIGITS}-digit "
                          "integers)") from None
    except json.JSONDecodeError as err:
        where = "" if err.msg.endswith(" at") else " at"
        raise ResultError(f"{path}: not valid JSON ({err.msg}{where} line {err.lineno} column "
                          f"{err.colno})") from None
    except (RecursionError, ValueError) as err:
        raise ResultError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ResultError(f"{path}: not a Google Benchmark result (expected a JSON object with "
                          "a 'benchmarks' list)")
    rows = data.get("benchmarks")
    if not isinstance(rows, list):
        raise ResultError(f"{path}: not a Google Benchmark result (no \"benchmarks\" array; "
                          "expected an object with a 'benchmarks' list)")
    if "context" in data and not isinstance(data["context"], dict):
        raise ResultError(f"{path}: \"context\" is not an object")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ResultError(f"{path}: benchmarks[{i}] is not an object")
        if not isinstance(row.get("name"), str) or not row["name"]:
            raise ResultError(f"{path}: benchmarks[{i}] has no \"name\" (expected a non-empty "
                              "string)")
        for field in STRING_FIELDS:
            if field in row and row[field] is not None and not isinstance(row[field], str):
                raise ResultError(f"{path}: benchmarks[{i}] ({row['name'][:80]}): {field} is a "
                                  f"{type(row[field]).__name__}, expected a string")
    return data


def strip_decorations(name: str) -> str:
    """"BM_x/8/repeats:5/manual_time" -> "BM_x/8": runs driven differently pair up."""
    return _DECORATION_RE.sub("", name)


def row_key(row: Dict[str, Any]) -> str:
    """Pairing key of one raw row: lockline_key when present, else the run name (run_name, or
    name for old files) without decorations."""
    key = row.get("lockline_key")
    if isinstance(key, str) and key:
        return key
    run_name = row.get("run_name")
    if not isinstance(run_name, str) or not run_name:
        run_name = row["name"]
    return strip_decorations(run_name)


def is_aggregate(row: Dict[str, Any], names) -> bool:
    """True for an aggregate row. `names`: the file's row names (old files without run_type:
    an aggregate suffix on a name whose base is also a row)."""
    run_type = row.get("run_type")
    if run_type is not None:
        return run_type == "aggregate"
    if "aggregate_name" in row:
        return True
    m = _AGGREGATE_SUFFIX.search(row["name"])
    return bool(m) and (m.group(1) in ("BigO", "RMS") or row["name"][:m.start()] in names)


def row_values(row: Dict[str, Any], path: str) -> Dict[str, float]:
    """Top-level finite numbers of one raw row except bookkeeping, real_time / cpu_time in ns.
    Raises ResultError on an unknown time_unit or a non-numeric time."""
    skip = {"iterations", "threads", "repetitions", "repetition_index", "family_index",
            "per_family_instance_index", "error_occurred"}
    out = {k: num for k, v in row.items() if k not in skip and (num := _number(v)) is not None}
    for k in ("real_time", "cpu_time"):
        if k in row:
            v = row[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ResultError(f"{path}: row {row['name']!r}: {k} {v!r} is not a number")
            unit = row.get("time_unit", "ns")
            if unit not in TIME_UNIT_NS:
                raise ResultError(f"{path}: row {row['name']!r}: time_unit {unit!r} is not one "
                                  "of ns, us, ms, s")
            num = _number(v)
            out.pop(k, None)
            if num is not None:
                out[k] = num * TIME_UNIT_NS[unit]
    return out


@dataclasses.dataclass
class Point:
    """One measured row, normalised: family (a foreign name's first segment without template
    arguments), bench (the key's first segment), params (all but threads, strings), metrics (times
    as `*_time_ns`; `throughput_per_s` without another rate), aggregate (None, `mean`, ...)."""

    family: str
    bench: str
    params: Dict[str, str]
    threads: int
    metrics: Dict[str, float]
    aggregate: Optional[str] = None
    repetition: int = 0
    placement: Dict[str, Any] = dataclasses.field(default_factory=dict)
    coherence: str = "unknown"
    regime_ns: Optional[float] = None
    key: str = ""
    overrun: bool = False
    emulated: bool = False
    row: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def regime(self) -> str:
        """`near`, `far`, ...; "" when the row names none."""
        return "" if self.coherence in NO_REGIME else self.coherence

    @property
    def variant(self) -> Tuple[Tuple[str, str], ...]:
        return tuple(sorted(self.params.items()))


def _flagged_pairs(row: Dict[str, Any]) -> List[Tuple[Any, bool]]:
    """(pair, whether a window overran) per window pair of a duet row: the pair's `overrun`
    (harness/run/runner.cpp MarkOverrunPairs), else (older files) `windows[].overrun` of the
    k-th two `a`/`b` windows of `details.duet.sides`. [] for any other row."""
    details = row.get("details") if isinstance(row, dict) else None
    duet = details.get("duet") if isinstance(details, dict) else None
    pairs = duet.get("pairs") if isinstance(duet, dict) else None
    if not isinstance(pairs, list):
        return []
    sides = duet.get("sides") if isinstance(duet.get("sides"), list) else []
    windows = row.get("windows") if isinstance(row.get("windows"), list) else []
    measured = [isinstance(w, dict) and w.get("overrun") is True
                for side, w in zip(sides, windows) if side in ("a", "b")]
    return [(pair, pair["overrun"] if isinstance(pair, dict) and isinstance(
        pair.get("overrun"), bool) else any(measured[2 * k:2 * k + 2]))
        for k, pair in enumerate(pairs)]


def row_duet_pairs(row: Dict[str, Any]) -> List[Tuple[float, float]]:
    """(A's ops/s, B's ops/s) per window pair of a duet row (harness/measure/duet.h), pairs
    with an overrun window left out; [] for any other or a malformed row."""
    out = []
    for pair, overrun in _flagged_pairs(row):
        if overrun or not isinstance(pair, dict):
            continue
        a, b = pair.get("a_ops_per_s"), pair.get("b_ops_per_s")
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
                not isinstance(a, bool) and not isinstance(b, bool):
            out.append((float(a), float(b)))
    return out


def duet_pairs(point: Point) -> List[Tuple[float, float]]:
    return row_duet_pairs(point.row)


def repetition_id(point: Point) -> str:
    """"RUN/KEY/#REPETITION", unique across the runs of a lockline --runs directory."""
    run = point.row.get("run", "") if isinstance(point.row, dict) else ""
    return f"{run}/{point.key}/#{point.repetition}"


def grouped(items: Iterable[Any], key: Any) -> Dict[Any, List[Any]]:
    """{key(x): [x, ...]} of `items`, keys in first-seen order."""
    out: Dict[Any, List[Any]] = {}
    for x in items:
        out.setdefault(key(x), []).append(x)
    return out


def by_variant(points: Iterable[Point]) -> Dict[Tuple, Dict[int, List[Point]]]:
    """{variant: {threads: [points]}}, in first-seen order."""
    return {v: grouped(pts, lambda p: p.threads)
            for v, pts in grouped(points, lambda p: p.variant).items()}


def labelled_duet_pairs(points: Sequence[Point]) -> List[Tuple[str, float, float, str]]:
    """(regime, A's ops/s, B's ops/s, repetition_id) per window pair: the input of
    stats.compare_pairs (the repetitions are its resampling units) and compare_pair_effects."""
    return [(p.regime, a, b, repetition_id(p)) for p in points for a, b in duet_pairs(p)]


# The context fields that tell two measurements apart even when their rows are equal
# (two files with identical rows from another host, clock or date are not a copy).
IDENTITY_CONTEXT = ("host_name", "mhz_per_cpu", "date", "executable", "num_cpus")


def row_identity(row: Dict[str, Any], context: Optional[Dict[str, Any]] = None) -> str:
    """A digest of a raw row's whole content (key order aside) and its context's IDENTITY_CONTEXT:
    equal only for the same measurement (a file on both sides of ci/compare.py, or a copy)."""
    if isinstance(context, dict):
        row = {"row": row, "context": {k: context.get(k) for k in IDENTITY_CONTEXT}}
    text = json.dumps(row, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclasses.dataclass
class Run:

    path: str
    context: Dict[str, Any]
    points: List[Point]
    skipped_rows: List[str]
    warnings: List[str] = dataclasses.field(default_factory=list)

    @property
    def lockline(self) -> Dict[str, Any]:
        value = self.context.get("lockline")
        return value if isinstance(value, dict) else {}

    @property
    def host(self) -> str:
        return str(self.context.get("host_name") or os.path.basename(self.path))

    @property
    def commit(self) -> str:
        return str(self.lockline.get("git_commit") or "?")[:12]

    tag: str = ""

    @property
    def label(self) -> str:
        """`host@commit` (foreign: `host@file name`) plus `tag`: the legend label."""
        base = f"{self.host}@{self.commit if self.lockline else os.path.basename(self.path)}"
        return f"{base} {self.tag}" if self.tag else base

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
        parts += [f"date {self.context.get('date', '?')}", f"pin {ll.get('pin', 'n/a')}",
                  f"commit {self.commit}"]
        return ", ".join(parts)

    def scale_text(self, threads: Optional[int] = None) -> str:
        """"4 threads on 16 PUs (16 cores, no SMT), 1 NUMA node, 1 package"
        (context.lockline.topology)."""
        ll = self.lockline
        topo = ll.get("topology") if isinstance(ll.get("topology"), dict) else {}
        head = f"{threads} thread{'s' if threads != 1 else ''} on " if threads else ""
        pus, cores = _number(topo.get("pus")), _number(topo.get("cores"))
        if not pus:
            cpus = _number(self.context.get("num_cpus"))
            return head + (f"{int(cpus)} CPUs (topology not recorded)" if cpus
                           else "a machine of unrecorded size")
        smt = ("SMT" if cores and pus > cores else "no SMT") if cores else "SMT not recorded"
        words = [f"{int(pus)} PUs ({int(cores) if cores else '?'} cores, {smt})"]
        numa, pkgs = _number(topo.get("numa_nodes")), _number(topo.get("packages"))
        if numa:
            words.append(f"{int(numa)} NUMA node{'s' if numa != 1 else ''}")
        if pkgs:
            words.append(f"{int(pkgs)} package{'s' if pkgs != 1 else ''}")
        if self.emulated:
            words.append("emulated (QEMU TCG)")
        return head + ", ".join(words)

    @property
    def finished(self) -> Optional[bool]:
        value = self.lockline.get("finished")
        return value if isinstance(value, bool) else None

    @property
    def emulated(self) -> bool:
        return self.lockline.get("emulated") is True or any(p.emulated for p in self.points)

    def overrun_keys(self) -> List[str]:
        return list(dict.fromkeys(p.key for p in self.points if p.overrun))

    def families(self) -> List[str]:
        return list(dict.fromkeys(p.family for p in self.points))


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _parse_name(name: str) -> Tuple[str, Dict[str, str], List[int]]:
    """`BM_x<T>/8/real_time` -> ("BM_x<T>", {}, [8]); '/' inside <...> does not split."""
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
    match = re.match(r"^([^<]*)<(.*)>$", head)
    if match:
        params["template"] = match.group(2)
        return match.group(1) or head
    return head


def _point_from_row(row: Dict[str, Any]) -> Optional[Point]:
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
    # Only the JSON `threads` field or a `threads:` key component is a thread count; positional
    # benchmark arguments (`BM_x/8`) are parameters arg0, arg1, ... (plotted on their own axis).
    params.update((f"arg{i}", str(value)) for i, value in enumerate(positional))
    if threads is None:
        threads = int(row_threads) if row_threads and row_threads >= 1 else 1
    if threads < 1:
        return None

    metrics: Dict[str, float] = {}
    scale = TIME_UNIT_NS.get(str(row.get("time_unit", "ns")))
    for key, value in row.items():
        num = _number(value)
        if num is None or key in ("family_index", "per_family_instance_index", "repetitions",
                                  "repetition_index", "threads"):
            continue
        if key in ("real_time", "cpu_time"):
            if scale is None or (aggregate and row.get("aggregate_unit") not in (None, "time")):
                continue
            metrics[f"{key}_ns"] = num * scale
        else:
            metrics[key] = num
    if "real_time_ns" in metrics and metrics["real_time_ns"] > 0 and aggregate in (None, "mean",
                                                                                  "median"):
        if "ops_per_s" not in metrics and "items_per_second" not in metrics:
            metrics["throughput_per_s"] = 1e9 / metrics["real_time_ns"]
    if not metrics:
        return None
    coherence = row.get("coherence")
    regime_ns = _number(coherence.get("regime_ns")) if isinstance(coherence, dict) else None
    label = coherence.get("label") if isinstance(coherence, dict) else None
    return Point(family=family, bench=head if row.get("family") else family, params=params,
                 threads=threads, metrics=metrics, aggregate=aggregate,
                 repetition=int(_number(row.get("repetition_index")) or 0),
                 placement=row.get("placement") if isinstance(row.get("placement"), dict) else {},
                 coherence=label if isinstance(label, str) else "unknown", regime_ns=regime_ns,
                 key=row_key(row), overrun=row_overrun(row),
                 emulated=row.get("emulated") is True, row=row)


def row_overrun(row: Dict[str, Any]) -> bool:
    """The row, or one of its windows, overran its bound."""
    windows = row.get("windows") if isinstance(row.get("windows"), list) else []
    return row.get("overrun") is True or any(isinstance(w, dict) and w.get("overrun") is True
                                             for w in windows)


def _merge_single_point_families(points: List[Point]) -> None:
    """Fold foreign families of one variant at one thread count into one family
    `benchmarks`, so they share one figure."""
    single = {fam for fam, pts in grouped(points, lambda p: p.family).items()
              if len({(p.variant, p.threads) for p in pts}) == 1}
    if len(single) < 2:
        return
    for p in points:
        if p.family in single:
            p.params = {"benchmark": p.family, **p.params}
            p.family = p.bench = "benchmarks"


def multi_run_dirs(path: str) -> List[str]:
    """The run directories of a `lockline --runs=N` directory (harness/run/runs.h): runs.json's
    `dirs`, else its run-K subdirectories in K order; [] for any other path."""
    if not os.path.isdir(path) or os.path.isfile(os.path.join(path, "lockline.json")):
        return []
    names: List[str] = []
    try:
        with open(os.path.join(path, "runs.json"), encoding="utf-8") as f:
            listed = json.load(f).get("dirs")
        if isinstance(listed, list):
            names = [str(d) for d in listed if isinstance(d, str) and "/" not in d]
    except (OSError, ValueError, AttributeError):
        names = []
    if not names:
        names = sorted((d for d in os.listdir(path) if re.fullmatch(r"run-\d+", d)),
                       key=lambda d: int(d[4:]))
    return [os.path.join(path, d) for d in names
            if os.path.isfile(os.path.join(path, d, "lockline.json"))]


def resolve_paths(paths: Iterable[str]) -> List[str]:
    """Result files of `paths`: a --runs directory's runs', a run directory's lockline.json,
    else every `*.json` in it. Raises ResultError for a missing path or no JSON."""
    files: List[str] = []
    for path in paths:
        if os.path.isdir(path) and multi_run_dirs(path):
            files.extend(os.path.join(d, "lockline.json") for d in multi_run_dirs(path))
            continue
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
    """Read one result JSON into a Run; rows with `error_occurred` or `skipped` go to
    `skipped_rows`. Raises ResultError (read_document's, or no row has a usable value)."""
    data = read_document(path)
    context = data.get("context") if isinstance(data.get("context"), dict) else {}
    points, skipped = [], []
    for row in data["benchmarks"]:  # objects with a name (read_document)
        if row.get("error_occurred") or row.get("skipped"):
            skipped.append(f"{row.get('name', '?')}: {row.get('error_message') or row.get('skip_message') or 'skipped'}")
            continue
        try:
            point = _point_from_row(row)
        except (TypeError, ValueError, AttributeError, OverflowError) as err:
            skipped.append(f"{row.get('name', '?')}: malformed row ({err})")
            continue
        if point is not None:
            points.append(point)
    if not points:
        raise ResultError(f"{path}: no benchmark row has a plottable value "
                          f"({len(data['benchmarks'])} rows, {len(skipped)} with errors)")
    warnings = []
    counters = context.get("lockline", {}).get("counters") if isinstance(
        context.get("lockline"), dict) else None
    if (isinstance(counters, dict) and counters.get("fake_pmu")) or any(
            isinstance(r, dict) and r.get("fake_pmu") is True for r in data["benchmarks"]):
        warnings.append("hardware counters come from a FAKE PMU (the test shim "
                        "tests/fake_pmu), not this CPU: cycles, instructions, IPC and cache "
                        "figures are made up")
    if not isinstance(context.get("lockline"), dict):
        _merge_single_point_families(points)
        warnings += normalise_threaded_time(points, gb_library_version(context))
        idle = [p for p in points if p.threads > 1 and p.aggregate is None
                and p.metrics.get("cpu_time_ns", math.inf)
                < 0.5 * p.metrics.get("real_time_ns", 0.0) * p.threads]
        if idle:
            warnings.append(f"{len(idle)} threaded row(s) report cpu_time far below real_time x "
                            f"threads (e.g. {idle[0].family} threads:{idle[0].threads}): the "
                            "workers were mostly idle or cpu_time is one thread's; read "
                            "throughput with care")
        warnings += _worker_argument_warnings(points)
    return Run(path=path, context=context, points=points, skipped_rows=skipped, warnings=warnings)


# Google Benchmark 1.9.0 (PR #1836): a threaded row's real_time is each thread's wall time per
# iteration (`threads` times the older value) and items/bytes_per_second are per thread.
GB_THREADED_TIME_CHANGE = (1, 9, 0)
PER_THREAD_RATES = ("items_per_second", "bytes_per_second")


def gb_library_version(context: Dict[str, Any]) -> Optional[Tuple[int, ...]]:
    """context.library_version ('v1.9.1') as an int tuple; None when absent (before 1.8.4,
    so on the old side of 1.9.0) or unreadable."""
    return parse_version(str(context.get("library_version") or "") if isinstance(
        context, dict) else None)


def parse_version(text: Any) -> Optional[Tuple[int, ...]]:
    """"v1.9.0-rc1" -> (1, 9, 0), or None."""
    m = re.match(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip()) if isinstance(
        text, str) else None
    return tuple(int(g or 0) for g in m.groups()) if m else None


def normalise_threaded_time(points: List[Point], version: Optional[Tuple[int, ...]]) -> List[str]:
    """Put a >= 1.9.0 file's threaded rows in the older semantics: real_time_ns / threads,
    throughput_per_s from it, PER_THREAD_RATES x threads (cv aggregates are ratios and stay).
    Returns one warning when a row was converted."""
    if version is None or version < GB_THREADED_TIME_CHANGE:
        return []
    changed = 0
    for p in points:
        if p.threads <= 1 or p.aggregate == "cv":
            continue
        m = p.metrics
        if "real_time_ns" in m:
            m["real_time_ns"] /= p.threads
            if "throughput_per_s" in m and m["real_time_ns"] > 0 and p.aggregate in (
                    None, "mean", "median"):
                m["throughput_per_s"] = 1e9 / m["real_time_ns"]
        m.update({rate: m[rate] * p.threads for rate in PER_THREAD_RATES if rate in m})
        changed += 1
    if not changed:
        return []
    return [f"{changed} threaded row(s) of a Google Benchmark "
            f"{'.'.join(map(str, version))} file: real_time divided by threads and "
            "items/bytes per second multiplied by threads, to the pre-1.9.0 accounting, so "
            "throughput compares with files of older versions"]


# Argument or user-counter names that carry a worker count in foreign files, when the
# benchmark starts its own workers and Google Benchmark's `threads` stays 1.
WORKER_NAMES = ("workers", "worker", "threads", "nthreads", "num_threads", "jobs", "cores",
                "procs")


def worker_count(p: Point) -> Optional[Tuple[str, float]]:
    """(name, count) of a 1-thread foreign row whose worker count is an argument
    (`BM_x/workers:8`) or a user counter; None otherwise."""
    if p.threads != 1:
        return None
    for name in WORKER_NAMES:
        value = p.params.get(name)
        try:
            count = float(value) if value is not None else p.metrics.get(name)
        except ValueError:
            continue
        if count is not None and count > 1:
            return name, count
    return None


def _worker_argument_warnings(points: List[Point]) -> List[str]:
    """One warning when 1-thread rows report cpu_time far below real_time x worker_count (else 1):
    cpu_time is then the timing thread's only."""
    low = []
    for p in points:
        if p.threads != 1 or p.aggregate not in (None, "mean", "median"):
            continue
        workers = worker_count(p) or ("", 1.0)
        cpu, real = p.metrics.get("cpu_time_ns"), p.metrics.get("real_time_ns")
        if cpu is not None and real and cpu < 0.5 * real * workers[1]:
            low.append((p, workers))
    if not low:
        return []
    named = [(p, w) for p, w in low if w[0]]
    p, (name, count) = (named or low)[0]
    if name:
        return [f"{len(low)} row(s) take their worker count from '{name}' (threads is 1) and "
                f"report cpu_time far below real_time x workers (e.g. {p.key}: cpu_time "
                f"{p.metrics['cpu_time_ns']:.3g} ns, real_time {p.metrics['real_time_ns']:.3g} "
                f"ns x {count:g} workers): cpu_time is the timing thread's only, not the "
                "workers' CPU time"]
    return [f"{len(low)} single-thread row(s) report cpu_time far below real_time (e.g. "
            f"{p.key}: cpu_time {p.metrics['cpu_time_ns']:.3g} ns, real_time "
            f"{p.metrics['real_time_ns']:.3g} ns): the timing thread mostly waited (workers "
            "it started, whatever the argument is called, or sleep); cpu_time is the timing "
            "thread's only, not the workers' CPU time"]


# A rate or time (ops/s, ns/op, times, a duet pair's ops/s) with |v| above PHYSICAL_MAX or non-zero
# below PHYSICAL_MIN is no measurement (it would overflow the plots' and report's sums).
PHYSICAL_METRICS = ("ops_per_s", "ns_per_op", "real_time", "cpu_time")
PHYSICAL_MAX, PHYSICAL_MIN = 1e15, 1e-200


def _non_physical(value: float) -> bool:
    v = abs(value)
    return v > PHYSICAL_MAX or 0.0 < v < PHYSICAL_MIN


def check_physical(run: Run) -> None:
    """Raise ResultError naming the first row of `run` whose rate or time (PHYSICAL_METRICS,
    a duet row's window pairs) is not physical."""
    for point in run.points:
        values = [(m, point.metrics[m]) for m in PHYSICAL_METRICS if m in point.metrics]
        for i, (a, b) in enumerate(row_duet_pairs(point.row)):
            values += [(f"details.duet.pairs[{i}].a_ops_per_s", a),
                       (f"details.duet.pairs[{i}].b_ops_per_s", b)]
        for name, value in values:
            if isinstance(value, (int, float)) and math.isfinite(value) and \
                    _non_physical(value):
                raise ResultError(
                    f"{run.path}: {point.key or point.family} {name} = {value:g} is not a "
                    f"measurement (accepted: 0, or {PHYSICAL_MIN:g} to {PHYSICAL_MAX:g} in "
                    "magnitude)")


def load_runs(paths: Iterable[str]) -> List[Run]:
    """load_run and check_physical over resolve_paths(paths). Runs that would share a legend
    label get a `tag`: their date, else their position."""
    paths = list(paths)
    if not paths:
        raise ResultError("no result path given (expected run directories or result JSON files)")
    runs = [load_run(p) for p in resolve_paths(paths)]
    for run in runs:
        check_physical(run)
    for step in ("date", "position"):
        labels = [r.label for r in runs]
        for i, run in enumerate(runs):
            if labels.count(labels[i]) < 2:
                continue
            if step == "date":
                date = str(run.context.get("date") or "")
                run.tag = f"({date})" if date else ""
            else:
                run.tag = (run.tag + f" #{i + 1}").strip()
    return runs


@dataclasses.dataclass
class Stat:
    """Mean and standard deviation over the repetitions of one coherence regime ("": pooled).
    others: values of other regimes (hollow markers, not averaged in); n: repetitions in the
    mean (from aggregate rows: their `repetitions`, else 0)."""

    mean: float
    std: float
    n: int
    shifted: bool = False
    regime: str = ""
    others: List[float] = dataclasses.field(default_factory=list)
    overrun: bool = False
    from_aggregates: bool = False


def _reduce(values: List[float]) -> Tuple[float, float]:
    mean = sum(values) / len(values)
    std = (math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
           if len(values) > 1 else 0.0)
    return mean, std


def summarize(points: Iterable[Point], metric: str) -> Dict[Tuple, Dict[int, Stat]]:
    """{variant: {threads: Stat}} of `metric` in each point's majority regime. Aggregate rows only
    for series without repetitions (`mean`/`median`, `stddev`; a derived `throughput_per_s` by
    stats.stddev_from_aggregate)."""
    from stats import majority_regime  # local: stats imports nothing from here

    points = list(points)
    reps = by_variant(p for p in points if p.aggregate is None and metric in p.metrics)
    aggs: Dict[Tuple, Dict[int, Dict[str, Point]]] = {}
    for p in points:
        if p.aggregate is not None and (metric in p.metrics or (
                metric == "throughput_per_s" and "real_time_ns" in p.metrics)):
            aggs.setdefault(p.variant, {}).setdefault(p.threads, {})[p.aggregate] = p
    out: Dict[Tuple, Dict[int, Stat]] = {}
    for variant, by_threads in reps.items():
        for n, pts in by_threads.items():
            regime = majority_regime(p.regime for p in pts)
            chosen = [p for p in pts if not regime or p.regime == regime]
            others = [p.metrics[metric] for p in pts if regime and p.regime != regime]
            mean, std = _reduce([p.metrics[metric] for p in chosen])
            out.setdefault(variant, {})[n] = Stat(mean, std, len(chosen), bool(others), regime,
                                                  others, any(p.overrun for p in pts))
    for variant, by_threads in aggs.items():
        if variant in out:
            continue
        for n, agg in by_threads.items():
            center = agg.get("mean") or agg.get("median")
            if center is None:
                continue
            spread = agg.get("stddev")
            if metric == "throughput_per_s" and "real_time_ns" in center.metrics:
                from stats import stddev_from_aggregate
                sd_ns = spread.metrics.get("real_time_ns", 0.0) if spread else 0.0
                try:
                    mean, std = stddev_from_aggregate(center.metrics["real_time_ns"] * 1e-9,
                                                      sd_ns * 1e-9)
                except ValueError:
                    continue
            elif metric in center.metrics:
                mean = center.metrics[metric]
                std = spread.metrics.get(metric, 0.0) if spread else 0.0
            else:
                continue
            reps = _number(center.row.get("repetitions"))
            out.setdefault(variant, {})[n] = Stat(mean, std, int(reps) if reps else 0,
                                                  from_aggregates=True)
    return out


def topology_markers(run: Run, thread_counts: Iterable[int]) -> List[Tuple[int, str]]:
    """[(threads, label)] where the placement first uses SMT siblings, spans >1 L3/NUMA/package or
    oversubscribes, e.g. [(65, "2 L3s")]."""
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
                markers.append((n, text if boolean else f"{int(value)} {text}"))
            previous = crossed
            if crossed:
                break
    return [(n, ", ".join(label for _, label in ms))
            for n, ms in grouped(sorted(markers), lambda m: m[0]).items()]


def summarize_in_regime(points: Iterable[Point], metric: str, regime: str) -> Optional[Stat]:
    """The Stat of `metric` over the non-overrun repetitions of `points` in `regime` ("": all);
    None when none carries `metric`."""
    pts = [p for p in points if p.aggregate is None and metric in p.metrics and not p.overrun]
    chosen = [p for p in pts if not regime or p.regime == regime]
    if not chosen:
        return None
    others = [p.metrics[metric] for p in pts if regime and p.regime != regime]
    mean, std = _reduce([p.metrics[metric] for p in chosen])
    return Stat(mean, std, len(chosen), bool(others), regime, others, False)


def common_regime(groups: Sequence[Sequence[Point]], metric: str) -> str:
    """The regime `groups` (one variant at one thread count each) are set side by side in: most
    groups with repetitions, then most in the smallest group, then most in all, then fastest; ""
    when no row names one."""
    from stats import NO_REGIME, NOT_A_REGIME, regime_rank  # local: stats imports nothing from here

    labels = [[p.regime for p in g if p.aggregate is None and metric in p.metrics
               and not p.overrun] for g in groups]
    # Groups naming no regime (1-thread rows) take no part; summarize_side_by_side pools them.
    labels = [g for g in labels if any(lab not in NO_REGIME for lab in g)]
    if not labels:
        return ""
    regimes = {lab for g in labels for lab in g if lab not in NO_REGIME + NOT_A_REGIME}
    if not regimes:
        return ""

    def score(regime: str):
        counts = [sum(1 for lab in g if lab == regime) for g in labels if g]
        return (-sum(1 for c in counts if c), -min(counts), -sum(counts), regime_rank(regime))
    return min(regimes, key=score)


def summarize_side_by_side(groups: Sequence[Sequence[Point]], metric: str
                           ) -> Tuple[str, List[Optional[Stat]]]:
    """(common_regime's regime, one Stat per group, None without repetitions in it) of `metric`; a
    group naming no regime is pooled."""
    regime = common_regime(groups, metric)
    return regime, [summarize_in_regime(g, metric, regime if any(
        p.regime for p in g if p.aggregate is None and metric in p.metrics) else "")
        for g in groups]
