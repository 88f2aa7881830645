"""The harness proves its power: every mutant is found, classified as expected, and shrunk.

Each mutant target declares the failure class it must produce and ``shrink_bound``, the largest
input (in elements) its minimal reproducer may have, a number or a function of the tile sizes and
head dim the profile drew; the bounds are stated with each mutant's record (``kernels._mutate.Expect``
in ``kernels/<family>/mutants.py``: e.g. at most 2 elements for most softmax mutants).
"""

from fuzz import reproducer
from fuzz.engine import derandomized_seed, hunt

KEEP_LOOKING = 2  # further hunts for the expected class, the classes found so far known


def test_mutant_is_found_classified_and_shrunk(
    fuzz_mutant, fuzz_require_backend, fuzz_profile, tmp_path
):
    result = hunt(fuzz_mutant, fuzz_require_backend, fuzz_profile, repro_dir=tmp_path)
    assert result.error is None, result.error
    # Hypothesis stops generating soon after its first failure. A mutant that shows first as
    # another class (an attention mask bug leaking into a row with valid keys: accuracy) is
    # hunted again with what was found counted as known, as a campaign's next slice does.
    for attempt in range(KEEP_LOOKING):
        if fuzz_mutant.expected_class in result.found:
            break
        # A derandomized profile (ci) would draw the same examples again: each further hunt
        # draws its own, from a seed of its own (still deterministic).
        seed = None
        if fuzz_profile.settings.derandomize:
            seed = derandomized_seed(fuzz_mutant.name, fuzz_require_backend) + attempt + 1
        more = hunt(
            fuzz_mutant,
            fuzz_require_backend,
            fuzz_profile,
            repro_dir=tmp_path,
            known=set(result.found),
            seed=seed,
        )
        assert more.error is None, more.error
        result.examples += more.examples
        result.found.update(more.found)
    assert fuzz_mutant.expected_class in result.found, (
        f"{fuzz_mutant.name} on {fuzz_require_backend}: expected class {fuzz_mutant.expected_class}, "
        f"found {result.classes} in {result.examples} examples"
    )
    # Its smallest reproducer of that class (the output and property are part of a bug's key:
    # a mutant can fail as several bugs of its class, say its lse and its o).
    found = min(result.of_class(fuzz_mutant.expected_class), key=lambda f: f.case.size)
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
