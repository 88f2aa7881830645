"""Profiles: Hypothesis settings plus what the harness runs under them.

The names are registered as Hypothesis profiles too, so ``pytest --hypothesis-profile=gpu`` picks
both the settings and the harness's side (backends, shape scale, differential, reference device).

    ci       CPU interpreters, small shapes, derandomized, no database, no explain phase
    dev      like ci, fewer examples: a quick look while editing a kernel
    gpu      compiled backends + in-process differential against the interpreters, larger shapes,
             a database, fp64 references on the GPU
    nightly  like gpu (or ci's backends on a CPU-only machine) with many more examples
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, settings

from fuzz.backends import cuda_reason

_NO_EXPLAIN = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
_QUIET_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

INTERPRETERS = ("triton-interpret", "pallas-interpret")
COMPILED = ("triton", "pallas-gpu")


@dataclass(frozen=True)
class Profile:
    """The harness's side of a profile.

    Attributes:
        name: also the Hypothesis profile's name.
        backends: the backends whose kernels are checked directly.
        scale: ``'small'`` or ``'large'``: which shape bounds the target strategies use.
        differential: also run each case on the backend's twin (compiled vs interpreted).
        differential_max_cost: ...but only cases whose ``Search.cost`` is at most this
            (the interpreter is orders of magnitude slower than the compiled kernel).
        differential_every: ...and on one example in this many (a drawn choice, so replays and
            shrinking see the same decision).
        ref_device: where the fp64 oracle and the naive reference run (``'cpu'``/``'cuda'``).
        needs_gpu: stop with a clear message on a machine without CUDA.
        max_examples: examples per target and backend.
        shrink_seconds: how long Hypothesis may shrink one failure (its own cap is 300 s). A
            compiled backend pays a compile (1-10 s on a GPU) for every new kernel variant a
            shrink step tries, and stopped 3-5x above the interpreters' minimal cases at 300 s.
        interpreter_shrink: a compiled backend's failure is shrunk where that is cheap
            (``fuzz.shrink``): in the interpreter of the same kernel source where it reproduces
            there, else on the compiled backend through compiled kernel variants first.
        interpreter_max_cost: the largest ``Search.cost`` of a case the interpreter
            shrinks (about 10 ms of Triton interpreter per unit, several launches per example):
            a larger case is first cut on the compiled backend.
        variant_choices: each run of a hunt draws its compile-time choices (dtype, tiles, head
            dims: each a kernel binary of its own) from this many values per dimension, the
            simplest always among them (``fuzz.families.variant_space``); runs with other seeds
            (a campaign's slices) take other values. None: every value in every run.
        compile_share: once this share of a run's time has gone into compiling, examples that
            would compile a new kernel variant are rejected before the compiler runs (drawn again)
            until the share is back under it. None: no limit.
        reuse_share: most examples draw a case structure (dtype, tiles, shapes, flags: a kernel
            variant) that an earlier example launched, with fresh values, and new structures
            are explored at the rate that keeps compiling near this share of the run's time
            (``strategies.reuse``). None: every example draws a fresh structure. It changes
            what a choice sequence means: every hunt that replays another's examples (shrink
            stages, the example database) must run with the same setting.
    """

    name: str
    backends: tuple[str, ...]
    scale: str
    differential: bool
    ref_device: str
    needs_gpu: bool
    max_examples: int
    differential_max_cost: float = 32.0
    differential_every: int = 1
    shrink_seconds: float = 300.0
    interpreter_shrink: bool = True
    interpreter_max_cost: float = 16.0
    variant_choices: int | None = None
    compile_share: float | None = None
    reuse_share: float | None = None

    @property
    def settings(self) -> settings:
        return settings.get_profile(self.name)


PROFILES: dict[str, Profile] = {
    "ci": Profile("ci", INTERPRETERS, "small", False, "cpu", False, 40),
    "dev": Profile("dev", INTERPRETERS, "small", False, "cpu", False, 10),
    "gpu": Profile(
        "gpu",
        COMPILED,
        "large",
        True,
        "cuda",
        True,
        200,
        # The interpreter twin took 70% of a warm softmax run at (16, every 4th) on an H100,
        # and still 61% at (8, every 8th): ~25 ms per program-tile against ~5 ms for all the
        # compiled kernel's checks. At (2, every 16th) it runs on the small cases, where a
        # divergence also shrinks to, at a few percent of the time (the nightly profile runs
        # it far more).
        differential_max_cost=2.0,
        differential_every=16,
        shrink_seconds=900.0,
        variant_choices=2,
        compile_share=0.15,
        reuse_share=0.15,
    ),
    "nightly": Profile(
        "nightly",
        COMPILED,
        "large",
        True,
        "cuda",
        True,
        5000,
        differential_max_cost=256.0,
        differential_every=2,
        shrink_seconds=1800.0,
        variant_choices=3,
        compile_share=0.15,
        reuse_share=0.15,
    ),
}

_BASE = settings(
    deadline=None, suppress_health_check=_QUIET_CHECKS, print_blob=False, phases=_NO_EXPLAIN
)
settings.register_profile(
    "ci", _BASE, max_examples=PROFILES["ci"].max_examples, derandomize=True, database=None
)
settings.register_profile("dev", _BASE, max_examples=PROFILES["dev"].max_examples, database=None)
settings.register_profile("gpu", _BASE, max_examples=PROFILES["gpu"].max_examples)
settings.register_profile("nightly", _BASE, max_examples=PROFILES["nightly"].max_examples)


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"profile={name!r} is unknown; choose one of {sorted(PROFILES)}") from None


SCALES = ("small", "large")


def with_scale(profile: Profile, scale: str | None) -> Profile:
    """``profile`` drawing shapes at ``scale`` (``small``: the CPU interpreters' sizes;
    ``large``: the GPU's chunk sizes, head counts and tiles) instead of its own; None: as is. A
    CPU machine can then draw the large configurations a kernel only has there."""
    if scale is None or scale == profile.scale:
        return profile
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r} must be one of {SCALES}")
    return dataclasses.replace(profile, scale=scale)


def default_profile() -> Profile:
    """``gpu`` where CUDA is available, else ``ci``."""
    return PROFILES["gpu" if cuda_reason() is None else "ci"]


def gpu_missing_message(profile: Profile, option: str = "--hypothesis-profile") -> str | None:
    """The one clear message for a GPU profile on a machine without CUDA (None if fine), naming
    the front end's ``option`` (pytest's, or the CLI's ``--profile``)."""
    if not profile.needs_gpu:
        return None
    reason = cuda_reason()
    if reason is None:
        return None
    return (
        f"the {profile.name!r} profile runs the compiled backends {', '.join(profile.backends)} "
        f"and needs a CUDA GPU, but {reason}. Use {option}=ci (CPU interpreters) here."
    )


@dataclass(frozen=True)
class HuntOptions:
    """What a hunt runs under: the harness side of a :class:`Profile`, with a front end's
    overrides, built once (:meth:`of`) and handed as it is through every layer (a campaign, its
    workers, the engine, the shrink stages, the reproducers). The fields are the profile's (see
    :class:`Profile`); ``name`` names its Hypothesis settings.
    """

    name: str
    scale: str
    ref_device: str
    differential: bool
    differential_max_cost: float
    differential_every: int
    max_examples: int
    shrink_seconds: float
    interpreter_shrink: bool
    interpreter_max_cost: float
    variant_choices: int | None
    compile_share: float | None
    reuse_share: float | None = None
    # A campaign with compile workers: a compiled-only bug's shrinking through kernel variants
    # not compiled yet (each a compile) is left to them (``fuzz.shrink``'s compile ladder).
    compile_ladder: bool = False

    @classmethod
    def of(
        cls,
        profile: Profile | HuntOptions,
        *,
        scale: str | None = None,
        shrink_seconds: float | None = None,
        differential: bool | None = None,
    ) -> HuntOptions:
        """The options of ``profile`` (a :class:`Profile`, or options to override), with each
        override given (None: the profile's): ``scale`` (as :func:`with_scale`), the seconds
        Hypothesis may shrink one failure, and whether cases also run on the backend's twin."""
        fields = {
            f.name: getattr(profile, f.name, f.default)  # (a Profile has no campaign's fields)
            for f in dataclasses.fields(cls)
        }
        if scale is not None and scale not in SCALES:
            raise ValueError(f"scale={scale!r} must be one of {SCALES}")
        changes = {"scale": scale, "shrink_seconds": shrink_seconds, "differential": differential}
        fields.update({k: v for k, v in changes.items() if v is not None})
        return cls(**fields)

    @property
    def settings(self) -> settings:
        return settings.get_profile(self.name)

    def check_kwargs(self) -> dict[str, Any]:
        """What these options say to ``fuzz.properties.check_case`` about checking one case (and
        a reproducer records, to replay it the same way): where the references run, and whether
        and up to which interpreter cost the case also runs on the backend's twin."""
        return {
            "ref_device": self.ref_device,
            "differential": self.differential,
            "differential_max_cost": self.differential_max_cost,
        }
