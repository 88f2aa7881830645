"""Every real target passes every property on every backend of the profile.

Parametrized by the harness's pytest plugin over the registry (``--fuzz-targets``/``--plugin``
add or narrow targets); ids are ``<target>-<backend>``.
"""

from fuzz.engine import check


def test_target_holds_every_property(
    fuzz_target, fuzz_require_backend, fuzz_profile, fuzz_repro_dir
):
    result = check(fuzz_target, fuzz_require_backend, fuzz_profile, repro_dir=fuzz_repro_dir)
    assert result.examples > 0
