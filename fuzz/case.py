"""One concrete kernel input: named host arrays plus static configuration."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzz.arrays import describe


def _jsonable(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, where) for v in value]
    raise TypeError(f"{where}={value!r} must be a JSON scalar or a list of them")


@dataclass(frozen=True, eq=False)
class Case:
    """Inputs of one kernel call.

    Attributes:
        inputs: host arrays by argument name (absent optional inputs are simply missing).
        params: static configuration (dtype name, scale, block sizes...), JSON scalars or lists.
        recipe: how the arrays were generated, for humans (seed, distribution, mask kind...).
    """

    inputs: Mapping[str, np.ndarray]
    params: Mapping[str, Any] = field(default_factory=dict)
    recipe: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, a in self.inputs.items():
            if not isinstance(a, np.ndarray):
                raise TypeError(f"Case.inputs[{name!r}] must be a numpy array, got {type(a)}")
        for key, value in self.params.items():
            _jsonable(value, f"Case.params[{key!r}]")

    def replace(self, *, inputs: Mapping[str, np.ndarray] | None = None, **params: Any) -> Case:
        """A copy with some inputs and/or params replaced."""
        new_inputs = dict(self.inputs) if inputs is None else {**self.inputs, **inputs}
        return Case(new_inputs, {**self.params, **params}, self.recipe)

    @property
    def size(self) -> int:
        """Elements of the largest input: the measure of a reproducer's size."""
        return max((a.size for a in self.inputs.values()), default=0)

    def shapes(self) -> dict[str, list[int]]:
        return {k: list(a.shape) for k, a in self.inputs.items()}

    def digest(self) -> str:
        """A fingerprint of the call: every input's name, dtype, shape and bytes, and the params.
        Two findings whose minimal examples have one digest are one kernel call failing two
        properties (``fuzz.engine``: one bug)."""
        h = hashlib.sha1()
        for k in sorted(self.inputs):
            a = np.ascontiguousarray(self.inputs[k])
            h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
            h.update(a.tobytes())
        h.update(json.dumps(self.params_json(), sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]

    def params_json(self) -> dict[str, Any]:
        return {k: _jsonable(v, k) for k, v in self.params.items()}

    def __repr__(self) -> str:
        parts = [f"{k}={describe(a)}" for k, a in self.inputs.items()]
        parts += [f"{k}={v!r}" for k, v in self.params.items()]
        if self.recipe:
            parts.append("recipe=" + json.dumps(dict(self.recipe), default=str, sort_keys=True))
        return f"Case({', '.join(parts)})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """How Hypothesis prints a case (a failing example's arguments, its notes): this
        repr, not the call that built it with every array in full. A GPU campaign's worker was
        killed past its slice's hard limit while Hypothesis formatted a case of 196,608 elements
        that way."""
        p.text(repr(self))
