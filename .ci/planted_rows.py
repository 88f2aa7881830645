"""How many report rows one planted bug becomes, and how large they are.

Reads a campaign's ``report.json`` and the planted-bug tables (``PLANTED``) of the planted plugins
(``tests/plugins/planted.py``, Triton; ``tests/plugins/planted_pallas.py``, Pallas; imported by
path; ``--round 3``: ``planted3.py`` and ``planted3_pallas.py``; ``--round 4``: ``planted4.py``;
``--round 5``: ``planted5.py`` and ``planted5_pallas.py``; ``--round 6``: ``planted6.py`` and
``planted6_pallas.py``; ``--round 7``: ``planted7.py`` and ``planted7_pallas.py``; ``--round 8``:
``planted8.py`` and ``planted8_pallas.py``; ``--round 9``: ``planted9.py`` and
``planted9_pallas.py``; ``--round 10``: ``planted10.py`` and ``planted10_pallas.py``; ``--round
11``: ``planted11.py`` and ``planted11_pallas.py``; ``--round 12``: ``planted12.py`` and
``planted12_pallas.py``; ``--round 13``: ``planted13.py`` and ``planted13_pallas.py``; ``--round
14``: ``planted14.py`` and ``planted14_pallas.py``; ``--round 15``: ``planted15.py`` and
``planted15_pallas.py``), and prints one line per planted kernel: its rows (findings) in the report, their classes and element counts
(``case_size``) and the ways each row's bug was also seen, whether each planted bug was found (a row
its record matches, or a way a row's bug was also seen: by default one of its expected class), then
the totals: rows per planted bug, the median and largest row size, rows over 4,096 elements. Rows of
the bug-free controls (``control_*``, ``control3_*``, ``control4_*``, ``control5_*``,
``control6_*``, ``control7_*``, ``control8_*``, ``control9_*``, ``control10_*``,
``control11_*``, ``control12_*``, ``control13_*``, ``control14_*``, ``control15_*``), where a campaign ran them, are listed after: they are not planted bugs (a row there is a false positive of the
harness, or a bug of the kernel itself).

    python .ci/planted_rows.py OUT                 # a campaign folder (or its report.json)
    python .ci/planted_rows.py --cpu-campaign 300  # run the planted kernels on the CPU first
    python .ci/planted_rows.py --round 3 --cpu-campaign 300             # round 3's kernels
    python .ci/planted_rows.py --round 3 --cpu-campaign 300 --targets 'control3_*'  # its controls
    python .ci/planted_rows.py --round 4 --cpu-campaign 300             # round 4's (Triton only)
    python .ci/planted_rows.py --round 5 --cpu-campaign 300             # round 5's
    python .ci/planted_rows.py --round 6 --cpu-campaign 300             # round 6's
    python .ci/planted_rows.py --round 6 --cpu-campaign 200 --targets 'control6_*'  # its controls
    python .ci/planted_rows.py --round 7 --cpu-campaign 300             # round 7's
    python .ci/planted_rows.py --round 7 --cpu-campaign 200 --targets 'control7_*'  # its controls
    python .ci/planted_rows.py --round 8 --cpu-campaign 300             # round 8's
    python .ci/planted_rows.py --round 8 --cpu-campaign 150 --targets 'control8_*'  # its controls
    python .ci/planted_rows.py --round 9 --cpu-campaign 300             # round 9's
    python .ci/planted_rows.py --round 9 --cpu-campaign 150 --targets 'control9_*'  # its controls
    python .ci/planted_rows.py --round 10 --cpu-campaign 300            # round 10's
    python .ci/planted_rows.py --round 10 --cpu-campaign 150 --targets 'control10_*'  # its controls
    python .ci/planted_rows.py --round 11 --cpu-campaign 300            # round 11's
    python .ci/planted_rows.py --round 11 --cpu-campaign 150 --targets 'control11_*'  # its controls
    python .ci/planted_rows.py --round 12 --cpu-campaign 300            # round 12's
    python .ci/planted_rows.py --round 12 --cpu-campaign 150 --targets 'control12_*'  # its controls
    python .ci/planted_rows.py --round 13 --cpu-campaign 300            # round 13's
    python .ci/planted_rows.py --round 13 --cpu-campaign 150 --targets 'control13_*'  # its controls
    python .ci/planted_rows.py --round 14 --cpu-campaign 300            # round 14's
    python .ci/planted_rows.py --round 14 --cpu-campaign 150 --targets 'control14_*'  # its controls
    python .ci/planted_rows.py --round 15 --cpu-campaign 300            # round 15's
    python .ci/planted_rows.py --round 15 --cpu-campaign 150 --targets 'control15_*'  # its controls

``--cpu-campaign SECONDS`` runs ``python -m fuzz run --targets 'planted_*' --backends
triton-interpret,pallas-interpret --budget SECONDS --db none --seed 1`` with both plugins into
``--out`` (default: a new temporary folder), then prints the table for it (``--round 3``:
``--targets 'planted3_*'`` with round 3's plugins; ``--round 4``: ``--targets 'planted4_*'`` with
round 4's plugin; ``--round 5``: ``--targets 'planted5_*'`` with round 5's plugins; ``--round
6``: ``--targets 'planted6_*'`` with round 6's plugins; ``--round 7``: ``--targets
'planted7_*'`` with round 7's plugins; ``--round 8``: ``--targets 'planted8_*'`` with round 8's
plugins; ``--round 9``: ``--targets 'planted9_*'`` with round 9's plugins; ``--round 10``:
``--targets 'planted10_*'`` with round 10's plugins; ``--round 11``: ``--targets 'planted11_*'``
with round 11's plugins; ``--round 12``: ``--targets 'planted12_*'`` with round 12's plugins;
``--round 13``: ``--targets 'planted13_*'`` with round 13's plugins; ``--round 14``:
``--targets 'planted14_*'`` with round 14's plugins; ``--round 15``: ``--targets 'planted15_*'``
with round 15's plugins; ``--targets GLOBS`` replaces the targets).
Exit status: 0, or 2 for a usage error (no report, a plugin that does not import).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = (
    ROOT / "tests" / "plugins" / "planted.py",
    ROOT / "tests" / "plugins" / "planted_pallas.py",
)


def _round(n: int) -> tuple[tuple[Path, ...], str]:
    """Round ``n``'s Triton and Pallas plugins and its targets' glob."""
    here = ROOT / "tests" / "plugins"
    return (here / f"planted{n}.py", here / f"planted{n}_pallas.py"), f"planted{n}_*"


# Each round's plugins and the targets its campaign runs.
ROUNDS = {
    1: (PLUGINS, "planted_*"),
    3: _round(3),
    4: ((ROOT / "tests" / "plugins" / "planted4.py",), "planted4_*"),
    **{n: _round(n) for n in range(5, 16)},
}
# the bug-free targets' name prefixes
CONTROLS = (
    "control_",
    "control3_",
    "control4_",
    "control5_",
    "control6_",
    "control7_",
    "control8_",
    "control9_",
    "control10_",
    "control11_",
    "control12_",
    "control13_",
    "control14_",
    "control15_",
)
LARGE = 4096  # elements: a row larger than this is not a reproducer a maintainer reads


class UsageError(Exception):
    pass


def planted_tables(plugins: Sequence[Path]) -> dict[str, Any]:
    """``PLANTED`` of every plugin, merged (target name -> pattern record), in plugin order."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    table: dict[str, Any] = {}
    for i, path in enumerate(plugins):
        if not path.is_file():
            raise UsageError(f"--plugin {path}: no such file")
        spec = importlib.util.spec_from_file_location(f"planted_rows_plugin_{i}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            raise UsageError(f"--plugin {path} does not import: {type(e).__name__}: {e}") from e
        planted = getattr(module, "PLANTED", None)
        if not isinstance(planted, Mapping):
            raise UsageError(f"--plugin {path} has no PLANTED table (target name -> record)")
        table.update(planted)
    return table


def read_report(where: Path) -> dict[str, Any]:
    path = where / "report.json" if where.is_dir() else where
    if not path.is_file():
        raise UsageError(f"{where}: no report.json there (give a campaign's --out folder)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not JSON: {e}") from e


def _language(name: str, results: list[dict[str, Any]]) -> str:
    backends = {r["backend"] for r in results if r["target"] == name}
    if any(b.startswith("pallas") for b in backends) or name.endswith("_pallas"):
        return "pallas"
    return "triton"


def _size(row: Mapping[str, Any]) -> int | None:
    size = row.get("case_size")
    return int(size) if isinstance(size, (int, float)) else None


def _describe(row: Mapping[str, Any]) -> str:
    """``class/property:output(elements)`` of one row; ``unshrunk`` where its shrinking did not
    finish, ``maybe-known`` where its key is a shrunk bug's."""
    size = f"{_size(row)}" + (", unshrunk" if row.get("shrunk") is False else "")
    out = f"{row.get('class')}/{row.get('property')}:{row.get('output') or '-'}({size})"
    also = [
        f"{s.get('class')}/{s.get('property')}:{s.get('output') or '-'}({_size(s)})"
        for s in row.get("also_seen") or []
    ]
    return (
        out
        + (f" [also seen as {', '.join(also)}]" if also else "")
        + (" maybe-known" if row.get("maybe_of") else "")
    )


def _distinct(rows: list[dict[str, Any]]) -> int:
    """The rows that are bugs of their own: those not shrunk that may be another row's bug
    (``maybe_of``, listed after it) are not counted, as the report counts them."""
    return sum(not r.get("maybe_of") for r in rows)


def table(report: Mapping[str, Any], planted: Mapping[str, Any]) -> list[str]:
    """The lines to print: one per planted kernel, the totals, then the controls' rows."""
    results = report.get("results", [])
    findings = report.get("findings", [])
    ran = {r["target"] for r in results}
    by_target: dict[str, list[dict[str, Any]]] = {}
    for row in findings:
        by_target.setdefault(row.get("target", "?"), []).append(row)
    lines = [
        f"{'target':44} {'lang':6} {'family':16} {'ex':>5} {'rows':>4}  "
        f"{'found':7} rows: class/property:output(case_size)"
    ]
    rows_all: list[dict[str, Any]] = []
    bugs_run = found_run = unrun = 0
    for name, record in planted.items():
        rows = by_target.get(name, [])
        bugs = record.bugs
        if name not in ran:
            lines.append(f"{name:44} {'-':6} {record.family:16} {'-':>5} {'-':>4}  not run")
            continue
        examples = sum(r.get("examples", 0) for r in results if r["target"] == name)
        if not examples and not rows:
            unrun += 1
            lines.append(
                f"{name:44} {_language(name, results):6} {record.family:16} {0:>5} {'-':>4}  "
                "unrun (no example ran: the budget ended first)"
            )
            continue
        # (a row found a bug as itself, or as a way its bug was also seen: its smallest
        # example stands for the bug, another class beside it)
        ways = [w for r in rows for w in [r, *(r.get("also_seen") or [])]]
        found = [any(b.matches(w) for w in ways) for b in bugs]
        bugs_run += len(bugs)
        found_run += sum(found)
        rows_all.extend(rows)
        what = ", ".join(_describe(r) for r in sorted(rows, key=lambda r: _size(r) or 0))
        verdict = f"{sum(found)}/{len(bugs)}"
        lines.append(
            f"{name:44} {_language(name, results):6} {record.family:16} {examples:>5} "
            f"{_distinct(rows):>4}  {verdict:7} {what or '-'}"
        )
        for bug, ok in zip(bugs, found, strict=True):
            if not ok:
                other = " (its rows are of other classes)" if rows else ""
                lines.append(f"{'':44}   not found{other}: {bug.expected} ({bug.trigger})")
    sizes = sorted(s for s in (_size(r) for r in rows_all) if s is not None)
    lines.append("")
    if bugs_run:
        unshrunk = sum(r.get("shrunk") is False for r in rows_all)
        n = _distinct(rows_all)
        maybe = len(rows_all) - n
        lines.append(
            f"planted bugs run: {bugs_run} ({unrun} kernels unrun), found: {found_run}; rows: "
            f"{n} ({unshrunk} unshrunk"
            + (f"; {maybe} more not shrunk, maybe a row's bug: not counted" if maybe else "")
            + f"), rows per bug run: {n / bugs_run:.2f}, per bug found: "
            + (f"{n / found_run:.2f}" if found_run else "-")
        )
    else:
        lines.append("planted bugs run: 0 (no planted target in this report)")
    if sizes:
        lines.append(
            f"row size (elements): median {statistics.median(sizes):g}, max {sizes[-1]}, "
            f"rows over {LARGE:,}: {sum(s > LARGE for s in sizes)}"
        )
    controls = sorted(t for t in ran if t.startswith(CONTROLS))
    if controls:
        lines.append("")
        lines.append("controls (no bug planted; any row here is not a planted bug's):")
        for name in controls:
            rows = by_target.get(name, [])
            what = ", ".join(_describe(r) for r in rows)
            lines.append(f"  {name:44} rows {len(rows)}  {what or '-'}")
    errors = report.get("errors") or []
    if errors:
        lines.append("")
        lines.append(f"harness errors: {len(errors)}")
        lines.extend(f"  {e}" for e in errors)
    return lines


def cpu_campaign(
    seconds: float, out: Path, plugins: Sequence[Path], targets: str = "planted_*"
) -> int:
    """Runs the planted kernels (``targets``: comma-separated globs) on the CPU interpreters into
    ``out``; the campaign's exit status (1: failing targets, as planted ones are)."""
    cmd = [sys.executable, "-m", "fuzz", "run"]
    for p in plugins:
        cmd += ["--plugin", str(p)]
    cmd += [
        "--targets", targets, "--backends", "triton-interpret,pallas-interpret",
        "--budget", f"{seconds:g}", "--db", "none", "--seed", "1", "--out", str(out),
    ]  # fmt: skip
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", nargs="?", help="a campaign's --out folder or its report.json")
    parser.add_argument(
        "--cpu-campaign",
        type=float,
        metavar="SECONDS",
        help="first run the planted kernels on the CPU interpreters for this budget",
    )
    parser.add_argument(
        "--out", help="the campaign's folder with --cpu-campaign (default: a new one)"
    )
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        help="a planted plugin to read PLANTED from (repeatable; default: the round's plugins)",
    )
    parser.add_argument(
        "--round",
        type=int,
        choices=sorted(ROUNDS),
        default=1,
        help="which round of planted kernels: its plugins and campaign targets (default 1: "
        "planted.py and planted_pallas.py, 'planted_*'; 3: planted3.py and planted3_pallas.py, "
        "'planted3_*'; 4: planted4.py, 'planted4_*'; 5: planted5.py and planted5_pallas.py, "
        "'planted5_*'; 6: planted6.py and planted6_pallas.py, 'planted6_*'; 7: planted7.py and "
        "planted7_pallas.py, 'planted7_*'; 8: planted8.py and planted8_pallas.py, 'planted8_*'; "
        "9: planted9.py and planted9_pallas.py, 'planted9_*'; 10: planted10.py and "
        "planted10_pallas.py, 'planted10_*'; 11: planted11.py and planted11_pallas.py, "
        "'planted11_*'; 12: planted12.py and planted12_pallas.py, 'planted12_*'; 13: "
        "planted13.py and planted13_pallas.py, 'planted13_*'; 14: planted14.py and "
        "planted14_pallas.py, 'planted14_*'; 15: planted15.py and planted15_pallas.py, "
        "'planted15_*')",
    )
    parser.add_argument(
        "--targets",
        help="comma-separated globs of the targets --cpu-campaign runs (default: the round's "
        "planted targets; e.g. 'control3_*' for round 3's controls, 'control11_*' for round 11's)",
    )
    args = parser.parse_args(argv)
    round_plugins, round_targets = ROUNDS[args.round]
    plugins = [Path(p).resolve() for p in args.plugin] or list(round_plugins)
    try:
        if args.cpu_campaign is not None:
            if args.report:
                raise UsageError("give a report folder or --cpu-campaign SECONDS, not both")
            if not args.cpu_campaign > 0:
                raise UsageError(f"--cpu-campaign={args.cpu_campaign:g} must be > 0 seconds")
            out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="planted-rows-"))
            code = cpu_campaign(args.cpu_campaign, out, plugins, args.targets or round_targets)
            if code not in (0, 1):
                raise UsageError(f"the campaign exited with {code}: see its output above")
            where = out
        elif args.report:
            where = Path(args.report)
        else:
            raise UsageError("give a campaign's report folder, or --cpu-campaign SECONDS")
        report = read_report(where)
        planted = planted_tables(plugins)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"== {where}: {report.get('summary', {}).get('examples', '?')} examples in "
        f"{report.get('seconds', 0):.0f} s, budget {report.get('budget')}"
    )
    print("\n".join(table(report, planted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
