"""Checks of an emulated rehearsal (ci/rehearse.sh): what only a multi-socket NUMA machine exercises.

The run directory comes from the environment variable LOCKLINE_REHEARSAL_DIR (ci/rehearse.sh
prints it; ci/test.sh sets it after the 4s4n rehearsal). Without it every test is skipped with
the reason. Nothing here looks at timing: under TCG it means nothing. The tests read the JSON the
guest returned and the plots/report the host drew from it.
"""

import csv
import itertools
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "plots"))
from lockline_results import row_overrun  # noqa: E402

RUN = os.environ.get("LOCKLINE_REHEARSAL_DIR", "")

pytestmark = pytest.mark.skipif(
    not RUN or not os.path.isfile(os.path.join(RUN, "lockline.json")),
    reason="no rehearsal run: set LOCKLINE_REHEARSAL_DIR to a directory left by "
           "ci/rehearse.sh (needs qemu-system-x86, linux-image-amd64, busybox-static)")

MEM_RUNS = ("mem-node", "mem-interleave", "mem-local")  # their --mem is in their context


def load(path):
    """The parsed lockline.json at `path`."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def main_doc():
    """The main run's result file."""
    return load(os.path.join(RUN, "lockline.json"))


@pytest.fixture(scope="module")
def all_docs(main_doc):
    """{name: result file} of the main run and every --mem run that came back."""
    docs = {"main": main_doc}
    for name in MEM_RUNS + ("c2c",):
        path = os.path.join(RUN, name, "lockline.json")
        if os.path.isfile(path):
            docs[name] = load(path)
    return docs


def iteration_rows(doc):
    """Rows of single repetitions (not aggregates) that did not fail."""
    return [r for r in doc["benchmarks"]
            if r.get("run_type") == "iteration" and not r.get("error_occurred")]


def topo(doc):
    """context.lockline.topology of a result file."""
    return doc["context"]["lockline"]["topology"]


def test_guest_is_multi_node(main_doc):
    """The guest really was a multi-package NUMA machine (else nothing here means much)."""
    t = topo(main_doc)
    assert t["numa_nodes"] >= 2 and t["packages"] >= 2, t
    assert t["usable_pus"] >= 8, t


def test_every_run_and_row_is_marked_emulated(all_docs):
    """context.lockline.emulated and every row's "emulated" are true (compare.py refuses to mix)."""
    for name, doc in all_docs.items():
        assert doc["context"]["lockline"].get("emulated") is True, name
        assert doc["benchmarks"], f"{name}: no rows"
        unmarked = [r["name"] for r in doc["benchmarks"] if r.get("emulated") is not True]
        assert not unmarked, f"{name}: rows without emulated: {unmarked[:5]}"


def test_no_point_failed(all_docs):
    """Every point of every run finished without an error or a broken invariant."""
    for name, doc in all_docs.items():
        failed = [(r["name"], r.get("error_message")) for r in doc["benchmarks"]
                  if r.get("error_occurred")]
        assert not failed, f"{name}: {failed[:5]}"
        assert all(r.get("verify") == "ok" for r in iteration_rows(doc)), name


def test_threads_ran_on_the_pus_their_plan_names(all_docs):
    """Binding read back (sched_getaffinity) is exactly the planned PU, and the PU sampled
    (sched_getcpu) when each window ended is that PU, for every thread of every pinned point."""
    checked = 0
    for name, doc in all_docs.items():
        for row in iteration_rows(doc):
            pl = row["placement"]
            if pl["pin"] == "none" and "pu_a" not in row["params"]:
                continue
            assert len(pl["bound_pus"]) == len(pl["pus"]) == row["threads"], row["name"]
            for i, pu in enumerate(pl["pus"]):
                assert pl["bound_pus"][i] == [pu], (name, row["name"], i, pl)
                assert pl["observed_pus"][i] == [pu], (name, row["name"], i, pl)
                checked += 1
    assert checked > 0


def test_plan_thread_counts_include_node_and_package_boundaries(main_doc):
    """--threads=topo with --pin=cores: the counts that fill 1, 2, 4, ... and all NUMA nodes and
    packages (in cores) are thread counts of the plan, and the plan at each spans exactly that
    many (lockline's topo list is powers of two plus the first L3 / node / package and all
    cores: on 4s4n the 3-node count 12 is not one of them)."""
    lk = main_doc["context"]["lockline"]
    t = topo(main_doc)
    counts = set(lk["threads_list"])
    plans = lk["plans"]
    for level in ("numa_nodes", "packages"):
        per = t["cores"] // t[level]
        wholes = {t[level]} | {k for k in (1, 2, 4, 8, 16, 32) if k <= t[level]}
        for k in sorted(wholes):
            assert k * per in counts, (level, k * per, sorted(counts))
            assert plans[str(k * per)][level] == k, (level, k, plans[str(k * per)])
            if k * per + 1 <= t["cores"] and str(k * per + 1) in plans:
                assert plans[str(k * per + 1)][level] == k + 1


def test_shared_structures_live_where_mem_asked(all_docs):
    """Each --mem run's shared allocations (details.mem_nodes: move_pages on their pages in the
    guest) lie on the node(s) the policy names: node:N -> node N; local -> the node of the
    point's first PU; interleave -> only nodes the point spans, and all of them for an
    allocation of at least one page per node."""
    runs = [n for n in MEM_RUNS if n in all_docs]
    assert runs, "no --mem run came back"
    for name in runs:
        doc = all_docs[name]
        policy = doc["context"]["lockline"]["mem"]
        assert policy.split(":")[0] in name, (name, policy)
        node_of_pu = pu_nodes(doc)
        rows = iteration_rows(doc)
        assert rows, name
        for row in rows:
            regions = [r for r in row["details"]["mem_nodes"] if r["policy"] == policy]
            assert regions, (name, row["name"], row["details"]["mem_nodes"])
            spanned = sorted({node_of_pu[pu] for pu in row["placement"]["pus"]})
            for reg in regions:
                assert reg["nodes"], (name, row["name"], reg)
                if policy.startswith("node:"):
                    want = [int(policy[5:])]
                    assert reg["requested"] == want and reg["nodes"] == want, (row["name"], reg)
                elif policy == "local":
                    want = [node_of_pu[row["placement"]["pus"][0]]]
                    assert reg["requested"] == want and reg["nodes"] == want, (row["name"], reg)
                else:
                    assert reg["requested"] == spanned, (row["name"], reg, spanned)
                    assert set(reg["nodes"]) <= set(spanned), (row["name"], reg)
                    if reg["bytes"] >= 4096 * len(spanned):
                        assert reg["nodes"] == spanned, (row["name"], reg)


def pu_nodes(doc):
    """OS PU index -> logical NUMA node in the rehearsal guest, whose -numa options give node i
    the PUs i*per .. i*per+per-1 (ci/rehearse.sh)."""
    t = topo(doc)
    per = t["pus"] // t["numa_nodes"]
    return {pu: pu // per for pu in range(t["pus"])}


def test_per_numa_zones_one_per_node(main_doc):
    """zones:per_numa rows (pagevec; zone_lock where it has them) use one zone per NUMA node,
    each zone's structures bound to its own node."""
    nodes = topo(main_doc)["numa_nodes"]
    rows = [r for r in iteration_rows(main_doc) if r["params"].get("zones") == "per_numa"]
    assert rows, "no zones:per_numa row in the rehearsal"
    for row in rows:
        det = row["details"]
        zones = det.get("pagevec", det).get("zones")
        assert zones == nodes, (row["name"], zones, nodes)
        bound = sorted({tuple(r["nodes"]) for r in det["mem_nodes"]
                        if r["policy"].startswith("node:")
                        and r["requested"] == [int(r["policy"][5:])]
                        and r["nodes"] == r["requested"]})
        assert bound == [(n,) for n in range(nodes)], (row["name"], det["mem_nodes"])


def test_c2c_matrix_covers_every_pu_pair(main_doc):
    """The c2c run (its own run, over the PUs ci/rehearse.sh gives it with taskset: 0-7 on 4s4n,
    two NUMA nodes) measured every pair of its usable PUs (an 8 x 8 matrix), and its plot drew
    all of them."""
    path = os.path.join(RUN, "c2c", "lockline.json")
    assert os.path.isfile(path), "the c2c run did not come back (see c2c.log, status)"
    doc = load(path)
    lk = doc["context"]["lockline"]
    pus = sorted(lk["plans"][str(max(lk["threads_list"]))]["pus"])
    assert len(pus) == topo(doc)["usable_pus"] >= 8, pus
    assert lk["plans"][str(len(pus))]["numa_nodes"] >= 2
    pairs = {(int(r["params"]["pu_a"]), int(r["params"]["pu_b"]))
             for r in iteration_rows(doc)
             if "pu_a" in r["params"] and r.get("latency_ns", 0) > 0}
    want = set(itertools.combinations(pus, 2)) if len(pus) <= 16 else pairs
    assert pairs == want, f"{len(pairs)} of {len(want)} pairs measured"
    if len(pus) > 16:  # lockline samples 64 pairs, every L3 / node / package represented
        assert len(pairs) == 64
    # The heatmap draws no overrun repetition (its latency is stretched by the overrun): every
    # pair measured without one is drawn, and no other.
    overrun = {(int(r["params"]["pu_a"]), int(r["params"]["pu_b"]))
               for r in iteration_rows(doc) if "pu_a" in r["params"] and row_overrun(r)}
    rows = read_csv(os.path.join(RUN, "c2c", "plots", "calibration.csv"))
    cells = {(int(r["series"].split(":")[1]), int(r["x"])) for r in rows
             if r["figure"] == "c2c_latency"}
    assert cells == pairs - overrun
    assert os.path.isfile(os.path.join(RUN, "c2c", "plots", "c2c_latency.png"))


def read_csv(path):
    """Rows of a CSV file as dicts."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_plots_have_one_point_per_thread_count_and_usl_fits(main_doc):
    """Each throughput-vs-threads series has each thread count once, and every such series with
    >= 4 thread counts has a USL fit in its family's _usl.csv."""
    fitted_any = False
    for fam in ("locks", "zone_lock", "pagevec"):
        path = os.path.join(RUN, "plots", f"{fam}.csv")
        assert os.path.isfile(path), path
        series = {}
        for r in read_csv(path):
            if r["x_name"] != "threads":
                continue
            key = (r["figure"], r["panel"], r["series"], r["run"], r["y_name"])
            series.setdefault(key, []).append(int(float(r["x"])))
        assert series, fam
        for key, xs in series.items():
            assert len(xs) == len(set(xs)), (fam, key, xs)
        usl_path = os.path.join(RUN, "plots", f"{fam}_usl.csv")
        fits = {(r["figure"], r["panel"], r["series"], r["run"], r["metric"])
                for r in read_csv(usl_path)} if os.path.isfile(usl_path) else set()
        long_series = [k for k, xs in series.items() if len(set(xs)) >= 4
                       and k[4] in ("ops_per_s", "pages_per_s")]
        for key in long_series:
            if key in fits:
                fitted_any = True
        missing = [k for k in long_series if k not in fits]
        # A fit may legitimately fail (the figure notes why); most must succeed.
        assert len(missing) <= len(long_series) // 2, (fam, missing)
    assert fitted_any


def test_report_renders(main_doc):
    """report.html exists, is a complete page and embeds the figures."""
    path = os.path.join(RUN, "report.html")
    assert os.path.isfile(path)
    with open(path, encoding="utf-8") as handle:
        html = handle.read()
    assert html.lstrip().lower().startswith("<!doctype html") and "</html>" in html.lower()
    assert "<img" in html
