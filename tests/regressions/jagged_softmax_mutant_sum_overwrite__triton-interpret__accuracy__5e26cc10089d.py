#!/usr/bin/env python3
"""Reproducer: jagged_softmax_mutant_sum_overwrite on triton-interpret -> accuracy

worst element y[2, 0] = 3.24168, oracle 0.338596: error 2.90309 > tolerance 1.04996e-07, naive
1.2134e-08

target:    jagged_softmax_mutant_sum_overwrite (mutant of jagged_softmax, expected class accuracy)
backend:   triton-interpret (replay elsewhere with --backend NAME)
property:  oracle
case:      Case(values=f32[5,1], offsets=int32[2], dtype='float32', block_n=4, block_m=4, num_programs=None, guard='nan', recipe={"lengths": [5], "values": {"distribution": "normal", "magnitude": 1.0, "offset": 0.0, "seed": 0, "specials": "none"}})
tolerance: y: rho=2.0 x naive + 2.0 eps x max|oracle|
hazards:   multi-tile-segment: max_seqlen 5 > block_n=4: the running max and sum cross tiles; partial-column-block: M=1 is not a multiple of block_m=4
found:     2026-11-22T14:33:42+0000 on CPU (x86_64, 2 cores)
versions:  python 3.11.7, numpy 2.4.6, torch 2.13.0+cpu, triton 3.6.0, jax 0.10.2, jaxlib 0.10.2, hypothesis 6.168.3

Run it: python jagged_softmax_mutant_sum_overwrite__triton-interpret__accuracy__5e26cc10089d.py [--backend NAME] [--quiet]
Exit status 1 while the failure reproduces, 0 once it does not.
"""

REPRO = {'format': 1, 'target': 'jagged_softmax_mutant_sum_overwrite', 'plugin': None, 'backend': 'triton-interpret', 'mutant_of': 'jagged_softmax', 'expected_class': 'accuracy', 'class': 'accuracy', 'property': 'oracle', 'message': 'worst element y[2, 0] = 3.24168, oracle 0.338596: error 2.90309 > tolerance 1.04996e-07, naive 1.2134e-08', 'where': 'y[2, 0]', 'error': 2.903085065101091, 'tolerance': 1.0499556745617772e-07, 'signature': '5e26cc10089d', 'params': {'dtype': 'float32', 'block_n': 4, 'block_m': 4, 'num_programs': None, 'guard': 'nan'}, 'recipe': {'lengths': [5], 'values': {'seed': 0, 'distribution': 'normal', 'magnitude': 1.0, 'offset': 0.0, 'specials': 'none'}}, 'property_params': '{}', 'dtypes': {'values': 'float32', 'offsets': 'int32'}, 'ref_device': 'cpu', 'differential': False, 'differential_max_cost': 32.0, 'tolerance_rule': {'y': {'rho': 2.0, 'floor_ulps': 2.0, 'atol': 0.0, 'divergence_factor': 2.0}}, 'hazards': ['multi-tile-segment: max_seqlen 5 > block_n=4: the running max and sum cross tiles', 'partial-column-block: M=1 is not a multiple of block_m=4'], 'versions': {'python': '3.11.7', 'numpy': '2.4.6', 'torch': '2.13.0+cpu', 'triton': '3.6.0', 'jax': '0.10.2', 'jaxlib': '0.10.2', 'hypothesis': '6.168.3'}, 'device': 'CPU (x86_64, 2 cores)', 'found': '2026-11-22T14:33:42+0000'}

DATA = """
UEsDBC0AAAAIAAAAIQCjB1zf//////////8KABQAdmFsdWVzLm5weQEAEACUAAAAAAAAAFsAAAAAAAAAm+wX6hsQychQxlCtnpJa
nFykbqWgbpNmoq6joJ6WX1RSlJgXn1+UkgoSd0vMKU4FihdnJBakAvkapjoKhpo6CrUKZAOunP0MdvVu7Pv2flK2v3/1mu1CRc79
AFBLAwQtAAAACAAAACEALMHXfP//////////CwAUAG9mZnNldHMubnB5AQAQAIgAAAAAAAAASQAAAAAAAACb7BfqGxDJyFDGUK2e
klqcXKRupaBuk2mirqOgnpZfVFKUmBefX5SSChJ3S8wpTgWKF2ckFqQC+RpGOpo6CrUKFAAuBiBgBWIAUEsBAi0DLQAAAAgAAAAh
AKMHXN9bAAAAlAAAAAoAAAAAAAAAAAAAAIABAAAAAHZhbHVlcy5ucHlQSwECLQMtAAAACAAAACEALMHXfEkAAACIAAAACwAAAAAA
AAAAAAAAgAGXAAAAb2Zmc2V0cy5ucHlQSwUGAAAAAAIAAgBxAAAAHQEAAAAA
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
