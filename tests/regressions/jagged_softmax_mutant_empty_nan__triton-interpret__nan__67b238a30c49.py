#!/usr/bin/env python3
"""Reproducer: jagged_softmax_mutant_empty_nan on triton-interpret -> nan

1 non-finite element(s) in y where the oracle is finite; y[0, 0] = nan, oracle 0

target:    jagged_softmax_mutant_empty_nan (mutant of jagged_softmax, expected class nan)
backend:   triton-interpret (replay elsewhere with --backend NAME)
property:  oracle
case:      Case(values=f32[1,1], offsets=int32[2], dtype='float32', block_n=4, block_m=4, num_programs=None, guard='nan', recipe={"lengths": [1], "values": {"density": 0.1, "distribution": "normal", "magnitude": 1.0, "offset": 0.0, "seed": 0, "specials": "-inf"}})
tolerance: y: rho=2.0 x naive + 2.0 eps x max|oracle|
hazards:   single-row-segments: 1 one-row segment(s) (softmax 1.0); no-finite-value: 1 segment column(s) with no finite value (all -inf); partial-column-block: M=1 is not a multiple of block_m=4
found:     2026-11-22T14:32:45+0000 on CPU (x86_64, 2 cores)
versions:  python 3.11.7, numpy 2.4.6, torch 2.13.0+cpu, triton 3.6.0, jax 0.10.2, jaxlib 0.10.2, hypothesis 6.168.3

Run it: python jagged_softmax_mutant_empty_nan__triton-interpret__nan__67b238a30c49.py [--backend NAME] [--quiet]
Exit status 1 while the failure reproduces, 0 once it does not.
"""

REPRO = {'format': 1, 'target': 'jagged_softmax_mutant_empty_nan', 'plugin': None, 'backend': 'triton-interpret', 'mutant_of': 'jagged_softmax', 'expected_class': 'nan', 'class': 'nan', 'property': 'oracle', 'message': '1 non-finite element(s) in y where the oracle is finite; y[0, 0] = nan, oracle 0', 'where': 'y[0, 0]', 'error': 'inf', 'tolerance': 2.802596928649634e-45, 'signature': '67b238a30c49', 'params': {'dtype': 'float32', 'block_n': 4, 'block_m': 4, 'num_programs': None, 'guard': 'nan'}, 'recipe': {'lengths': [1], 'values': {'seed': 0, 'distribution': 'normal', 'magnitude': 1.0, 'offset': 0.0, 'specials': '-inf', 'density': 0.1}}, 'property_params': '{}', 'dtypes': {'values': 'float32', 'offsets': 'int32'}, 'ref_device': 'cpu', 'differential': False, 'differential_max_cost': 32.0, 'tolerance_rule': {'y': {'rho': 2.0, 'floor_ulps': 2.0, 'atol': 0.0, 'divergence_factor': 2.0}}, 'hazards': ['single-row-segments: 1 one-row segment(s) (softmax 1.0)', 'no-finite-value: 1 segment column(s) with no finite value (all -inf)', 'partial-column-block: M=1 is not a multiple of block_m=4'], 'versions': {'python': '3.11.7', 'numpy': '2.4.6', 'torch': '2.13.0+cpu', 'triton': '3.6.0', 'jax': '0.10.2', 'jaxlib': '0.10.2', 'hypothesis': '6.168.3'}, 'device': 'CPU (x86_64, 2 cores)', 'found': '2026-11-22T14:32:45+0000'}

DATA = """
UEsDBC0AAAAIAAAAIQBMsXF4//////////8KABQAdmFsdWVzLm5weQEAEACEAAAAAAAAAEoAAAAAAAAAm+wX6hsQychQxlCtnpJa
nFykbqWgbpNmoq6joJ6WX1RSlJgXn1+UkgoSd0vMKU4FihdnJBakAvkahjoKhpo6CrUKZAMuBoaG/wBQSwMELQAAAAgAAAAhAHtW
tfP//////////wsAFABvZmZzZXRzLm5weQEAEACIAAAAAAAAAEkAAAAAAAAAm+wX6hsQychQxlCtnpJanFykbqWgbpNpoq6joJ6W
X1RSlJgXn1+UkgoSd0vMKU4FihdnJBakAvkaRjqaOgq1ChQALgYgYARiAFBLAQItAy0AAAAIAAAAIQBMsXF4SgAAAIQAAAAKAAAA
AAAAAAAAAACAAQAAAAB2YWx1ZXMubnB5UEsBAi0DLQAAAAgAAAAhAHtWtfNJAAAAiAAAAAsAAAAAAAAAAAAAAIABhgAAAG9mZnNl
dHMubnB5UEsFBgAAAAACAAIAcQAAAAwBAAAAAA==
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
