"""``python -m fuzz``: list targets, run a campaign, replay reproducers."""

from __future__ import annotations

import argparse
import fnmatch
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--budget={text!r} must be a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--budget={text!r} must be > 0 seconds")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fuzz", description="Property-based numerical fuzzing of GPU kernels."
    )
    sub = p.add_subparsers(dest="command", required=True)

    def plugin_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--plugin", action="append", default=[], metavar="FILE_OR_MODULE",
                        help="register extra targets from a .py file or module (repeatable)")  # fmt: skip

    ls = sub.add_parser("list", help="targets, and which backends can run on this machine")
    plugin_arg(ls)

    run = sub.add_parser("run", help="a fuzz campaign with a time budget")
    run.add_argument(
        "--budget", type=_positive_float, default=120.0, help="total seconds (default 120)"
    )
    run.add_argument(
        "--targets", default="*", help="comma-separated globs of target names (default *)"
    )
    run.add_argument(
        "--backends",
        default="*",
        help="comma-separated globs of backend names (default: the profile's)",
    )
    run.add_argument("--out", required=True, help="output folder for report.json and reproducers")
    run.add_argument(
        "--mutants", action="store_true", help="also run the mutants (the harness proving itself)"
    )
    run.add_argument(
        "--profile", default=None, help="ci, dev, gpu or nightly (default: gpu with CUDA, else ci)"
    )
    run.add_argument(
        "--repro-dir", default=None, help="where reproducers go (default OUT/reproducers)"
    )
    run.add_argument(
        "--db", default=None, help="example database folder (default OUT/examples; 'none' for none)"
    )
    run.add_argument("--seed", type=int, default=None, help="random seed (default: a fresh one)")
    plugin_arg(run)

    rp = sub.add_parser("replay", help="replay reproducer scripts (files or folders)")
    rp.add_argument("paths", nargs="+")
    rp.add_argument(
        "--backend", default=None, help="replay on this backend instead of the recorded one"
    )
    plugin_arg(rp)
    return p


def _load_plugins(specs: Sequence[str]) -> None:
    from fuzz.target import load_builtin, load_plugin

    load_builtin()
    for spec in specs:
        load_plugin(spec)


def cmd_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from fuzz.backends import backends
    from fuzz.target import all_targets

    _load_plugins(args.plugin)
    console = Console(width=max(Console().width, 140))
    bt = Table(title="backends")
    bt.add_column("backend")
    bt.add_column("kernel language")
    bt.add_column("available here")
    for b in backends().values():
        reason = b.unavailable_reason()
        bt.add_row(b.name, b.impl, "yes" if reason is None else f"no: {reason}")
    console.print(bt)
    tt = Table(title="targets")
    tt.add_column("target", no_wrap=True)
    tt.add_column("kernels", no_wrap=True)
    tt.add_column("mutant: expected class", no_wrap=True)
    tt.add_column("source", no_wrap=True)
    tt.add_column("description")
    for t in all_targets():
        mut = t.expected_class if t.is_mutant else ""
        tt.add_row(t.name, ", ".join(t.kernels), mut, t.source, t.description)
    console.print(tt)
    return EXIT_OK


def _select_backends(pattern: str, profile_backends: Sequence[str]) -> list[str]:
    from fuzz.backends import backends

    pats = [p.strip() for p in pattern.split(",") if p.strip()]
    if pattern == "*":
        return list(profile_backends)
    names = [n for n in backends() if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    if not names:
        raise SystemExit(
            f"--backends={pattern!r} matches no backend; known: {', '.join(backends())}"
        )
    return names


def cmd_run(args: argparse.Namespace) -> int:
    from hypothesis.database import DirectoryBasedExampleDatabase
    from rich.console import Console

    from fuzz import report
    from fuzz.backends import get_backend
    from fuzz.engine import HuntResult, hunt
    from fuzz.profiles import default_profile, get_profile
    from fuzz.target import select

    console = Console(stderr=True)
    if not console.is_terminal:  # a log file: wide enough that the findings table stays readable
        console = Console(stderr=True, width=160)
    _load_plugins(args.plugin)
    profile = get_profile(args.profile) if args.profile else default_profile()
    targets = select(args.targets, mutants=None if args.mutants else False)
    if not targets:
        console.print(
            f"[red]--targets={args.targets!r} matches no target[/red] (see python -m fuzz list)"
        )
        return EXIT_ERROR
    backend_names = _select_backends(args.backends, profile.backends)
    pairs = []
    skipped = []
    for t in targets:
        for name in backend_names:
            b = get_backend(name)
            reason = b.unavailable_reason()
            if reason is not None:
                skipped.append(f"{name}: {reason}")
            elif b.impl in t.kernels:
                pairs.append((t, b))
    for s in sorted(set(skipped)):
        console.print(f"[yellow]skipping backend {s}[/yellow]")
    if not pairs:
        console.print("[red]nothing to run: no selected backend is available here[/red]")
        return EXIT_ERROR
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    repro_dir = Path(args.repro_dir) if args.repro_dir else out / "reproducers"
    db = (
        None
        if args.db == "none"
        else DirectoryBasedExampleDatabase(args.db or str(out / "examples"))
    )
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    started = time.time()
    deadline = time.perf_counter() + args.budget
    results: list[HuntResult] = []
    report_path = out / "report.json"
    console.print(
        f"fuzzing {len(targets)} target(s) x {len(backend_names)} backend(s) = {len(pairs)} run(s), "
        f"profile {profile.name}, budget {args.budget:.0f}s, seed {seed} -> {out}"
    )
    extra = {"seed": seed}
    interrupted = False
    try:
        for i, (t, b) in enumerate(pairs):
            left = deadline - time.perf_counter()
            share = max(left / (len(pairs) - i), 0.0)
            r = hunt(
                t,
                b,
                profile,
                max_examples=10**9,
                seed=seed + i,
                database=db,
                repro_dir=repro_dir,
                time_limit=share,
            )
            results.append(r)
            _print_line(console, r)
            report.write(report_path, report.build(results, profile=profile.name, budget=args.budget, started=started,
                                                   argv=sys.argv[1:], complete=False, extra=extra))  # fmt: skip
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: writing the report of what was found so far[/yellow]")
    final = report.build(results, profile=profile.name, budget=args.budget, started=started, argv=sys.argv[1:],
                         complete=not interrupted, extra=extra)  # fmt: skip
    report.write(report_path, final)
    _print_summary(console, results, report_path)
    if final["summary"]["real_failed"]:
        return EXIT_FAIL
    if final["summary"]["harness_errors"] or interrupted:
        return EXIT_ERROR
    return EXIT_OK


def _print_line(console: object, r: object) -> None:
    from rich.console import Console

    from fuzz.engine import HuntResult

    assert isinstance(console, Console) and isinstance(r, HuntResult)
    colour = {
        "pass": "green",
        "found": "green",
        "fail": "red",
        "missed": "red",
        "wrong-class": "red",
    }[r.status]
    classes = ", ".join(r.classes) or "-"
    console.print(
        f"  [{colour}]{r.status:11}[/{colour}] {r.target:34} {r.backend:17} {r.examples:6d} ex "
        f"{r.seconds:6.1f}s {r.examples_per_second:6.1f}/s  {classes}"
        + (f"  [red]{r.error}[/red]" if r.error else "")
    )


def _print_summary(console: object, results: Sequence[object], report_path: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    from fuzz.engine import HuntResult

    assert isinstance(console, Console)
    table = Table(title="findings")
    for col in ("target", "backend", "class", "where", "error / tol", "case size", "reproducer"):
        table.add_column(col)
    n = 0
    for r in results:
        assert isinstance(r, HuntResult)
        for f in r.found.values():
            n += 1
            fd = f.finding
            err = (
                f"{fd.error:.3g} / {fd.tolerance:.3g}"
                if fd.error is not None and fd.tolerance is not None
                else ""
            )
            mark = (
                ""
                if r.expected_class is None
                else (" (expected)" if fd.cls == r.expected_class else " (mutant)")
            )
            table.add_row(r.target, r.backend, fd.cls + mark, fd.where, err, str(f.case.size),
                          os.path.relpath(f.reproducer) if f.reproducer else "")  # fmt: skip
    if n:
        console.print(table)
    real_fail = sorted(
        {r.target for r in results if isinstance(r, HuntResult) and r.status == "fail"}
    )
    mutants = [r for r in results if isinstance(r, HuntResult) and r.expected_class is not None]
    found = sum(1 for r in mutants if r.status == "found")
    console.print(
        f"{sum(r.examples for r in results if isinstance(r, HuntResult))} examples; "
        + (
            f"[red]failing real targets: {', '.join(real_fail)}[/red]"
            if real_fail
            else "[green]no real target failed[/green]"
        )
        + (f"; mutants found with the expected class: {found}/{len(mutants)}" if mutants else "")
        + f"\nreport: {report_path}"
    )


def _reproducer_files(paths: Sequence[str]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files.extend(sorted(q for q in path.rglob("*.py") if not q.name.startswith(".")))
        elif path.is_file():
            files.append(path)
        else:
            raise SystemExit(f"replay: {p!r} is neither a file nor a folder")
    return files


def cmd_replay(args: argparse.Namespace) -> int:
    from fuzz.reproducer import load, report_replay

    _load_plugins(args.plugin)
    files = _reproducer_files(args.paths)
    if not files:
        print("replay: no reproducer files found")
        return EXIT_ERROR
    worst = EXIT_OK
    for f in files:
        try:
            meta, data = load(f)
        except (ValueError, SyntaxError) as e:
            print(f"{f}: {e}")
            worst = max(worst, EXIT_ERROR)
            continue
        print(f"== {f}")
        worst = max(worst, report_replay(meta, data, backend=args.backend))
    return worst


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"list": cmd_list, "run": cmd_run, "replay": cmd_replay}
    try:
        return commands[args.command](args)
    except ValueError as e:  # bad input named by the code that checked it
        print(f"python -m fuzz {args.command}: error: {e}", file=sys.stderr)
        return EXIT_ERROR
