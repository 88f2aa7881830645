"""Shared by the real-library tests: the harness's verdict on a library's outputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest

from fuzz import get, get_backend
from fuzz.case import Case
from fuzz.properties import Context


def check_against_oracle(target_name: str, case: Case, got: Mapping[str, np.ndarray]) -> None:
    """Every output finite where the oracle is, and within the error the harness allows target
    ``target_name`` on this case (``Context.bound``: the target's tolerance rule and analysis)
    of its fp64 oracle; the message names the worst element and the case."""
    ctx = Context(get(target_name), get_backend("triton-interpret"), case)
    for name, oracle in ctx.oracle.items():
        value = np.asarray(got[name]).astype(np.float64)
        assert value.shape == oracle.shape, (name, value.shape, oracle.shape)
        finite = np.isfinite(oracle)
        assert np.isfinite(value[finite]).all(), (
            f"{name}: NaN/Inf where the oracle is finite; {case!r}"
        )
        if not value.size:
            continue
        err = np.where(finite, np.abs(value - oracle), 0.0)
        ratio = err / np.maximum(ctx.bound(name), np.finfo(np.float64).tiny)
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
        assert ratio[worst] <= 1.0, (
            f"{name}{list(worst)}: error {err[worst]:.3g} is {ratio[worst]:.3g} x the bound "
            f"{ctx.bound(name)[worst]:.3g} ({value[worst]!r} vs {oracle[worst]!r}); {case!r}"
        )


@pytest.fixture
def within_bounds() -> Callable[[str, Case, Mapping[str, np.ndarray]], None]:
    return check_against_oracle
