"""The output of `lockline predict` (plots/predict.py): predicted.json, one figure per
family, and the predicted-vs-measured table of --validate-against (via outputs.write_atomic)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import numpy as np

from outputs import write_atomic
from predict_fit import CLASSES, MODEL, SIMPLIFICATIONS

SCHEMA = 1

def predicted_document(run, path: str, plan: Dict[str, Any], title: str, x86, assumed_note: str,
                       lat: Dict[str, Dict[str, Any]], regime: str, bias: Tuple[float, str],
                       variants, curves, verdicts, skipped, draws: int, seed: int
                       ) -> Dict[str, Any]:
    """The predicted.json document (schema SCHEMA)."""
    emulated = run.emulated
    return {
        "schema": SCHEMA, "predicted": True,
        "topology": {k: plan.get(k) for k in ("source", "packages", "numa_nodes", "l3s",
                                              "cores", "pus", "usable_pus", "pin",
                                              "threads_list")},
        "title": title + (" - from an EMULATED run" if emulated else ""), "target_x86": x86,
        "latencies_assumed_note": assumed_note or None,
        "run": {"path": os.path.abspath(path), "host": run.context.get("host_name"),
                "git_commit": run.lockline.get("git_commit"),
                "cpu_model": run.lockline.get("cpu_model"), "emulated": emulated},
        "emulated_input": emulated,
        "latencies_ns": {c: {k: v for k, v in lat[c].items() if k != "samples"} for c in CLASSES},
        "regime": regime, "clock_bias_ns": {"ns": bias[0], "why": bias[1]},
        "fit_threads": sorted({n for v in variants for n in v.reps}), "model": MODEL,
        "simplifications": (["EMULATED INPUT: the run was made in an emulator; its timings "
                             "are not a machine's"] if emulated else []) + list(SIMPLIFICATIONS),
        "bootstrap": {"draws": draws, "seed": seed,
                      "over": "repetitions of each variant at every fit thread count and c2c "
                              "repetitions"},
        "skipped": skipped, "variants": [{
            "key": v.key, "family": v.family, "params": v.params, "lock": v.lock,
            "description": v.description, "inputs": v.summary(),
            "curve": [{k: r[k] for k in r if not k.startswith("_")} for r in curves[v.key]]}
            for v in variants], "verdicts": verdicts}


# Most curves in one panel; a family with more is drawn as small multiples.
PER_PANEL = 8


def write_figures(out_dir: str, title: str, variants, curves, assumed: str = "",
                  date: str = "") -> List[str]:
    """One PNG per family: predicted ops/s against threads with a 95 % band per variant, at
    most PER_PANEL curves per panel; `assumed` (latencies assumed) is printed on it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    files = []
    for fam in sorted({v.family for v in variants}):
        vs = [v for v in variants if v.family == fam]
        panels = [vs[i:i + PER_PANEL] for i in range(0, len(vs), PER_PANEL)]
        fig, axes = plt.subplots(len(panels), 1, figsize=(13, 4.0 * len(panels) + 0.6),
                                 squeeze=False)
        for ax in axes.flat[len(panels):]:
            ax.set_visible(False)
        common = set.intersection(*[set(v.key.split("/")[1:]) for v in vs])
        for pi, (ax, pv) in enumerate(zip(axes.flat, panels)):
            for v in pv:
                c = curves[v.key]
                t = [r["threads"] for r in c]
                label = "/".join(x for x in v.key.split("/")[1:] if x not in common) or \
                    v.key[len(fam) + 1:]
                line, = ax.plot(t, [r["ops_per_s"] for r in c], lw=1, label=label)
                ax.fill_between(t, [r["lo"] for r in c], [r["hi"] for r in c],
                                color=line.get_color(), alpha=0.15, lw=0)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("threads (target placement plan)")
            ax.set_ylabel("predicted ops/s")
            part = f" ({pi + 1}/{len(panels)})" if len(panels) > 1 else ""
            ax.set_title(f"{fam}{part}: PREDICTED", fontsize=9)
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
            ax.grid(True, which="both", alpha=0.3)
        head = f"{fam}: PREDICTED for {title}" + (f", input run {date}" if date else "")
        if common:
            head += "\nall curves: " + "/".join(sorted(common))
        if assumed:
            head += "\n" + assumed
        fig.suptitle(head, fontsize=9)
        fig.tight_layout()
        name = f"predicted-{fam}.png"
        # bbox_inches="tight": the legends sit outside the axes.
        write_atomic(os.path.join(out_dir, name), lambda handle, fig=fig: fig.savefig(
            handle, format="png", dpi=90, bbox_inches="tight"))
        plt.close(fig)
        files.append(name)
    return files


def validation_report(res: Dict[str, Any]) -> str:
    """Markdown of validate_against: errors per family and thread count, every point, then
    the seed comparisons."""
    rows = res["rows"]
    lines = ["predicted vs measured (error = predicted / measured - 1; measured = median ops/s "
             "of the repetitions; inside = in the predicted 95 % interval)", ""]
    lines += [f"- {n}" for n in res["notes"]]
    lines += ["", "| family | threads | points | median error | median abs error | inside 95 % |",
              "|---|---|---|---|---|---|"]
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for r in rows:
        for key in ((r["family"], str(r["threads"])), (r["family"], "all"), ("all", "all")):
            groups.setdefault(key, []).append(r)
    for (fam, n), rs in sorted(groups.items(), key=lambda kv: (kv[0][0] == "all", kv[0][0],
                                                               kv[0][1] == "all", kv[0][1])):
        errs = np.array([r["error"] for r in rs])
        inside = sum(r["inside"] for r in rs)
        lines.append(f"| {fam} | {n} | {len(rs)} | {np.median(errs) * 100:+.0f} % | "
                     f"{np.median(np.abs(errs)) * 100:.0f} % | {inside} of {len(rs)} |")
    lines += ["", "| variant | threads | predicted ops/s [95 %] | measured (n) | error | "
              "inside |", "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["key"], r["threads"])):
        lines.append(f"| {r['key']} | {r['threads']} | {r['predicted']:.3g} "
                     f"[{r['lo']:.3g}, {r['hi']:.3g}] | {r['measured']:.3g} ({r['n']}) | "
                     f"{r['error'] * 100:+.0f} % | {'yes' if r['inside'] else 'no'} |")
    if res["verdicts"]:
        lines += ["", "| comparison | threads | predicted [95 %] | measured | sign | "
                  "within 2x |", "|---|---|---|---|---|---|"]
        for v in res["verdicts"]:
            name = v["text"].split(", " + str(v["threads"]) + " threads")[0]
            if not v["predicted"]:
                lines.append(f"| {name} | {v['threads']} | not predicted ({v['reason']}) | "
                             f"{v['measured_effect'] * 100:+.1f} % | - | - |")
                continue
            lines.append(f"| {name} | {v['threads']} | {v['effect'] * 100:+.1f} % "
                         f"[{v['ci'][0] * 100:+.1f}, {v['ci'][1] * 100:+.1f}] | "
                         f"{v['measured_effect'] * 100:+.1f} % | "
                         f"{'right' if v['right_sign'] else 'WRONG'} | "
                         + ("n/a (measured < 5 %)" if v["within_2x"] is None else
                            "yes" if v["within_2x"] else "no") + " |")
    return "\n".join(lines)
