"""Jagged softmax (seed 000): a softmax over each segment's rows of ``values [N, M]``, per column,
with segments given by ``offsets [B+1]``; Triton (``triton.py``) and Pallas (``pallas.py``)
kernels, and their mutants (``mutants.py``). See ``README.md`` for the math and the conventions."""
