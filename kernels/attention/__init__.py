"""Attention forward kernels: dense/varlen (``triton``, ``pallas``), decode (``triton_decode``,
``pallas_decode``), and their mutants. The math and conventions are in ``README.md`` beside this
file."""
