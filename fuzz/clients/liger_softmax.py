"""liger-kernel's softmax (``liger_kernel.ops.softmax.LigerSoftmaxFunction``: Triton kernels
launched by liger's own Python code) against the softmax family, compiled or in Triton's
interpreter. ``--plugin fuzz.clients.liger_softmax``.

Findings (liger-kernel 0.8.5): a row whose every logit is ``-inf`` gives NaN, as ``torch.softmax``
does: a convention, declared below (checked on exactly those rows, so a NaN anywhere else is still
a finding). Within the bounds otherwise (fp32, fp16, bf16). Its multi-block kernels (rows longer
than one block) do not compile under Triton 3.6 (``tl.float32(-float("inf"))``: "'dtype' object is
not callable"): a bug its public entry never reaches, since it picks one block per row.
"""

from liger_kernel.ops.softmax import LigerSoftmaxFunction

import fuzz


def softmax(x):
    return LigerSoftmaxFunction.apply(x)


fuzz.fuzz_kernel(
    "liger_softmax",
    family="softmax",
    kernel=softmax,
    capabilities=fuzz.Capabilities(features=()),
    conventions=fuzz.Conventions(empty_rows="nan"),
)
