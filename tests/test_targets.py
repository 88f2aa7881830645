"""Every real target passes every property on every backend of the profile.

Parametrized by the harness's pytest plugin over the registry (``--fuzz-targets``/``--plugin``
add or narrow targets); ids are ``<target>-<backend>``.
"""

from fuzz.engine import check

# Under the ci profile (the CI suite, on a 2-core CPU machine within 20 minutes) each real target
# runs half the profile's examples on each interpreter, and the correct reformulations (targets
# described "reformulation: ...", which prove the error bounds from the passing side and are the
# slowest kernels to interpret) a quarter. Every other profile, a campaign (`python -m fuzz run`)
# and the bound-margin tools (fuzz.devtools) run them in full.
CI_SHARE, CI_REFORMULATION_SHARE = 2, 4


def test_target_holds_every_property(
    fuzz_target, fuzz_require_backend, fuzz_profile, fuzz_repro_dir
):
    kw = {}
    if fuzz_profile.name == "ci":
        share = (
            CI_REFORMULATION_SHARE
            if fuzz_target.description.startswith("reformulation:")
            else CI_SHARE
        )
        kw["max_examples"] = max(1, fuzz_profile.max_examples // share)
    result = check(fuzz_target, fuzz_require_backend, fuzz_profile, repro_dir=fuzz_repro_dir, **kw)
    assert result.examples > 0
