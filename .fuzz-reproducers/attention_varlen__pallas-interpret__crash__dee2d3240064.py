#!/usr/bin/env python3
"""Reproducer: attention_varlen on pallas-interpret -> crash

IndexError: index 0 is out of bounds for axis 1 with size 0

target:    attention_varlen
backend:   pallas-interpret (replay elsewhere with --backend NAME)
property:  crash
case:      Case(q=f32[1,1,1,1], k=f32[1,1,0,1], v=f32[1,1,0,1], cu_seqlens_q=int32[2], cu_seqlens_k=int32[2], dtype='float32', causal=False, window=None, scale=None, softcap=None, alibi=None, block_q=16, block_k=16, recipe={"guard_rows": 0, "level": 0.0, "slopes": null, "trend": 0.0, "values": {"k": {"distribution": "normal", "magnitude": 1.0, "offset": 0.0, "seed": 1, "specials": "none"}, "q": {"distributio
tolerance: o: rho=2.0 x naive + 4.0 eps x max|oracle| + 4.70197740328915e-38; lse: rho=2.0 x naive + 4.0 eps x max|oracle| + 4.70197740328915e-38
hazards:   row-without-visible-key: 1 query row(s) with no visible key (first: batch 0, row 0); sequence-without-keys: 1 sequence(s) with no key (length 0)
found:     2026-11-22T15:28:02+0000 on CPU (x86_64, 2 cores)
versions:  python 3.11.7, numpy 2.4.6, torch 2.13.0+cpu, triton 3.6.0, jax 0.10.2, jaxlib 0.10.2, hypothesis 6.168.3

Run it: python attention_varlen__pallas-interpret__crash__dee2d3240064.py [--backend NAME] [--quiet]
Exit status 1 while the failure reproduces, 0 once it does not.
"""

REPRO = {
    "format": 1,
    "target": "attention_varlen",
    "plugin": None,
    "backend": "pallas-interpret",
    "mutant_of": None,
    "expected_class": None,
    "class": "crash",
    "property": "crash",
    "message": "IndexError: index 0 is out of bounds for axis 1 with size 0",
    "where": "",
    "error": None,
    "tolerance": None,
    "signature": "dee2d3240064",
    "params": {
        "dtype": "float32",
        "causal": False,
        "window": None,
        "scale": None,
        "softcap": None,
        "alibi": None,
        "block_q": 16,
        "block_k": 16,
    },
    "recipe": {
        "guard_rows": 0,
        "slopes": None,
        "level": 0.0,
        "trend": 0.0,
        "values": {
            "q": {
                "seed": 0,
                "distribution": "normal",
                "magnitude": 1.0,
                "offset": 0.0,
                "specials": "none",
            },
            "k": {
                "seed": 1,
                "distribution": "normal",
                "magnitude": 1.0,
                "offset": 0.0,
                "specials": "none",
            },
            "v": {
                "seed": 2,
                "distribution": "normal",
                "magnitude": 1.0,
                "offset": 0.0,
                "specials": "none",
            },
        },
    },
    "property_params": "{}",
    "dtypes": {
        "q": "float32",
        "k": "float32",
        "v": "float32",
        "cu_seqlens_q": "int32",
        "cu_seqlens_k": "int32",
    },
    "ref_device": "cpu",
    "differential": False,
    "differential_max_cost": 32.0,
    "tolerance_rule": {
        "o": {
            "rho": 2.0,
            "floor_ulps": 4.0,
            "atol": 4.70197740328915e-38,
            "divergence_factor": 2.0,
        },
        "lse": {
            "rho": 2.0,
            "floor_ulps": 4.0,
            "atol": 4.70197740328915e-38,
            "divergence_factor": 2.0,
        },
    },
    "hazards": [
        "row-without-visible-key: 1 query row(s) with no visible key (first: batch 0, row 0)",
        "sequence-without-keys: 1 sequence(s) with no key (length 0)",
    ],
    "versions": {
        "python": "3.11.7",
        "numpy": "2.4.6",
        "torch": "2.13.0+cpu",
        "triton": "3.6.0",
        "jax": "0.10.2",
        "jaxlib": "0.10.2",
        "hypothesis": "6.168.3",
    },
    "device": "CPU (x86_64, 2 cores)",
    "found": "2026-11-22T15:28:02+0000",
}

DATA = """
UEsDBC0AAAAIAAAAIQAtfXxZ//////////8FABQAcS5ucHkBABAAhAAAAAAAAABLAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxcpG6l
oG6TZqKuo6Cell9UUpSYF59flJIKEndLzClOBYoXZyQWpAL5GoY6ClCkqaNQq0AG4MrZz2AHAFBLAwQtAAAACAAAACEALp6j/P//
////////BQAUAGsubnB5AQAQAIAAAAAAAAAASQAAAAAAAACb7BfqGxDJyFDGUK2eklqcXKRupaBuk2airqOgnpZfVFKUmBefX5SS
ChJ3S8wpTgWKF2ckFqQC+RqGOgpAZAAkNXUUahXIAFwAUEsDBC0AAAAIAAAAIQAunqP8//////////8FABQAdi5ucHkBABAAgAAA
AAAAAABJAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxcpG6loG6TZqKuo6Cell9UUpSYF59flJIKEndLzClOBYoXZyQWpAL5GoY6CkBk
ACQ1dRRqFcgAXABQSwMELQAAAAgAAAAhAHtWtfP//////////xAAFABjdV9zZXFsZW5zX3EubnB5AQAQAIgAAAAAAAAASQAAAAAA
AACb7BfqGxDJyFDGUK2eklqcXKRupaBuk2mirqOgnpZfVFKUmBefX5SSChJ3S8wpTgWKF2ckFqQC+RpGOpo6CrUKFAAuBiBgBGIA
UEsDBC0AAAAIAAAAIQAeMQlL//////////8QABQAY3Vfc2VxbGVuc19rLm5weQEAEACIAAAAAAAAAEcAAAAAAAAAm+wX6hsQychQ
xlCtnpJanFykbqWgbpNpoq6joJ6WX1RSlJgXn1+UkgoSd0vMKU4FihdnJBakAvkaRjqaOgq1ChQALgYoAABQSwECLQMtAAAACAAA
ACEALX18WUsAAACEAAAABQAAAAAAAAAAAAAAgAEAAAAAcS5ucHlQSwECLQMtAAAACAAAACEALp6j/EkAAACAAAAABQAAAAAAAAAA
AAAAgAGCAAAAay5ucHlQSwECLQMtAAAACAAAACEALp6j/EkAAACAAAAABQAAAAAAAAAAAAAAgAECAQAAdi5ucHlQSwECLQMtAAAA
CAAAACEAe1a180kAAACIAAAAEAAAAAAAAAAAAAAAgAGCAQAAY3Vfc2VxbGVuc19xLm5weVBLAQItAy0AAAAIAAAAIQAeMQlLRwAA
AIgAAAAQAAAAAAAAAAAAAACAAQ0CAABjdV9zZXFsZW5zX2subnB5UEsFBgAAAAAFAAUAFQEAAJYCAAAAAA==
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
