"""The fuzz package's layers: dependencies point one way, core <- campaign machinery <- front ends,
and no import circle runs through them, counting imports inside functions and under
``TYPE_CHECKING`` (an import moved into a function to dodge a circle is still one). Hypothesis's
internals are used in one module only (``fuzz.hypothesis_internals``)."""

import ast
import importlib
from pathlib import Path

import hypothesis
import pytest

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "fuzz"
CORE = {
    "allocations",
    "arrays",
    "backends",
    "case",
    "compare",
    "duplicates",
    "engine",
    "explain",
    "failures",
    "families",
    "files",
    "hypothesis_internals",
    "influence",
    "isolated",
    "isolated_child",
    "issue",
    "kit",
    "known_crashes",
    "ledger",
    "narrowing",
    "origin",
    "plugin",
    "profiles",
    "properties",
    "reproducer",
    "results",
    "shrink",
    "signatures",
    "standalone",
    "stops",
    "store_fence",
    "target",
    "timing",
    "triton_keys",
    "triton_runtime",
}
FRONT_ENDS = {"__main__", "bench", "cli", "pytest_plugin", "scoreboard"}


def _module(path: Path) -> str:
    parts = path.relative_to(FUZZ).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "fuzz"


def _imports() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports, anywhere in it."""
    modules = {_module(p): p for p in FUZZ.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.removeprefix("fuzz.") for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                base = node.module.removeprefix("fuzz").lstrip(".")
                found |= {f"{base}.{a.name}".lstrip(".") for a in node.names} | {base}
            elif isinstance(node, ast.ImportFrom):
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, node.module or ""]).strip(".")
                found |= {f"{base}.{a.name}" for a in node.names} | {base}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


GRAPH = _imports()
# The campaign machinery is the fuzz.campaign package: the tree shows the layer.
MACHINERY = {m for m in GRAPH if m == "campaign" or m.startswith("campaign.")}


@pytest.mark.parametrize("module", sorted(CORE))
def test_core_imports_no_campaign_machinery_and_no_front_end(module):
    assert not GRAPH[module] & (MACHINERY | FRONT_ENDS)


@pytest.mark.parametrize("module", sorted(MACHINERY))
def test_campaign_machinery_imports_no_front_end(module):
    assert not GRAPH[module] & FRONT_ENDS


def test_no_import_circle_runs_through_the_engine_the_campaign_or_a_front_end():
    ours = {"engine", "shrink", "reproducer", "results", "origin", "files"} | MACHINERY | FRONT_ENDS
    assert [c for c in _circles(GRAPH) if c & ours] == []


def test_every_top_level_module_has_a_layer():
    top = {p.stem for p in FUZZ.glob("*.py")} - {"__init__"}
    assert top <= CORE | FRONT_ENDS, sorted(top - CORE - FRONT_ENDS)


def test_nothing_imports_the_developer_tools_or_the_client_plugins():
    leaves = {m for m in GRAPH if m.split(".")[0] in ("devtools", "clients")}
    assert not [m for m, deps in GRAPH.items() if deps & leaves and m not in leaves]


def test_the_layers_name_modules_that_exist():
    assert CORE | FRONT_ENDS <= set(GRAPH)
    assert {"campaign.runner", "campaign.worker", "campaign.report"} <= MACHINERY
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


# The campaign's scheduling policy and what it keeps (fuzz.campaign.policy, the picks and
# estimates it decides by, pairs, tunables, and the bug ledger it shares with the engine): no
# processes, clock, files or console. Whoever runs the workers (processes on one host, actors on
# a cluster) tells it what happened; a test feeds it scripted events (tests/fuzz/
# test_scheduling.py, test_policy_picks.py). A module the policy imports is held to it too.
PURE = {
    "campaign.booking",
    "campaign.estimates",
    "campaign.messages",
    "campaign.pairs",
    "campaign.picks",
    "campaign.policy",
    "campaign.tunables",
    "ledger",
}
# What the pure modules may import from the package besides each other: pure records and rules.
PURE_CORE = {"signatures", "failures"}
IMPURE_STDLIB = {
    "asyncio",
    "fcntl",
    "io",
    "multiprocessing",
    "os",
    "pathlib",
    "random",
    "select",
    "shutil",
    "signal",
    "socket",
    "subprocess",
    "sys",
    "tempfile",
    "threading",
    "time",
}
IMPURE_CALLS = {"open", "print", "input", "exec", "eval", "breakpoint"}


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports of a module that run (not those under ``if TYPE_CHECKING:``)."""
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in typing_only
    ]


@pytest.mark.parametrize("module", sorted(PURE))
def test_the_scheduling_policy_has_no_processes_clock_or_io(module):
    path = FUZZ / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    stdlib, ours = set(), set()
    for node in _runtime_imports(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
        for name in names:
            if name and name.startswith("fuzz"):
                base = name.removeprefix("fuzz").lstrip(".")
                sub = [f"{base}.{a.name}".lstrip(".") for a in node.names]
                ours |= {m for m in sub if m in GRAPH} or {base}  # a module imported from a package
            elif name:
                stdlib.add(name.split(".")[0])
    assert not stdlib & IMPURE_STDLIB, sorted(stdlib & IMPURE_STDLIB)
    assert ours <= PURE | PURE_CORE | {""}, sorted(ours - PURE - PURE_CORE)
    calls = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert not calls & IMPURE_CALLS, sorted(calls & IMPURE_CALLS)


def test_the_pure_layer_check_catches_a_clock():
    tree = ast.parse("import time\nfrom fuzz.campaign import pool\nprint(time.time())")
    imports = _runtime_imports(tree)
    assert {a.name for n in imports if isinstance(n, ast.Import) for a in n.names} == {"time"}
    typed = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n")
    assert [type(n) for n in _runtime_imports(typed)] == [ast.ImportFrom]


# Hypothesis's internals -------------------------------------------------------------------------

# Hypothesis's public modules (its extras are public as a whole). A name imported from one is
# public where its ``__all__`` lists it; from one without (``hypothesis.control``), where the
# package's does; from ``hypothesis.errors``, where it has no leading underscore.
PUBLIC_MODULES = {
    "hypothesis",
    "hypothesis.control",
    "hypothesis.database",
    "hypothesis.errors",
    "hypothesis.stateful",
    "hypothesis.strategies",
}
# Attributes of Hypothesis's engine objects (the ConjectureData of an example, its choice nodes,
# the runner and its build context) that the harness could reach without importing anything.
ENGINE_ATTRIBUTES = {
    "cached_test_function",
    "conjecture_data",
    "current_data",
    "is_final",
    "mutator_groups",
    "provider",
    "was_forced",
}
INTERNALS = FUZZ / "hypothesis_internals.py"
# Uses outside fuzz.hypothesis_internals allowed for now (none).
CAMPAIGN_FOR_NOW: dict[str, set[str]] = {}


def _public(module: str, name: str | None) -> bool:
    if module.startswith("hypothesis.extra."):
        return True
    if name is not None and f"{module}.{name}" in PUBLIC_MODULES:
        return True  # a public submodule (``from hypothesis import strategies``)
    if module not in PUBLIC_MODULES:
        return False
    if name is None:
        return True
    if module == "hypothesis.errors":
        return not name.startswith("_")
    listed = getattr(importlib.import_module(module), "__all__", None)
    return name in (hypothesis.__all__ if listed is None else listed)


def _hypothesis_internals(path: Path) -> set[str]:
    """What the module at ``path`` uses of Hypothesis besides its public API: modules and names
    imported, ``_hypothesis*`` attributes, private attributes of what it imported from
    Hypothesis, and the attributes of Hypothesis's engine objects (``ENGINE_ATTRIBUTES``)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    bound: set[str] = set()  # local names of what the module imported from Hypothesis
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "hypothesis":
                    bound.add((a.asname or a.name).split(".")[0])
                    if not _public(a.name, None):
                        found.add(a.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "hypothesis":
                for a in node.names:
                    bound.add(a.asname or a.name)
                    if not _public(node.module, a.name):
                        found.add(f"{node.module}.{a.name}")
    for node in ast.walk(tree):
        attribute = owner = None
        if isinstance(node, ast.Attribute):
            attribute, owner = node.attr, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            attribute, owner = node.args[1].value, node.args[0]
        if attribute is None:
            continue
        ours = isinstance(owner, ast.Name) and owner.id in bound
        if (
            attribute.startswith("_hypothesis")
            or attribute in ENGINE_ATTRIBUTES
            or (ours and attribute.startswith("_") and not attribute.startswith("__"))
        ):
            found.add(f".{attribute}")
    return found


def _package_files() -> list[Path]:
    return sorted([*FUZZ.rglob("*.py"), *(ROOT / "strategies").rglob("*.py")])


@pytest.mark.parametrize("path", _package_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_internals_module_uses_hypothesis_internals(path):
    """Every use of Hypothesis's private API (its ``internal`` package, its statistics and build
    context, attributes it sets on tests, its choice serialization...) goes through
    ``fuzz.hypothesis_internals``, which says why each is used and what a Hypothesis without it
    does: a Hypothesis upgrade has one module to check."""
    if path == INTERNALS:
        return
    allowed = CAMPAIGN_FOR_NOW.get(str(path.relative_to(ROOT)), set())
    assert not _hypothesis_internals(path) - allowed


def test_the_internals_check_sees_the_internals():
    uses = _hypothesis_internals(INTERNALS)
    assert {
        "hypothesis.control.current_build_context",
        "hypothesis.database.choices_to_bytes",
        "hypothesis.internal.conjecture.engine.ConjectureRunner",
        "hypothesis.statistics.collector",
        "._hypothesis_internal_add_digest",
        "._profiles",
        ".provider",
        ".was_forced",
    } <= uses
    assert not {"hypothesis.settings", "hypothesis.errors.InvalidArgument"} & uses
    assert _public("hypothesis.control", "currently_in_test_context")
    assert _public("hypothesis", "strategies") and _public("hypothesis.extra.redis", "X")


# Function lengths --------------------------------------------------------------------------------

MAX_FUNCTION_LINES = 110


def _functions(path: Path) -> list[tuple[str, int]]:
    """(qualified name, lines from ``def`` to its end) of every function of a module, methods
    and nested functions included."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out.append((name, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text()), "")
    return out


@pytest.mark.parametrize(
    "path",
    sorted(FUZZ.rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_function_of_the_package_is_over_110_lines(path):
    """No function in ``fuzz/`` is over ``MAX_FUNCTION_LINES`` lines (docstring included): a
    longer one does several things, which get a name each."""
    long = {name: n for name, n in _functions(path) if n > MAX_FUNCTION_LINES}
    assert not long, long


def test_the_length_check_sees_nested_functions_and_methods(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "class A:\n    def f(self):\n        def g():\n            pass\n\n        x = 1\n"
    )
    assert _functions(module) == [("A.f", 5), ("A.f.g", 2)]


# The campaign package's files ------------------------------------------------------------------

MAX_CAMPAIGN_FILE_LINES = 520
# Files allowed over it for now, at their size when the limit came down (name -> lines).
CAMPAIGN_FILES_OVER: dict[str, int] = {}


@pytest.mark.parametrize(
    "path", sorted((FUZZ / "campaign").glob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_file_of_the_campaign_package_is_much_over_500_lines(path):
    """The campaign package is a scheduling policy and its mechanisms, each in a file of its
    own of about 500 lines at most: one that grows past ``MAX_CAMPAIGN_FILE_LINES`` holds two
    concerns (its runner once held the policy, the bug ledger and every mechanism in 2,162
    lines, and every scheduling experiment edited the whole machine)."""
    limit = CAMPAIGN_FILES_OVER.get(path.name, MAX_CAMPAIGN_FILE_LINES)
    assert len(path.read_text().splitlines()) <= limit


def test_the_campaign_files_over_the_limit_name_files_that_exist():
    assert {p.name for p in (FUZZ / "campaign").glob("*.py")} >= set(CAMPAIGN_FILES_OVER)
