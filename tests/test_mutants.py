"""The harness proves its power: every mutant is found, classified as expected, and shrunk.

Each mutant target declares the failure class it must produce and ``shrink_bound``, the largest
input (in elements) its minimal reproducer may have, a number or a function of the tile sizes and
head dim the profile drew; the bounds are stated next to each family's mutants (e.g.
``fuzz/targets/softmax.py``: at most 2 elements for every softmax mutant).
"""

from fuzz import reproducer
from fuzz.engine import hunt


def test_mutant_is_found_classified_and_shrunk(
    fuzz_mutant, fuzz_require_backend, fuzz_profile, tmp_path
):
    result = hunt(fuzz_mutant, fuzz_require_backend, fuzz_profile, repro_dir=tmp_path)
    assert result.error is None, result.error
    assert fuzz_mutant.expected_class in result.found, (
        f"{fuzz_mutant.name} on {fuzz_require_backend}: expected class {fuzz_mutant.expected_class}, "
        f"found {result.classes} in {result.examples} examples"
    )
    found = result.found[fuzz_mutant.expected_class]
    bound = fuzz_mutant.shrink_limit(found.case)
    assert bound is not None
    assert found.case.size <= bound, (
        f"minimal case has {found.case.size} elements > bound {bound}: {found.case!r}"
    )
    # Its reproducer replays to the same class (tests/fuzz/test_reproducer.py runs scripts as
    # subprocesses; here the replay runs in-process to keep the suite quick).
    meta, data = reproducer.load(found.reproducer)
    outcome = reproducer.replay(meta, data)
    assert outcome.finding is not None and outcome.finding.cls == fuzz_mutant.expected_class
