"""Digests of the cases the family strategies draw with fixed seeds: run it before and after a
change to a strategy that must not change what is drawn (a refactor), and compare the lines.

Each line is one strategy (a family's, some narrowed the way plugins narrow them) at one scale:
``N`` cases drawn with ``hypothesis.seed(SEED)`` (generate phase only, no database), hashed
over every input array (dtype, shape, bytes), the params and the recipe; and the hash of the
choice sequences Hypothesis made for them.

    python -m fuzz.devtools.draw_digest [--examples 40] [--seed 0] [--scale small,large] [--only NAME...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from fuzz.hypothesis_internals import current_choices
from fuzz.target import generate
from strategies.attention import attention_cases, decode_cases, varlen_cases
from strategies.jagged_softmax import jagged_softmax_cases
from strategies.simple_gla import simple_gla_bwd_cases, simple_gla_fwd_cases
from strategies.softmax import softmax_cases

# name -> strategy(scale): the families' own strategies, and narrowings like a plugin's.
STRATEGIES: dict[str, Callable[[str], Any]] = {
    "softmax": softmax_cases,
    "softmax[scale,tiles]": lambda s: softmax_cases(
        s, features=frozenset({"scale"}), block_m=(16,), block_n=(128, 256)
    ),
    "jagged_softmax": jagged_softmax_cases,
    "attention": attention_cases,
    "attention[causal,D64]": lambda s: attention_cases(
        s, features=frozenset({"causal"}), head_dims=(64,), dtypes=("float16", "bfloat16")
    ),
    "attention_varlen": varlen_cases,
    "attention_decode": decode_cases,
    "attention_decode[splits]": lambda s: decode_cases(
        s, features=frozenset({"splits", "gqa"}), num_splits=(1, 2), blocks_k=(32,)
    ),
    "simple_gla_fwd": simple_gla_fwd_cases,
    "simple_gla_fwd[varlen]": lambda s: simple_gla_fwd_cases(
        s, varlen=True, chunk_sizes=(64,), features=frozenset({"g", "varlen", "initial_state"})
    ),
    "simple_gla_bwd": simple_gla_bwd_cases,
}


def case_digest(case: Any) -> str:
    """A hash of a case's inputs (dtype, shape, bytes), params and recipe."""
    h = hashlib.sha256()
    for name in sorted(case.inputs):
        a = case.inputs[name]
        h.update(f"{name}|{a.dtype}|{a.shape}|".encode())
        h.update(a.tobytes())
    h.update(json.dumps(dict(case.params), sort_keys=True, default=repr).encode())
    h.update(json.dumps(dict(case.recipe), sort_keys=True, default=repr).encode())
    return h.hexdigest()


def digest(strategy: st.SearchStrategy[Any], examples: int, seed: int) -> tuple[str, str, int]:
    """(cases digest, choices digest, cases drawn) of ``examples`` draws with ``seed``."""
    cases, choices = hashlib.sha256(), hashlib.sha256()
    n = 0

    def keep(case: Any) -> None:
        nonlocal n
        n += 1
        cases.update(case_digest(case).encode())
        choices.update(repr(current_choices()).encode())

    generate(strategy, keep, examples=examples, seed=seed)
    return cases.hexdigest()[:16], choices.hexdigest()[:16], n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scale", default="small,large")
    p.add_argument("--only", nargs="*", default=[], help="strategy names (default: all)")
    args = p.parse_args()
    names = args.only or list(STRATEGIES)
    for scale in args.scale.split(","):
        for name in names:
            c, ch, n = digest(STRATEGIES[name](scale), args.examples, args.seed)
            print(f"{scale:6} {name:26} cases {c} choices {ch} n={n}", flush=True)


if __name__ == "__main__":
    main()
