#!/usr/bin/env python3
"""Reproducer: attention_decode_lse_merge on pallas-interpret -> inf

2 non-finite element(s) in o where the oracle is finite; o[0, 0, 0, 0] = inf, oracle 60000

target:    attention_decode_lse_merge
backend:   pallas-interpret (replay elsewhere with --backend NAME)
property:  oracle
case:      Case(q=f16[1,2,1,1], k=f16[1,2,17,1], v=f16[1,2,17,1], cache_len=int32[1], dtype='float16', window=None, scale=None, softcap=None, alibi=None, block_k=16, num_splits=2, recipe={"level": -1000000000.0, "slopes": null, "trend": 0.0, "values": {"k": {"distribution": "normal", "magnitude": 1.0, "offset": 0.0, "seed": 1, "specials": "none"}, "q": {"distribution": "normal", "magnitude": 1.0, "offset": 0
tolerance: o: rho=2.0 x naive + 2.0 eps x max|oracle|
hazards:   lse-below-exp-range: log-sum-exp -9.996e+08 < -88.72: sum(exp(s)) underflows fp32 without the max; below-finite-sentinel: log-sum-exp -9.996e+08: every visible logit of a row is at or below the finite sentinel(s) -10000, -50000, -60000; a key masked with one would outrank them all; partial-kv-tile: key counts leave partial last tiles of [1] keys (block_k=16); multi-kv-tile: up to 17 keys > block_k=16: the running max crosses tiles
origin: overflow in `z * poly` at kernels/attention/pallas.py:72 (_tanh), Pallas interpret mode, checked primitive by primitive
        poly = c + z * poly
        mul(9.99143e+17, 5.89017e+32) = inf at element [0, 0] of a [16, 16] block
found:     2026-11-25T15:24:44+0000 on CPU (x86_64, 2 cores)
versions:  python 3.11.7, numpy 2.4.6, torch 2.13.0+cpu, triton 3.6.0, jax 0.10.2, jaxlib 0.10.2, hypothesis 6.168.3

Run it: python attention_decode_lse_merge__pallas-interpret__inf__1e343eec81fb.py [--backend NAME] [--quiet]
Exit status 1 while the failure reproduces, 0 once it does not.
"""

REPRO = {'format': 1, 'target': 'attention_decode_lse_merge', 'plugin': None, 'backend': 'pallas-interpret', 'mutant_of': None, 'expected_class': None, 'class': 'inf', 'property': 'oracle', 'message': '2 non-finite element(s) in o where the oracle is finite; o[0, 0, 0, 0] = inf, oracle 60000', 'where': 'o[0, 0, 0, 0]', 'error': 'inf', 'tolerance': 14314063.4304007, 'signature': '1e343eec81fb', 'params': {'dtype': 'float16', 'window': None, 'scale': None, 'softcap': None, 'alibi': None, 'block_k': 16, 'num_splits': 2}, 'recipe': {'slopes': None, 'level': -1000000000.0, 'trend': 0.0, 'values': {'q': {'seed': 0, 'distribution': 'normal', 'magnitude': 1.0, 'offset': 0.0, 'specials': 'none'}, 'k': {'seed': 1, 'distribution': 'normal', 'magnitude': 1.0, 'offset': 0.0, 'specials': 'none'}, 'v': {'seed': 2, 'distribution': 'normal', 'magnitude': 1.0, 'offset': 60000.0, 'specials': 'none'}}}, 'property_params': '{}', 'dtypes': {'q': 'float16', 'k': 'float16', 'v': 'float16', 'cache_len': 'int32'}, 'ref_device': 'cpu', 'differential': False, 'differential_max_cost': 32.0, 'tolerance_rule': {'o': {'rho': 2.0, 'floor_ulps': 2.0, 'atol': 0.0, 'divergence_factor': 2.0, 'ratio_caps_analysis': False}}, 'hazards': ['lse-below-exp-range: log-sum-exp -9.996e+08 < -88.72: sum(exp(s)) underflows fp32 without the max', 'below-finite-sentinel: log-sum-exp -9.996e+08: every visible logit of a row is at or below the finite sentinel(s) -10000, -50000, -60000; a key masked with one would outrank them all', 'partial-kv-tile: key counts leave partial last tiles of [1] keys (block_k=16)', 'multi-kv-tile: up to 17 keys > block_k=16: the running max crosses tiles'], 'origin': {'found': True, 'kind': 'overflow', 'primitive': 'mul', 'detail': 'mul(9.99143e+17, 5.89017e+32) = inf at element [0, 0] of a [16, 16] block', 'interpreter': 'Pallas interpret mode, checked primitive by primitive', 'file': 'kernels/attention/pallas.py', 'line': 72, 'function': '_tanh', 'source': '        poly = c + z * poly', 'expression': 'z * poly'}, 'process': None, 'isolate': False, 'timeout': None, 'versions': {'python': '3.11.7', 'numpy': '2.4.6', 'torch': '2.13.0+cpu', 'triton': '3.6.0', 'jax': '0.10.2', 'jaxlib': '0.10.2', 'hypothesis': '6.168.3'}, 'device': 'CPU (x86_64, 2 cores)', 'found': '2026-11-25T15:24:44+0000'}

DATA = """
UEsDBC0AAAAIAAAAIQA+zDYR//////////8FABQAcS5ucHkBABAAhAAAAAAAAABPAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxcpG6l
oG6TZqSuo6Cell9UUpSYF59flJIKEndLzClOBYoXZyQWpAL5GoY6CkY6CkDSUFNHoVaBDMC1o3xHOQBQSwMELQAAAAgAAAAhAFx2
BNf//////////wUAFABrLm5weQEAEADEAAAAAAAAAFoAAAAAAAAAm+wX6hsQychQxlCtnpJanFykbqWgbpNmpK6joJ6WX1RSlJgX
n1+UkgoSd0vMKU4FihdnJBakAvkahjoKRjoKhuZArKmjUKtAOuDa8R0Bd37fgRPuRKFRVQIAUEsDBC0AAAAIAAAAIQBhPe0F////
//////8FABQAdi5ucHkBABAAxAAAAAAAAABQAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxcpG6loG6TZqSuo6Cell9UUpSYF59flJIK
EndLzClOBYoXZyQWpAL5GoY6CkY6CobmQKypo1CrQDrgCq6mHAIAUEsDBC0AAAAIAAAAIQA+Twsf//////////8NABQAY2FjaGVf
bGVuLm5weQEAEACEAAAAAAAAAEgAAAAAAAAAm+wX6hsQychQxlCtnpJanFykbqWgbpNpoq6joJ6WX1RSlJgXn1+UkgoSd0vMKU4F
ihdnJBakAvkahjqaOgq1ChQALkEGBgYAUEsBAi0DLQAAAAgAAAAhAD7MNhFPAAAAhAAAAAUAAAAAAAAAAAAAAIABAAAAAHEubnB5
UEsBAi0DLQAAAAgAAAAhAFx2BNdaAAAAxAAAAAUAAAAAAAAAAAAAAIABhgAAAGsubnB5UEsBAi0DLQAAAAgAAAAhAGE97QVQAAAA
xAAAAAUAAAAAAAAAAAAAAIABFwEAAHYubnB5UEsBAi0DLQAAAAgAAAAhAD5PCx9IAAAAhAAAAA0AAAAAAAAAAAAAAIABngEAAGNh
Y2hlX2xlbi5ucHlQSwUGAAAAAAQABADUAAAAJQIAAAAA
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
