"""Side by side: campaigns of one host (or cluster) on 1, 2, ... GPUs, from their report.json.

    python .ci/scale_bench.py [--smi SAMPLES.csv] LABEL=OUT_DIR [LABEL=OUT_DIR ...]

prints, per campaign: its GPUs and workers (report.json's ``sizing``), its examples and their
ratio to the first campaign's, the mutant pairs found with their class, the pairs at their
floor (200 examples, or retired), the compile share on the fuzzing path, and (with ``--smi``,
``nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader -l 2``) how busy
each GPU was while it ran. The goals of "Scale out" follow: 2 GPUs >= 1.8x the examples of one
and at least as many mutant pairs found; 4 GPUs >= 3.5x; a cluster within 10% of the local run
with as many GPUs (a label starting "ray").
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
from pathlib import Path
from typing import Any


def _report(folder: str) -> dict[str, Any]:
    return json.loads((Path(folder) / "report.json").read_text())


def _busy(samples: list[tuple[float, int, float]], start: float, end: float) -> str:
    by_gpu: dict[int, list[float]] = {}
    for t, gpu, util in samples:
        if start <= t <= end:
            by_gpu.setdefault(gpu, []).append(util)
    return " ".join(f"{g}:{sum(v) / len(v):.0f}%" for g, v in sorted(by_gpu.items()) if v) or "-"


def _samples(path: str | None) -> list[tuple[float, int, float]]:
    if not path:
        return []
    out = []
    for row in csv.reader(open(path)):
        try:
            t = dt.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((t, int(row[1]), float(row[2].strip().rstrip(" %"))))
        except (ValueError, IndexError):
            continue
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smi", default=None)
    ap.add_argument("runs", nargs="+", metavar="LABEL=OUT_DIR")
    args = ap.parse_args()
    samples = _samples(args.smi)
    rows = []
    for spec in args.runs:
        label, folder = spec.split("=", 1)
        r = _report(folder)
        results = r["results"]
        mutants = [x for x in results if x.get("mutant")]
        found = sum(1 for x in mutants if x["status"] == "found")
        floor = sum(1 for x in results if x["examples"] >= 200 or x.get("retired"))
        secs = sum(x.get("seconds", 0.0) for x in results)
        compiled = sum(x.get("compile_seconds", 0.0) for x in results)
        sizing = r.get("sizing") or {}
        start = dt.datetime.strptime(r["started"], "%Y-%m-%dT%H:%M:%S%z").timestamp()
        rows.append(
            {
                "label": label,
                "gpus": sizing.get("gpus"),
                "workers": f"{sizing.get('workers')}+{sizing.get('compile_workers')}",
                "examples": r["summary"]["examples"],
                "found": f"{found}/{len(mutants)}",
                "found_n": found,
                "floor": f"{floor}/{len(results)}",
                "compile": f"{100 * compiled / secs:.1f}%" if secs else "-",
                "busy": _busy(samples, start, start + r.get("seconds", 0.0)),
                "errors": len(r.get("errors", [])),
            }
        )
    by = {x["label"]: x for x in rows}
    base = by.get("1gpu", rows[0])["examples"] or 1
    head = "run | GPUs | workers (fuzz+compile) | examples | ratio | mutant pairs found | floor | compile share | GPU busy | harness errors"
    print(head)
    print("|".join("---" for _ in head.split("|")))
    for x in rows:
        print(
            f"{x['label']} | {x['gpus']} | {x['workers']} | {x['examples']:,} | "
            f"{x['examples'] / base:.2f}x | {x['found']} | {x['floor']} | {x['compile']} | "
            f"{x['busy']} | {x['errors']}"
        )
    one = by.get("1gpu")
    for label, want in (("2", 1.8), ("4", 3.5)):
        x = by.get(f"{label}gpu")
        if x and one:
            base = one["examples"] or 1
            ratio = x["examples"] / base
            ok = ratio >= want and x["found_n"] >= one["found_n"]
            print(
                f"goal {label} GPUs >= {want}x and found >= 1 GPU's: {ratio:.2f}x, "
                f"{x['found']} vs {one['found']}: {'PASS' if ok else 'FAIL'}"
            )
    for x in rows:
        if x["label"].startswith("ray") and x["label"] != "raykill":  # (half the budget)
            local = by.get(f"{x['gpus']}gpu")
            if local:
                gap = x["examples"] / max(1, local["examples"]) - 1
                print(
                    f"goal {x['label']} within 10% of the local run on {x['gpus']} GPUs: "
                    f"{100 * gap:+.1f}%: {'PASS' if gap >= -0.10 else 'FAIL'}"
                )


if __name__ == "__main__":
    main()
