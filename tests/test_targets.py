"""Every real target passes every property on every backend of the profile.

Parametrized by the harness's pytest plugin over the registry (``--fuzz-targets``/``--plugin``
add or narrow targets); ids are ``<target>-<backend>``.
"""

from fuzz.engine import check

# The correct reformulations (targets described "reformulation: ...") prove the error bounds from
# the passing side. Their kernels are the slowest to interpret (a token recurrence, extra passes),
# so under the ci profile each runs a quarter of its examples, keeping the suite within CI's time;
# every other profile, a campaign and the bound-margin tools (fuzz.devtools) run them in full.
CI_REFORMULATION_SHARE = 4


def test_target_holds_every_property(
    fuzz_target, fuzz_require_backend, fuzz_profile, fuzz_repro_dir
):
    kw = {}
    if fuzz_profile.name == "ci" and fuzz_target.description.startswith("reformulation:"):
        kw["max_examples"] = max(1, fuzz_profile.max_examples // CI_REFORMULATION_SHARE)
    result = check(fuzz_target, fuzz_require_backend, fuzz_profile, repro_dir=fuzz_repro_dir, **kw)
    assert result.examples > 0
