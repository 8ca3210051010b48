"""Google Benchmark tools/compare.py's pairing and change, re-derived (see README.md)."""

from typing import Any, Dict, List


def change(old: float, new: float) -> float:
    """Relative change as Google's tool defines it: (new - old) / |old|; 0.0 when both are 0;
    relative to their mean when only old is 0."""
    if old == 0 and new == 0:
        return 0.0
    if old == 0:
        return (new - old) / ((old + new) / 2)
    return (new - old) / abs(old)


def comparable(row: Dict[str, Any]) -> bool:
    """A row Google's tool compares: it has time_unit, real_time and cpu_time."""
    return "time_unit" in row and "real_time" in row and "cpu_time" in row


def difference_report(old: Dict[str, Any], new: Dict[str, Any]) -> List[Dict[str, Any]]:
    """[{name, time_unit, measurements: [{time, cpu, real_time, real_time_other, ...}]}] for
    every name in both documents (first-seen order of the old one), as Google's tool builds
    it: repetitions paired by index, in the old side's time unit."""
    def names(doc):
        seen: Dict[str, None] = {}
        for row in doc["benchmarks"]:
            seen.setdefault(row["name"], None)
        return list(seen)
    new_names = set(names(new))
    out = []
    for name in names(old):
        if name not in new_names:
            continue
        unit = next((r["time_unit"] for r in old["benchmarks"]
                     if r["name"] == name and comparable(r)), None)
        if unit is None:
            continue
        lhs = [r for r in old["benchmarks"] if r["name"] == name and r.get("time_unit") == unit]
        rhs = [r for r in new["benchmarks"] if r["name"] == name and r.get("time_unit") == unit]
        measurements = [{"real_time": a["real_time"], "cpu_time": a["cpu_time"],
                         "real_time_other": b["real_time"], "cpu_time_other": b["cpu_time"],
                         "time": change(a["real_time"], b["real_time"]),
                         "cpu": change(a["cpu_time"], b["cpu_time"])}
                        for a, b in zip(lhs, rhs)]
        if measurements:
            out.append({"name": name, "time_unit": unit, "measurements": measurements})
    return out
