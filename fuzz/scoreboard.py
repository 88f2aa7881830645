"""The mutant scoreboard: how much better the harness finds planted bugs than the usual tests.

For every mutant and backend, in one run:

harness
    :func:`fuzz.engine.hunt` with a time budget: found or not, the class, examples and seconds to
    the first failure, shrink time, and the minimal reproducer's size.
randn baseline
    five seeded ``randn`` trials at the target's default shape (``Baselines.randn``), the
    way KernelBench checks a kernel.
grid baseline
    the fixed grid of shapes, dtypes and options the family's upstream tests use
    (``Baselines.grid``), the way flash-attention and fla test.

A baseline *finds* a mutant when any of its cases fails any property the harness checks (the same
property code, no shrinking; a property with drawn parameters gets its simplest value). Targets
without baselines show ``n/a``. The summary gives each method's detection rate and bugs found per
minute (mutants detected / minutes spent; the harness's minutes count up to the first failure of
each detected mutant and the whole budget of each missed one).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fuzz.backends import get_backend
from fuzz.campaign.report_files import write_json
from fuzz.case import Case
from fuzz.engine import hunt
from fuzz.files import atomic_write_text
from fuzz.profiles import HuntOptions, Profile
from fuzz.properties import check_case, properties_of
from fuzz.results import Found, HuntResult
from fuzz.target import Target

RANDN_TRIALS = 5


def _simplest_params(target: Target) -> dict[str, Any]:
    from hypothesis import find

    out = {}
    for prop in properties_of(target):
        if prop.params_strategy is not None:
            out[prop.name] = find(prop.params_strategy, lambda _: True)
    return out


def run_baseline(
    target: Target,
    backend: str,
    cases: Sequence[Case],
    profile: Profile | HuntOptions,
    time_limit: float | None = None,
) -> dict[str, Any]:
    """Checks every case with every property; the first failure decides. With ``time_limit``,
    no case starts after that many seconds (on a GPU each case of a grid may be a compile of a
    new kernel variant); ``run`` says how many of the ``cases`` ran."""
    b = get_backend(backend)
    checks = HuntOptions.of(profile).check_kwargs()
    params = _simplest_params(target)
    t0 = time.perf_counter()
    first = None
    classes: set[str] = set()
    run = 0
    for i, case in enumerate(cases):
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            break
        run += 1
        outcome = check_case(target, b, case, params=params, **checks)
        if outcome.finding is not None:
            classes.add(outcome.finding.cls)
            if first is None:
                first = {
                    "case": i,
                    "class": outcome.finding.cls,
                    "message": outcome.finding.message[:200],
                }
    return {
        "found": first is not None,
        "class": first["class"] if first else None,
        "classes": sorted(classes),
        "first": first,
        "cases": len(cases),
        "run": run,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def run_scoreboard(
    mutants: Sequence[Target],
    backends: Sequence[str],
    profile: Profile,
    *,
    budget: float,
    shrink_limit: float | None = None,
    baseline_limit: float | None = None,
    seed: int = 0,
    log: Callable[[str], None] = lambda line: None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    repro_dir: Path | None = None,
) -> dict[str, Any]:
    """The scoreboard of ``mutants`` on ``backends``. ``budget``: seconds of search per row;
    ``shrink_limit``: seconds a row may shrink its failure (None: the profile's cap, which on a
    GPU, where every shrink step may be a compile, is long); Hypothesis checks it between shrink
    steps, and a row cut there keeps the smallest failing example so far and says so.
    ``baseline_limit``: seconds each baseline may run (None: all its cases). ``on_row``
    gets the board so far (marked interrupted) after each row, so that a run killed outright
    still leaves its rows written. ``repro_dir``: where the reproducer of each row's minimal
    example goes (the one whose size the row reports); None: none written."""
    rows: list[dict[str, Any]] = []

    def board(interrupted: bool) -> dict[str, Any]:
        return {
            "profile": profile.name,
            "budget": budget,
            "shrink_limit": shrink_limit,
            "baseline_limit": baseline_limit,
            "seed": seed,
            "rows": rows,
            "interrupted": interrupted,
            "summary": summarize(rows),
        }

    def row_done(row: dict[str, Any]) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(board(True))
        log(row_line(row))

    options = HuntOptions.of(profile, shrink_seconds=shrink_limit)
    try:
        _run_rows(
            row_done,
            mutants,
            backends,
            options,
            budget=budget,
            baseline_limit=baseline_limit,
            seed=seed,
            log=log,
            repro_dir=repro_dir,
        )
    except KeyboardInterrupt:  # SIGINT, or SIGTERM through the CLI: keep the rows so far
        log(f"interrupted: {len(rows)} row(s) complete")
        return board(True)
    return board(False)


def row_line(row: dict[str, Any]) -> str:
    """One finished row in a line, logged as soon as it is complete."""
    h = row["harness"]
    cut = " (shrinking cut at the limit)" if h.get("shrink_cut") else ""
    found = (
        f"{h['class']} after {h['examples_to_first']} examples / {h['seconds_to_first']:.1f}s, "
        f"shrunk in {h['shrink_seconds']:.1f}s{cut} to {h['reproducer_size']} elements"
        if h["found"]
        else f"not found in {h['examples']} examples / {h['seconds']:.1f}s"
    )
    base = "; ".join(
        f"{key} " + ("n/a" if row[key] is None else _cell(row[key])) for key in ("randn", "grid")
    )
    return f"done {row['mutant']} on {row['backend']}: harness {found}; {base}"


def _size(found: Found) -> int:
    return found.case.size


def _found_class(cls: str | None) -> Callable[[HuntResult], bool]:
    """A hunt's stop: once the mutant's class is found (the scoreboard measures its first)."""
    return lambda r: cls in r.classes


def _run_rows(
    row_done: Callable[[dict[str, Any]], None],
    mutants: Sequence[Target],
    backends: Sequence[str],
    options: HuntOptions,
    *,
    budget: float,
    baseline_limit: float | None,
    seed: int,
    log: Callable[[str], None],
    repro_dir: Path | None = None,
) -> None:
    for m in mutants:
        for name in backends:
            b = get_backend(name)
            if m.unsupported(b) is not None:
                continue
            reason = b.unavailable_reason()
            if reason is not None:
                log(f"skipping {m.name} on {name}: {reason}")
                continue
            log(f"{m.name} on {name}: harness ({budget:g}s budget)...")
            r = hunt(
                m,
                b,
                options,
                max_examples=10**9,
                seed=seed,
                database=None,
                time_limit=budget,
                repro_dir=repro_dir,
                stop_when=_found_class(m.expected_class),
            )
            mine = sorted(r.of_class(m.expected_class or ""), key=_size)
            f = mine[0] if mine else next(iter(r.found.values()), None)
            harness = {
                "found": f is not None,
                "class": f.finding.cls if f else None,
                "expected": bool(f and f.finding.cls == m.expected_class),
                "classes": r.classes,
                "examples_to_first": f.first_example if f else None,
                "seconds_to_first": round(f.first_seconds, 3) if f else None,
                "shrink_seconds": round(f.shrink_seconds, 3) if f else None,
                "shrink_cut": bool(f and f.shrink_seconds >= options.shrink_seconds),
                "reproducer_size": f.case.size if f else None,
                "reproducer": str(f.reproducer) if f and f.reproducer else None,
                "examples": r.examples,
                "seconds": round(r.seconds, 3),
                "error": r.error,
            }
            row: dict[str, Any] = {
                "mutant": m.name,
                "backend": name,
                "expected_class": m.expected_class,
                "harness": harness,
            }
            base = m.baselines
            if base.randn is not None:
                cases = [base.randn(s, options.scale) for s in range(RANDN_TRIALS)]
                row["randn"] = run_baseline(m, name, cases, options, baseline_limit)
            else:
                row["randn"] = None
            row["grid"] = (
                run_baseline(m, name, list(base.grid(options.scale)), options, baseline_limit)
                if base.grid is not None
                else None
            )
            row_done(row)


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    n = len(rows)
    h_found = [r for r in rows if r["harness"]["found"]]
    h_minutes = (
        sum(
            (r["harness"]["seconds_to_first"] if r["harness"]["found"] else r["harness"]["seconds"])
            for r in rows
        )
        / 60
    )
    out["harness"] = {
        "detected": len(h_found),
        "expected_class": sum(r["harness"]["expected"] for r in rows),
        "total": n,
        "rate": len(h_found) / n if n else 0.0,
        "minutes": round(h_minutes, 3),
        "per_minute": round(len(h_found) / h_minutes, 2) if h_minutes > 0 else None,
    }
    for key in ("randn", "grid"):
        have = [r for r in rows if r[key] is not None]
        found = [r for r in have if r[key]["found"]]
        minutes = sum(r[key]["seconds"] for r in have) / 60
        out[key] = {
            "detected": len(found),
            "total": len(have),
            "rate": len(found) / len(have) if have else None,
            "minutes": round(minutes, 3),
            "per_minute": round(len(found) / minutes, 2) if minutes > 0 else None,
        }
    return out


def _cell(b: dict[str, Any] | None) -> str:
    if b is None:
        return "n/a"
    cut = f" ({b['run']}/{b['cases']} cases)" if b.get("run", b["cases"]) < b["cases"] else ""
    return (f"yes ({b['class']})" if b["found"] else "no") + cut


def table_rows(board: dict[str, Any]) -> list[list[str]]:
    out = []
    for r in board["rows"]:
        h = r["harness"]
        cls = h["class"] or "-"
        if h["found"] and not h["expected"]:
            cls += f" (expected {r['expected_class']})"
        out.append(
            [
                r["mutant"],
                r["backend"],
                "yes" if h["found"] else "no",
                cls,
                "" if h["examples_to_first"] is None else str(h["examples_to_first"]),
                "" if h["seconds_to_first"] is None else f"{h['seconds_to_first']:.2f}",
                ""
                if h["shrink_seconds"] is None
                else f"{h['shrink_seconds']:.2f}" + (" (cut)" if h.get("shrink_cut") else ""),
                "" if h["reproducer_size"] is None else str(h["reproducer_size"]),
                _cell(r["randn"]),
                _cell(r["grid"]),
            ]
        )
    return out


HEADERS = [
    "mutant",
    "backend",
    "found",
    "class",
    "examples to 1st",
    "s to 1st",
    "shrink s",
    "repro size",
    f"randn x{RANDN_TRIALS}",
    "grid",
]


def summary_lines(board: dict[str, Any]) -> list[str]:
    s = board["summary"]
    lines = []
    for key, label in (
        ("harness", "harness"),
        ("randn", f"randn x{RANDN_TRIALS}"),
        ("grid", "fixed grid"),
    ):
        d = s[key]
        if d["total"] == 0 or d.get("rate") is None:
            lines.append(f"{label:12} n/a")
            continue
        per = "n/a" if d["per_minute"] is None else f"{d['per_minute']:.2f}"
        lines.append(
            f"{label:12} detected {d['detected']}/{d['total']} ({d['rate']:.0%}), "
            f"{per} bugs/min over {d['minutes'] * 60:.1f}s"
            + (f"; expected class {d['expected_class']}/{d['total']}" if key == "harness" else "")
        )
    return lines


def print_scoreboard(board: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 180))
    t = Table(
        title=f"mutant scoreboard (profile {board['profile']}, {board['budget']:g}s per mutant)"
        + (" - interrupted, rows so far" if board.get("interrupted") else "")
    )
    for i, h in enumerate(HEADERS):
        t.add_column(h, no_wrap=i < 2)  # mutant and backend whole: what the reader looks up
    for row in table_rows(board):
        t.add_row(*row)
    console.print(t)
    for line in summary_lines(board):
        console.print(line, markup=False, highlight=False)


def write_scoreboard(out: Path, board: dict[str, Any]) -> None:
    write_json(out / "scoreboard.json", board)
    md = ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
    md += ["| " + " | ".join(r) + " |" for r in table_rows(board)]
    md += ["", *[f"- {line}" for line in summary_lines(board)], ""]
    atomic_write_text(out / "scoreboard.md", "\n".join(md))
