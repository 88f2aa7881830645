"""``python -m fuzz``: list targets, run a campaign, replay reproducers."""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--budget={text!r} must be a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--budget={text!r} must be > 0 seconds")
    return value


def count_arg(text: str) -> int:
    """An argparse type: an integer >= 1 (argparse names the option in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fuzz", description="Property-based numerical fuzzing of GPU kernels."
    )
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="targets, and which backends can run on this machine")
    _plugin_arg(ls)
    ls.add_argument(
        "--families",
        action="store_true",
        help="instead: the kernel signature of each built-in family (what a plugin's kernel "
        "receives and returns)",
    )
    _run_arguments(sub.add_parser("run", help="a fuzz campaign with a time budget"))
    _mutants_arguments(
        sub.add_parser("mutants", help="the mutant scoreboard: harness vs randn and grid baselines")
    )
    _replay_arguments(sub.add_parser("replay", help="replay reproducer scripts (files or folders)"))
    _merge_arguments(
        sub.add_parser("merge", help="merge the campaign folders of several hosts into one report")
    )
    return p


def _merge_arguments(mg: argparse.ArgumentParser) -> None:
    mg.add_argument(
        "folders", nargs="+", metavar="DIR", help="campaign output folders (each with report.json)"
    )
    mg.add_argument(
        "--out",
        required=True,
        help="folder of the merged report (report.{md,json,xml}, index.html, reproducers/, "
        "history/: triaged against the previous merged report there)",
    )


def _plugin_arg(
    sp: argparse.ArgumentParser,
    help_text: str = "register extra targets from a .py file or module (repeatable)",
) -> None:
    sp.add_argument(
        "--plugin", action="append", default=[], metavar="FILE_OR_MODULE", help=help_text
    )


def _scale_arg(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--scale",
        choices=("small", "large"),
        default=None,
        help="shape scale independent of the profile: large draws the GPU's "
        "chunk sizes, head counts and tiles on the CPU interpreters too "
        "(default: the profile's)",
    )


def _run_arguments(run: argparse.ArgumentParser) -> None:
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
    _scale_arg(run)
    run.add_argument(
        "--db",
        default=None,
        metavar="DIR_OR_URL",
        help="example database: a folder, redis://HOST:PORT[/N], or 'none' (default OUT/examples)",
    )
    run.add_argument(
        "--db-shared",
        action="append",
        default=[],
        metavar="DIR_OR_URL",
        help="a shared database read (never written) under --db (repeatable)",
    )
    run.add_argument("--seed", type=int, default=None, help="random seed (default: a fresh one)")
    _workers_args(run)
    run.add_argument(
        "--example-timeout",
        type=_positive_float,
        default=None,
        metavar="S",
        help="seconds one example may run before it is a hang (default 120; "
        "600 with a CPU profile)",
    )
    run.add_argument(
        "--compile-timeout",
        type=_positive_float,
        default=900.0,
        metavar="S",
        help="seconds a kernel may spend compiling before it counts as a hang "
        "(compile time is not example time; default 900)",
    )
    run.add_argument(
        "--slice",
        type=_positive_float,
        default=None,
        metavar="S",
        help="seconds per scheduling slice (default: budget / (4 x pairs), 1..60)",
    )
    run.add_argument(
        "--floor-examples",
        type=count_arg,
        default=None,
        metavar="N",
        help="every pair is fuzzed N examples (or --floor-seconds) before the scheduler "
        "favours pairs that find new bugs (default 200; all three floors scaled down, and "
        "said so, where the budget is short of them, unless one is given)",
    )
    run.add_argument(
        "--floor-seconds",
        type=_positive_float,
        default=None,
        metavar="S",
        help="... or S seconds of fuzzing, compiling not counted (default 30)",
    )
    run.add_argument(
        "--real-floor-seconds",
        type=_positive_float,
        default=None,
        metavar="S",
        help="the seconds floor of a real (non-mutant) target's pairs (default 60)",
    )
    run.add_argument(
        "--examples",
        type=count_arg,
        default=None,
        metavar="N",
        help="stop each pair after N examples; the campaign ends once every pair has run them "
        "(or is retired), the budget bounding it still",
    )
    run.add_argument(
        "--no-triage", action="store_true", help="do not replay the previous report's reproducers"
    )
    _plugin_arg(run)


def _workers_args(run: argparse.ArgumentParser) -> None:
    """Where a campaign's workers run, and how many (``fuzz.campaign.hosts``)."""
    run.add_argument(
        "--workers",
        type=count_arg,
        default=None,
        help="fuzzing worker processes (default: per visible GPU, a third of its share of the "
        "host's cores, the host's cores shared over all its GPUs; without a GPU, 1)",
    )
    run.add_argument(
        "--compile-workers",
        type=int,
        default=None,
        metavar="N",
        help="processes that compile each pair's kernel variants ahead, while the workers fuzz "
        "what is compiled (default: with a compiled backend, 6 for one GPU and 2 more per GPU "
        "more, at most the host's spare cores; else 0)",
    )
    run.add_argument(
        "--cluster",
        default=None,
        metavar="ADDRESS",
        help="run the workers as actors on a Ray cluster (ray://HOST:PORT, HOST:PORT, or "
        "'auto' inside a Ray job): every node's GPUs, one report here (needs "
        "'pip install kernel-fuzz[ray]')",
    )


def _mutants_arguments(mu: argparse.ArgumentParser) -> None:
    mu.add_argument(
        "--budget",
        type=_positive_float,
        default=60.0,
        help="seconds per mutant and backend for the harness (default 60)",
    )
    mu.add_argument(
        "--shrink-limit",
        type=_positive_float,
        default=None,
        help="seconds a row may spend shrinking its failure (default: the profile's "
        "shrink cap); a row cut there keeps its smallest example so far",
    )
    mu.add_argument(
        "--baseline-limit",
        type=_positive_float,
        default=None,
        help="seconds each baseline may run (default: all its cases); the table "
        "shows how many cases ran when it was cut",
    )
    mu.add_argument("--targets", default="*", help="globs of mutant names (default *)")
    mu.add_argument("--backends", default="*", help="globs of backends (default: the profile's)")
    mu.add_argument("--profile", default=None, help="ci, dev, gpu or nightly")
    _scale_arg(mu)
    mu.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default 0)")
    mu.add_argument(
        "--out",
        default=None,
        help="also write scoreboard.json, scoreboard.md and the reproducer of each "
        "row's minimal example (reproducers/) here",
    )
    _plugin_arg(mu)


def _replay_arguments(rp: argparse.ArgumentParser) -> None:
    rp.add_argument("paths", nargs="+")
    rp.add_argument(
        "--backend", default=None, help="replay on this backend instead of the recorded one"
    )
    rp.add_argument(
        "--jobs",
        "-j",
        type=count_arg,
        default=1,
        metavar="N",
        help="replay in N processes side by side (each compiles its own kernels)",
    )
    rp.add_argument(
        "--show",
        action="store_true",
        help="print each reproducer's inputs and parameters instead of replaying it",
    )
    rp.add_argument("--no-summary", action="store_true", help=argparse.SUPPRESS)
    _plugin_arg(
        rp,
        "the plugin that registers a reproducer's target, where it is now: it takes the place of "
        "the one the reproducer recorded (repeatable; default: the recorded one, else one of its "
        "name beside the reproducer or on sys.path)",
    )


def _load_plugins(specs: Sequence[str]) -> None:
    from fuzz.target import load_builtin, load_plugin_checked

    load_builtin()
    for spec in specs:
        load_plugin_checked(spec)


def cmd_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from fuzz.backends import backends
    from fuzz.target import all_targets

    if args.families:
        return _list_families()
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
    tt.add_column("not run on")
    tt.add_column("description")
    for t in all_targets():
        mut = t.expected_class if t.is_mutant else ""
        never = [
            f"{b.name} ({why})"
            for b in backends().values()
            if (why := t.unsupported(b)) and b.impl in t.kernels
        ]
        tt.add_row(t.name, ", ".join(t.kernels), mut, t.source, "; ".join(never), t.description)
    console.print(tt)
    declared = [t for t in all_targets() if _declarations(t)]
    if declared:
        dt = Table(title="what plugins declare (fuzz.fuzz_kernel)")
        for col in (
            "target",
            "conventions",
            "siblings",
            "disabled properties",
            "rules",
            "known failures",
        ):
            dt.add_column(col, no_wrap=col == "target")
        for t in declared:
            dt.add_row(t.name, *(_declarations(t) or ()))
        console.print(dt)
    return EXIT_OK


def _list_families() -> int:
    """``python -m fuzz list --families``: each built-in family's kernel signature
    (``fuzz.families.signature``), one row per family."""
    from rich.console import Console
    from rich.table import Table

    from fuzz.families import SIGNATURE_COLUMNS, family_names, get_family, signature

    console = Console(width=max(Console().width, 200))
    table = Table(
        title="kernel signatures of the built-in families (fuzz.fuzz_kernel(family=...))",
        caption="dtype: the case's float dtype (Capabilities.dtypes); tensors are torch tensors "
        "for a Triton kernel, JAX arrays for a Pallas kernel (which is also passed interpret=); "
        "Capabilities.features=None supports every feature; axes as in the family's layout "
        "(fuzz.Layout converts)",
        show_lines=True,
    )
    for col in SIGNATURE_COLUMNS:
        table.add_column(col, no_wrap=col == "family")
    for name in family_names():
        sig = signature(get_family(name))
        table.add_row(*("\n".join(sig[col]) or "-" for col in SIGNATURE_COLUMNS))
    console.print(table)
    return EXIT_OK


def _declarations(t: Any) -> tuple[str, str, str, str, str] | None:
    """A plugin target's declarations as ``python -m fuzz list`` shows them: the conventions that
    differ from the family's, the siblings (or the property off without one), the properties
    switched off with their reasons, the rules per backend kind and the known failures; None for
    a built-in target that declares nothing."""
    from fuzz.plugin import Conventions

    lib = t.library
    if not (
        lib.conventions or lib.siblings or lib.disabled or lib.capabilities or lib.known_failures
    ):
        return None
    default = Conventions()
    conv = [f"{k}={v}" for k, v in lib.conventions.items() if getattr(default, k, v) != v]
    sibs = [
        f"{fam}: {getattr(e, '__name__', 'kernel') if e is not None else 'none'}"
        for fam, e in lib.siblings.items()
    ]
    off = [f"{p} ({why})" for p, why in lib.disabled.items()]
    rules = []
    for kind, caps in lib.capabilities.items():
        parts = [f"{n}: {r.describe()}" for n, r in (caps.lengths or {}).items()]
        parts += [
            f"{c.reason}" + (f" (else no {c.feature})" if c.feature else "")
            for c in caps.constraints
        ]
        if parts:
            rules.append(f"{kind}: " + "; ".join(parts))
    return (
        ", ".join(conv) or "the family's",
        "; ".join(sibs) or "-",
        "; ".join(off) or "-",
        " | ".join(rules) or "-",
        "; ".join(k.describe() for k in lib.known_failures) or "-",
    )


def _select_backends(pattern: str, profile_backends: Sequence[str]) -> list[str]:
    from fuzz.backends import backends

    pats = [p.strip() for p in pattern.split(",") if p.strip()]
    if pattern == "*":
        return list(profile_backends)
    names = [n for n in backends() if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    if not names:
        raise ValueError(
            f"--backends={pattern!r} matches no backend; known: {', '.join(backends())}"
        )
    return names


def _progress_console() -> object:
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:  # a log file: wide enough that the findings table stays readable
        console = Console(stderr=True, width=160)
    return console


def cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from fuzz.campaign.estimates import floors_text
    from fuzz.campaign.outdir import install_signal_handlers
    from fuzz.campaign.process import map_limit
    from fuzz.campaign.runner import Campaign
    from fuzz.campaign.threads import gpu_share, threads_for

    threads_for(args.workers or 1)  # a bad KERNEL_FUZZ_THREADS stops here, not in a worker's start
    map_limit()  # and a bad KERNEL_FUZZ_MAP_LIMIT
    gpu_share()  # and a bad KERNEL_FUZZ_GPU_SHARE
    if not args.out.strip():
        raise ValueError("--out='' is empty; it must name the campaign's output folder")
    out = Path(args.out)
    repro_dir = Path(args.repro_dir) if args.repro_dir else out / "reproducers"
    for option, folder in (("--out", out), ("--repro-dir", repro_dir)):
        check_output_folder(option, folder)
    from fuzz.hypothesis_internals import keep_hypothesis_files_out_of_cwd

    keep_hypothesis_files_out_of_cwd(out)
    console = _progress_console()
    assert isinstance(console, Console)
    _load_plugins(args.plugin)
    made = _campaign_config(args, console, out, repro_dir)
    if made is None:
        return EXIT_ERROR
    config, db_problems = made
    live, log, progress = _live_display(console)
    campaign = Campaign(config, log=log, progress=progress)
    campaign.db_problems.extend(db_problems)
    if not campaign.pairs:
        console.print("[red]nothing to run: no selected backend is available here[/red]")
        return EXIT_ERROR
    campaign.lock()  # a second campaign into the same --out stops here, naming the first
    gpus = [d for d in config.devices if d is not None]
    console.print(
        f"fuzzing {len(config.targets)} target(s) on {len(config.backends)} backend(s) = "
        f"{len(campaign.pairs)} pair(s), profile {config.profile.name}, budget {args.budget:g}s, "
        f"seed {config.seed} -> {out}\n"
        + (f"on {config.cluster}: " if config.cluster else "on this host: ")
        + config.host.describe()
        + (f" (GPUs {', '.join(gpus)})" if gpus else "")
    )
    said = floors_text(campaign.floors, len(campaign.pairs), args.budget)
    if said is not None:  # up front: the budget cannot give every pair its full floor
        console.print(f"[yellow]{said}[/yellow]")
    undo = install_signal_handlers(campaign.request_stop)
    try:
        with live if live is not None else contextlib.nullcontext():
            final = campaign.run()
    except BaseException:
        undo()
        raise
    # The final report is written: a stop signal from now on (a job's timeout a moment late)
    # changes nothing, and the exit status stays the campaign's. Restoring the handlers here let
    # a SIGTERM in the summary's printing end the process with 143.
    _ignore_stops_from_now(undo)
    _print_summary(console, final, out)
    if campaign.disk_full is not None:  # what it found is above, and in what could be written
        unwritten = f"; not written: {', '.join(campaign.unwritten)}" if campaign.unwritten else ""
        print(
            f"python -m fuzz run: error: no space left on device: {campaign.disk_full}; the "
            f"campaign stopped and reported what it had found{unwritten}",
            file=sys.stderr,
        )  # (its findings are in the table above, whatever could be written)
        return EXIT_ERROR
    if final["summary"]["real_failed"]:
        return EXIT_FAIL
    if final["summary"]["harness_errors"] or final.get("interrupted"):
        return EXIT_ERROR
    return EXIT_OK


# What puts back the stop signals' handlers that ``cmd_run`` replaced once its campaign ended:
# called by ``main`` where a caller runs it in its own process (see there).
_RESTORE_STOPS: list[Callable[[], None]] = []


def _ignore_stops_from_now(restore: Callable[[], None]) -> None:
    """Has the stop signals the campaign handled (SIGTERM, SIGINT, SIGHUP; not those the
    process was started ignoring) ignored from now until the process exits: its outcome is
    settled. ``restore`` puts back the handlers there were before the campaign."""
    import signal

    from fuzz.stops import STOP_SIGNALS

    for s in STOP_SIGNALS:
        if callable(signal.getsignal(s)):  # the campaign's handler (install_signal_handlers)
            signal.signal(s, _late_stop)
    _RESTORE_STOPS.append(restore)


def _late_stop(signum: int, frame: Any) -> None:
    """A stop signal after the campaign's end: nothing is left to stop."""


def _restore_stops() -> None:
    while _RESTORE_STOPS:
        _RESTORE_STOPS.pop()()


def _campaign_config(
    args: argparse.Namespace, console: Any, out: Path, repro_dir: Path
) -> tuple[Any, list[str]] | None:
    """The campaign ``python -m fuzz run`` asks for, and the problems of its example database
    (said on the console now); None when ``--targets`` matches nothing (said too)."""
    from rich.markup import escape

    from fuzz.backends import coordinator_probes, get_backend
    from fuzz.campaign.config import CampaignConfig, plugin_specs
    from fuzz.campaign.database import is_server, open_database
    from fuzz.profiles import default_profile, get_profile, gpu_missing_message, with_scale
    from fuzz.target import select

    profile = with_scale(
        get_profile(args.profile) if args.profile else default_profile(), args.scale
    )
    missing = gpu_missing_message(profile, "--profile")
    if missing is not None:  # (its oracles run on the GPU: every pair would be a harness error)
        console.print(f"[red]{escape(missing)}[/red]")
        return None
    targets = select(args.targets, mutants=None if args.mutants else False)
    if not targets:
        console.print(f"[red]--targets={args.targets!r} matches no target[/red] {_hint(args)}")
        return None
    backend_names = _select_backends(args.backends, profile.backends)
    coordinator_probes()  # this process coordinates; its workers use the GPUs
    runnable = _runnable_backends(backend_names, console)
    db = None if args.db == "none" else (args.db or str(out / "examples"))
    check_databases(db, args.db_shared)
    # A server that does not answer: its saves and fetches go to this folder meanwhile.
    fallback = str(out / "examples") if db is not None and is_server(db) else None
    database = open_database(db, args.db_shared, fallback=fallback)  # a bad location: its message
    db_problems = database.check() if database is not None else []
    for problem in db_problems:  # a server that cannot be reached: said now, not only in the report
        console.print(f"[yellow]WARNING {escape(problem)}[/yellow]")
    compiled = any(get_backend(b).compiled for b in runnable)
    plan, gpus = _sizing(args, compiled)
    config = CampaignConfig(
        targets=targets,
        backends=runnable,
        profile=profile,
        budget=args.budget,
        out=out,
        repro_dir=repro_dir,
        db=db,
        db_shared=list(args.db_shared),
        db_fallback=fallback,
        seed=args.seed if args.seed is not None else random.randrange(2**31),
        workers=plan.workers,
        compile_workers=plan.compile_workers,
        devices=gpus or [None],
        cluster=args.cluster,
        host=plan,
        example_timeout=args.example_timeout or (120.0 if profile.needs_gpu else 600.0),
        compile_timeout=args.compile_timeout,
        floor_examples=_or(args.floor_examples, 200),
        floor_seconds=_or(args.floor_seconds, 30.0),
        real_floor_seconds=_or(args.real_floor_seconds, 60.0),
        scale_floors=(args.floor_examples, args.floor_seconds, args.real_floor_seconds)
        == (None, None, None),
        slice_seconds=args.slice,
        examples=args.examples,
        argv=sys.argv[1:],
        plugins=plugin_specs(targets),
        triage=not args.no_triage,
    )
    return config, db_problems


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _sizing(args: argparse.Namespace, compiled: bool) -> tuple[Any, list[str]]:
    """How many workers the campaign runs, and the visible GPUs they are spread over: sized
    from this host's GPUs, their memory and its cores (``fuzz.campaign.hosts``), or from each
    node of a Ray cluster (``--cluster``: ``fuzz.campaign.cluster_plan``)."""
    from fuzz.campaign.config import visible_gpus
    from fuzz.campaign.hosts import cpu_cores, gpu_inventory, plan_host, sharing_gpus

    if args.cluster is not None:
        from fuzz.campaign import cluster, cluster_plan

        if args.workers is not None or args.compile_workers is not None:
            raise ValueError(
                "--workers and --compile-workers size one host; with --cluster each node is "
                "sized from its own GPUs and cores: leave them out"
            )
        cluster.connect(args.cluster)
        return cluster_plan.plan_cluster(cluster.live_nodes(), compiled=compiled), []
    gpus = visible_gpus() if compiled else []
    host_gpus, memory = gpu_inventory() if gpus else (0, None)
    cores = cpu_cores()
    plan = plan_host(
        gpus=len(gpus),
        cores=cores,
        host_gpus=sharing_gpus(len(gpus), host_gpus, cores, os.cpu_count()),
        gpu_memory_gib=memory,
        compiled=compiled,
        workers=args.workers,
        compile_workers=args.compile_workers,
    )
    return plan, gpus


def _hint(args: argparse.Namespace) -> str:
    """What to do about ``--targets`` that matched no target: add ``--mutants`` where it
    matches mutants only, else look at the list."""
    from fuzz.target import select

    if not args.mutants and select(args.targets, mutants=True):
        return "but mutants (they run with --mutants: add --mutants)"
    return "(see python -m fuzz list)"


def _runnable_backends(names: Sequence[str], console: Any) -> list[str]:
    """The backends of ``names`` available here; the others are said to be skipped, and why."""
    from fuzz.backends import get_backend

    runnable = []
    skipped = []
    for name in names:
        reason = get_backend(name).unavailable_reason()
        if reason is not None:
            skipped.append(f"{name}: {reason}")
        else:
            runnable.append(name)
    for s in sorted(set(skipped)):
        console.print(f"[yellow]skipping backend {s}[/yellow]")
    return runnable


def _live_display(console: object) -> tuple[Any, Callable[[str], None], Any]:
    """(rich Live or None, log function, progress callback): a live table on a terminal, plain
    timestamped lines otherwise."""
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    assert isinstance(console, Console)
    t0 = time.perf_counter()

    def stamp() -> str:
        return f"[{time.perf_counter() - t0:7.1f}s]"

    if not console.is_terminal:

        def plain(line: str) -> None:
            print(f"{stamp()} {line}", file=sys.stderr, flush=True)

        return None, plain, None
    live = Live(console=console, refresh_per_second=4, transient=False)
    last = [0.0]

    def table(c: object) -> Table:
        from fuzz.campaign.runner import Campaign

        assert isinstance(c, Campaign)
        left = max(0.0, c.remaining()) if c.fuzz_started is not None else c.config.budget
        t = Table(
            title=f"campaign: {left:.0f}s left, {len(c.workers)} worker(s), {c.restarts} restart(s)"
        )
        for col in ("target", "backend", "examples", "ex/s", "compile s", "bugs", "state"):
            t.add_column(col)
        for p in c.pairs:
            rate = p.total_examples / p.fuzz_seconds if p.fuzz_seconds > 0 else 0.0
            state = p.retired or ("running" if p.running else "")
            t.add_row(
                p.target.name,
                p.backend,
                str(p.total_examples),
                f"{rate:.1f}",
                f"{p.compile_seconds:.0f}",
                f"{len(p.found)} ({', '.join(sorted(p.classes))})" if p.found else "-",
                state,
            )
        return t

    def progress(c: object) -> None:
        now = time.perf_counter()
        if now - last[0] > 0.25:
            last[0] = now
            live.update(table(c))

    def log(line: str) -> None:
        live.console.print(f"{stamp()} {line}", markup=False, highlight=False)

    return live, log, progress


def _print_summary(console: object, report: dict, out: Path) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    assert isinstance(console, Console)
    from fuzz.campaign.report import also_seen_text, cell_text, matrix, smallest_reproducer

    backends, cells = matrix(report["results"])
    grid = Table(title="target x backend: status, examples, fuzzing + compile seconds, bugs")
    grid.add_column("target")
    for b in backends:
        grid.add_column(b)
    for target, row in cells:
        grid.add_row(target, *(cell_text(row.get(b)) for b in backends))
    if cells:
        console.print(grid)
    table = Table(title="findings")
    for col in (
        "triage",
        "target",
        "backends",
        "class",
        "where",
        "error / tol",
        "case",
        "reproducer",
    ):
        table.add_column(col)
    for f in report["findings"]:
        err = (
            f"{f['error']:.3g} / {f['tolerance']:.3g}"
            if isinstance(f.get("error"), (int, float))
            and isinstance(f.get("tolerance"), (int, float))
            else ""
        )
        mark = ""
        if f.get("mutant"):
            mark = " (expected)" if f["class"] == f.get("expected_class") else " (mutant)"
        size, repro = smallest_reproducer(f)  # the bug's smallest example, whichever way seen
        seen = also_seen_text(f)
        table.add_row(
            f["triage"],
            f["target"],
            ", ".join(f["backends"]),
            f["class"] + mark + (f"; {seen}" if seen else ""),
            f.get("where", ""),
            err,
            str(size if size is not None else "")
            + (
                f" ({'not shrunk' if f.get('maybe_why') is None else f['maybe_why']}; "
                f"maybe {f['maybe_of']})"
                if f.get("maybe_of")
                else ""
            ),
            os.path.relpath(repro) if repro else "",
        )
    if report["findings"]:
        console.print(table)
    s = report["summary"]
    real_fail = s["real_failed"]
    problems = report["database"]["problems"]
    console.print(
        f"{s['examples']} examples; {s['new']} new, {s['still_failing']} still failing, {s['fixed']} fixed"
        + (
            f" ({s['maybe_known']} of them not shrunk or not reproduced alone, maybe a bug found before)"
            if s.get("maybe_known")
            else ""
        )
        + "; "
        + (
            f"[red]failing real targets: {', '.join(real_fail)}[/red]"
            if real_fail
            else "[green]no real target failed[/green]"
        )
        + (
            f"; mutants found with the expected class: {s['mutants_found']}/{s['mutants_total']}"
            if s["mutants_total"]
            else ""
        )
        + (
            f"\n[yellow]interrupted ({report['interrupted']})[/yellow]"
            if report.get("interrupted")
            else ""
        )
        + _coverage_text(s, report)
        + "".join(f"\n[red]harness error: {escape(e)}[/red]" for e in s["harness_errors"])
        + (
            f"\n[yellow]{len(problems)} example database warning(s), the first: "
            f"{escape(problems[0])}[/yellow]"
            if problems
            else ""
        )
        + f"\nreport: {out / 'report.md'}, {out / 'index.html'}, {out / 'report.json'}, {out / 'report.xml'}"
    )


def _coverage_text(summary: dict[str, Any], report: dict[str, Any]) -> str:
    """The summary's word on pairs the budget left unrun or short of their floor (they read as
    no failure, and were not fuzzed enough to say so)."""
    unrun, short = summary.get("unrun", []), summary.get("short_of_floor", [])
    floors = report.get("floors") or {}
    out = ""
    if unrun:
        out += (
            f"\n[yellow]{len(unrun)} pair(s) not run at all (the budget ran out first): "
            f"{', '.join(unrun[:6])}{', ...' if len(unrun) > 6 else ''}[/yellow]"
        )
    if short:
        out += (
            f"\n[yellow]{len(short)} pair(s) short of their floor ({floors.get('examples')} "
            f"examples or {floors.get('seconds')} s of fuzzing): their 'pass' says little"
            "[/yellow]"
        )
    if (unrun or short) and floors.get("need_seconds"):
        out += (
            f"\n[yellow]every pair to its full floor needs about {floors['need_seconds']:,} s "
            f"of fuzzing (--budget {round(floors['need_seconds'] / 0.8)})[/yellow]"
        )
    return out


def _reproducer_files(paths: Sequence[str]) -> list[Path]:
    """The files to replay: each file named, and the ``*.py`` files under each folder named (a
    folder whose name ends in ``.py`` is a folder); a path that does not exist is a usage error."""
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = (q for q in path.rglob("*.py") if q.is_file() and not q.name.startswith("."))
            files.extend(sorted(found))
        elif path.is_file():
            files.append(path)
        else:
            raise ValueError(f"{p!r} is neither a file nor a folder")
    return files


def replay_status(codes: Sequence[int]) -> int:
    """The exit status of replaying files with exit statuses ``codes``: 1 while any still fails,
    else 2 if any could not be replayed (or was interrupted), else 0."""
    if EXIT_FAIL in codes:
        return EXIT_FAIL
    return EXIT_ERROR if any(c != EXIT_OK for c in codes) else EXIT_OK


@contextlib.contextmanager
def _stops_interrupt() -> Any:
    """SIGTERM and SIGHUP (timeout, a CI runner, a closed terminal) end a replay as Ctrl-C does:
    child processes are stopped and the verdicts so far are kept."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    for s, h in saved.items():
        if h is not signal.SIG_IGN:
            signal.signal(s, stop)
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _capture() -> Any:
    """Echoes stdout and keeps a copy of it (the replay verdicts)."""
    import io

    copy = io.StringIO()
    real = sys.stdout

    class _Tee:
        def write(self, text: str) -> int:
            copy.write(text)
            return real.write(text)

        def flush(self) -> None:
            real.flush()

    sys.stdout = _Tee()  # type: ignore[assignment]
    try:
        yield copy
    finally:
        sys.stdout = real


def _replay_in_parallel(args: argparse.Namespace, files: list[Path]) -> int:
    """Splits ``files`` round-robin over ``args.jobs`` child replays; prints each child's verdicts
    as soon as it ends (a time limit that stops the replay keeps those); returns the summary exit
    status. A stop (Ctrl-C, SIGTERM) stops the children and prints what they said so far."""
    import subprocess
    import tempfile

    jobs = min(args.jobs, len(files))
    base = [sys.executable, "-m", "fuzz", "replay", "--no-summary"]
    for spec in args.plugin:
        base += ["--plugin", spec]
    if args.backend:
        base += ["--backend", args.backend]
    codes: list[int] = []
    with tempfile.TemporaryDirectory(prefix="fuzz-replay-") as tmp:
        logs = [open(Path(tmp) / f"{i}.log", "w+") for i in range(jobs)]
        procs = [
            subprocess.Popen(
                [*base, *map(str, files[i::jobs])],
                stdout=logs[i],
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i in range(jobs)
        ]
        pending = set(range(jobs))

        def show(i: int) -> None:
            logs[i].seek(0)
            sys.stdout.write(logs[i].read())
            sys.stdout.flush()
            pending.discard(i)

        try:
            while pending:
                for i in sorted(i for i in pending if procs[i].poll() is not None):
                    show(i)
                    code = procs[i].returncode
                    codes.append(code if code >= 0 else EXIT_ERROR)
                if pending:
                    time.sleep(0.1)
        except KeyboardInterrupt:
            for proc in procs:  # each stops its own child replay on SIGTERM
                if proc.poll() is None:
                    proc.terminate()
            for i in sorted(pending):
                try:
                    procs[i].wait(10)
                except subprocess.TimeoutExpired:
                    pass
                show(i)
            print("replay: interrupted")
            return replay_status([*codes, EXIT_ERROR])
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            for log in logs:
                log.close()
    status = replay_status(codes)
    print(f"replayed {len(files)} file(s) in {jobs} processes: exit status {status}")
    return status


def _replay_one(path: Path, backend: str | None, isolate: bool, plugins: Sequence[str]) -> int:
    """Replays one file and prints its verdict; any error is this file's "cannot replay".
    ``plugins``: those given with ``--plugin`` (loaded), which take the place of the plugin a
    reproducer recorded where they register its target."""
    from fuzz.reproducer import load, report_replay

    try:
        meta, data = load(path)
        return report_replay(
            meta, data, backend=backend, path=path, isolate=isolate, plugins=plugins
        )
    except Exception as e:
        print(f"{path}: cannot replay: {type(e).__name__}: {e}")
        return EXIT_ERROR


def _show(files: Sequence[Path]) -> int:
    """``replay --show``: each file's inputs and parameters (``fuzz.standalone.show``), nothing
    run; exit status 2 if any file could not be shown, else 0."""
    from fuzz.reproducer import load
    from fuzz.standalone import show

    codes = []
    for f in files:
        print(f"== {f}", flush=True)
        try:
            meta, data = load(f)
        except Exception as e:
            print(f"{f}: cannot show: {type(e).__name__}: {e}")
            codes.append(EXIT_ERROR)
            continue
        codes.append(show(meta, data))
    return EXIT_ERROR if any(codes) else EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    from fuzz.reproducer import sticky_cuda_error

    _load_plugins(args.plugin)
    files = _reproducer_files(args.paths)
    if not files:
        print("python -m fuzz replay: error: no reproducer files found", file=sys.stderr)
        return EXIT_ERROR
    if args.show:
        return _show(files)
    with _stops_interrupt():
        if args.jobs > 1 and len(files) > 1:
            return _replay_in_parallel(args, files)
        codes: list[int] = []
        context_lost = False
        try:
            for f in files:
                print(f"== {f}", flush=True)
                with _capture() as out:
                    codes.append(_replay_one(f, args.backend, context_lost, args.plugin))
                # A replay that lost this process's CUDA context (an illegal address it was not
                # recorded for): every later one replays in a child process, or all would "crash".
                context_lost = context_lost or sticky_cuda_error(out.getvalue())
        except KeyboardInterrupt:
            print("replay: interrupted")
            codes.append(EXIT_ERROR)
        if not args.no_summary:
            n = Counter(codes)
            print(
                f"replayed {len(codes)} of {len(files)} file(s): {n[EXIT_FAIL]} still fail, "
                f"{n[EXIT_OK]} pass, {len(codes) - n[EXIT_FAIL] - n[EXIT_OK]} without a verdict "
                "(not replayable here, or interrupted)"
            )
        return replay_status(codes)


def cmd_merge(args: argparse.Namespace) -> int:
    """``python -m fuzz merge DIR... --out DIR`` (``fuzz.campaign.merge``); exit status as a
    campaign's: 1 a real target fails, 2 a host's campaign is incomplete (or a usage error)."""
    from rich.console import Console

    from fuzz.campaign.merge import merge, read_sources, warnings
    from fuzz.campaign.outdir import lock_output

    if not args.out.strip():
        raise ValueError("--out='' is empty; it must name the merged report's folder")
    out = Path(args.out)
    check_output_folder("--out", out)
    read_sources(
        args.folders, out
    )  # a folder without a campaign report: before anything is written
    lock = lock_output(out, argv=sys.argv[1:])  # not while a campaign or a merge writes there
    try:
        data = merge(args.folders, out, argv=sys.argv[1:])
    finally:
        lock.close()
    console = Console(stderr=True, width=160)
    for line in warnings(data):  # a host still running (or killed): merged as it stood
        console.print(f"WARNING {line}", markup=False)
    hosts = data["merged"]["hosts"]
    console.print(
        f"merged {len(hosts)} campaign(s) ({', '.join(h['host'] for h in hosts)}) -> {out}"
    )
    _print_summary(console, data, out)
    if data["summary"]["real_failed"]:
        return EXIT_FAIL
    return EXIT_OK if data["complete"] else EXIT_ERROR


def cmd_mutants(args: argparse.Namespace) -> int:
    from fuzz.profiles import default_profile, get_profile, gpu_missing_message, with_scale
    from fuzz.scoreboard import print_scoreboard, run_scoreboard, write_scoreboard
    from fuzz.target import select

    _load_plugins(args.plugin)
    profile = with_scale(
        get_profile(args.profile) if args.profile else default_profile(), args.scale
    )
    missing = gpu_missing_message(profile, "--profile")
    if missing is not None:
        print(missing, file=sys.stderr)
        return EXIT_ERROR
    mutants = select(args.targets, mutants=True)
    if not mutants:
        print(
            f"--targets={args.targets!r} matches no mutant (see python -m fuzz list)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    backends = _select_backends(args.backends, profile.backends)
    out = Path(args.out) if args.out else None
    if out is not None:
        check_output_folder("--out", out)  # before the first row, not when it is saved
    import signal

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # ends like Ctrl-C: the rows so far are kept and printed

    def save(so_far: dict[str, Any]) -> None:
        assert out is not None
        try:
            write_scoreboard(out, so_far)
        except OSError as e:  # a full disk mid-run: keep measuring, say so
            print(f"WARNING: cannot save the scoreboard to {out}: {e}", file=sys.stderr)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        board = run_scoreboard(
            mutants,
            backends,
            profile,
            budget=args.budget,
            shrink_limit=args.shrink_limit,
            baseline_limit=args.baseline_limit,
            seed=args.seed,
            log=lambda line: print(line, file=sys.stderr, flush=True),
            # Written after every row too: a run killed outright (a hung compile) keeps its rows.
            on_row=None if out is None else save,
            repro_dir=None if out is None else out / "reproducers",
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    print_scoreboard(board)
    if out is not None:
        save(board)
    return EXIT_ERROR if board["interrupted"] else EXIT_OK


def check_databases(db: str | None, shared: Sequence[str]) -> None:
    """A usage error unless ``db`` (a folder database: ``--db``) can be written and every shared
    folder database (``--db-shared``) exists and can be read: a campaign would otherwise save or
    replay nothing, silently. Servers are checked when opened (a warning: they may come back)."""
    from fuzz.campaign.database import is_server

    if db is not None and not is_server(db):
        check_output_folder("--db", Path(db))
    for location in shared:
        if is_server(location):
            continue
        path = Path(location)
        if not path.exists():
            raise ValueError(
                f"--db-shared={location!r} does not exist: a shared database folder is read "
                "(never written), so it must exist; give the team's folder or a redis:// URL"
            )
        if not path.is_dir():
            raise ValueError(f"--db-shared={location!r} is a file; it must name a folder")
        if not os.access(path, os.R_OK | os.X_OK):
            raise ValueError(f"--db-shared={location!r} is not readable")


def check_output_folder(option: str, folder: Path) -> None:
    """A usage error unless ``folder`` is a writable folder or can be created as one (nothing is
    created here: a usage error leaves no trace)."""
    if folder.exists():
        if not folder.is_dir():
            raise ValueError(f"{option}={str(folder)!r} is a file; it must name a folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"{option}={str(folder)!r} is not writable")
        return
    parent = folder.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{option}={str(folder)!r} cannot be created: {parent} is a file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{option}={str(folder)!r} cannot be created: {parent} is not writable")


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status: 0 clean, 1 a real target fails (or a reproducer still fails), 2 a usage
    error, an interruption or an error of the harness itself -- never 1 for those.

    ``argv`` given: a caller runs the command inside its own process (a batch of command lines,
    a test), and gets back the stop signals' handlers a campaign left ignoring once it ended;
    ``python -m fuzz`` (no ``argv``) keeps ignoring them until it exits, so that a stop after
    the final report does not change its exit status."""
    try:
        return _main(argv)
    finally:
        if argv is not None:
            _restore_stops()


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    commands = {
        "list": cmd_list,
        "run": cmd_run,
        "replay": cmd_replay,
        "mutants": cmd_mutants,
        "merge": cmd_merge,
    }
    prog = f"python -m fuzz {args.command}"
    try:
        return commands[args.command](args)
    except ValueError as e:  # bad input named by the code that checked it
        print(f"{prog}: error: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
    except SystemExit as e:  # sys.exit("message") from a plugin or a library: not a status
        if e.code is None or isinstance(e.code, int):
            raise
        print(f"{prog}: error: {e.code}", file=sys.stderr)
    except OSError as e:
        import errno

        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            import traceback

            traceback.print_exc()
            print(f"{prog}: harness error: {type(e).__name__}: {e}", file=sys.stderr)
        else:  # a full disk is no bug of the harness: one line
            where = f" ({e.filename})" if e.filename else ""
            print(f"{prog}: error: no space left on device{where}", file=sys.stderr)
    except Exception as e:  # a bug of the harness: its traceback, then one line
        import traceback

        traceback.print_exc()
        print(f"{prog}: harness error: {type(e).__name__}: {e}", file=sys.stderr)
    return EXIT_ERROR
