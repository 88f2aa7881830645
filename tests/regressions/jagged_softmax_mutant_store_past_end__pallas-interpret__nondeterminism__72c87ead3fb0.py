#!/usr/bin/env python3
"""Reproducer: jagged_softmax_mutant_store_past_end on pallas-interpret -> nondeterminism

num_programs=2 instead of None changes y[3, 0] (segment 2) from 1 to 0: the result depends on
the order in which programs run

target:    jagged_softmax_mutant_store_past_end (mutant of jagged_softmax, expected class nondeterminism)
backend:   pallas-interpret (replay elsewhere with --backend NAME)
property:  schedule-invariance
case:      Case(values=f32[4,1], offsets=int32[4], dtype='float32', block_n=4, block_m=4, num_programs=None, guard='nan', recipe={"lengths": [1, 2, 1], "values": {"distribution": "normal", "magnitude": 1.0, "offset": 0.0, "seed": 0, "specials": "none"}})
tolerance: y: rho=2.0 x naive + 2.0 eps x max|oracle|
hazards:   single-row-segments: 2 one-row segment(s) (softmax 1.0); tile-overhang: 2 segment(s) whose last tile covers rows of the next (first: segment 0, 3 row(s)); partial-column-block: M=1 is not a multiple of block_m=4
found:     2026-11-22T14:33:40+0000 on CPU (x86_64, 2 cores)
versions:  python 3.11.7, numpy 2.4.6, torch 2.13.0+cpu, triton 3.6.0, jax 0.10.2, jaxlib 0.10.2, hypothesis 6.168.3

Run it: python jagged_softmax_mutant_store_past_end__pallas-interpret__nondeterminism__72c87ead3fb0.py [--backend NAME] [--quiet]
Exit status 1 while the failure reproduces, 0 once it does not.
"""

REPRO = {'format': 1, 'target': 'jagged_softmax_mutant_store_past_end', 'plugin': None, 'backend': 'pallas-interpret', 'mutant_of': 'jagged_softmax', 'expected_class': 'nondeterminism', 'class': 'nondeterminism', 'property': 'schedule-invariance', 'message': 'num_programs=2 instead of None changes y[3, 0] (segment 2) from 1 to 0: the result depends on the order in which programs run', 'where': 'y[3, 0]', 'error': None, 'tolerance': None, 'signature': '72c87ead3fb0', 'params': {'dtype': 'float32', 'block_n': 4, 'block_m': 4, 'num_programs': None, 'guard': 'nan'}, 'recipe': {'lengths': [1, 2, 1], 'values': {'seed': 0, 'distribution': 'normal', 'magnitude': 1.0, 'offset': 0.0, 'specials': 'none'}}, 'property_params': '{"masked-poison": "nan", "schedule-invariance": 2}', 'dtypes': {'values': 'float32', 'offsets': 'int32'}, 'ref_device': 'cpu', 'differential': False, 'differential_max_cost': 32.0, 'tolerance_rule': {'y': {'rho': 2.0, 'floor_ulps': 2.0, 'atol': 0.0, 'divergence_factor': 2.0}}, 'hazards': ['single-row-segments: 2 one-row segment(s) (softmax 1.0)', 'tile-overhang: 2 segment(s) whose last tile covers rows of the next (first: segment 0, 3 row(s))', 'partial-column-block: M=1 is not a multiple of block_m=4'], 'versions': {'python': '3.11.7', 'numpy': '2.4.6', 'torch': '2.13.0+cpu', 'triton': '3.6.0', 'jax': '0.10.2', 'jaxlib': '0.10.2', 'hypothesis': '6.168.3'}, 'device': 'CPU (x86_64, 2 cores)', 'found': '2026-11-22T14:33:40+0000'}

DATA = """
UEsDBC0AAAAIAAAAIQDZ1n36//////////8KABQAdmFsdWVzLm5weQEAEACQAAAAAAAAAFcAAAAAAAAAm+wX6hsQychQxlCtnpJa
nFykbqWgbpNmoq6joJ6WX1RSlJgXn1+UkgoSd0vMKU4FihdnJBakAvkaJjoKhpo6CrUKZAOunP0MdvVu7Pv2flK2v3/1mi0AUEsD
BC0AAAAIAAAAIQDZTGOF//////////8LABQAb2Zmc2V0cy5ucHkBABAAkAAAAAAAAABOAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxc
pG6loG6TaaKuo6Cell9UUpSYF59flJIKEndLzClOBYoXZyQWpAL5GiY6mjoKtQoUAC4GIGAEYmYgZgFiAFBLAQItAy0AAAAIAAAA
IQDZ1n36VwAAAJAAAAAKAAAAAAAAAAAAAACAAQAAAAB2YWx1ZXMubnB5UEsBAi0DLQAAAAgAAAAhANlMY4VOAAAAkAAAAAsAAAAA
AAAAAAAAAIABkwAAAG9mZnNldHMubnB5UEsFBgAAAAACAAIAcQAAAB4BAAAAAA==
"""

if __name__ == "__main__":
    import sys
    from pathlib import Path

    try:
        import fuzz.reproducer
    except ImportError:
        for parent in Path(__file__).resolve().parents:
            if (parent / "fuzz" / "reproducer.py").is_file():
                sys.path.insert(0, str(parent))
                break
        import fuzz.reproducer
    sys.exit(fuzz.reproducer.main(REPRO, DATA, sys.argv[1:]))
