"""The fuzz package's layers: dependencies point one way, core <- campaign machinery <- front ends,
and no import circle runs through them, counting imports inside functions and under
``TYPE_CHECKING`` (an import moved into a function to dodge a circle is still one)."""

import ast
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[2] / "fuzz"
CORE = {
    "allocations",
    "arrays",
    "backends",
    "case",
    "compare",
    "engine",
    "failures",
    "families",
    "files",
    "kit",
    "origin",
    "plugin",
    "profiles",
    "properties",
    "reproducer",
    "results",
    "shrink",
    "signatures",
    "stops",
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
