#!/usr/bin/env python3
"""Smoke-runs one lockline family at tiny windows and checks the result file's shape.

Usage: smoke_run.py LOCKLINE_BINARY FAMILY_REGEX [extra lockline args...]

Runs the default suite of one family, `lockline --window=5ms --benchmark_repetitions=1 --benchmark_filter=REGEX` into a
temporary run directory, then checks lockline.json against results/SCHEMA.md: every iteration
row has the Google Benchmark keys, a lockline_key that starts with the family, params, placement,
coherence, fairness and counters objects, ops_per_s and ns_per_op, and no error. Exit 0 when the
file is right, 1 with one line per problem otherwise.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

GB_KEYS = ["name", "run_name", "run_type", "repetitions", "threads", "iterations", "real_time",
           "cpu_time", "time_unit"]
LOCKLINE_KEYS = ["lockline_key", "family", "params", "placement", "coherence", "fairness",
                 "counters", "windows", "details"]


def check(doc, regex):
    """Returns a list of problems in a parsed lockline.json (empty when it is right)."""
    problems = []
    ctx = doc.get("context", {}).get("lockline", {})
    for key in ["schema_version", "git_commit", "topology", "plans", "counters", "versions",
                "environment", "finished"]:
        if key not in ctx:
            problems.append(f"context.lockline lacks {key}")
    if ctx.get("finished") is not True:
        problems.append("context.lockline.finished is not true after a complete run")
    rows = [r for r in doc.get("benchmarks", []) if r.get("run_type") == "iteration"]
    if not rows:
        problems.append(f"no iteration rows for filter {regex}")
    for r in rows:
        name = r.get("name", "?")
        if r.get("error_occurred"):
            problems.append(f"{name}: error: {r.get('error_message')}")
            continue
        for key in GB_KEYS + LOCKLINE_KEYS + ["ops_per_s", "ns_per_op"]:
            if key not in r:
                problems.append(f"{name}: lacks {key}")
        if not r.get("lockline_key", "").startswith(r.get("family", "\0") + "/"):
            problems.append(f"{name}: lockline_key does not start with its family")
        if r.get("params", {}).get("threads") != r.get("threads"):
            problems.append(f"{name}: params.threads differs from threads")
        pus = r.get("placement", {}).get("pus", [])
        if len(pus) != r.get("threads"):
            problems.append(f"{name}: placement lists {len(pus)} PUs for {r.get('threads')} threads")
        label = r.get("coherence", {}).get("label", "")
        if not (label in ("near", "far", "mixed", "none", "unknown", "preempted")
                or (label.startswith("regime") and label[6:].isdigit())):
            problems.append(f"{name}: bad coherence label {label!r}")
        if r.get("time_unit") != "ns" or r.get("iterations") != sum(
                w.get("ops", 0) for w in r.get("windows", [])):
            problems.append(f"{name}: iterations are not the operations or time_unit is not ns")
        fair = r.get("fairness", {})
        if len(fair.get("per_thread_ops", [])) != r.get("threads"):
            problems.append(f"{name}: fairness has no per-thread count per thread")
        for metric in ("ops_per_s", "ns_per_op"):
            v = r.get(metric)
            if not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
                problems.append(f"{name}: {metric} = {v!r}")
        if r.get("verify") != "ok":
            problems.append(f"{name}: verify = {r.get('verify')!r}")
        problems += [f"{name}: {p}" for p in scanner_problems(r)]
        problems += [f"{name}: {p}" for p in helper_pair_problems(r)]
    return problems


def helper_pair_problems(row):
    """A one-PU row whose helper (prezero's zeroer) ran on a PU of its own carries that pair's
    coherence probe, taken with the helper stopped: the regime of the transfers it pays."""
    helper = row.get("details", {}).get("helper_pu")
    pus = row.get("placement", {}).get("pus", [])
    c = row.get("coherence", {})
    if (not isinstance(helper, list) or not helper or helper[0] in (None, -1)
            or len(set(pus)) != 1 or helper[0] == pus[0] or not c.get("shares_lines")):
        return []
    if c.get("pair") != [pus[0], helper[0]] or not (
            c.get("before_ns", 0) > 0 and c.get("after_ns", 0) > 0):
        return [f"helper on PU {helper[0]} but coherence pair {c.get('pair')}, probes "
                f"{c.get('before_ns')} / {c.get('after_ns')} ns"]
    return []


def scanner_problems(row):
    """Issue 40 item 1: a row with a reclaim scanner (pagevec details.scanner.on) must have run
    it at its design rate (scanner_acquisitions_per_page within 10 % of
    scanner_design_acquisitions_per_page) on a PU no measured thread runs on, and say where."""
    sc = row.get("details", {}).get("scanner", {})
    if row.get("family") != "pagevec" or not isinstance(sc, dict) or not sc.get("on"):
        return []
    out = []
    if sc.get("shares_measured_pu"):
        out.append(f"the scanner shares a measured PU (pus {sc.get('pus')})")
    if "pus" not in sc:
        out.append("the row does not record the scanner's PU")
    got = row.get("scanner_acquisitions_per_page")
    design = row.get("scanner_design_acquisitions_per_page")
    if not isinstance(got, (int, float)) or not isinstance(design, (int, float)) or design <= 0:
        out.append(f"scanner rate not recorded ({got!r} per page, design {design!r})")
    elif abs(got / design - 1) > 0.10:
        out.append(f"scanner {got:.4f} lru_lock acquisitions per page, design {design:.4f} "
                   "(more than 10 % off)")
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    binary, regex, extra = argv[1], argv[2], argv[3:]
    with tempfile.TemporaryDirectory(prefix="lockline-smoke-") as tmp:
        out = os.path.join(tmp, "run")
        cmd = [binary, "--window=5ms", "--benchmark_repetitions=1",
               f"--benchmark_filter={regex}", f"--out={out}", *extra]
        print("+", " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=600)
        print(proc.stdout[-6000:])
        try:
            with open(os.path.join(out, "lockline.json")) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"FAIL: no readable lockline.json: {e}")
            return 1
        problems = check(doc, regex)
        if proc.returncode != 0:
            problems.append(f"lockline exited {proc.returncode}")
        for p in problems:
            print("FAIL:", p)
        n = sum(1 for r in doc["benchmarks"] if r.get("run_type") == "iteration")
        print(f"{n} rows checked, {len(problems)} problems")
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
