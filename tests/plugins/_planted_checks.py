"""What the planted rounds' tests (``test_planted*.py``) read from their plugins and records:
each planted kernel's docstring bullet, and the patterns a round's record file names; and a
check of one case as a hunt settles its finding. Loaded with ``fuzz.load_beside`` (the tests are
imported by path, not as a package)."""

from __future__ import annotations

import ast
import re


def docstring_entries(doc: str, prefix: str) -> dict[str, str]:
    """The docstring's ``- ``name``: ...`` bullets whose target name starts with ``prefix``
    (``planted3_``), by target name, each on one line."""
    entries = {}
    for bullet in re.split(r"\n(?=- ``)", doc):
        m = re.match(rf"- ``({re.escape(prefix)}\w+)``", bullet)
        if m:
            entries[m.group(1)] = " ".join(bullet.split())
    return entries


def record_keys(path: str) -> set[str]:
    """The string keys of every dict literal in the file at ``path`` (a record file's patterns)."""
    tree = ast.parse(open(path).read())
    return {
        k.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for k in node.keys
        if isinstance(k, ast.Constant) and isinstance(k.value, str)
    }


def options():
    """The hunt options of the ci profile."""
    from fuzz.profiles import HuntOptions, get_profile

    return HuntOptions.of(get_profile("ci"))


def as_found(target, backend, case, params=None):
    """``case`` checked on ``backend`` as a Found, as a hunt settles it: its key and triggers
    as the hunt computes them (the case must fail)."""
    from fuzz.failures import bug_key
    from fuzz.properties import check_case
    from fuzz.results import Found
    from fuzz.signatures import conditions, signature

    outcome = check_case(target, backend, case, params=params or {}, **options().check_kwargs())
    f = outcome.finding
    assert f is not None, case
    key, holds = bug_key(f), sorted(conditions(target, case, outcome.context.hazards))
    f.details.update(bug_key=key, triggers=holds, signature=signature(target.name, key, holds))
    return Found(f, case, dict(outcome.params), 1, 0.0, choices=(1,), key=key, final=True)


def language(name: str) -> str:
    """A planted or control target's kernel language, from its name."""
    return "pallas" if name.endswith("_pallas") else "triton"


class Round:
    """The structural checks of one planted round of a Triton and a Pallas plugin (rounds 5 and
    on): ``number``, its plugins by language, the families each language's kernels cover, the
    earlier rounds' record files (their patterns not planted again) and patterns known to be
    among them (what the names look like)."""

    def __init__(self, number, plugins, families, earlier, known_old):
        self.number, self.plugins = number, plugins
        self.families, self.earlier, self.known_old = families, earlier, known_old
        self.prefix = f"planted{number}_"

    def modules(self):
        """Each language's plugin module, loaded as ``--plugin`` loads it."""
        import os
        import sys

        from fuzz.target import load_plugin

        out = {}
        for lang, path in self.plugins.items():
            load_plugin(path)
            found = [
                m
                for m in list(sys.modules.values())
                if os.path.abspath(getattr(m, "__file__", None) or "") == path
            ]
            assert found, f"no module imported from {path}"
            out[lang] = found[0]
        return out

    @staticmethod
    def planted(plugins):
        """Target name -> (language, record) of every planted kernel."""
        return {
            name: (lang, record)
            for lang, module in plugins.items()
            for name, record in module.PLANTED.items()
        }

    def check_registered(self, plugins):
        """Every planted kernel is a target registered through ``fuzz.fuzz_kernel`` by its
        language's plugin, a real target to the harness, each pattern in the languages its
        record names."""
        from fuzz.target import get

        planted = self.planted(plugins)
        assert len(planted) >= 10
        patterns = plugins["triton"].PATTERNS
        assert patterns is plugins["pallas"].PATTERNS  # (one record file, loaded once)
        for lang, module in plugins.items():
            assert len(module.PLANTED) >= 5, lang
            mine = {p: r for p, r in patterns.items() if lang in r.languages}
            assert set(module.PLANTED) == {module.target_name(p) for p in mine}, lang
            families = {r.family.split("_varlen")[0].split("_decode")[0] for r in mine.values()}
            assert set(self.families) <= families, (lang, sorted(families))
        for name, (lang, record) in planted.items():
            assert name.startswith(self.prefix) and name.endswith(f"_{lang}"), name
            target = get(name)
            assert target.source == self.plugins[lang], (name, target.source)
            assert target.family == record.family, name
            assert set(target.kernels) == {lang}, (name, sorted(target.kernels))
            assert target.mutant is None, name

    def check_controls(self, plugins):
        """Every kernel a planted target runs has its bug-free control, one per family."""
        from fuzz.target import get

        for lang, module in plugins.items():
            kernel_families = {r.family for r in module.PLANTED.values()}
            assert {get(n).family for n in module.CONTROLS} == kernel_families, lang
            for name in module.CONTROLS:
                target = get(name)
                assert name == f"control{self.number}_{target.family}_{lang}", name
                assert target.source == self.plugins[lang] and target.mutant is None, name

    def check_records(self, plugins):
        """Each record (round 3's classes, loaded from its file) names a family, one bug of a
        known class that counts as found by its own class, and its trigger."""
        import sys

        from fuzz.failures import CLASSES
        from fuzz.families import family_names

        rounds = sys.modules["kernel_fuzz_planted3_bugs"]
        for name, (lang, record) in self.planted(plugins).items():
            assert type(record) is rounds.Pattern and type(record.bugs[0]) is rounds.Bug, name
            assert record.family in family_names(), name
            assert record.languages == (lang,), name
            assert len(record.bugs) == 1, name  # one planted bug per target
            bug = record.bugs[0]
            assert bug.expected in CLASSES, (name, bug.expected)
            assert bug.matches({"class": bug.expected}), name
            assert bug.what.strip() and bug.trigger.strip(), name
            assert set(record.cpu) <= {lang}, name  # filled in from a campaign, or empty

    def check_new(self, plugins, here):
        """No pattern of the earlier rounds' records (files beside ``here``), nor a mutant's of
        the same family and name, is planted again."""
        import os

        from fuzz.target import all_targets

        old = set()
        for records in self.earlier:
            old |= record_keys(os.path.join(here, records))
        assert set(self.known_old) <= old
        mutants = {t.name.replace("_mutant_", "_") for t in all_targets() if "_mutant_" in t.name}
        assert "softmax_scale_twice" in mutants  # (what the names look like)
        for pattern in plugins["triton"].PATTERNS:
            assert pattern not in old and pattern not in mutants, pattern

    def check_docstrings(self, plugins):
        """Each planted kernel has its plugin docstring's bullet, with its trigger and class."""
        for lang, module in plugins.items():
            entries = docstring_entries(module.__doc__, self.prefix)
            assert set(entries) == set(module.PLANTED), (
                lang,
                sorted(set(entries) ^ set(module.PLANTED)),
            )
            for name, record in module.PLANTED.items():
                assert "Trigger:" in entries[name], name
                assert f"Expected: {record.bugs[0].expected}" in entries[name], name

    @staticmethod
    def check_pallas_kinds(plugins):
        """The Pallas kernels are declared for the GPU's lowering and interpret mode both."""
        from fuzz.target import get

        for name in [*plugins["pallas"].PLANTED, *plugins["pallas"].CONTROLS]:
            assert set(get(name).library.backends) == {"pallas-gpu", "pallas-interpret"}, name

    # The behaviour checks: each bug's trigger and near miss, short seeded hunts.

    @staticmethod
    def check(name, case):
        """The finding of ``check_case`` on ``case`` (None: it passes), as a hunt checks it, on
        the interpreter of the target's language."""
        from fuzz.backends import get_backend
        from fuzz.properties import check_case
        from fuzz.target import get

        backend = get_backend(BACKENDS[language(name)])
        return check_case(get(name), backend, case, **options().check_kwargs()).finding

    def check_trigger(self, plugins, pattern, triggers):
        """The pattern's documented trigger (``triggers[pattern]``: makers of the trigger and a
        near miss) fails with its expected class; the family's bug-free control passes it (the
        planted line is what fails), and the planted kernel passes the near miss."""
        record = plugins["triton"].PATTERNS[pattern]
        (lang,) = record.languages
        trigger, near_miss = (make() for make in triggers[pattern])
        name = plugins[lang].target_name(pattern)
        finding = self.check(name, trigger)
        assert finding is not None, f"{pattern}: its trigger passes ({record.bugs[0].trigger})"
        assert finding.cls == record.bugs[0].expected, (pattern, finding.cls, finding.message)
        control = f"control{self.number}_{record.family}_{lang}"
        found = self.check(control, trigger)
        assert found is None, (control, found.cls, found.message)
        found = self.check(name, near_miss)
        assert found is None, (pattern, "near miss", found.cls, found.message)

    @staticmethod
    def hunt_rows(name, examples):
        """The findings (as report rows) of a hunt of ``examples`` examples, seed 1, stopped by
        its examples, never by the clock."""
        from fuzz.engine import hunt
        from fuzz.profiles import get_profile
        from fuzz.target import get

        result = hunt(
            get(name),
            BACKENDS[language(name)],
            get_profile("ci"),
            database=None,
            max_examples=examples,
            seed=1,
            time_limit=10**6,
        )
        assert result.error is None, result.error
        return [f.as_dict() for f in result.found.values()]

    def check_clean(self, name, examples):
        """A control's short hunt finds nothing."""
        rows = self.hunt_rows(name, examples)
        assert not rows, [
            (r["class"], r["property"], r.get("output"), r.get("message")) for r in rows
        ]

    def check_found(self, plugins, name, examples):
        """A planted kernel's short hunt finds its bug with its expected class."""
        bug = self.planted(plugins)[name][1].bugs[0]
        rows = self.hunt_rows(name, examples)
        assert any(bug.matches(r) for r in rows), (
            f"{name}: {bug.expected} ({bug.trigger}) not found; found "
            f"{[(r['class'], r['property']) for r in rows]}"
        )


# The interpreter each language's planted kernels are checked on here.
BACKENDS = {"triton": "triton-interpret", "pallas": "pallas-interpret"}
