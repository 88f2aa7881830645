#!/usr/bin/env python3
"""Reproducer: softmax_mutant_scale_twice on pallas-interpret -> accuracy

worst element y[0, 0] = 0.516109, oracle 0.532185: error 0.0160757 > tolerance 1.62396e-07,
naive 1.77566e-08

target:    softmax_mutant_scale_twice (mutant of softmax, expected class accuracy)
backend:   pallas-interpret (replay elsewhere with --backend NAME)
property:  oracle
case:      Case(x=f32[1,2], dtype='float32', scale=0.5, block_m=8, block_n=16, recipe={"bias": "none", "mask": {"kind": "none"}, "values": {"distribution": "normal", "magnitude": 1.0, "offset": 0.0, "seed": 0, "specials": "none"}})
tolerance: y: rho=2.0 x naive + 2.0 eps x max|oracle|
hazards:   partial-tile: row length 2 is not a multiple of block_n=16 (partial last tile)
found:     2026-11-22T13:26:13+0000 on CPU (x86_64, 2 cores)
versions:  python 3.11.7, numpy 2.4.6, torch 2.13.0+cpu, triton 3.6.0, jax 0.10.2, jaxlib 0.10.2, hypothesis 6.168.3

Run it: python softmax_mutant_scale_twice__pallas-interpret__accuracy__77418a55dfca.py [--backend NAME] [--quiet]
Exit status 1 while the failure reproduces, 0 once it does not.
"""

REPRO = {'format': 1, 'target': 'softmax_mutant_scale_twice', 'plugin': None, 'backend': 'pallas-interpret', 'mutant_of': 'softmax', 'expected_class': 'accuracy', 'class': 'accuracy', 'property': 'oracle', 'message': 'worst element y[0, 0] = 0.516109, oracle 0.532185: error 0.0160757 > tolerance 1.62396e-07, naive 1.77566e-08', 'where': 'y[0, 0]', 'error': 0.016075712567144573, 'tolerance': 1.6239604282074394e-07, 'signature': '77418a55dfca', 'params': {'dtype': 'float32', 'scale': 0.5, 'block_m': 8, 'block_n': 16}, 'recipe': {'values': {'seed': 0, 'distribution': 'normal', 'magnitude': 1.0, 'offset': 0.0, 'specials': 'none'}, 'mask': {'kind': 'none'}, 'bias': 'none'}, 'property_params': '{}', 'dtypes': {'x': 'float32'}, 'ref_device': 'cpu', 'differential': False, 'differential_max_cost': 32.0, 'tolerance_rule': {'y': {'rho': 2.0, 'floor_ulps': 2.0, 'atol': 0.0, 'divergence_factor': 2.0}}, 'hazards': ['partial-tile: row length 2 is not a multiple of block_n=16 (partial last tile)'], 'versions': {'python': '3.11.7', 'numpy': '2.4.6', 'torch': '2.13.0+cpu', 'triton': '3.6.0', 'jax': '0.10.2', 'jaxlib': '0.10.2', 'hypothesis': '6.168.3'}, 'device': 'CPU (x86_64, 2 cores)', 'found': '2026-11-22T13:26:13+0000'}

DATA = """
UEsDBC0AAAAIAAAAIQAA+ePK//////////8FABQAeC5ucHkBABAAiAAAAAAAAABOAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxcpG6l
oG6TZqKuo6Cell9UUpSYF59flJIKEndLzClOBYoXZyQWpAL5GoY6CkaaOgq1CmQDrpz9DHb1buz7AFBLAQItAy0AAAAIAAAAIQAA
+ePKTgAAAIgAAAAFAAAAAAAAAAAAAACAAQAAAAB4Lm5weVBLBQYAAAAAAQABADMAAACFAAAAAAA=
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
