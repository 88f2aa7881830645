"""The planted one-bug kernels (``tests/plugins/planted.py``, Triton; ``planted_pallas.py``,
Pallas): each planted target registered through the public plugin API, with its bug in its
plugin's docstring and in the shared records (``_planted_bugs.py``), and a few of the bugs found
with their expected class by short hunts on the CPU interpreters (stopped by example counts).

How many rows each bug becomes is measured by ``.ci/planted_rows.py``, not asserted here: the
harness is being changed to improve it.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from fuzz.engine import hunt
from fuzz.failures import CLASSES
from fuzz.families import family_names
from fuzz.profiles import get_profile
from fuzz.target import get, load_plugin

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = {
    "triton": os.path.join(HERE, "planted.py"),
    "pallas": os.path.join(HERE, "planted_pallas.py"),
}


def _module(path: str):
    """The plugin module ``load_plugin`` imported from ``path``."""
    for module in list(sys.modules.values()):
        if os.path.abspath(getattr(module, "__file__", None) or "") == path:
            return module
    raise AssertionError(f"no module imported from {path}")


@pytest.fixture(scope="module")
def plugins():
    """Each language's plugin module, loaded as ``--plugin`` loads it."""
    out = {}
    for language, path in PLUGINS.items():
        load_plugin(path)
        out[language] = _module(path)
    return out


def _planted(plugins):
    return {
        name: (language, record)
        for language, module in plugins.items()
        for name, record in module.PLANTED.items()
    }


def test_every_planted_kernel_is_a_registered_plugin_target(plugins):
    planted = _planted(plugins)
    patterns = plugins["triton"].PATTERNS
    assert len(patterns) >= 10
    for language, module in plugins.items():
        # every pattern in both languages (none is left out today)
        assert len(module.PLANTED) == len(patterns), (language, sorted(module.PLANTED))
    for name, (language, record) in planted.items():
        assert name.startswith("planted_"), name
        target = get(name)  # registered through fuzz.fuzz_kernel by the plugin
        assert target.source == PLUGINS[language], (name, target.source)
        assert target.family == record.family, name
        assert set(target.kernels) == {language}, (name, sorted(target.kernels))
        assert target.mutant is None, name  # a real target to the harness, as a user's is


def test_every_record_names_a_family_a_class_and_a_trigger(plugins):
    for name, (_, record) in _planted(plugins).items():
        assert record.family in family_names(), name
        assert record.bugs, name
        for bug in record.bugs:
            assert bug.expected in CLASSES, (name, bug.expected)
            assert bug.what.strip() and bug.trigger.strip(), name
        # what the CPU campaigns found, in each language the pattern is written in
        assert {"triton", "pallas"} - set(record.not_in) <= set(record.cpu), name
    two = [n for n, (_, r) in _planted(plugins).items() if len(r.bugs) == 2]
    assert sorted(two) == ["planted_two_bugs_softmax", "planted_two_bugs_softmax_pallas"]


def _docstring_entries(doc: str) -> dict[str, str]:
    """The docstring's ``- ``name``: ...`` bullets, by target name."""
    entries = {}
    for bullet in re.split(r"\n(?=- ``)", doc):
        m = re.match(r"- ``(planted_\w+)``", bullet)
        if m:
            entries[m.group(1)] = " ".join(bullet.split())
    return entries


def test_every_planted_kernel_has_a_docstring_line_with_its_trigger_and_class(plugins):
    for language, module in plugins.items():
        entries = _docstring_entries(module.__doc__)
        assert set(entries) == set(module.PLANTED), (
            language,
            sorted(set(entries) ^ set(module.PLANTED)),
        )
        for name, record in module.PLANTED.items():
            text = entries[name]
            assert "Trigger" in text or "trigger" in text, name
            for bug in record.bugs:
                assert f"Expected: {bug.expected}" in text, (name, text)


# A sample quick to find: one per language and family kind, each a bug the harness finds within
# a few dozen examples (its trigger is near the simplest case the strategies draw). (The GLA
# pattern in Pallas, 90 s on a 2-core VM, was the suite's slowest test: its bugs are measured by
# .ci/planted_rows.py.)
SAMPLE = [
    ("planted_attention_lse_no_max_triton", "triton-interpret"),
    ("planted_softmax_bias_row0_triton", "triton-interpret"),
    ("planted_attention_alibi_kv_head_pallas", "pallas-interpret"),
]


@pytest.mark.parametrize(("name", "backend"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, backend):
    record = _planted(plugins)[name][1]
    result = hunt(get(name), backend, get_profile("ci"), database=None, max_examples=60, seed=1)
    assert result.error is None, result.error
    rows = [f.as_dict() for f in result.found.values()]
    for bug in record.bugs:
        assert any(bug.matches(r) for r in rows), (
            f"{name}: {bug.expected} ({bug.trigger}) not found; found "
            f"{[(r['class'], r['property']) for r in rows]}"
        )
