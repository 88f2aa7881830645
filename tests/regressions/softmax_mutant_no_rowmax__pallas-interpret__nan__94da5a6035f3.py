#!/usr/bin/env python3
"""Reproducer: softmax_mutant_no_rowmax on pallas-interpret -> nan

1 non-finite element(s) in y where the oracle is finite; y[0, 0] = nan, oracle 1

target:    softmax_mutant_no_rowmax (mutant of softmax, expected class nan)
backend:   pallas-interpret (replay elsewhere with --backend NAME)
property:  oracle
case:      Case(x=f32[1,1], dtype='float32', scale=None, block_m=8, block_n=16, recipe={"bias": "none", "mask": {"kind": "none"}, "values": {"distribution": "normal", "magnitude": 1.0, "offset": 90.0, "seed": 0, "specials": "none"}})
tolerance: y: rho=2.0 x naive + 2.0 eps x max|oracle|
hazards:   exp-overflow: logit 90.13 > 88.72: exp overflows fp32 unless the row max is subtracted; single-valid-key: 1 row(s) with exactly one valid key; partial-tile: row length 1 is not a multiple of block_n=16 (partial last tile)
found:     2026-11-22T13:25:53+0000 on CPU (x86_64, 2 cores)
versions:  python 3.11.7, numpy 2.4.6, torch 2.13.0+cpu, triton 3.6.0, jax 0.10.2, jaxlib 0.10.2, hypothesis 6.168.3

Run it: python softmax_mutant_no_rowmax__pallas-interpret__nan__94da5a6035f3.py [--backend NAME] [--quiet]
Exit status 1 while the failure reproduces, 0 once it does not.
"""

REPRO = {'format': 1, 'target': 'softmax_mutant_no_rowmax', 'plugin': None, 'backend': 'pallas-interpret', 'mutant_of': 'softmax', 'expected_class': 'nan', 'class': 'nan', 'property': 'oracle', 'message': '1 non-finite element(s) in y where the oracle is finite; y[0, 0] = nan, oracle 1', 'where': 'y[0, 0]', 'error': 'inf', 'tolerance': 2.384185791015625e-07, 'signature': '94da5a6035f3', 'params': {'dtype': 'float32', 'scale': None, 'block_m': 8, 'block_n': 16}, 'recipe': {'values': {'seed': 0, 'distribution': 'normal', 'magnitude': 1.0, 'offset': 90.0, 'specials': 'none'}, 'mask': {'kind': 'none'}, 'bias': 'none'}, 'property_params': '{}', 'dtypes': {'x': 'float32'}, 'ref_device': 'cpu', 'differential': False, 'differential_max_cost': 32.0, 'tolerance_rule': {'y': {'rho': 2.0, 'floor_ulps': 2.0, 'atol': 0.0, 'divergence_factor': 2.0}}, 'hazards': ['exp-overflow: logit 90.13 > 88.72: exp overflows fp32 unless the row max is subtracted', 'single-valid-key: 1 row(s) with exactly one valid key', 'partial-tile: row length 1 is not a multiple of block_n=16 (partial last tile)'], 'versions': {'python': '3.11.7', 'numpy': '2.4.6', 'torch': '2.13.0+cpu', 'triton': '3.6.0', 'jax': '0.10.2', 'jaxlib': '0.10.2', 'hypothesis': '6.168.3'}, 'device': 'CPU (x86_64, 2 cores)', 'found': '2026-11-22T13:25:53+0000'}

DATA = """
UEsDBC0AAAAIAAAAIQBJ9zc9//////////8FABQAeC5ucHkBABAAhAAAAAAAAABKAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxcpG6l
oG6TZqKuo6Cell9UUpSYF59flJIKEndLzClOBYoXZyQWpAL5GoY6CoaaOgq1CmQDrgSHLU4AUEsBAi0DLQAAAAgAAAAhAEn3Nz1K
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
