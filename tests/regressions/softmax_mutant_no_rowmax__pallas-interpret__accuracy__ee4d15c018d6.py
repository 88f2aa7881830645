#!/usr/bin/env python3
"""Reproducer: softmax_mutant_no_rowmax on pallas-interpret -> accuracy

worst element y[0, 0] = 0, oracle 1: error 1 > tolerance 2.38419e-07, naive 0

target:    softmax_mutant_no_rowmax (mutant of softmax, expected class nan)
backend:   pallas-interpret (replay elsewhere with --backend NAME)
property:  oracle
case:      Case(x=f32[1,1], dtype='float32', scale=None, block_m=8, block_n=16, recipe={"bias": "none", "mask": {"kind": "none"}, "values": {"distribution": "normal", "magnitude": 1.0, "offset": 88.0, "seed": 0, "specials": "none"}})
tolerance: y: rho=2.0 x naive + 2.0 eps x max|oracle|
hazards:   single-valid-key: 1 row(s) with exactly one valid key; partial-tile: row length 1 is not a multiple of block_n=16 (partial last tile)
found:     2026-11-22T13:25:53+0000 on CPU (x86_64, 2 cores)
versions:  python 3.11.7, numpy 2.4.6, torch 2.13.0+cpu, triton 3.6.0, jax 0.10.2, jaxlib 0.10.2, hypothesis 6.168.3

Run it: python softmax_mutant_no_rowmax__pallas-interpret__accuracy__ee4d15c018d6.py [--backend NAME] [--quiet]
Exit status 1 while the failure reproduces, 0 once it does not.
"""

REPRO = {'format': 1, 'target': 'softmax_mutant_no_rowmax', 'plugin': None, 'backend': 'pallas-interpret', 'mutant_of': 'softmax', 'expected_class': 'nan', 'class': 'accuracy', 'property': 'oracle', 'message': 'worst element y[0, 0] = 0, oracle 1: error 1 > tolerance 2.38419e-07, naive 0', 'where': 'y[0, 0]', 'error': 1.0, 'tolerance': 2.384185791015625e-07, 'signature': 'ee4d15c018d6', 'params': {'dtype': 'float32', 'scale': None, 'block_m': 8, 'block_n': 16}, 'recipe': {'values': {'seed': 0, 'distribution': 'normal', 'magnitude': 1.0, 'offset': 88.0, 'specials': 'none'}, 'mask': {'kind': 'none'}, 'bias': 'none'}, 'property_params': '{}', 'dtypes': {'x': 'float32'}, 'ref_device': 'cpu', 'differential': False, 'differential_max_cost': 32.0, 'tolerance_rule': {'y': {'rho': 2.0, 'floor_ulps': 2.0, 'atol': 0.0, 'divergence_factor': 2.0}}, 'hazards': ['single-valid-key: 1 row(s) with exactly one valid key', 'partial-tile: row length 1 is not a multiple of block_n=16 (partial last tile)'], 'versions': {'python': '3.11.7', 'numpy': '2.4.6', 'torch': '2.13.0+cpu', 'triton': '3.6.0', 'jax': '0.10.2', 'jaxlib': '0.10.2', 'hypothesis': '6.168.3'}, 'device': 'CPU (x86_64, 2 cores)', 'found': '2026-11-22T13:25:53+0000'}

DATA = """
UEsDBC0AAAAIAAAAIQBNMltZ//////////8FABQAeC5ucHkBABAAhAAAAAAAAABKAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxcpG6l
oG6TZqKuo6Cell9UUpSYF59flJIKEndLzClOBYoXZyQWpAL5GoY6CoaaOgq1CmQDrgSHDU4AUEsBAi0DLQAAAAgAAAAhAE0yW1lK
AAAAhAAAAAUAAAAAAAAAAAAAAIABAAAAAHgubnB5UEsFBgAAAAABAAEAMwAAAIEAAAAAAA==
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
