"""Tests for plots/report.py: sections, seed tables, escaping, self-containment, bad input, and a
render check in headless Chromium (skipped when /usr/bin/chromium is absent)."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(HERE, "fixtures", "plots")
sys.path.insert(0, os.path.join(ROOT, "plots"))

import report  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
SECTIONS = ["q1", "q2", "q3", "q4", "q5", "other", "machine", "plans", "counters", "warnings",
            "layouts"]


def make_report(tmp_path_factory, name):
    run_dir = tmp_path_factory.mktemp(name)
    shutil.copy(os.path.join(FIX, name, "lockline.json"), run_dir / "lockline.json")
    assert report.main([str(run_dir)]) == 0
    return run_dir, (run_dir / "report.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def report_a(tmp_path_factory):
    """run_a (every family) reported once: (run dir, html)."""
    return make_report(tmp_path_factory, "run_a")


@pytest.fixture(scope="module")
def report_b(tmp_path_factory):
    """run_b (zone_lock only) reported once."""
    return make_report(tmp_path_factory, "run_b")


def test_sections_figures_and_plots_dir(report_a):
    run_dir, text = report_a
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in text, sid
    imgs = re.findall(r'<img src="([^"]{0,40})', text)
    # 12 family figures and one figure of the verdicts' rows per answered question (issue 35).
    assert len(imgs) == 17 and all(s.startswith("data:image/png;base64,") for s in imgs)
    assert (run_dir / "plots" / "zone_lock.png").is_file()
    assert (run_dir / "plots" / "c2c_latency.svg").is_file()


def test_self_contained_and_escaped(report_a):
    _, text = report_a
    without_data = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", text)
    assert not re.search(r"(src|href)=\"(https?:|//)", without_data)
    assert "default-src 'none'" in text
    assert "&lt;script&gt;alert(&#x27;escaped&#x27;)&lt;/script&gt;" in text
    assert "<script>alert" not in text


def test_seed_tables_hold_measured_values(report_a):
    _, text = report_a
    q2 = text[text.index('<section id="q2">'):text.index('<section id="q3">')]
    assert "aim7 152288 -&gt; 81911 jobs/min (-46.2 %)" in q2
    # Two repetitions a side: an interval needs 4, so the change is not given as an answer.
    assert "too few same-regime repetitions (2 of 2 in the baseline regime" in q2
    # The verdict's two sides come from its own samples (issue 47), not the rows' means.
    assert re.search(r"base -&gt; variant of zone_lock_after_before\[[^<]*</td><td>-</td><td>"
                     r'<span class="sides" data-sides="[^"]*">[\d,]+ -&gt; [\d,]+ ops/s: baseline-regime, '
                     r"medians of the repetitions \(the verdict: too few, not an answer\)", q2)
    assert "<b>Verdict</b>" in q2
    q3 = text[text.index('<section id="q3">'):text.index('<section id="q4">')]
    assert "UNSAFE: 7 violations" in q3
    q1 = text[text.index('<section id="q1">'):text.index('<section id="q2">')]
    # Two repetitions a side: no slot count is told apart from the best beyond noise, so the
    # row says so instead of naming a best (issue 35).
    assert re.search(r"N=1: none resolved \(every slot count within noise of 4\); N=4: ", q1)
    assert "<td>136</td>" in q1 and "<td>128</td>" in q1


def test_provenance_plans_counters_layouts(report_a):
    _, text = report_a
    assert "Synthetic Xeon 2x16c" in text and "abc1234def" in text
    plans = text[text.index('<section id="plans">'):text.index('<section id="counters">')]
    assert plans.count("<tr>") == 8  # header + 7 thread counts
    counters = text[text.index('<section id="counters">'):text.index('<section id="warnings">')]
    assert "<th>name</th><th>status</th><th>reason</th>" in counters
    assert "unavailable" in counters and "no PMU" in counters
    assert "<td>kernel_hardware_pmu</td><td>no</td>" in counters
    warnings = text[text.index('<section id="warnings">'):text.index('<section id="layouts">')]
    assert "failed row: locks/lock:broken/threads:2" in warnings
    assert "skipped point: pagevec/slots:1024/threads:64: needs 64 PUs" in warnings
    layouts = text[text.index('<section id="layouts">'):]
    assert "<pre>struct zone {" in layouts and "cacheline 1 boundary" in layouts
    assert "<td>pages_offset</td>" in layouts


def test_missing_families_say_not_run(report_b):
    _, text = report_b
    q1 = text[text.index('<section id="q1">'):text.index('<section id="q2">')]
    assert "not run" in q1 and "<img" not in q1
    q2 = text[text.index('<section id="q2">'):text.index('<section id="q3">')]
    assert q2.count("<img") == 3  # the verdicts' rows, zone_lock, zone_lock_relative


def test_bad_input(tmp_path, capsys):
    assert report.main([str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    (tmp_path / "lockline.json").write_text('{"context": {}, "benchmarks": "no"}')
    assert report.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("report.py: error:") and "'benchmarks' list" in err
    assert err.count("\n") == 1


def test_foreign_gbench_file_reports(tmp_path):
    shutil.copy(os.path.join(HERE, "..", "fixtures", "gbench-json", "libfork-laptop-matmul.json"), tmp_path / "x.json")
    assert report.main([str(tmp_path)]) == 0
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert text.count('<section id="q') == 5 and "no placement plans recorded" in text


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} not installed")
def test_renders_in_headless_chromium(report_a, tmp_path):
    """Chromium loads the report: sections present, every image decoded (the report's inline
    script sets data-images="ok"), and no console message (errors, CSP violations)."""
    run_dir, text = report_a
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr",
           "--v=0", "--virtual-time-budget=5000", "--window-size=1400,900", "--dump-dom",
           "file://" + str(run_dir / "report.html")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    for sid in SECTIONS:
        assert f'id="{sid}"' in dom, sid
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-images="ok"' in body, body
    assert f'data-image-count="{text.count("<img ")}"' in body, body
    # No table wider than the page's 1400 px (cells wrap anywhere: long row keys included).
    assert int(re.search(r'data-largest-table-width="(\d+)"', body).group(1)) <= 1400, body
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert not console, console


def test_real_interrupted_lockline_run(tmp_path):
    """A real (partial) lockline.json from the harness plots and reports."""
    shutil.copy(os.path.join(FIX, "real_partial", "lockline.json"), tmp_path / "lockline.json")
    assert report.main([str(tmp_path)]) == 0
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert (tmp_path / "plots" / "locks.png").is_file()
    assert "amd64_fam19h_zen4" in text and "task-clock" in text
    assert text.count(">not run<") >= 5


# ---- other helpers' rows, rendered against the contracts (synthetic rows) ----------------------

def _contract_row(key, family, params, rep, metrics, details=None, counters=None, label="none",
                  overrun=False):
    name = key + "/iterations:3/manual_time"
    row = {"name": name, "run_name": name, "run_type": "iteration", "repetition_index": rep,
           "threads": params.get("threads", 1), "iterations": 3, "real_time": 100.0,
           "time_unit": "ns", "lockline_key": key, "family": family, "params": params,
           "coherence": {"label": label}, "overrun": overrun, **metrics}
    if details is not None:
        row["details"] = details
    if counters is not None:
        row["counters"] = counters
    return row


def contract_run(tmp_path):
    """A run directory holding rows shaped by the contracts in HELPERS.md: kernel_zone with and
    without tracepoints, page_free_race with split violations per scanner, prezero bursts, fault
    rows with seed columns, derived counters, one overrun point."""
    rows = []
    kernel = {"kernel": {"sources": {"tracepoints": "unavailable",
                                     "tracepoints:reason": "perf_event_paranoid 2",
                                     "vmstat": "measured"},
                         "attribution": {"zone_lock": 12, "lru_lock": 0, "other": 3}}}
    for rep in range(4):
        rows.append(_contract_row("kernel_zone/tasks:threads/threads:2", "kernel_zone",
                                  {"tasks": "threads", "threads": 2}, rep,
                                  {"ops_per_s": 1e6 + rep, "pages_per_s": 2e6 + rep}, kernel,
                                  label="near"))
        rows.append(_contract_row("kernel_lru/tasks:processes/threads:2", "kernel_lru",
                                  {"tasks": "processes", "threads": 2}, rep,
                                  {"pages_per_s": 3e6, "kernel_contention_per_op": 0.25},
                                  {"kernel": {"sources": {"tracepoints": "measured"}}}))
    for scanner, seen in (("2.6.16", 3), ("2.6.18", 0)):
        for variant in ("fastpath", "atomic"):
            v = seen if variant == "fastpath" else 0
            rows.append(_contract_row(
                f"page_free_race/variant:{variant}/scanner:{scanner}/race_window_ns:100/threads:2",
                "page_free", {"variant": variant, "scanner": scanner, "race_window_ns": "100",
                              "threads": 2}, 0,
                {"violations_freed_referenced": v, "violations_freed_on_lru": 0,
                 "frees": 1e6, "violation_rate_upper_95": 3e-6}))
    for burst in (64, 4096):
        rows.append(_contract_row(
            f"prezero/protocol:idle_burst/zeroer:idle_cpus/burst_pages:{burst}/pool_pages:1024/"
            "threads:1", "prezero",
            {"protocol": "idle_burst", "zeroer": "idle_cpus", "burst_pages": str(burst),
             "pool_pages": "1024", "threads": 1}, 0,
            {"allocs_per_s": 5e5, "prezeroed_share": min(1.0, 1024 / burst)}))
    # Steady-state prezero rows: every line of each page written (issue 23 item 5: labelled).
    rows.append(_contract_row(
        "prezero/mode:prezeroed_busy/method:memset/idle_us:0/threads:1", "prezero",
        {"mode": "prezeroed_busy", "method": "memset", "idle_us": "0", "threads": 1}, 0,
        {"allocs_per_s": 2e5, "prezeroed_share": 0.4},
        {"touches": "all 64 lines of each page: the case the 2004 author excluded"}))
    rows.append(_contract_row("fault/mode:plain/tasks:threads/start:warm/mb:1024/threads:1",
                              "fault", {"mode": "plain", "tasks": "threads", "start": "warm",
                                        "mb": "1024", "threads": 1}, 0,
                              {"faults_per_wall_s": 250000.0, "faults_per_cpu_s": 260000.0,
                               "user_s": 0.01, "sys_s": 1.0, "wall_s": 1.05,
                               "zeroing_share": 0.6, "clear_page_sampled_share": 0.25},
                              {"seed_columns": {"gb": 1},
                               "clear_page_sampled": {"status": "measured", "share": 0.25,
                                                      "share_ci95": [0.2, 0.3]}}))
    rows.append(_contract_row("fault/mode:thp/tasks:threads/start:warm/mb:256/threads:1",
                              "fault", {"mode": "thp", "tasks": "threads", "start": "warm",
                                        "mb": "256", "threads": 1}, 0,
                              {"faults_per_wall_s": 2000.0, "faults_per_cpu_s": 2100.0,
                               "user_s": 0.01, "sys_s": 0.5, "wall_s": 0.6,
                               "zeroing_share": 0.5},
                              {"seed_columns": {"gb": 0.25},
                               "clear_page_sampled": {"status": "unavailable",
                                                      "reason": "perf_event_paranoid=2"}}))
    rows.append(_contract_row("locks/lock:ticket/cs:0/stats:off/threads:2", "locks",
                              {"lock": "ticket", "cs": "0", "stats": "off", "threads": 2}, 0,
                              {"ops_per_s": 1e7, "IPC": 0.8, "cache-misses/op": 1.5},
                              counters={"status": {"instructions": "scaled",
                                                   "cycles": "measured", "hitm": "unavailable",
                                                   "hitm:reason": "no PEBS in a VM"},
                                        "scaling": {"instructions": 1.7}},
                              label="near", overrun=True))
    doc = {"context": {"host_name": "contract", "date": "2026-12-01",
                       "lockline": {"finished": False, "warnings": []}}, "benchmarks": rows}
    (tmp_path / "lockline.json").write_text(json.dumps(doc))
    return tmp_path


def test_other_helpers_rows_are_rendered(tmp_path):
    """Each contract's rows show up where the report promises them, tolerant of absence."""
    run_dir = contract_run(tmp_path)
    assert report.main([str(run_dir)]) == 0
    text = (run_dir / "report.html").read_text(encoding="utf-8")
    q2 = text[text.index('<section id="q2">'):text.index('<section id="q3">')]
    assert "The real kernel, measured the same way" in q2
    assert "kernel_zone/tasks:threads" in q2
    assert "unavailable (perf_event_paranoid 2)" in q2 and "zone_lock 12" in q2
    q1 = text[text.index('<section id="q1">'):text.index('<section id="q2">')]
    assert "kernel_lru/tasks:processes" in q1 and "0.25 events/op" in q1
    q3 = text[text.index('<section id="q3">'):text.index('<section id="q4">')]
    assert "race test, variant fastpath, scanner 2.6.16" in q3
    assert "UNSAFE: 3 violations (3 freed while referenced, 0 freed on the LRU)" in q3
    assert "race test, variant fastpath, scanner 2.6.18" in q3
    assert "rate &lt; 3e-06 per free (95 %, rule of three)" in q3
    q5 = text[text.index('<section id="q5">'):text.index('<section id="other">')]
    assert "burst B against pool P" in q5 and "<td>4</td>" in q5 and "<td>0.062</td>" in q5
    # The steady-state rows carry the label the 2004 argument excluded them by.
    steady = q5[q5.index("Pre-zeroing in steady state"):]
    assert "<td>prezeroed_busy</td>" in steady
    assert "all 64 lines of each page: the case the 2004 author excluded" in steady
    assert "Faults in the 2004 table" in q5 and "inconsistent" in q5
    for column in ("GB", "repetitions", "user s", "system s", "wall s", "faults/cpu/s",
                   "faults/wall-s"):
        assert f"<th>{column}</th>" in q5, column
    assert "<td>250,000</td>" in q5
    # Zeroing's share twice: modelled, and sampled from the kernel (or why not).
    assert "<th>zeroing share (modelled)</th>" in q5
    assert "<th>clear_page share (sampled)</th>" in q5
    assert "<td>0.25 [0.2, 0.3]</td>" in q5
    assert "<td>unavailable (perf_event_paranoid=2)</td>" in q5
    counters = text[text.index('<section id="counters">'):text.index('<section id="warnings">')]
    assert "Derived counters" in counters and "0.8 (scaled: instructions x1.7)" in counters
    assert "unavailable (no PEBS in a VM)" in counters
    warnings = text[text.index('<section id="warnings">'):text.index('<section id="layouts">')]
    assert "overrun window: locks/lock:ticket/cs:0/stats:off/threads:2" in warnings
    assert "did not finish" in text


def test_verdict_lines_in_each_question(report_a):
    """Every question section states a verdict (or that nothing answers it)."""
    _, text = report_a
    for qid in ("q1", "q2", "q3", "q4", "q5"):
        start = text.index(f'<section id="{qid}">')
        section = text[start:text.index("</section>", start)]
        assert "<b>Verdict</b>" in section or "verdict: not run" in section, qid
    assert "comparisons resolved on this machine" in text


