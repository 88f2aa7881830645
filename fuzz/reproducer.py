"""Reproducer scripts: one standalone Python file per failure.

The file embeds the shrunk inputs (``.npz``, zlib-compressed, base64; no pickle), the target,
backend, profile parameters, the property parameters that were drawn, the tolerance, versions and
device. Running it replays the case with every property and prints the class, the error and where
it is; it exits 1 while a failure reproduces and 0 once it does not. ``--backend NAME`` replays on
another backend (a bug seen on the GPU, replayed in the interpreter). Beside it, ``NAME.md`` holds
its issue text (``fuzz.issue``): the failure described for a kernel's maintainer, who need not run
anything; :func:`remove` takes both away.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fuzz.arrays import dtype_name, np_dtype
from fuzz.case import Case
from fuzz.failures import STICKY_NAMES
from fuzz.files import atomic_write_text

if TYPE_CHECKING:
    from fuzz.failures import Finding
    from fuzz.target import Target

FORMAT = 1
Q3, S3 = '"' * 3, "'" * 3


def encode_arrays(arrays: dict[str, np.ndarray]) -> tuple[str, dict[str, str]]:
    """Arrays -> (base64 text of a compressed .npz, dtype names). bfloat16 travels as uint16."""
    dtypes = {}
    plain = {}
    for name, a in arrays.items():
        dtypes[name] = dtype_name(a.dtype)
        plain[name] = a.view(np.uint16) if dtypes[name] == "bfloat16" else a
    buf = io.BytesIO()
    np.savez_compressed(buf, **plain)  # type: ignore[arg-type]
    return base64.b64encode(buf.getvalue()).decode("ascii"), dtypes


def decode_arrays(data: str, dtypes: dict[str, str]) -> dict[str, np.ndarray]:
    raw = base64.b64decode("".join(data.split()))
    with np.load(io.BytesIO(raw), allow_pickle=False) as z:
        out = {}
        for name, dt in dtypes.items():
            a = z[name]
            out[name] = (
                a.view(np_dtype(dt)) if dt == "bfloat16" else a.astype(np_dtype(dt), copy=False)
            )
        return out


def versions() -> dict[str, str]:
    import platform

    out = {"python": platform.python_version()}
    for mod in ("numpy", "torch", "triton", "jax", "jaxlib", "hypothesis"):
        m = sys.modules.get(mod)
        if m is None:
            try:
                m = __import__(mod)
            except Exception:
                continue
        out[mod] = str(getattr(m, "__version__", "?"))
    return out


def signature(target: str, finding: Finding) -> str:
    """Deduplication key of a finding: the one a hunt gave it (``fuzz.signatures``: the bug's key
    and triggers), else its key alone (a finding made outside a hunt)."""
    sig = finding.details.get("signature")
    if sig:
        return str(sig)
    from fuzz import signatures

    key = signatures.bug_key(finding)
    return signatures.signature(target, key, finding.details.get("triggers", ()))


_TEMPLATE = '''\
#!/usr/bin/env python3
"""Reproducer: {target} on {backend} -> {cls}

{message}

target:    {target}{mutant}
backend:   {backend} (replay elsewhere with --backend NAME)
property:  {prop}
case:      {case}
tolerance: {tolerance}
hazards:   {hazards}
{origin}found:     {found} on {device}
versions:  {versions}

Run it: python {filename} [--backend NAME] [--plugin PATH] [--quiet] [--show]{isolate_note}
Exit status 1 while the failure reproduces, 0 once it does not, 2 when it cannot replay here.
--show prints the inputs (NumPy alone; no harness needed); {issue} beside it describes the
failure for a kernel's maintainer.
"""

REPRO = {meta!r}

DATA = """
{data}
"""

{standalone}

if __name__ == "__main__":
    import sys
    from pathlib import Path

    if "--show" in sys.argv[1:]:
        sys.exit(show(REPRO, DATA))
    try:
        import fuzz.reproducer
    except ImportError:
        for parent in Path(__file__).resolve().parents:
            if (parent / "fuzz" / "reproducer.py").is_file():
                sys.path.insert(0, str(parent))
                break
    try:
        import fuzz.reproducer
    except ImportError as e:
        sys.exit(harness_missing(Path(__file__).name, e))
    sys.exit(fuzz.reproducer.main(REPRO, DATA, sys.argv[1:]))
'''


def write(
    directory: str | os.PathLike[str],
    *,
    target: Target,
    backend: str,
    case: Case,
    params: dict[str, Any],
    finding: Finding,
    ref_device: str,
    differential: bool,
    differential_max_cost: float = float("inf"),
    isolate: bool = False,
    timeout: float | None = None,
) -> Path:
    """Writes the reproducer of ``finding`` into ``directory`` (atomically) and returns its path.

    ``isolate``: the failure killed or hung the process that ran it (a segfault, a lost CUDA
    context, a hang): the script then replays in a child process (``timeout`` seconds at most)
    and reports how the child ended, so that replaying never takes the replayer down.
    """
    data, dtypes = encode_arrays(dict(case.inputs))
    meta = _meta(
        target=target,
        backend=backend,
        case=case,
        params=params,
        finding=finding,
        dtypes=dtypes,
        ref_device=ref_device,
        differential=differential,
        differential_max_cost=differential_max_cost,
        isolate=isolate,
        timeout=timeout,
    )
    name = f"{target.name}__{backend}__{finding.cls}__{meta['signature']}.py"
    path = Path(directory) / re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    issue = issue_path(path)
    text = _script(
        meta, target, case, finding, data, isolate=isolate, filename=path.name, issue=issue.name
    )
    # The issue text first: a disk that fills between the two leaves no script without it, and
    # a script that cannot be written takes its issue text with it.
    atomic_write_text(issue, _issue_text(meta, target, case, finding, path.name))
    try:
        atomic_write_text(path, text, executable=True)
    except BaseException:
        issue.unlink(missing_ok=True)
        raise
    return path


def issue_path(path: str | os.PathLike[str]) -> Path:
    """The issue text written beside the reproducer at ``path`` (``NAME.md`` beside ``NAME.py``):
    the failure described for a kernel's maintainer, who need not run anything
    (``fuzz.issue``)."""
    return Path(path).with_suffix(".md")


def companions(path: str | os.PathLike[str]) -> list[Path]:
    """The files written with the reproducer at ``path`` that exist (its issue text): what goes
    where the script goes (copied with it, removed with it)."""
    return [p for p in (issue_path(path),) if p.is_file()]


def remove(path: str | os.PathLike[str]) -> None:
    """Removes the reproducer at ``path`` and its companions (its issue text); what is not there
    is skipped."""
    Path(path).unlink(missing_ok=True)
    issue_path(path).unlink(missing_ok=True)


def _issue_text(
    meta: dict[str, Any], target: Target, case: Case, finding: Finding, script: str
) -> str:
    """The issue text of a reproducer (``fuzz.issue``). Never the reason a reproducer is lost:
    where it cannot be made, it says why and points at the script."""
    from fuzz import issue

    try:
        return issue.text(meta, target, case, finding, script=script)
    except Exception as e:
        return (
            f"# {target.name} on {meta['backend']}: {finding.cls} ({finding.prop})\n\n"
            f"> {finding.message}\n\n"
            f"(the issue text could not be written: {type(e).__name__}: {e}; "
            f"`python {script} --show` prints the inputs, `python {script}` replays it)\n"
        )


def _meta(
    *,
    target: Target,
    backend: str,
    case: Case,
    params: dict[str, Any],
    finding: Finding,
    dtypes: dict[str, str],
    ref_device: str,
    differential: bool,
    differential_max_cost: float,
    isolate: bool,
    timeout: float | None,
) -> dict[str, Any]:
    """The reproducer's ``REPRO``: what a replay reads (see :func:`load`), and what the finding
    was, where and with what."""
    from fuzz.backends import device_name
    from fuzz.target import target_plugin

    return {
        "format": FORMAT,
        "target": target.name,
        "plugin": target_plugin(target),
        "backend": backend,
        "mutant_of": target.mutant_of,
        "expected_class": target.expected_class,
        "class": finding.cls,
        "property": finding.prop,
        "message": finding.message,
        "where": finding.where,
        "error": finding.error,
        "tolerance": finding.tolerance,
        "signature": signature(target.name, finding),
        "params": case.params_json(),
        "recipe": json.loads(json.dumps(dict(case.recipe), default=str)),
        "property_params": json.dumps(params),
        "dtypes": dtypes,
        "ref_device": ref_device,
        "differential": differential,
        "differential_max_cost": differential_max_cost,
        "tolerance_rule": {o: target.tolerance_for(o).as_dict() for o in _outputs(finding, target)},
        "hazards": finding.hazards,
        "origin": finding.details.get("origin"),
        "process": finding.details.get("process"),
        "isolate": isolate or kills_context(finding),
        "timeout": timeout,
        "versions": versions(),
        "device": device_name(),
        "found": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _script(
    meta: dict[str, Any],
    target: Target,
    case: Case,
    finding: Finding,
    data: str,
    *,
    isolate: bool,
    filename: str,
    issue: str,
) -> str:
    """The reproducer script: its docstring for the reader, ``REPRO`` (``meta``), ``DATA``, and
    what it does without the harness (``fuzz.standalone``: ``--show``, a missing harness)."""
    return _TEMPLATE.format(
        target=target.name,
        backend=meta["backend"],
        cls=finding.cls,
        message=textwrap.fill(finding.message, 96),
        mutant=f" (mutant of {target.mutant_of}, expected class {target.expected_class})"
        if target.is_mutant
        else "",
        prop=finding.prop,
        case=repr(case)[:400],
        tolerance="; ".join(
            f"{o}: {target.tolerance_for(o).describe()}" for o in _outputs(finding, target)
        ),
        hazards="; ".join(finding.hazards) or "none declared hold",
        origin="".join(f"{line}\n" for line in _origin_lines(finding.details.get("origin"))),
        isolate_note="\n(it replays in a child process: the failure kills or hangs the process "
        "running it;\n--in-process runs it here)"
        if isolate
        else "",
        found=meta["found"],
        device=meta["device"],
        versions=", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
        filename=filename,
        issue=issue,
        meta=_literal_safe(meta),
        data=_lines(data, 100),
        standalone=_standalone_code(),
    )


def _lines(text: str, width: int) -> str:
    """``text`` (base64: no spaces) cut into lines of ``width`` characters. Not ``textwrap``: it
    takes time quadratic in the length of one long word (34 s for 4 MB of data, enough to kill a
    slice that writes the reproducer of a large case)."""
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _standalone_code() -> str:
    """The code of ``fuzz.standalone`` as a reproducer carries it (without its docstring)."""
    import ast
    import inspect

    from fuzz import standalone

    source = inspect.getsource(standalone)
    first = ast.parse(source).body[1].lineno  # the statement after the module docstring
    body = "".join(source.splitlines(keepends=True)[first - 1 :]).strip()
    return f"# What this script does without the harness (fuzz/standalone.py).\n\n{body}\n"


def _origin_lines(origin: dict[str, Any] | None) -> list[str]:
    from fuzz.origin import describe

    return [line.replace(Q3, S3) for line in describe(origin)]


def _literal_safe(value: Any) -> Any:
    """``value`` with non-finite floats as strings, so that ``repr`` is a Python literal."""
    if isinstance(value, float) and not np.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _literal_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_literal_safe(v) for v in value]
    return value


def _outputs(finding: Finding, target: Target) -> list[str]:
    if finding.output is not None:
        return [finding.output]
    from fuzz.compare import Tolerance

    return ["*"] if isinstance(target.tolerance, Tolerance) else list(target.tolerance)


# Replaying ------------------------------------------------------------------------------------------


def load(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """Reads ``REPRO`` and ``DATA`` from a reproducer file without running it."""
    import ast

    tree = ast.parse(Path(path).read_text(), filename=str(path))
    found: dict[str, Any] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            if node.targets[0].id in ("REPRO", "DATA"):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    if "REPRO" not in found or "DATA" not in found:
        raise ValueError(f"{path} is not a reproducer (no REPRO/DATA)")
    meta, data = found["REPRO"], found["DATA"]
    if not isinstance(meta, dict) or not isinstance(data, str):
        raise ValueError(f"{path} is not a reproducer (REPRO is not a dict or DATA not a string)")
    bad = [
        f"{k!r} (a {kind.__name__})"
        for k, kind in _FIELDS.items()
        if not isinstance(meta.get(k), kind)
    ]
    if bad:
        raise ValueError(f"{path}: its REPRO lacks {', '.join(bad)}: not a reproducer of this tool")
    return meta, data


# The fields of REPRO a replay reads, and their types.
_FIELDS: dict[str, type] = {
    "format": int,
    "target": str,
    "backend": str,
    "class": str,
    "property": str,
    "message": str,
    "params": dict,
    "dtypes": dict,
}


# A race shows on some runs only: a reproducer of a nondeterminism finding replays up to this many
# times before it calls the bug fixed (each replay runs the kernel at least twice).
RACE_ATTEMPTS = 8


# Extra runs of the determinism property in a replay of a race (fuzz.properties._determinism).
RACE_REPEATS = 8


# Exception texts after which a CUDA context is unusable (sticky errors): each one's words, and
# any driver error of an illegal kind.
STICKY_CUDA_ERRORS = (*(w for _, words in STICKY_NAMES for w in words), "CUDA_ERROR_ILLEGAL")


def _mentions(text: str, phrases: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(s.lower() in low for s in phrases)


def _crash_text(finding: Finding) -> str | None:
    """The exception's words of a ``crash`` finding (None for a finding of another class)."""
    if finding.cls != "crash":
        return None
    return f"{finding.message} {finding.details.get('text', '')}"


def sticky_cuda_error(text: str) -> bool:
    """Whether ``text`` (an exception's, a replay's output) names a sticky CUDA error."""
    return _mentions(text, STICKY_CUDA_ERRORS)


# The device's memory ran out (PyTorch's caching allocator, a JAX/XLA buffer or launch, Triton's
# launcher, the driver): in a campaign of a dozen processes on one GPU, the harness's doing.
DEVICE_MEMORY_ERRORS = (
    "CUDA out of memory",
    "CUDA error: out of memory",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "Triton Error [CUDA]: out of memory",
    "OutOfMemoryError",
    "RESOURCE_EXHAUSTED: Out of memory",
    "cudaErrorMemoryAllocation",
)


def device_out_of_memory(text: str) -> bool:
    """Whether ``text`` (an exception's) says the GPU's memory ran out: not a shared-memory
    limit of a kernel's tiles (Triton's ``OutOfResources``), which is the kernel's."""
    return _mentions(text, DEVICE_MEMORY_ERRORS)


def out_of_device_memory(finding: Finding) -> bool:
    """A crash whose exception says the GPU's memory ran out: the harness's resources, not a
    finding (a campaign restarts the worker; ``fuzz.engine``)."""
    text = _crash_text(finding)
    return text is not None and device_out_of_memory(text)


def kills_context(finding: Finding) -> bool:
    """A crash whose exception is a sticky CUDA error (an illegal address...), or a flaky
    failure one of whose runs was one (``lost_context``): the process that saw it can launch
    nothing more, so its reproducer replays in a child process."""
    text = _crash_text(finding)
    if text is None and isinstance(finding.details.get("lost_context"), str):
        text = finding.details["lost_context"]
    return text is not None and sticky_cuda_error(text)


def replay_attempts(meta: dict[str, Any]) -> int:
    """How many replays it takes to call ``meta``'s failure gone (races: several)."""
    return RACE_ATTEMPTS if meta.get("class") == "nondeterminism" else 1


def replay(
    meta: dict[str, Any],
    data: str,
    *,
    backend: str | None = None,
    attempts: int | None = None,
    path: str | os.PathLike[str] | None = None,
) -> Any:
    """Runs the recorded case again, up to ``attempts`` times (default
    :func:`replay_attempts`) until it fails; returns the :class:`fuzz.properties.Outcome`.
    ``path``: the reproducer's file, where its plugin is looked for once moved
    (:func:`plugin_path`)."""
    attempts = replay_attempts(meta) if attempts is None else max(1, attempts)
    outcome = None
    for _ in range(attempts):
        outcome = _replay_once(meta, data, backend=backend, path=path)
        if outcome.finding is not None:
            break
    return outcome


def _is_file_spec(spec: str) -> bool:
    """Whether plugin ``spec`` names a file (as ``fuzz.target.load_plugin`` tells), not a
    module."""
    return spec.endswith(".py") or os.sep in spec or "/" in spec


def plugin_path(spec: str, script: str | os.PathLike[str] | None = None) -> str:
    """Where the plugin a reproducer recorded (``spec``: the absolute path of its file, or a
    module name) is here: as recorded where that file exists (or ``spec`` is a module); else a
    file of its name beside the reproducer (``script``), else in a folder of ``sys.path``.

    Raises:
        ValueError: none of them holds it; the message names the places and ``--plugin``.
    """
    if not _is_file_spec(spec) or os.path.isfile(spec):
        return spec
    name = os.path.basename(spec)
    places = [Path(script).resolve().parent] if script is not None else []
    places += [Path(p or os.getcwd()) for p in sys.path if isinstance(p, str)]
    for place in places:
        if (place / name).is_file():
            return str(place / name)
    beside = f", nor beside the reproducer ({places[0]})" if script is not None else ""
    raise ValueError(
        f"its plugin {spec!r} is not there{beside}, nor as {name} in a folder of sys.path: "
        "give the plugin's place with --plugin PATH"
    )


def _load_recorded_plugin(meta: dict[str, Any], path: str | os.PathLike[str] | None) -> None:
    """Loads the plugin ``meta`` recorded (:func:`plugin_path`), unless its target is
    registered already (by a plugin given with ``--plugin``, which takes its place)."""
    from fuzz.target import get, load_plugin

    spec = meta.get("plugin")
    if not spec:
        return
    try:
        get(meta["target"])
        return
    except ValueError:
        pass
    load_plugin(plugin_path(spec, path))


def recorded_case(meta: dict[str, Any], data: str) -> Case:
    """The case a reproducer recorded (its ``REPRO`` and ``DATA``, :func:`load`); a ``DATA``
    that does not decode is a ``ValueError`` saying so."""
    try:
        arrays = decode_arrays(data, meta["dtypes"])
    except Exception as e:
        raise ValueError(f"its DATA does not decode: {type(e).__name__}: {e}") from None
    return Case(arrays, meta["params"], meta.get("recipe", {}))


def recorded_params(meta: dict[str, Any]) -> dict[str, Any]:
    """The property parameters a reproducer recorded."""
    return json.loads(meta.get("property_params", "{}"))  # type: ignore[no-any-return]


def _prepare(
    meta: dict[str, Any],
    data: str,
    backend: str | None,
    path: str | os.PathLike[str] | None = None,
) -> tuple[Any, Any, Case]:
    """(target, backend, case) of a reproducer (whose file is ``path``, if known); raises what
    makes it impossible to replay here (another format, a plugin that cannot be found or does
    not import, an unknown target or backend, a backend not available here, data that does not
    decode) before anything runs."""
    from fuzz.backends import get_backend
    from fuzz.target import get

    if meta.get("format") != FORMAT:
        raise ValueError(f"reproducer format {meta.get('format')!r} is not {FORMAT}")
    _load_recorded_plugin(meta, path)
    target = get(meta["target"])
    b = get_backend(backend or meta["backend"])
    reason = b.unavailable_reason()
    if reason:
        raise RuntimeError(f"backend {b.name} is not available here: {reason}")
    if b.impl not in target.kernels:
        raise ValueError(f"target {target.name} has no {b.impl} kernel for backend {b.name}")
    case = recorded_case(meta, data)
    from fuzz.families import contract_problems

    problems = contract_problems(target, case)
    if problems:
        raise ValueError(
            f"its case is outside what target {target.name} is fuzzed with (edited by hand?): "
            + "; ".join(problems)
        )
    return target, b, case


def _replay_once(
    meta: dict[str, Any],
    data: str,
    *,
    backend: str | None = None,
    path: str | os.PathLike[str] | None = None,
) -> Any:
    from fuzz.properties import check_case

    target, b, case = _prepare(meta, data, backend, path)
    ref_device = meta.get("ref_device", "cpu")
    if ref_device != "cpu":
        from fuzz.backends import cuda_reason

        if cuda_reason() is not None:
            ref_device = "cpu"
    if os.environ.get("KERNEL_FUZZ_REPLAY_MARKER"):
        print(_MARKER, flush=True)  # replay_isolated times the replay from here
    return check_case(
        target,
        b,
        case,
        params=recorded_params(meta),
        ref_device=ref_device,
        differential=bool(meta.get("differential")) and backend in (None, meta["backend"]),
        differential_max_cost=float(meta.get("differential_max_cost", "inf")),
        race_repeats=RACE_REPEATS if meta.get("class") == "nondeterminism" else 0,
        prefer=meta.get("class"),
    )


def main(meta: dict[str, Any], data: str, argv: Sequence[str]) -> int:
    """Entry point of a reproducer script."""
    import argparse

    parser = argparse.ArgumentParser(description=f"Replay {meta['target']} ({meta['class']}).")
    parser.add_argument("--backend", help=f"backend to replay on (recorded: {meta['backend']})")
    parser.add_argument("--quiet", action="store_true", help="print one line")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="replay here even if the failure kills or hangs its process",
    )
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE_OR_MODULE",
        help="the plugin that registers the target, where it is now (default: as recorded, "
        "else beside this script or on sys.path)",
    )
    parser.add_argument(
        "--show", action="store_true", help="print the inputs and parameters; run nothing"
    )
    args = parser.parse_args(list(argv))
    if args.show:
        from fuzz.standalone import show

        return show(meta, data)
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0].endswith(".py") else None
    head = f"{meta['target']} on {args.backend or meta['backend']}"
    try:
        load_plugins(args.plugin)
    except Exception as e:
        print(f"{head}: cannot replay: {type(e).__name__}: {e}")
        return 2
    return report_replay(
        meta,
        data,
        backend=args.backend,
        quiet=args.quiet,
        path=script,
        in_process=args.in_process,
        plugins=args.plugin,
    )


def load_plugins(specs: Sequence[str]) -> None:
    """Loads the plugins given on a replay's command line (``--plugin``), before the one its
    reproducer recorded (which they replace where they register its target); a plugin that
    fails to import is a ``ValueError`` naming it."""
    from fuzz.target import load_plugin_checked

    for spec in specs:
        load_plugin_checked(spec)


def _signal_name(code: int) -> str:
    import signal

    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


_MARKER = "-- kernel-fuzz: replay starts"
# Signals that ask a process to stop (timeout, systemd, Ctrl-C, a closed terminal): a replay
# ended by one was interrupted; the kernel did not crash.
_STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
# Seconds a child replay may take to start (Python, torch, JAX, the plugin: imports only).
STARTUP_LIMIT = 300.0
_CHILD = (
    "import sys; from fuzz.reproducer import replay_child; sys.exit(replay_child(sys.argv[1:]))"
)


def replay_child(argv: Sequence[str]) -> int:
    """The child process of :func:`replay_isolated`: ``PATH [--backend NAME] [--plugin SPEC]...``.
    It reads the reproducer's ``REPRO`` and ``DATA`` without running the file and replays them
    here."""
    path, backend, plugins = argv[0], None, []
    for option, value in zip(argv[1::2], argv[2::2], strict=False):
        if option == "--backend":
            backend = value
        elif option == "--plugin":
            plugins.append(value)
    try:
        meta, data = load(path)
        load_plugins(plugins)
    except Exception as e:
        print(f"{path}: cannot replay: {type(e).__name__}: {e}")
        return 2
    return report_replay(
        meta, data, backend=backend, quiet=True, in_process=True, path=path, plugins=plugins
    )


def replay_isolated(
    path: str | os.PathLike[str],
    *,
    backend: str | None = None,
    timeout: float | None = None,
    plugins: Sequence[str] = (),
) -> tuple[int, str]:
    """Replays the reproducer at ``path`` in a child process (which loads ``plugins`` first, as
    this one did); returns (exit status, verdict line).

    The child reads the file's ``REPRO`` and ``DATA`` (it does not run the file) and prints a
    marker when the kernel is about to run. Status 1 (the failure reproduces): the child was
    killed by a signal after the marker, exited after it without a verdict (whatever its status:
    ``os._exit(0)`` in a kernel ends the process too) and without a traceback, or its replay was
    still running ``2 * timeout + 2`` seconds after it. Status 2 (cannot replay, or
    interrupted): anything that ends the child before the marker (a plugin that does not import,
    a backend not available, data that does not decode...), a child that says it cannot replay
    or dies of an uncaught exception of the harness, and a child stopped by SIGTERM, SIGINT or
    SIGHUP (a stop, not a crash).
    """
    import subprocess
    import threading

    cmd = [sys.executable, "-c", _CHILD, str(path)] + (["--backend", backend] if backend else [])
    for spec in plugins:
        cmd += ["--plugin", spec]
    root = str(Path(__file__).resolve().parent.parent)  # the fuzz package's, for the child
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "KERNEL_FUZZ_REPLAY_MARKER": "1", "PYTHONPATH": os.pathsep.join(paths)}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    lines: list[str] = []
    marker = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(_MARKER):
                marker.set()
            elif line.strip():
                lines.append(line.rstrip())

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    limit = 2 * (timeout if timeout is not None else 60.0) + 2
    try:
        until = time.monotonic() + STARTUP_LIMIT
        while not marker.is_set() and proc.poll() is None and time.monotonic() < until:
            marker.wait(0.05)
        proc.wait(limit if marker.is_set() else 0.5)
    except subprocess.TimeoutExpired:
        if not marker.is_set():
            return 2, f"cannot replay (the replay process did not start within {STARTUP_LIMIT:g} s)"
        return 1, f"FAIL hang (the replay did not finish within {limit:g} s; killed)"
    finally:  # also when this process is stopped: the child never outlives it
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5)
    return _child_verdict(proc.returncode, marker.is_set(), lines)


def _child_verdict(code: int, started: bool, lines: list[str]) -> tuple[int, str]:
    """(exit status, verdict) of a child replay that ended with ``code``; ``started``: its kernel
    was about to run (the marker came)."""
    last = lines[-1][:200] if lines else ""
    said = next(
        (ln for ln in lines if any(k in ln for k in (": PASS", ": FAIL", "cannot replay"))), None
    )
    if code < 0 and _signal_name(code) in _STOP_SIGNALS:
        return 2, f"interrupted (the replay process was stopped by {_signal_name(code)})"
    if not started:
        how = f"was killed by {_signal_name(code)}" if code < 0 else f"exited with status {code}"
        return 2, said or f"cannot replay (the replay process {how} before the kernel ran: {last})"
    if code < 0:
        return 1, f"FAIL crash (the replay process was killed by {_signal_name(code)})"
    if code in (0, 1, 2) and said is not None:
        return code, said
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        # no verdict, an uncaught exception: the harness failed after the kernel ran
        return 2, f"cannot replay (the replay process exited with status {code}: {last})"
    # No verdict and no traceback: the kernel ended the process (os._exit(0), even): a crash.
    said_last = f": {last}" if last else " before any verdict"
    return 1, f"FAIL crash (the replay process exited with status {code}{said_last})"


def report_replay(
    meta: dict[str, Any],
    data: str,
    *,
    backend: str | None = None,
    quiet: bool = False,
    path: str | os.PathLike[str] | None = None,
    in_process: bool = False,
    isolate: bool = False,
    plugins: Sequence[str] = (),
) -> int:
    """Replays and prints the verdict; returns the exit status (1: reproduces, 0: fixed, 2: cannot
    replay or interrupted).

    A reproducer recorded as ``isolate`` (its failure kills or hangs the process), or any with
    ``isolate``, replays in a child process when ``path`` is known, unless ``in_process``; what
    makes it impossible to replay here is found in this process first, without a child.
    ``plugins``: those given on the command line (loaded already), for a child to load too.
    """
    head = f"{meta['target']} on {backend or meta['backend']}"
    if (meta.get("isolate") or isolate) and path is not None and not in_process:
        return _report_isolated(
            meta, data, head, backend=backend, quiet=quiet, path=path, plugins=plugins
        )
    from fuzz.failures import Unsupported

    try:
        outcome = replay(meta, data, backend=backend, path=path)
    except Unsupported as e:
        print(f"{head}: cannot replay: the kernel declines this case (unsupported: {e.reason})")
        return 2
    except Exception as e:
        print(f"{head}: cannot replay: {type(e).__name__}: {e}")
        return 2
    f = outcome.finding
    if f is None:
        tries = replay_attempts(meta)
        again = "" if tries == 1 else f" in {tries} tries"
        print(
            f"{head}: PASS (recorded: {meta['class']} in {meta['property']}; it no longer "
            f"reproduces{again})"
        )
        return 0
    same = "same class as recorded" if f.cls == meta["class"] else f"recorded {meta['class']}"
    print(f"{head}: FAIL {f.cls} ({same})")
    if not quiet:
        _print_failure(meta, outcome, backend or meta["backend"])
    return 1


def _report_isolated(
    meta: dict[str, Any],
    data: str,
    head: str,
    *,
    backend: str | None,
    quiet: bool,
    path: str | os.PathLike[str],
    plugins: Sequence[str] = (),
) -> int:
    """:func:`report_replay` in a child process (:func:`replay_isolated`), after checking here
    that the file can replay at all."""
    try:
        _prepare(meta, data, backend, path)
    except Exception as e:
        print(f"{head}: cannot replay: {type(e).__name__}: {e}")
        return 2
    timeout = meta.get("timeout")
    code, verdict = replay_isolated(
        path,
        backend=backend,
        timeout=None if timeout is None else float(timeout),
        plugins=plugins,
    )
    if verdict.startswith(head):
        verdict = verdict[len(head) :].lstrip(": ")
    print(f"{head}: {verdict}")
    if code == 1 and not quiet:
        print(f"  recorded: {meta['message']}")
    return code


def _print_failure(meta: dict[str, Any], outcome: Any, backend: str) -> None:
    """The details of a failing replay: property, message, error, hazards, and for a NaN or Inf
    where it was born."""
    f = outcome.finding
    print(f"  property: {f.prop}")
    print(f"  {f.message}")
    if f.error is not None and f.tolerance is not None:
        print(f"  error {f.error:.6g} vs tolerance {f.tolerance:.6g}")
    for h in f.hazards:
        print(f"  hazard: {h}")
    from fuzz import origin

    if f.cls in origin.TRACED_CLASSES:
        from fuzz.target import get

        tracer = origin.tracer_of(f.cls)
        try:
            o = tracer(get(meta["target"]), backend, outcome.context.case, outcome.params)
        except Exception as e:
            o = {"error": f"{type(e).__name__}: {e}"}
        for line in origin.describe(o) if origin.worth_showing(f.cls, o) else []:
            print(f"  {line}")
