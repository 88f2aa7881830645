"""An attention kernel in plain torch with two positional bugs of independent triggers, each
reading as a convention a maintainer would name: its causal mask aligned top-left (query i sees
keys up to i where bottom-right, ``i + Tk - Tq``, is declared) and its window's ``(left,
right)`` unpacked as ``(right, left)``. A case with no window meets only the first; a window
without the causal mask, only the second. The duplicate check must report two rows: a small
example of the second bug (two queries on one key under a window ``(-1, 0)``) reads as a
top-left alignment too, which alone must not make the two bugs one.
``positional_causal_top_left`` has the first bug alone, ``control_positional`` neither."""

from __future__ import annotations

import torch

import fuzz

BUGS = ("causal_top_left", "window_sides_swapped")


def _attention(q, k, v, *, scale, causal, window, bugs):
    dtype = q.dtype
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) * scale
    tq, tk = q.shape[2], k.shape[2]
    i = torch.arange(tq)[:, None]
    j = torch.arange(tk)[None, :]
    p = i + (tk - tq)  # each query's key position, bottom-right aligned
    keep = torch.ones(tq, tk, dtype=torch.bool)
    if causal:
        keep &= j <= (i if "causal_top_left" in bugs else p)
    if window is not None:
        left, right = window
        if "window_sides_swapped" in bugs:
            left, right = right, left
        if left >= 0:
            keep &= j >= p - left
        if right >= 0:
            keep &= j <= p + right
    s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    total = e.sum(-1, keepdim=True)
    o = torch.einsum("bhqk,bhkd->bhqd", e / total.clamp_min(1e-30), v.float())
    lse = (m + torch.log(total)).squeeze(-1)
    return o.to(dtype), lse


def _register(name, bugs):
    def kernel(q, k, v, *, scale, causal, window):
        return _attention(q, k, v, scale=scale, causal=causal, window=window, bugs=bugs)

    fuzz.fuzz_kernel(
        name,
        family="attention",
        kernel=kernel,
        capabilities=fuzz.Capabilities(dtypes=("float32",), features={"scale", "causal", "window"}),
        # (a masked key's value times its zero probability: NaN where the value is NaN)
        conventions=fuzz.Conventions(masked_inputs="finite"),
        description="plain-torch attention: " + (", ".join(bugs) or "no bug"),
    )


_register("two_positional_bugs", BUGS)
_register("positional_causal_top_left", BUGS[:1])
_register("control_positional", ())
