"""Plugins for published kernel libraries, and the README's examples of fuzzing your own kernel.

Each module is a plugin (``python -m fuzz run --plugin fuzz.clients.fla_simple_gla``, ``pytest
--plugin fuzz.clients.liger_softmax``) written against the public API only; the library comes
from the ``clients`` extra (``pip install -e ".[clients]"``), or with JAX itself
(``fuzz.clients.jax_pallas_ops``: JAX's Pallas GPU attention ops). Its docstring records what the
harness found in the library and why each finding is a bug, an unsupported input or a
convention.
"""
