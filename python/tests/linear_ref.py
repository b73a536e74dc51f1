"""The float64 reference of the fused-epilogue GEMM families (``linear_bias*``:
``act(x @ w.T + b)``) and the error bound of their results, shared by their GPU tests
(``test_gpu_linear_fused.py``, the torch operators' cases in ``test_gpu_torch_ops.py``)."""

from __future__ import annotations

from typing import Any


def reference(torch: Any, x: Any, w: Any, b: Any, act: str) -> Any:
    s = x.double() @ w.double().t() + b.double()
    f = torch.nn.functional
    return {
        "none": lambda v: v,
        "relu": torch.relu,
        "gelu": f.gelu,
        "gelu_tanh": lambda v: f.gelu(v, approximate="tanh"),
        "silu": f.silu,
    }[act](s)


def bound(torch: Any, x: Any, w: Any, b: Any, want: Any, odtype: Any) -> Any:
    """The f32 sums' error ((K + 2) f32 ulps of Σ|xw|) and the bias addition's (one ulp of
    |s|) through an activation of slope ≤ 1.13, the activation's own (8 f32 ulps of result
    and argument), then one rounding to ``odtype``."""
    e32 = 2.0**-23
    k = x.shape[1]
    mag = x.double().abs() @ w.double().abs().t()
    s = (x.double() @ w.double().t() + b.double()).abs()
    tl = 1.13 * ((k + 2) * e32 * mag + e32 * s) + 8 * e32 * (want.abs() + s) + 1e-30
    if odtype == torch.bfloat16:
        tl = tl + 2.0**-8 * want.abs() + float(torch.finfo(torch.bfloat16).tiny)
    return tl
