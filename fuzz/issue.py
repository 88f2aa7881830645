"""The issue text of a reproducer: the failure described for a kernel's maintainer, in Markdown,
so that it reads without running anything.

``fuzz.reproducer.write`` writes it beside each script (``NAME.md`` beside ``NAME.py``), so every
front end that writes reproducers (a campaign, the pytest plugin, the scoreboard) has it. It says
what fails (the property, the class, the worst element: expected and got), the exact call (the
kernel, its tensors' shapes, dtypes and layout, every keyword argument), the inputs as NumPy
literals where an input has at most ``fuzz.standalone.INLINE_LIMIT`` elements, the hazards that
hold, where a NaN or Inf was born, and the versions and device it was found with.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from fuzz.standalone import INLINE_LIMIT, assignment

if TYPE_CHECKING:
    from fuzz.case import Case
    from fuzz.failures import Finding
    from fuzz.families import Family
    from fuzz.target import Target

FENCE = "```"


def text(
    meta: Mapping[str, Any], target: Target, case: Case, finding: Finding, *, script: str
) -> str:
    """The issue text of the reproducer ``script`` whose ``REPRO`` is ``meta`` (see the module
    docstring)."""
    parts = [
        *_title(meta, target, finding),
        *_what_fails(meta, target, finding),
        *_the_call(meta, target, case),
        *_hazards(finding),
        *_origin(finding, script),
        *_environment(meta),
        *_reproduce(meta, script),
    ]
    return "\n".join(parts).rstrip() + "\n"


def _title(meta: Mapping[str, Any], target: Target, finding: Finding) -> list[str]:
    lines = [f"# {target.name} on {meta['backend']}: {finding.cls} ({finding.prop})", ""]
    if target.is_mutant:
        lines += [
            f"A planted bug: `{target.name}` is a mutant of `{target.mutant_of}` (expected class "
            f"{target.expected_class}), the harness checking itself.",
            "",
        ]
    return [*lines, _quoted(finding.message), ""]


def _quoted(message: str) -> str:
    return "\n".join(f"> {line}" for line in message.splitlines() or [""])


def _number(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.9g}"
    return str(v)


def _what_fails(meta: Mapping[str, Any], target: Target, finding: Finding) -> list[str]:
    from fuzz.failures import DESCRIPTIONS
    from fuzz.properties import properties_of

    described = {p.name: p.description for p in properties_of(target)}
    rows = [
        ("class", f"`{finding.cls}`: {DESCRIPTIONS.get(finding.cls, '')}"),
        (
            "property",
            f"`{finding.prop}`: {described.get(finding.prop) or 'declared by the target'}",
        ),
    ]
    drawn = json.loads(meta.get("property_params") or "{}")
    if drawn:
        rows.append(
            ("drawn for the properties", ", ".join(f"`{k}` = {v!r}" for k, v in drawn.items()))
        )
    d = finding.details
    if finding.where:
        rows.append(("worst element", f"`{finding.where}`"))
    if finding.oracle_value is not None or finding.kernel_value is not None:
        rows.append(("expected (fp64 oracle)", f"`{_number(finding.oracle_value)}`"))
        rows.append(("got (kernel)", f"`{_number(finding.kernel_value)}`"))
    if "clean_value" in d:
        rows.append(("the clean run there", f"`{_number(d['clean_value'])}`"))
    if "second_value" in d:
        rows.append(("a second run there", f"`{_number(d['second_value'])}`"))
    if finding.error is not None:
        rows.append(("error", f"`{_number(finding.error)}`"))
    if finding.tolerance is not None:
        rows.append(("tolerance there", f"`{_number(finding.tolerance)}`"))
    rule = "; ".join(f"{o}: {r}" for o, r in _rules(target, finding).items())
    if rule:
        rows.append(("tolerance rule", rule))
    lines = ["## What fails", "", "| | |", "| --- | --- |"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in rows]
    if finding.cls == "crash" and d.get("text"):
        lines += ["", f"The kernel raised `{d.get('exception', 'an exception')}`:", ""]
        lines += [FENCE, str(d["text"])[:2000].rstrip(), FENCE]
    return [*lines, ""]


def _cell(text: str) -> str:
    """``text`` inside a Markdown table cell: its pipes escaped, on one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def _rules(target: Target, finding: Finding) -> dict[str, str]:
    from fuzz.compare import Tolerance

    if finding.output is not None:
        outputs = [finding.output]
    elif isinstance(target.tolerance, Tolerance):
        return {}
    else:
        outputs = list(target.tolerance)
    out = {}
    for o in outputs:
        try:
            out[o] = target.tolerance_for(o).describe()
        except KeyError:
            continue
    if target.error_bound is not None and finding.output is not None:
        out[finding.output] = "per-element error bound of the computation (`Target.error_bound`)"
    return out


# The call ---------------------------------------------------------------------------------------


def _the_call(meta: Mapping[str, Any], target: Target, case: Case) -> list[str]:
    from fuzz.backends import get_backend
    from fuzz.families import family_of

    impl = get_backend(meta["backend"]).impl
    entry = target.kernels.get(impl)
    fam = family_of(target)
    arrays = _readable(case)
    lines = ["## The call", ""]
    if fam is not None and _is_plugin_entry(entry):
        call, said = _plugin_call(fam, entry, case, meta)
    elif fam is not None:
        call = _family_call(fam, case)
        said = (
            f"Target `{target.name}`'s {impl} kernel (the project's own), called with the "
            f"arguments of every `{fam.name}` kernel (`fuzz.families`), in the family's layout:"
        )
    else:
        inputs = ", ".join(f"{n!r}: {n}" for n in case.inputs)
        call = [f"outputs = kernel({{{inputs}}}, {dict(case.params)!r})"]
        said = f"Target `{target.name}`'s {impl} entry point, with its inputs and params:"
    lines += [said, "", FENCE + "python", "import numpy as np", "from numpy import inf, nan"]
    if "bfloat16" in meta["dtypes"].values():
        lines.append("import ml_dtypes")
    lines.append("")
    big = []
    for name, a in arrays.items():
        lines.append(assignment(name, a, meta["dtypes"][name]))
        if a.size > INLINE_LIMIT:
            big.append(name)
    lines += ["", *call, FENCE, ""]
    if big:
        lines += [
            f"{', '.join(big)}: more than {INLINE_LIMIT:,} elements each, not written out here "
            "(the reproducer's `DATA` holds them; `--show` prints a summary).",
            "",
        ]
    if case.recipe:
        recipe = json.dumps(dict(case.recipe), default=str, sort_keys=True)
        lines += [f"How the inputs were drawn: `{recipe}`", ""]
    return lines


def _readable(case: Case) -> dict[str, np.ndarray]:
    """The case's inputs as ``fuzz.standalone.assignment`` takes them (as ``--show`` reads them
    from the script's ``DATA``): bfloat16 widened to float32, which holds its values exactly."""
    from fuzz.arrays import dtype_name

    return {
        name: a.astype(np.float32) if dtype_name(a.dtype) == "bfloat16" else a
        for name, a in case.inputs.items()
    }


def _is_plugin_entry(entry: Any) -> bool:
    """Whether ``entry`` (a ``Target.kernels`` value) is a plugin kernel's entry point, which
    knows the kernel function, its layout and the keywords it is passed."""
    from fuzz.plugin import _PluginKernel

    return isinstance(entry, _PluginKernel)


def _argument(value: Any, case: Case) -> str:
    """An argument as Python: an input's name, or the value's literal."""
    for name, a in case.inputs.items():
        if value is a:
            return name
    if isinstance(value, np.ndarray):
        return f"np.asarray({value.tolist()!r})"
    if isinstance(value, np.generic):
        return repr(value.item())
    return repr(value)


def _described(a: np.ndarray, axes: str | None = None) -> str:
    from fuzz.arrays import dtype_name

    shape = [int(n) for n in a.shape]
    return f"{dtype_name(a.dtype)} {shape}" + (f" {axes}" if axes else "")


def _call(
    outputs: Any,
    function: str,
    positional: list[tuple[str, str]],
    keywords: list[tuple[str, tuple[str, str]]],
) -> list[str]:
    """``outputs = function(...)``, one argument a line, each ``(expression, comment)``."""
    lines = [f"{', '.join(outputs)} = {function}("]
    for expr, note in positional:
        lines.append(f"    {expr},  # {note}" if note else f"    {expr},")
    for name, (expr, note) in keywords:
        lines.append(f"    {name}={expr},  # {note}" if note else f"    {name}={expr},")
    return [*lines, ")"]


def _family_call(fam: Family, case: Case) -> list[str]:
    """A built-in family's call: its tensors (in its layout) and every keyword of its kernels."""
    values = dict(fam.values(case))
    positional = []
    for name in fam.tensors:
        a = case.inputs.get(name)
        positional.append(("None", "") if a is None else (name, _described(a, fam.layouts[name])))
    keywords = []
    for k in fam.passed(frozenset(fam.features), frozenset(fam.tiles)):
        v = values.get(k)
        note = _described(v) if isinstance(v, np.ndarray) else ""
        keywords.append((k, (_argument(v, case), note)))
    return _call(fam.outputs, fam.name, positional, keywords)


def _in_layout(fam: Family, entry: Any, name: str, a: np.ndarray, case: Case) -> tuple[str, str]:
    """Array ``a`` (tensor or keyword ``name``) as a plugin's kernel receives it: transposed to
    its layout, head dims padded; ``(expression, comment)``."""
    expr = _argument(a, case)
    if name not in fam.layouts:
        return expr, _described(a)
    src, dst = fam.layouts[name], entry.layout.axes(fam, name)
    shape = [int(a.shape[src.index(x)]) for x in dst]
    if src != dst:
        expr += f".transpose({', '.join(str(src.index(x)) for x in dst)})"
    pad = entry.layout.pad_head_dim
    note = ""
    if pad > 1 and any(x in fam.dims for x in dst):
        shape = [
            -(-n // pad) * pad if x in fam.dims else n for x, n in zip(dst, shape, strict=True)
        ]
        note = f", head dims zero-padded to a multiple of {pad}"
    from fuzz.arrays import dtype_name

    return expr, f"{dtype_name(a.dtype)} {shape} {dst}{note}"


def _plugin_call(
    fam: Family, entry: Any, case: Case, meta: Mapping[str, Any]
) -> tuple[list[str], str]:
    """The call of a plugin's kernel as its entry point makes it (``fuzz.plugin``): its tensors
    in its layout (transposed, padded), the keywords its declarations pass."""
    from fuzz.backends import get_backend

    interpret = get_backend(meta["backend"]).interpret
    rules = entry.rules.get("interpreted" if interpret else "compiled")
    rules = rules or next(iter(entry.rules.values()))
    values = dict(fam.values(case))
    positional = []
    for name in fam.tensors:
        a = case.inputs.get(name)
        positional.append(("None", "") if a is None else _in_layout(fam, entry, name, a, case))
    keywords = []
    for k in rules.keywords:
        v = values.get(k)
        arg = (
            _in_layout(fam, entry, k, v, case)
            if isinstance(v, np.ndarray)
            else (_argument(v, case), "")
        )
        keywords.append((k, arg))
    if entry.language == "pallas":
        keywords.append(("interpret", (repr(interpret), "")))
    plugin = str(meta.get("plugin") or "its plugin")
    where = plugin.replace("\\", "/").rsplit("/", 1)[-1]
    framework = "JAX arrays" if entry.language == "pallas" else "torch tensors"
    said = (
        f"`{entry.label}()` of plugin `{where}` (target `{meta['target']}`, family `{fam.name}`), "
        f"called as the harness calls it: the tensors as {framework} in its layout, the "
        "keywords its declarations pass:"
    )
    return _call(["outputs"], entry.label, positional, keywords), said


# The rest ---------------------------------------------------------------------------------------


def _hazards(finding: Finding) -> list[str]:
    lines = ["## Hazards", ""]
    if not finding.hazards:
        return [*lines, "None of the family's declared input hazards holds.", ""]
    return [*lines, *(f"- {h}" for h in finding.hazards), ""]


def _origin(finding: Finding, script: str) -> list[str]:
    from fuzz.origin import LOAD_CLASSES, STORE_CLASSES, TRACED_CLASSES, describe, worth_showing

    origin = finding.details.get("origin")
    if finding.cls not in TRACED_CLASSES or not worth_showing(finding.cls, origin):
        return []
    store = finding.cls in STORE_CLASSES
    kind = (origin or {}).get("kind")
    load = finding.cls in LOAD_CLASSES or kind == "load past a buffer"
    if store or kind == "store past a buffer":
        title = "Where it stores past the end"
    elif kind == "store racing another program's":
        title = "Where its programs store over each other"
    elif load:
        title = "Where it loads past the end"
    else:
        title = f"Where the {'NaN' if finding.cls == 'nan' else 'Inf'} is born"
    lines = [f"## {title}", ""]
    if not origin:
        what = (
            "the kernel line of the first store outside its launch's buffers"
            if store
            else "the kernel line of the first overflow, invalid operation or division by zero"
        )
        return [
            *lines,
            f"Not traced when this was written; `python {script}` traces it ({what}).",
            "",
        ]
    return [*lines, FENCE, *describe(origin), FENCE, ""]


def _environment(meta: Mapping[str, Any]) -> list[str]:
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items())
    return [
        "## Found with",
        "",
        f"- device: {meta.get('device', '?')}",
        f"- versions: {versions or '?'}",
        f"- on: {meta.get('found', '?')}",
        "",
    ]


def _reproduce(meta: Mapping[str, Any], script: str) -> list[str]:
    lines = [
        "## Reproduce",
        "",
        FENCE + "bash",
        f"python {script}          # exit 1 while it fails, 0 once fixed, 2 if it cannot run here",
        f"python {script} --show   # the inputs and parameters; needs NumPy only",
        FENCE,
        "",
        f"Replaying needs the kernel-fuzz harness installed. Recorded on {meta['backend']}; "
        "`--backend NAME` replays on another.",
    ]
    plugin = meta.get("plugin")
    if plugin:
        name = str(plugin).replace("\\", "/").rsplit("/", 1)[-1]
        lines[-1] += (
            f" The target comes from plugin `{name}`: moved, it is looked for beside the script "
            "and on `sys.path`, or give its place with `--plugin PATH`."
        )
    return lines
