"""Developer tools: measurements of the harness itself, run by hand or from ``.ci/gpu-session``.

Nothing here is imported by the harness, the tests or a plugin; each module is a script
(``python -m fuzz.devtools.NAME --help``) that prints numbers and asserts nothing. The numbers
they printed, dated with their device, are in BENCHMARKS.md.

    bound_margins      how much room the per-element error bounds (softmax, jagged softmax,
                       attention) leave on both sides: correct kernels and reformulations against
                       precision-loss mutants, per dtype
    gla_bound_margins  the same for the simple GLA bound
    compile_cost       what one new kernel variant costs to compile, per target and backend
    first_hunt         where a fresh hunt's time goes (compiles included), then the same warm
    profile_hunt       a hunt under cProfile; ``--stub`` replaces the kernel by its oracle to
                       profile the harness's host side at GPU shapes on a CPU machine
    variants           how many compiled Pallas kernel variants a hunt asks for (no kernel runs)
    reuse_bench        examples/s and compile share with and without reused case structures
                       (``strategies.reuse``), each run in its own process
    triton_keys        the Triton binaries each target's cases would compile (no GPU needed),
                       and any that a length selects (``fuzz.triton_keys``)
    draw_digest        digests of the cases each family strategy draws with fixed seeds: equal
                       before and after a refactor that must not change what is drawn
    gla_smem           shared memory of the Pallas GLA kernels per tile and head dims (GPU)
    mutant_probe       whether GLA mutants give NaN on a backend for the interpreters' minimal
                       cases (GPU)

``.ci/`` holds what CI runs: ``.ci/run`` (the CPU suite on a fresh clone) and
``.ci/gpu-session`` with ``.ci/gpu_goals.py`` (the GPU checks and the goal tables).
"""
