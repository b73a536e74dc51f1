"""``linear`` (``out = x @ w.T``) for f16 inputs, and ``linear_tf32`` (f32 inputs on the
tensor cores in TF32, asked for by name), on the GPU: every element against float64 with the
error bound of the arithmetic — the sm_90a kernels (TMA, ``wgmma``) where the family picks
them and by name, the portable f16 ``mma.sync`` kernels from the bundled module loaded
without its sm_90a part; whole and partial tiles, K = 0, transposed and odd-pitch views (the
portable path on an H100); bad arguments refused naming the argument (GPU; skipped without
one)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ferrocuda
from conftest import assert_elements, bundled_without_parts
from linear_ref import assert_outside_untouched, out_layouts

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels

SHAPES = [
    (1, 1, 8),
    (128, 256, 64),
    (129, 257, 136),
    (300, 520, 72),
    (1000, 1000, 520),
    (64, 48, 1024),
    (3, 5, 0),
]


@pytest.fixture(scope="module")
def portable(tmp_path_factory: Any) -> Any:
    """The bundled module without its sm_90a part: each family keeps its portable kernels."""
    return bundled_without_parts(tmp_path_factory.mktemp("portable"))


@pytest.fixture
def gen(torch: Any, rng: np.random.Generator) -> Any:
    g = torch.Generator(device="cuda")
    g.manual_seed(int(rng.integers(1 << 62)))
    return g


def hopper(torch: Any) -> bool:
    return torch.cuda.get_device_capability() == (9, 0)


def check(torch: Any, got: Any, x: Any, w: Any, rel_product: float, what: str) -> None:
    """Every element of ``got`` within ``(K + 2) · 2⁻²³ · Σ|x w|`` (f32 sums of K terms) plus
    ``rel_product · Σ|x w|`` (what the inputs lose on the tensor cores) and, for a 16-bit
    output, its rounding (half an ulp: 2⁻⁹ bf16, 2⁻¹¹ f16 of the value)."""
    xd, wd = x.double(), w.double()
    want = xd @ wd.T
    absum = xd.abs() @ wd.abs().T
    k = x.shape[1]
    tol = absum * ((k + 2) * 2.0**-23 + rel_product) + 1e-30
    if got.dtype == torch.float16:
        tol = tol + want.abs() * 2.0**-11 + 2.0**-25
    elif got.dtype == torch.bfloat16:
        tol = tol + want.abs() * 2.0**-8
    g = got.double()
    ok = (g - want).abs() <= tol
    assert_elements(ok, got, want, tol, what)


def f16_operands(torch: Any, gen: Any, m: int, n: int, k: int) -> Any:
    def r(*shape: int) -> Any:
        return (torch.rand(shape, generator=gen, device="cuda") * 4 - 2).to(torch.float16)

    return r(m, k), r(n, k)


@pytest.mark.parametrize("itype", ["bfloat16", "float16"])
def test_sm90_out_layouts(torch: Any, gen: Any, itype: str) -> None:
    """The sm_90a kernels' two store paths for every output type: a consumer's 64 × 256 slice
    inside ``out`` with contiguous rows aligned to 8 bytes is stored from one base pointer (for
    16-bit outputs two pairs per 8-byte store, traded between neighbouring lanes), any other
    slice pair by pair. ``out`` a column slice of a wider buffer at an offset of 4 elements
    (pitch ≠ N: the one-pointer store for every type), of 2 (8 bytes for f32: one pointer; 4
    for 16-bit: pair by pair), of 1, with an odd pitch, and transposed; whole tiles only
    (256 × 512) and whole and partial ones (384 × 520); the buffer outside the view untouched."""
    if not hopper(torch):
        pytest.skip("the sm_90a kernels run on compute capability 9.0")
    dt = getattr(torch, itype)
    for m, n, k in [(256, 512, 64), (384, 520, 136)]:
        x = (torch.rand(m, k, generator=gen, device="cuda") * 4 - 2).to(dt)
        w = (torch.rand(n, k, generator=gen, device="cuda") * 4 - 2).to(dt)
        for odtype in (torch.float32, dt):
            for label, buf, out, cols in out_layouts(torch, m, n, odtype):
                K.linear(x, w, out)
                torch.cuda.synchronize()
                what = f"linear {itype} {m}x{n}x{k} -> {odtype}, out {label}"
                check(torch, out, x, w, 0.0, what)
                assert_outside_untouched(torch, buf, cols, what)


@pytest.mark.parametrize("odtype", ["float32", "float16"])
def test_f16_family_and_members(torch: Any, gen: Any, portable: Any, odtype: str) -> None:
    od = getattr(torch, odtype)
    suffix = "_f32" if odtype == "float32" else ""
    for m, n, k in SHAPES:
        x, w = f16_operands(torch, gen, m, n, k)
        runs = [("family", K.linear), ("portable", getattr(portable, f"linear_f16{suffix}"))]
        if hopper(torch) and k > 0:
            runs.append(("sm90", getattr(K, f"linear_f16{suffix}_sm90")))
        for what, launch in runs:
            out = torch.full((m, n), float("nan"), dtype=od, device="cuda")
            launch(x, w, out)
            torch.cuda.synchronize()
            check(torch, out, x, w, 0.0, f"linear f16 -> {odtype} {what} {m}x{n}x{k}")


def test_f16_views_the_portable_kernel_takes(torch: Any, gen: Any) -> None:
    """On an H100 the family hands what TMA cannot read (a transposed x, an odd row pitch of
    w, K not a multiple of 8) to the portable kernel: the results are the same."""
    m, n, k = 200, 136, 72
    x, w = f16_operands(torch, gen, m, n, k)
    xt = x.T.contiguous().T  # a transposed view of the same values
    wide = torch.zeros(n, k + 3, dtype=torch.float16, device="cuda")
    wide[:, :k] = w
    wp = wide[:, :k]  # rows 150 bytes apart: no 16-byte stride
    for xa, wa, what in [(xt, w, "x transposed"), (x, wp, "w odd pitch")]:
        out = torch.full((m, n), float("nan"), device="cuda")
        K.linear(xa, wa, out)
        torch.cuda.synchronize()
        check(torch, out, x, w, 0.0, f"linear f16 {what}")
    x7, w7 = f16_operands(torch, gen, 33, 40, 7)
    out = torch.full((33, 40), float("nan"), device="cuda")
    K.linear(x7, w7, out)
    torch.cuda.synchronize()
    check(torch, out, x7, w7, 0.0, "linear f16 K=7")


def test_tf32(torch: Any, gen: Any) -> None:
    if not hopper(torch):
        with pytest.raises(ferrocuda.CudaError, match="sm_90a"):
            x = torch.ones(8, 8, device="cuda")
            K.linear_tf32(x, x, torch.empty(8, 8, device="cuda"))
        return
    for m, n, k in SHAPES:
        if k == 0:
            continue
        x = torch.randn(m, k, generator=gen, device="cuda") * 3
        w = torch.randn(n, k, generator=gen, device="cuda")
        for what, launch in [("family", K.linear_tf32), ("sm90", K.linear_tf32_sm90)]:
            out = torch.full((m, n), float("nan"), device="cuda")
            launch(x, w, out)
            torch.cuda.synchronize()
            # Each TF32 operand keeps 10 of f32's 23 mantissa bits (truncated or rounded: below
            # 2⁻¹⁰ relative either way), so a product is within 2⁻⁹ + 2⁻²⁰ of the exact one.
            check(torch, out, x, w, 2.0**-9 + 2.0**-20, f"linear_tf32 {what} {m}x{n}x{k}")
    # Not exact f32: the product of values TF32 cannot hold differs from the f32 one (the
    # kernel does not quietly run in f32).
    x = torch.full((64, 64), 1.0 + 2.0**-20, device="cuda")
    out = torch.empty(64, 64, device="cuda")
    K.linear_tf32(x, x, out)
    torch.cuda.synchronize()
    exact = 64 * (1.0 + 2.0**-20) ** 2
    assert abs(out[0, 0].item() - exact) > 2.0**-15, "linear_tf32 gave the f32 product"


def test_bad_arguments(torch: Any) -> None:
    x = torch.ones(16, 16, device="cuda", dtype=torch.float16)
    w = torch.ones(8, 16, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="as many columns as w has rows"):
        K.linear(x, w, torch.empty(16, 16, device="cuda"))
    # Mixed input types: no member takes f16 x with bf16 w.
    with pytest.raises(TypeError):
        K.linear(x, w.to(torch.bfloat16), torch.empty(16, 8, device="cuda"))
    if hopper(torch):
        # TF32 takes f32 only; TMA needs 16-byte row strides (K a multiple of 4).
        with pytest.raises(TypeError, match="x"):
            K.linear_tf32_sm90(x, w, torch.empty(16, 8, device="cuda"))
        xf = torch.ones(16, 6, device="cuda")
        with pytest.raises(ValueError, match="x"):
            K.linear_tf32_sm90(
                xf, torch.ones(8, 6, device="cuda"), torch.empty(16, 8, device="cuda")
            )
