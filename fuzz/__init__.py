"""A property-based numerical fuzzing harness for GPU kernels.

Public surface. Fuzzing your own kernel against a built-in family (``fuzz.plugin``):
:func:`fuzz_kernel` with :class:`Capabilities` (and its :class:`Lengths` and
:class:`Constraint` rules), :class:`Conventions` and :class:`Layout`; :class:`Unsupported`,
raised by a kernel that declines a case; :func:`autograd_backward`; :class:`Property` for checks
of your own; :class:`KnownFailure` for failures your library accepts. Lower level: targets (:class:`Target` with its :class:`Library`, :class:`Search`,
:class:`Baselines` and :class:`MutantOf` records, :func:`register`), cases, tolerance policy,
the hunt loop and profiles. See README.md for the command line.
"""

from typing import Any

from fuzz.backends import Backend, backends, get_backend, register_backend
from fuzz.case import Case
from fuzz.compare import Metrics, Tolerance, measure
from fuzz.engine import HuntResult, check, hunt
from fuzz.failures import CLASSES, Finding, Unsupported
from fuzz.plugin import (
    Capabilities,
    Constraint,
    Conventions,
    Layout,
    Lengths,
    PluginWarning,
    autograd_backward,
    fuzz_kernel,
)
from fuzz.profiles import PROFILES, Profile, get_profile
from fuzz.properties import Context, Property, check_case
from fuzz.signatures import KnownFailure
from fuzz.target import (
    Baselines,
    Hazard,
    Library,
    MutantOf,
    Search,
    Target,
    all_targets,
    get,
    load_beside,
    load_plugin,
    register,
    select,
)

__all__ = [
    "CLASSES",
    "PROFILES",
    "Backend",
    "Baselines",
    "Capabilities",
    "Case",
    "Constraint",
    "Context",
    "Conventions",
    "Finding",
    "Hazard",
    "HuntResult",
    "KnownFailure",
    "Layout",
    "Lengths",
    "Library",
    "Metrics",
    "MutantOf",
    "PluginWarning",
    "Profile",
    "Property",
    "Search",
    "Target",
    "Tolerance",
    "Unsupported",
    "all_targets",
    "autograd_backward",
    "backends",
    "check",
    "check_case",
    "fuzz_kernel",
    "get",
    "get_backend",
    "get_profile",
    "hunt",
    "load_beside",
    "load_plugin",
    "measure",
    "register",
    "register_backend",
    "select",
]

# The Triton runtime's scopes patch Triton's autotuner when imported: imported on first use.
_RUNTIME = ("interpreter_adapter", "interpreting", "pinned_configs")


def __getattr__(name: str) -> Any:
    if name in _RUNTIME:
        from fuzz import triton_runtime

        return getattr(triton_runtime, name)
    raise AttributeError(f"module 'fuzz' has no attribute {name!r}")
