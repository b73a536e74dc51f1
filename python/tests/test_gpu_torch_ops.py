"""``ferrocuda.torch`` on the GPU: every bundled family's operators (functional and out-form)
checked by ``torch.library.opcheck`` and against torch references element by element, on
random and adversarial inputs (empty, one element, odd sizes, transposed views); a model of
several operators under ``torch.compile(fullgraph=True)`` (no graph breaks, the eager
results) and ``mode="reduce-overhead"`` (CUDA graphs replayed with new inputs); launches on
torch's current stream; a crate of one's own; the errors (GPU; skipped without one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import attention_ref
import ferrocuda
from linear_ref import bound, reference

pytestmark = pytest.mark.gpu

MANIFEST = json.loads(ferrocuda.bundled().manifest)
FAMILIES = sorted({k["family"] for k in MANIFEST["kernels"]})


def param_names(family: str) -> list[str]:
    k = next(k for k in MANIFEST["kernels"] if k["family"] == family)
    return [p["name"] for p in k["params"] if p["kind"] != "scratch"]


@pytest.fixture(scope="module")
def ft(torch: Any) -> Any:
    import ferrocuda.torch as m

    return m


@pytest.fixture
def gen(torch: Any, rng: np.random.Generator) -> Any:
    g = torch.Generator(device="cuda")
    g.manual_seed(int(rng.integers(1 << 62)))
    return g


# ---- cases: inputs, initial outputs, the torch reference ---------------------------------


@dataclass
class Case:
    """One call of a family: its read arguments, its written ones (initial values for the
    out-form; the functional form starts from zeros), the expected written values (float64
    or exact) from a torch reference, and the tolerance per element (``None``: exact)."""

    label: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    expect: Callable[[dict[str, Any]], dict[str, Any]]
    tol: Callable[[str, Any, dict[str, Any]], Any] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    functional: bool = True
    reference: bool = True

    def out_args(self, family: str) -> tuple[Any, ...]:
        return tuple(
            self.inputs[n] if n in self.inputs else self.outputs[n] for n in param_names(family)
        )

    def fn_args(self, family: str) -> tuple[Any, ...]:
        return tuple(self.inputs[n] for n in param_names(family) if n in self.inputs)


def eps(torch: Any, dtype: Any) -> float:
    return float(torch.finfo(dtype).eps) if dtype.is_floating_point else 0.0


def poison(torch: Any, t: Any) -> Any:
    return t.fill_(float("nan") if t.dtype.is_floating_point else -7)


def x_wt(d: dict[str, Any]) -> dict[str, Any]:
    """``linear``'s reference: ``out = x · wᵀ`` in float64."""
    return {"out": d["x"].double() @ d["w"].double().t()}


def x_wt_magnitude(d: dict[str, Any]) -> Any:
    """``|x| · |w|ᵀ`` in float64, the scale of ``x · wᵀ``'s rounding errors."""
    return d["x"].double().abs() @ d["w"].double().abs().t()


def rand(torch: Any, gen: Any, shape: Any, dtype: Any, scale: float = 3.0) -> Any:
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32) * scale
        return x.to(dtype)
    return torch.randint(-1000, 1000, shape, generator=gen, device="cuda", dtype=dtype)


def elementwise_tol(torch: Any, dtype: Any, ulps: float = 2.0) -> Any:
    def tol(name: str, want: Any, inputs: dict[str, Any]) -> Any:
        return ulps * eps(torch, dtype) * want.abs() + 1e-300

    return tol


def activation_tol(torch: Any, dtype: Any) -> Any:
    # libdevice's functions (≤ 2 ulp) and a few float32 roundings, 8 ulp of the result and of
    # the argument (the cancellation near 0), then one rounding to the storage type.
    e32 = eps(torch, torch.float32)

    def tol(name: str, want: Any, inputs: dict[str, Any]) -> Any:
        x = inputs["x"].double()
        t = 8 * e32 * (want.abs() + x.abs()) + 1e-30
        if dtype != torch.float32:
            t = t + eps(torch, dtype) * want.abs() + float(torch.finfo(dtype).tiny)
        return t

    return tol


def views(torch: Any, gen: Any, dtype: Any) -> list[tuple[str, Any]]:
    """Adversarial layouts: empty, one element, odd sizes, 2-D and 3-D, transposed."""
    return [
        ("empty", rand(torch, gen, (0,), dtype)),
        ("one", rand(torch, gen, (1,), dtype)),
        ("odd", rand(torch, gen, (4099,), dtype)),
        ("2d", rand(torch, gen, (33, 65), dtype)),
        ("2d-transposed", rand(torch, gen, (65, 33), dtype).t()),
        ("3d-sliced", rand(torch, gen, (4, 6, 10), dtype)[:, 1:, ::2]),
    ]


def cases(family: str, torch: Any, gen: Any) -> list[Case]:
    t = torch
    f32, f64 = t.float32, t.float64
    out: list[Case] = []
    if family == "add":
        for dtype in (f32, f64, t.int64, t.int32, t.float16, t.bfloat16):
            for label, a in views(t, gen, dtype):
                b = rand(t, gen, a.shape, dtype)
                exact = not dtype.is_floating_point or dtype in (f32, f64)
                out.append(
                    Case(
                        f"{dtype}-{label}",
                        {"a": a, "b": b},
                        {"out": poison(t, t.empty_like(a))},
                        lambda d: (
                            {"out": (d["a"].double() + d["b"].double())}
                            if d["a"].dtype.is_floating_point
                            else {"out": d["a"] + d["b"]}
                        ),
                        None if exact else elementwise_tol(t, dtype, 1.0),
                    )
                )
        # f32/f64 sums are correctly rounded: compared with torch's own add, exactly.
        for c in out:
            if c.inputs["a"].dtype in (f32, f64):
                c.expect = lambda d: {"out": d["a"] + d["b"]}
    elif family in ("gelu", "gelu_tanh", "silu"):
        ref = {
            "gelu": lambda x: t.nn.functional.gelu(x),
            "gelu_tanh": lambda x: t.nn.functional.gelu(x, approximate="tanh"),
            "silu": lambda x: t.nn.functional.silu(x),
        }[family]
        for dtype in (f32, t.float16, t.bfloat16):
            for label, x in views(t, gen, dtype):
                out.append(
                    Case(
                        f"{dtype}-{label}",
                        {"x": x},
                        {"out": poison(t, t.empty_like(x))},
                        lambda d, ref=ref: {"out": ref(d["x"].double())},
                        activation_tol(t, dtype),
                    )
                )
    elif family in ("saxpy", "axpy"):
        dtypes = (f32, f64, t.float16) if family == "saxpy" else (t.bfloat16, t.float16)
        for dtype in dtypes:
            for label, x in views(t, gen, dtype):
                y = rand(t, gen, x.shape, dtype)
                alpha = -1.75

                def expect(d: dict[str, Any], alpha: float = alpha) -> dict[str, Any]:
                    # float32 arithmetic (f32/f16/bf16 storage), float64 for float64.
                    wt = f64 if d["x"].dtype == f64 else f32
                    return {"y": (alpha * d["x"].to(wt) + d["y"].to(wt)).double()}

                def tol(name: str, want: Any, d: dict[str, Any], dtype: Any = dtype) -> Any:
                    # Two roundings in the working type, and for half types in storage too.
                    mag = 1.75 * d["x"].double().abs() + d["y"].double().abs()
                    e = 2 * eps(t, f64 if dtype == f64 else f32)
                    if dtype not in (f32, f64):
                        e += eps(t, dtype)
                    return e * mag + float(t.finfo(dtype).tiny)

                out.append(
                    Case(f"{dtype}-{label}", {"alpha": alpha, "x": x}, {"y": y}, expect, tol)
                )
    elif family == "add_index":
        for dtype in (f32, t.int64, t.int32):
            for shape, tr in [((5, 7), False), ((7, 5), True), ((2, 3, 4), False), ((0, 3), False)]:
                x = rand(t, gen, shape, dtype)
                x = x.t() if tr else x

                def expect(d: dict[str, Any]) -> dict[str, Any]:
                    x = d["x"]
                    idx = sum(
                        t.arange(n, device="cuda").view(
                            [-1 if i == k else 1 for i in range(x.dim())]
                        )
                        for k, n in enumerate(x.shape)
                    )
                    return {"x": x + idx.to(x.dtype)}

                out.append(Case(f"{dtype}-{shape}-{tr}", {}, {"x": x}, expect, functional=False))
    elif family == "checked_write":
        x = rand(t, gen, (10,), t.int32)
        out.append(
            Case(
                "x[3] = 42",
                {"index": 3, "value": 42},
                {"x": x},
                lambda d: {"x": t.where(t.arange(10, device="cuda") == 3, 42, d["x"])},
                functional=False,
            )
        )
    elif family in ("cumsum", "cumsum_exclusive"):
        for dtype, odt in [
            (f32, None),
            (f64, None),
            (t.int64, None),
            (t.int32, t.int64),
            (t.int32, t.int32),
        ]:
            for n in (0, 1, 1000, 70001):
                x = rand(t, gen, (n,), dtype)
                odtype = odt or dtype

                def expect(
                    d: dict[str, Any], excl: bool = family == "cumsum_exclusive"
                ) -> dict[str, Any]:
                    x = d["x"]
                    s = t.cumsum(x.double() if x.dtype.is_floating_point else x.long(), 0)
                    if excl:
                        s = s - (x.double() if x.dtype.is_floating_point else x.long())
                    return {"out": s if x.dtype.is_floating_point else s.to(d["out"].dtype)}

                def tol(name: str, want: Any, d: dict[str, Any], dtype: Any = dtype) -> Any:
                    mag = t.cumsum(d["x"].double().abs(), 0)
                    return (len(d["x"]) + 2) * eps(t, dtype) * mag + 1e-300

                out.append(
                    Case(
                        f"{dtype}-{odtype}-{n}",
                        {"x": x},
                        {"out": poison(t, t.empty(n, dtype=odtype, device="cuda"))},
                        expect,
                        tol if dtype.is_floating_point else None,
                        kwargs={"out_dtype": odt} if odt is not None else {},
                    )
                )
    elif family == "div_by":
        for dtype in (f32, f64):
            for n in (0, 1, 4099):
                x = rand(t, gen, (n,), dtype)
                dd = t.tensor([-0.37], dtype=dtype, device="cuda")
                out.append(
                    Case(
                        f"{dtype}-{n}",
                        {"x": x, "d": dd},
                        {"out": poison(t, t.empty_like(x))},
                        lambda d: {"out": d["x"].double() / d["d"].double()[0]},
                        elementwise_tol(t, dtype, 0.5),
                    )
                )
    elif family == "fill_slow":
        x = rand(t, gen, (1000,), f32)
        out.append(
            Case(
                "fill",
                {"value": 2.5, "iters": 3},
                {"x": x},
                lambda d: {"x": t.full_like(d["x"], 2.5)},
                functional=False,
            )
        )
    elif family == "histogram":
        for dtype, nb, lo, hi in [
            (f32, 7, -2.0, 2.0),
            (f64, 33, -3.0, 3.0),
            (t.int32, 1000, -1000.0, 1000.0),
        ]:
            x = rand(t, gen, (4099,), dtype)

            def expect(
                d: dict[str, Any], nb: int = nb, lo: float = lo, hi: float = hi
            ) -> dict[str, Any]:
                h = np.histogram(d["x"].cpu().numpy(), bins=nb, range=(lo, hi))[0]
                return {"bins": t.as_tensor(h.astype(np.int64), device="cuda")}

            out.append(
                Case(
                    f"{dtype}-{nb}",
                    {"x": x, "lo": lo, "hi": hi},
                    {"bins": poison(t, t.empty(nb, dtype=t.int64, device="cuda"))},
                    expect,
                    functional=False,
                )
            )
    elif family == "index_grid":
        for shape in [(5, 7), (33, 300), (2, 3, 4), (0, 4)]:
            x = rand(t, gen, shape, t.int32)
            out.append(
                Case(
                    f"{shape}",
                    {},
                    {"x": x},
                    lambda d: {
                        "x": t.arange(d["x"].numel(), device="cuda", dtype=t.int32).view(
                            d["x"].shape
                        )
                    },
                    functional=False,
                )
            )
    elif family == "initialize_array":
        for n in (0, 1, 4099):
            x = rand(t, gen, (n,), t.int32)
            out.append(
                Case(
                    f"{n}",
                    {},
                    {"x": x},
                    lambda d: {"x": t.arange(d["x"].numel(), device="cuda", dtype=t.int32)},
                    functional=False,
                )
            )
    elif family == "linear":
        for (m, k, n), odtype in [
            ((1, 1, 1), f32),
            ((70, 130, 50), f32),
            ((64, 256, 128), t.bfloat16),
            ((3, 0, 5), f32),
        ]:
            x = rand(t, gen, (m, k), t.bfloat16, 1.0)
            w = rand(t, gen, (n, k), t.bfloat16, 1.0)

            def tol(
                name: str, want: Any, d: dict[str, Any], k: int = k, odtype: Any = odtype
            ) -> Any:
                mag = x_wt_magnitude(d)
                tl = (k + 2) * eps(t, f32) * mag + 1e-30
                if odtype != f32:
                    tl = tl + eps(t, odtype) * want.abs()
                return tl

            out.append(
                Case(
                    f"{m}x{k}x{n}-{odtype}",
                    {"x": x, "w": w},
                    {"out": poison(t, t.empty((m, n), dtype=odtype, device="cuda"))},
                    x_wt,
                    tol,
                    kwargs={"out_dtype": odtype},
                )
            )
    elif family == "linear_tf32":
        # TF32 by name: f32 operands cut to 10 mantissa bits — truncated on the H100, so below
        # 2^-10 relative each (not rounding's 2^-11), a product within 2^-9 + 2^-20 — and f32
        # sums; rows of x and w a multiple of 16 bytes (the tensor maps': K a multiple of 4,
        # K > 0).
        for m, k, n in [(1, 4, 1), (70, 132, 50), (64, 256, 128)]:
            x = rand(t, gen, (m, k), f32, 1.0)
            w = rand(t, gen, (n, k), f32, 1.0)

            def tol(name: str, want: Any, d: dict[str, Any], k: int = k) -> Any:
                mag = x_wt_magnitude(d)
                return (2.0**-9 + 2.0**-20 + (k + 2) * eps(t, f32)) * mag + 1e-30

            out.append(
                Case(
                    f"{m}x{k}x{n}",
                    {"x": x, "w": w},
                    {"out": poison(t, t.empty((m, n), dtype=f32, device="cuda"))},
                    x_wt,
                    tol,
                )
            )
    elif family.startswith("linear_bias"):
        act = family.removeprefix("linear_bias").removeprefix("_") or "none"
        odtypes = [f32, t.bfloat16] if act == "none" else [t.bfloat16]
        for (m, k, n), odtype in [
            (shape, odtype)
            for shape in [(1, 1, 1), (70, 130, 50), (200, 64, 300), (3, 0, 5)]
            for odtype in odtypes
        ]:
            x = rand(t, gen, (m, k), t.bfloat16, 1.0)
            w = rand(t, gen, (n, k), t.bfloat16, 1.0)
            b = rand(t, gen, (n,), t.bfloat16, 1.0)

            def expect(d: dict[str, Any], act: str = act) -> dict[str, Any]:
                return {"out": reference(t, d["x"], d["w"], d["bias"], act)}

            def tol(name: str, want: Any, d: dict[str, Any], odtype: Any = odtype) -> Any:
                return bound(t, d["x"], d["w"], d["bias"], want, odtype)

            out.append(
                Case(
                    f"{m}x{k}x{n}-{odtype}",
                    {"x": x, "w": w, "bias": b},
                    {"out": poison(t, t.empty((m, n), dtype=odtype, device="cuda"))},
                    expect,
                    tol,
                    kwargs={"out_dtype": odtype} if len(odtypes) > 1 else {},
                )
            )
    elif family in ("attention", "attention_lse"):
        with_lse = family == "attention_lse"
        for (b, h, sq, skv, d), dtype, causal in [
            ((1, 2, 100, 130, 64), t.bfloat16, False),
            ((2, 1, 70, 70, 128), t.float16, True),
            ((1, 1, 0, 5, 64), t.bfloat16, False),
        ]:
            q, k, v = (rand(t, gen, (b, h, s, d), dtype, 1.0) for s in (sq, skv, skv))
            scale = d**-0.5

            def expect(
                dd: dict[str, Any], causal: bool = causal, scale: float = scale
            ) -> dict[str, Any]:
                want = {
                    "out": attention_ref.reference(t, dd["q"], dd["k"], dd["v"], scale, causal)[0]
                }
                if with_lse:
                    want["lse"] = attention_ref.lse_reference(t, dd["q"], dd["k"], scale, causal)[0]
                return want

            def tol(
                name: str,
                want: Any,
                dd: dict[str, Any],
                causal: bool = causal,
                scale: float = scale,
            ) -> Any:
                if name == "lse":
                    return attention_ref.lse_reference(t, dd["q"], dd["k"], scale, causal)[1]
                return attention_ref.reference(t, dd["q"], dd["k"], dd["v"], scale, causal)[1]

            outputs = {"out": poison(t, t.empty_like(q))}
            if with_lse:
                outputs["lse"] = poison(t, t.empty((b, h, sq), device="cuda"))
            out.append(
                Case(
                    f"{(b, h, sq, skv, d)}-{dtype}-causal={causal}",
                    {"q": q, "k": k, "v": v, "scale": scale, "causal": int(causal)},
                    outputs,
                    expect,
                    tol,
                )
            )
    elif family in ("softmax", "log_softmax"):
        log = family == "log_softmax"
        for dtype in (f32, f64, t.float16, t.bfloat16):
            for shape, tr in [((5, 300), False), ((1, 1), False), ((0, 4), False), ((40, 7), True)]:
                x = rand(t, gen, shape, dtype)
                x = x.t() if tr else x

                def expect(d: dict[str, Any], log: bool = log) -> dict[str, Any]:
                    x = d["x"].double()
                    return {"out": t.log_softmax(x, -1) if log else t.softmax(x, -1)}

                def tol(
                    name: str, want: Any, d: dict[str, Any], dtype: Any = dtype, log: bool = log
                ) -> Any:
                    x = d["x"].double()
                    n = x.shape[-1] + 16
                    e = eps(t, f64 if dtype == f64 else f32)
                    if log:
                        mag = x.abs() + x.abs().amax(-1, keepdim=True) + want.abs() + 1
                        tl = n * e * mag
                    else:
                        tl = n * e * want.abs() + 1e-300
                    if dtype in (t.float16, t.bfloat16):
                        tl = tl + eps(t, dtype) * want.abs() + float(t.finfo(dtype).tiny)
                    return tl

                out.append(
                    Case(
                        f"{dtype}-{shape}-{tr}",
                        {"x": x},
                        {"out": poison(t, t.empty(x.shape, dtype=dtype, device="cuda"))},
                        expect,
                        tol,
                    )
                )
    elif family == "matmul":
        for m, k, n in [(1, 1, 1), (33, 65, 17), (128, 64, 96), (0, 5, 3)]:
            a = rand(t, gen, (m, k), f32, 1.0)
            b = rand(t, gen, (k, n), f32, 1.0)
            c = rand(t, gen, (m, n), f32, 1.0)
            alpha, beta = -0.5, 2.0

            def expect(d: dict[str, Any]) -> dict[str, Any]:
                return {
                    "c": d["alpha"] * (d["a"].double() @ d["b"].double())
                    + d["beta"] * d["c"].double()
                }

            def tol(name: str, want: Any, d: dict[str, Any], k: int = k) -> Any:
                mag = (
                    0.5 * (d["a"].double().abs() @ d["b"].double().abs())
                    + 2.0 * d["c"].double().abs()
                )
                return (k + 2) * eps(t, f32) * mag + 1e-30

            out.append(
                Case(
                    f"{m}x{k}x{n}",
                    {"a": a, "b": b, "alpha": alpha, "beta": beta},
                    {"c": c},
                    expect,
                    tol,
                )
            )
    elif family in ("max", "min"):
        for dtype in (f32, f64, t.int32, t.int64):
            for n in (1, 1000, 70001):
                x = rand(t, gen, (n,), dtype)
                red = t.amax if family == "max" else t.amin
                out.append(
                    Case(
                        f"{dtype}-{n}",
                        {"x": x},
                        {"out": poison(t, t.empty(1, dtype=dtype, device="cuda"))},
                        lambda d, red=red: {"out": red(d["x"], 0, keepdim=True)},
                    )
                )
    elif family == "normalize":
        for dtype in (f32, f64):
            for n in (1, 1000, 1 << 20):
                x = rand(t, gen, (n,), dtype).abs() + 0.5

                def tol(name: str, want: Any, d: dict[str, Any], dtype: Any = dtype) -> Any:
                    return (len(d["x"]) + 4) * eps(t, dtype) * want.abs()

                out.append(
                    Case(
                        f"{dtype}-{n}",
                        {"x": x},
                        {"out": poison(t, t.empty_like(x))},
                        lambda d: {"out": d["x"].double() / d["x"].double().sum()},
                        tol,
                    )
                )
    elif family == "shared_reverse":
        # Launched with the automatic configuration (no dynamic shared memory: the kernel
        # documents that it then writes nothing); opcheck only.
        x = rand(t, gen, (100,), f32)
        out.append(Case("auto", {"x": x}, {"y": t.zeros_like(x)}, lambda d: {}, reference=False))
    elif family == "stencil5":
        for dtype in (f32, f64):
            for shape in [(0, 0), (1, 1), (6, 7), (130, 256)]:
                x = rand(t, gen, shape, dtype)

                def expect(d: dict[str, Any]) -> dict[str, Any]:
                    x = d["x"].double()
                    p = t.nn.functional.pad(x, (1, 1, 1, 1))
                    return {"out": p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * x}

                def tol(name: str, want: Any, d: dict[str, Any], dtype: Any = dtype) -> Any:
                    x = d["x"].double().abs()
                    p = t.nn.functional.pad(x, (1, 1, 1, 1))
                    mag = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] + 4 * x
                    return 6 * eps(t, dtype) * mag + 1e-300

                out.append(
                    Case(
                        f"{dtype}-{shape}",
                        {"x": x},
                        {"out": poison(t, t.empty_like(x))},
                        expect,
                        tol,
                    )
                )
    elif family == "sum":
        for dtype, odtype in [(f32, f32), (f64, f64), (t.int32, t.int64), (t.int64, t.int64)]:
            for n in (0, 1, 1000, 70001):
                x = rand(t, gen, (n,), dtype)

                def expect(d: dict[str, Any]) -> dict[str, Any]:
                    x = d["x"]
                    if x.dtype.is_floating_point:
                        return {"out": x.double().sum().reshape(1)}
                    return {"out": x.long().sum().reshape(1)}

                def tol(name: str, want: Any, d: dict[str, Any], dtype: Any = dtype) -> Any:
                    # Short per-thread runs, then tree reductions: well under n roundings.
                    k = min(len(d["x"]), 256) + 2
                    return k * eps(t, dtype) * d["x"].double().abs().sum().reshape(1) + 1e-300

                out.append(
                    Case(
                        f"{dtype}-{n}",
                        {"x": x},
                        {"out": poison(t, t.empty(1, dtype=odtype, device="cuda"))},
                        expect,
                        tol if dtype.is_floating_point else None,
                    )
                )
    elif family == "sum_rows":
        for dtype in (f32, f64):
            for shape, tr in [
                ((7, 300), False),
                ((1, 1), False),
                ((0, 5), False),
                ((300, 9), True),
            ]:
                x = rand(t, gen, shape, dtype)
                x = x.t() if tr else x

                def tol(name: str, want: Any, d: dict[str, Any], dtype: Any = dtype) -> Any:
                    x = d["x"].double()
                    return (x.shape[1] + 2) * eps(t, dtype) * x.abs().sum(1) + 1e-300

                out.append(
                    Case(
                        f"{dtype}-{shape}-{tr}",
                        {"x": x},
                        {"out": poison(t, t.empty(x.shape[0], dtype=dtype, device="cuda"))},
                        lambda d: {"out": d["x"].double().sum(1)},
                        tol,
                    )
                )
    return out


def test_every_family_has_cases(torch: Any, gen: Any) -> None:
    missing = [f for f in FAMILIES if not cases(f, torch, gen)]
    assert not missing, f"families without test cases: {missing}"


def compare(
    torch: Any, case: Case, got: dict[str, Any], want: dict[str, Any], what: str, ctx: Any
) -> None:
    """`got` against `want` element by element (`ctx`: the arguments the call started from,
    for the tolerance)."""
    for name, w in want.items():
        g = got[name]
        assert tuple(g.shape) == tuple(w.shape), f"{what} `{name}`: shape {g.shape} != {w.shape}"
        if case.tol is None:
            ok = g == w.to(g.dtype)
        else:
            gd, wd = g.double(), w.double()
            both_nan = gd.isnan() & wd.isnan()
            same_inf = gd.isinf() & (gd == wd)
            ok = ((gd - wd).abs() <= case.tol(name, wd, ctx)) | both_nan | same_inf
        if not bool(ok.all()):
            bad = (~ok).nonzero()[0].tolist()
            raise AssertionError(
                f"{what} `{name}`: {int((~ok).sum())} of {ok.numel()} elements differ; first at "
                f"{bad}: got {g[tuple(bad)].item()}, want {w[tuple(bad)].item()}"
            )


@pytest.mark.parametrize("family", FAMILIES)
def test_out_form_equals_the_torch_reference(ft: Any, torch: Any, gen: Any, family: str) -> None:
    op = getattr(ft, f"{family}_out")
    for case in cases(family, torch, gen):
        initial = {n: o.clone() for n, o in case.outputs.items()}
        want = case.expect({**case.inputs, **initial})
        args = case.out_args(family)
        snapshot = {n: v.clone() for n, v in case.inputs.items() if hasattr(v, "clone")}
        op(*args)
        torch.cuda.synchronize()
        if case.reference:
            compare(
                torch,
                case,
                case.outputs,
                want,
                f"{family}_out {case.label}",
                {**case.inputs, **initial},
            )
        for n, v in snapshot.items():  # read arguments are not written
            assert torch.equal(case.inputs[n], v), f"{family} wrote `{n}`"


@pytest.mark.parametrize("family", FAMILIES)
def test_functional_form_equals_the_torch_reference(
    ft: Any, torch: Any, gen: Any, family: str
) -> None:
    fn = getattr(ft, family)
    for case in cases(family, torch, gen):
        if not case.functional:
            with pytest.raises(NotImplementedError, match=f"{family}_out"):
                fn(*case.fn_args(family), **case.kwargs)
            continue
        got = fn(*case.fn_args(family), **case.kwargs)
        got = got if isinstance(got, tuple) else (got,)
        names = [n for n in param_names(family) if n in case.outputs]
        assert len(got) == len(names)
        got_d = dict(zip(names, got, strict=True))
        for n in names:  # allocated like the out-form's outputs, on the inputs' device
            assert got_d[n].dtype == case.outputs[n].dtype, (family, case.label, n)
            assert got_d[n].is_cuda and got_d[n].is_contiguous()
        torch.cuda.synchronize()
        if case.reference:
            # Outputs start as zeros.
            ctx = {**case.inputs, **{n: torch.zeros_like(o) for n, o in case.outputs.items()}}
            compare(torch, case, got_d, case.expect(ctx), f"{family} {case.label}", ctx)


def opcheck_cases(family: str, all_cases: list[Case]) -> list[Case]:
    """A few cases per family (opcheck runs each one several times): the first non-empty
    one, an empty one and a strided one where there are."""

    def empty(c: Case) -> bool:
        values = [*c.inputs.values(), *c.outputs.values()]
        return any(hasattr(v, "numel") and v.numel() == 0 for v in values)

    pick = [c for c in all_cases if not empty(c)][:1]
    pick += [c for c in all_cases if empty(c)][:1]
    pick += [c for c in all_cases if "transposed" in c.label or "True" in c.label][:1]
    return pick


@pytest.mark.parametrize("family", FAMILIES)
def test_opcheck(ft: Any, torch: Any, gen: Any, family: str) -> None:
    for case in opcheck_cases(family, cases(family, torch, gen)):
        torch.library.opcheck(getattr(ft, f"{family}_out"), case.out_args(family))
        if case.functional:
            torch.library.opcheck(getattr(ft, family), case.fn_args(family), case.kwargs)


def test_opcheck_histogram_with_a_shape_hook(ft: Any, torch: Any, gen: Any) -> None:
    ops = ft.register(
        ferrocuda.bundled(),
        "ferrocuda_hist",
        output_shapes={"histogram": {"bins": lambda inputs: (33,)}},
    )
    x = rand(torch, gen, (5000,), torch.float32)
    got = ops.histogram(x, -3.0, 3.0)
    want = np.histogram(x.cpu().numpy(), bins=33, range=(-3.0, 3.0))[0]
    assert got.dtype == torch.int64 and got.shape == (33,)
    assert np.array_equal(got.cpu().numpy(), want)
    torch.library.opcheck(ops.histogram, (x, -3.0, 3.0))


# ---- torch.compile and CUDA graphs --------------------------------------------------------


def model(ft: Any, torch: Any) -> Callable[..., Any]:
    def f(x: Any, w: Any) -> Any:
        y = ft.gelu(x)
        z = ft.add(y, x)
        s = ft.softmax(z)
        u = ft.silu(s)
        v = torch.empty_like(u)
        ft.add_out(u, z, v)
        r = ft.sum_rows(v)
        m = ft.matmul(v, w, 1.0, 0.0)
        return ft.gelu_tanh(m), r

    return f


def test_compile_fullgraph_has_no_graph_break_and_eager_results(
    ft: Any, torch: Any, gen: Any
) -> None:
    f = model(ft, torch)
    x = rand(torch, gen, (64, 96), torch.float32)
    w = rand(torch, gen, (96, 32), torch.float32)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(x, w)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1
    want = f(x, w)
    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True)(x, w)
    for g, e in zip(got, want, strict=True):
        assert torch.equal(g, e)


def test_reduce_overhead_replays_with_new_inputs(ft: Any, torch: Any, gen: Any) -> None:
    from torch._dynamo.utils import counters

    f = model(ft, torch)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for step in range(6):
        x = rand(torch, gen, (64, 96), torch.float32)
        w = rand(torch, gen, (96, 32), torch.float32)
        got = [t.clone() for t in compiled(x, w)]  # a replay's outputs are reused by the next
        want = f(x, w)
        for g, e in zip(got, want, strict=True):
            assert torch.equal(g, e), f"step {step}"
    assert not counters["inductor"].get("cudagraph_skips"), dict(counters["inductor"])


def test_compiled_out_form_mutates_its_argument(ft: Any, torch: Any, gen: Any) -> None:
    def f(a: Any, b: Any, out: Any) -> Any:
        ft.add_out(a, b, out)
        return ft.gelu(out)

    a, b = rand(torch, gen, (1000,), torch.float32), rand(torch, gen, (1000,), torch.float32)
    out = torch.full_like(a, float("nan"))
    torch._dynamo.reset()
    y = torch.compile(f, fullgraph=True)(a, b, out)
    assert torch.equal(out, a + b)
    assert torch.equal(y, ft.gelu(a + b))


# ---- streams, grads, errors ----------------------------------------------------------------


def test_launches_on_torchs_current_stream(ft: Any, torch: Any, gen: Any) -> None:
    src = rand(torch, gen, (1 << 22,), torch.float32)
    x = torch.empty_like(src)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)  # the copy below starts late on s
        x.copy_(src)
        y = ft.gelu(x)  # must run after the copy: on s
        out = torch.empty_like(x)
        ft.add_out(x, y, out)
    s.synchronize()
    assert torch.equal(y, ft.gelu(src))
    assert torch.equal(out, src + y)


def test_tensors_that_require_grad(ft: Any, torch: Any, gen: Any) -> None:
    x = rand(torch, gen, (100,), torch.float32).requires_grad_()
    y = ft.gelu(x)
    assert torch.equal(y, ft.gelu(x.detach()))
    # The out-form's kernel reads them as detach() would: the same memory, no autograd.
    b = rand(torch, gen, (100,), torch.float32).requires_grad_()
    out = torch.full((100,), float("nan"), device="cuda")
    ft.add_out(x, b, out)
    assert torch.equal(out, torch.add(x.detach(), b.detach()))
    ft.add_out(x, x, out)
    assert torch.equal(out, 2 * x.detach())
    # An output that requires grad is written in place, in its own memory.
    out_g = torch.full((100,), float("nan"), device="cuda", requires_grad=True)
    ft.add_out(x, b, out_g)
    assert out_g.is_leaf and out_g.requires_grad
    assert torch.equal(out_g.detach(), torch.add(x.detach(), b.detach()))
    # A non-leaf view that requires grad (the strided variant), and nn.Parameter (a subclass:
    # read by the generic reader, on its detach()).
    m = rand(torch, gen, (33, 65), torch.float32).requires_grad_()
    o = torch.full((65, 33), float("nan"), device="cuda")
    ft.add_out(m.t(), m.t(), o)
    assert torch.equal(o, torch.add(m.detach().t(), m.detach().t()))
    p = torch.nn.Parameter(rand(torch, gen, (100,), torch.float32))
    assert p.requires_grad
    ft.add_out(p, b, out)
    assert torch.equal(out, torch.add(p.detach(), b.detach()))
    assert torch.equal(ft.add(p, x), torch.add(p.detach(), x.detach()))
    # A launcher's own call keeps torch's refusal (its getter's error).
    with pytest.raises(Exception, match="grad"):
        ferrocuda.kernels.add(x, b, out)


@pytest.mark.parametrize("family", FAMILIES)
def test_operators_read_inputs_that_require_grad(
    ft: Any, torch: Any, gen: Any, family: str
) -> None:
    # Every family's operators on floating inputs that require grad (detached aliases of the
    # cases' inputs, views kept): the results of the torch reference, as without grad.
    op, fn = getattr(ft, f"{family}_out"), getattr(ft, family)
    ran = 0
    for case in cases(family, torch, gen):
        grads = {
            n: v.detach().requires_grad_()
            for n, v in case.inputs.items()
            if isinstance(v, torch.Tensor) and v.dtype.is_floating_point
        }
        if not grads:
            continue
        inputs = {**case.inputs, **grads}
        initial = {n: o.clone() for n, o in case.outputs.items()}
        ctx = {**case.inputs, **initial}
        want = case.expect(ctx)
        op(*(inputs[n] if n in inputs else case.outputs[n] for n in param_names(family)))
        torch.cuda.synchronize()
        if case.reference:
            compare(torch, case, case.outputs, want, f"{family}_out {case.label} (grad)", ctx)
        if case.functional and case.reference:
            got = fn(*(inputs[n] for n in param_names(family) if n in inputs), **case.kwargs)
            got = got if isinstance(got, tuple) else (got,)
            names = [n for n in param_names(family) if n in case.outputs]
            zeros = {**case.inputs, **{n: torch.zeros_like(o) for n, o in case.outputs.items()}}
            got_d = {n: g.detach() for n, g in zip(names, got, strict=True)}
            compare(torch, case, got_d, case.expect(zeros), f"{family} {case.label} (grad)", zeros)
        ran += 1
    floating = any(
        isinstance(v, torch.Tensor) and v.dtype.is_floating_point
        for c in cases(family, torch, gen)
        for v in c.inputs.values()
    )
    assert ran or not floating, f"{family}: no case with floating inputs ran"


@pytest.mark.parametrize(
    "env",
    [{}, {"FERROCUDA_TORCH_EXCHANGE": "0"}, {"FERROCUDA_FAST_PATHS": "0"}],
    ids=["exchange-api", "attribute-reads", "generic-reader"],
)
def test_every_reader_takes_tensors_that_require_grad(torch: Any, env: dict[str, str]) -> None:
    # In a fresh process, so that the operator's first tensor is the fast path's first read
    # (its self-check against torch's getter reads the tensor's detach()); with each reader.
    code = (
        "import warnings, torch, ferrocuda, ferrocuda.torch as ft\n"
        "warnings.simplefilter('error', RuntimeWarning)\n"
        "x = torch.randn(1000, device='cuda', requires_grad=True)\n"
        "p = torch.nn.Parameter(torch.randn(1000, device='cuda'))\n"
        "out = torch.full((1000,), float('nan'), device='cuda', requires_grad=True)\n"
        "ft.add_out(x, p, out)\n"
        "assert torch.equal(out.detach(), x.detach() + p.detach())\n"
        "y = ft.gelu(x[::2])\n"
        "o = torch.empty(500, device='cuda')\n"
        "ft.gelu_out(x.detach()[::2], o)\n"
        "assert torch.equal(y, o)\n"
        "try:\n"
        "    ferrocuda.kernels.add(x, p, o.new_empty(1000))\n"
        "except Exception as e:\n"
        "    assert 'grad' in str(e), e\n"
        "else:\n"
        "    raise AssertionError('a launcher call took a tensor that requires grad')\n"
        "print(ferrocuda._ferrocuda._fast_paths()[1], ferrocuda._ferrocuda._torch_read_source())\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    fast, source = r.stdout.split()
    assert fast == ("False" if env.get("FERROCUDA_FAST_PATHS") == "0" else "True"), r.stdout
    if env.get("FERROCUDA_TORCH_EXCHANGE") == "0":
        assert source == "attributes", r.stdout


def test_out_form_errors(ft: Any, torch: Any) -> None:
    x, out = torch.ones(4, device="cuda"), torch.full((4,), -1.0, device="cuda")
    # A CPU tensor is refused in the operator's terms by its kernel (a launcher's call would
    # stage it as a host array), nothing written — also one that requires grad, and a CPU
    # output.
    with pytest.raises(ValueError, match=r"argument `b` of ferrocuda::add_out\b.*cpu"):
        ft.add_out(x, torch.ones(4), out)
    with pytest.raises(ValueError, match=r"argument `b` of ferrocuda::add_out\b.*cpu"):
        ft.add_out(x, torch.ones(4, requires_grad=True), out)
    cpu_out = torch.full((4,), -1.0)
    with pytest.raises(ValueError, match=r"^argument `out` of ferrocuda::add_out: .*on cpu"):
        ft.add_out(x, x, cpu_out)
    assert torch.equal(cpu_out, torch.full((4,), -1.0))
    # The launcher's own refusal comes through as it is.
    with pytest.raises(ValueError, match="shape"):
        ft.add_out(x, torch.ones(5, device="cuda"), out)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full((4,), -1.0, device="cuda"))


def test_errors(ft: Any, torch: Any) -> None:
    x = torch.zeros(4, device="cuda")
    with pytest.raises(ValueError, match=r"argument `b` of ferrocuda::add\b.*cpu"):
        ft.add(x, torch.zeros(4))
    with pytest.raises(TypeError, match="`gelu` has no variant"):
        ft.gelu(torch.zeros(4, device="cuda", dtype=torch.int8))
    with pytest.raises(NotImplementedError, match="bins"):
        ft.histogram(x, 0.0, 1.0)
    # The launcher's own checks name the argument (shapes differ).
    with pytest.raises(ValueError, match="shape"):
        ft.add_out(x, torch.zeros(5, device="cuda"), torch.zeros(4, device="cuda"))


# ---- a crate of one's own -------------------------------------------------------------------


@pytest.fixture(scope="module")
def crate(own_crate: Path) -> Path:
    return own_crate


def test_a_crate_of_ones_own(ft: Any, torch: Any, gen: Any, crate: Path) -> None:
    mod = ferrocuda.load(crate)
    ops = ft.register(mod)
    assert ops.namespace == "my_kernels"
    for dtype in (torch.float32, torch.float64):
        x = rand(torch, gen, (1000,), dtype)
        y = ops.scale(2.5, x)
        assert torch.equal(y, 2.5 * x)
        out = torch.full_like(x, float("nan"))
        torch.ops.my_kernels.scale_out(-0.5, x, out)
        assert torch.equal(out, -0.5 * x)
        torch.library.opcheck(ops.scale, (2.5, x))
        torch.library.opcheck(ops.scale_out, (2.5, x, out))
    f = torch.compile(lambda x: ops.scale(3.0, ft.gelu(x)), fullgraph=True)
    x = rand(torch, gen, (4099,), torch.float32)
    assert torch.equal(f(x), 3.0 * ft.gelu(x))
