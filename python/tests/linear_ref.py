"""The float64 reference of the fused-epilogue GEMM families (``linear_bias*``:
``act(x @ w.T + b)``) and the error bound of their results, shared by their GPU tests
(``test_gpu_linear_fused.py``, the torch operators' cases in ``test_gpu_torch_ops.py``); and
the ``out`` layouts that take each store path of the sm_90a ``linear`` kernels
(``test_gpu_linear_fused.py``, ``test_gpu_linear_types.py``)."""

from __future__ import annotations

from collections.abc import Iterator
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


def out_layouts(torch: Any, m: int, n: int, dtype: Any) -> Iterator[tuple[str, Any, Any, Any]]:
    """``(label, buf, out, cols)`` for an (m, n) ``out`` poisoned with NaN: a column slice
    ``buf[:, cols]`` of a wider buffer at an offset of 4 elements with pitch n + 8 (rows
    aligned to 8 bytes for every type: the one-pointer store), of 2 with pitch n + 6 (8 bytes
    for f32, 4 for 16-bit: the pair-by-pair store there), of 1, with an odd pitch; then
    transposed (``cols`` None: ``out`` is all of ``buf``)."""
    for off, pitch in [(4, n + 8), (2, n + 6), (1, n + 2), (0, n + 1)]:
        buf = torch.full((m, pitch), float("nan"), dtype=dtype, device="cuda")
        cols = slice(off, off + n)
        yield f"offset {off}, pitch {pitch}", buf, buf[:, cols], cols
    buf = torch.full((n, m), float("nan"), dtype=dtype, device="cuda")
    yield "transposed", buf, buf.t(), None


def assert_outside_untouched(torch: Any, buf: Any, cols: Any, what: str) -> None:
    """Every element of ``buf`` outside the columns ``cols`` of the view is still NaN."""
    if cols is None:
        return
    outside = torch.ones_like(buf, dtype=torch.bool)
    outside[:, cols] = False
    assert bool(buf[outside].isnan().all()), f"{what}: wrote outside the view"
