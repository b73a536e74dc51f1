"""The float64 reference of the attention families (``attention``: softmax(scale·q·kᵀ
[causal])·v; ``attention_lse``: that and each row's log-sum-exp) and the error bounds of the
kernels' arithmetic (grouped-query attention too: ``k`` and ``v`` with fewer heads), shared
by their GPU tests (``test_gpu_attention.py``, the torch operators' cases in
``test_gpu_torch_ops.py``)."""

from __future__ import annotations

from typing import Any


def unit(torch: Any, dtype: Any) -> float:
    """Half an ulp of 1 in the inputs' type (the relative rounding error): 2⁻⁸ for bf16,
    2⁻¹¹ for f16."""
    return float(torch.finfo(dtype).eps) / 2


def heads_of(q: Any, kv: Any) -> Any:
    """``k`` or ``v`` with one head per query head: grouped-query attention's key/value head
    ``j`` serves query heads ``j·g … j·g + g − 1`` (g = H / H_kv; torch's ``enable_gqa``)."""
    return kv.repeat_interleave(q.shape[1] // kv.shape[1], dim=1) if kv.shape[1] else kv


def scores(torch: Any, q: Any, k: Any, scale: float, causal: bool) -> Any:
    """scale·q·kᵀ in float64, keys after the query (top-left aligned) set to −∞ under the
    causal mask."""
    s = (q.double() @ heads_of(q, k).double().transpose(-1, -2)) * scale
    if causal:
        sq, skv = s.shape[-2], s.shape[-1]
        keep = torch.ones(sq, skv, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return s


def reference(torch: Any, q: Any, k: Any, v: Any, scale: float, causal: bool) -> tuple[Any, Any]:
    """The exact result in float64, and the error bound of the kernel's arithmetic per element:
    P rounded to the inputs' type before P·v (half an ulp, ``u`` relative, of each weight: at
    most u·Σ p|v| / Σ p, doubled for the sum's different rounding), the output's rounding
    (u·|out|), f32 sums and ex2.approx (2⁻¹⁶ of Σ p|v| / Σ p covers them), and for f16 the
    weights below its normal range (2⁻¹⁴), rounded with an absolute error of 2⁻²⁵ each (the
    largest weight is 1, so Σ p ≥ 1: at most 2⁻²⁵ Σ|v| over the keys)."""
    u = unit(torch, q.dtype)
    vd = heads_of(q, v).double()
    p = torch.softmax(scores(torch, q, k, scale, causal), dim=-1)
    if p.shape[-1] == 0:
        want = torch.zeros(*p.shape[:-1], v.shape[-1], dtype=torch.float64, device=v.device)
        return want, want + 1e-30
    p = p.nan_to_num(0.0)
    want = p @ vd
    spread = p @ vd.abs()
    tol = spread * (2 * u + 2.0**-16) + want.abs() * u + 1e-30
    if q.dtype == torch.float16:
        tol = tol + vd.abs().sum(-2, keepdim=True) * 2.0**-24
    return want, tol


def lse_reference(torch: Any, q: Any, k: Any, scale: float, causal: bool) -> tuple[Any, Any]:
    """Each query row's ln Σ_j exp(scale·q·k_j) over the keys it sees (−∞ for none) in
    float64, and its error bound: the f32 scores' ((D + 4) f32 ulps of |scale|·Σ|q||k|, the
    row's largest such magnitude), the exponentials' and the sum's (2⁻²⁰ relative of the sum:
    2⁻²⁰ absolute in the logarithm), the logarithm's (2⁻²² of |lse|)."""
    s = scores(torch, q, k, scale, causal)
    want = torch.logsumexp(s, dim=-1)
    mag = (q.double().abs() @ heads_of(q, k).double().abs().transpose(-1, -2)) * abs(scale)
    d = q.shape[-1]
    big = mag.amax(dim=-1) if mag.shape[-1] else torch.zeros_like(want)
    finite = want.isfinite()
    tol = big * (d + 4) * 2.0**-23 + 2.0**-20 + want.abs().where(finite, 0.0) * 2.0**-22
    return want, tol
