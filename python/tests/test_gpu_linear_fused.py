"""The fused-epilogue GEMM families (``linear_bias``, ``linear_bias_{relu,gelu,gelu_tanh,silu}``:
``out = act(x @ w.T + bias)`` in one kernel) on the GPU: every element against float64 with
the error bound of the arithmetic, on torch and CuPy arrays, for the sm_90a kernel (TMA,
``wgmma``) where the family picks it and for the portable ``mma.sync`` kernel run by name from
the bundled module loaded without its sm_90a part; whole and partial tiles, K not a multiple
of 8 and transposed views (the portable path on an H100), K = 0 (``act(bias)``), huge and NaN
values; bad arguments refused naming the argument (GPU; skipped without one)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ferrocuda
from conftest import assert_elements, bundled_without_parts
from linear_ref import assert_outside_untouched, bound, out_layouts, reference

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels
ACTS = ["none", "relu", "gelu", "gelu_tanh", "silu"]


def family(act: str) -> str:
    return "linear_bias" if act == "none" else f"linear_bias_{act}"


def check(torch: Any, got: Any, x: Any, w: Any, b: Any, act: str, what: str) -> None:
    want = reference(torch, x, w, b, act)
    g = got.double()
    tl = bound(torch, x, w, b, want, got.dtype)
    ok = ((g - want).abs() <= tl) | (g.isnan() & want.isnan()) | (g.isinf() & (g == want))
    assert_elements(ok, got, want, tl, what)


@pytest.fixture(scope="module")
def portable(tmp_path_factory: Any) -> Any:
    """The bundled module without its sm_90a part: each family has only its portable
    ``mma.sync`` kernels, so a call runs exactly them, on any device."""
    return bundled_without_parts(tmp_path_factory.mktemp("portable"))


def operands(torch: Any, gen: Any, m: int, n: int, k: int, scale: float = 1.0) -> Any:
    def r(*shape: int) -> Any:
        v = torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32) * scale
        return v.to(torch.bfloat16)

    return r(m, k), r(n, k), r(n)


@pytest.fixture
def gen(torch: Any, rng: np.random.Generator) -> Any:
    g = torch.Generator(device="cuda")
    g.manual_seed(int(rng.integers(1 << 62)))
    return g


SHAPES = [
    (1, 1, 1),
    (7, 5, 3),
    (128, 256, 64),
    (129, 257, 136),
    (300, 520, 72),
    (1000, 1000, 520),
    (64, 48, 7),
    (3, 5, 0),
]


@pytest.mark.parametrize("act", ACTS)
def test_family_on_torch(torch: Any, gen: Any, act: str) -> None:
    fam = getattr(K, family(act))
    odtypes = [torch.float32, torch.bfloat16] if act == "none" else [torch.bfloat16]
    for m, n, k in SHAPES:
        x, w, b = operands(torch, gen, m, n, k)
        for odtype in odtypes:
            out = torch.full((m, n), float("nan"), dtype=odtype, device="cuda")
            fam(x, w, b, out)
            torch.cuda.synchronize()
            check(torch, out, x, w, b, act, f"{family(act)} {m}x{n}x{k} -> {odtype}")


@pytest.mark.parametrize("act", ["none", "gelu"])
def test_family_out_layouts(torch: Any, gen: Any, act: str) -> None:
    """Both store paths of the sm_90a kernels: a consumer's 64 × 256 slice of a tile that lies
    inside ``out`` with contiguous rows aligned to 8 bytes goes through one base pointer (the
    row pitch taken from the stride), any other slice pair by pair. ``out`` as a column slice
    of a wider buffer at an offset of 4 elements (pitch ≠ N: the fast path), of 2 (8 bytes for
    f32, 4 for bf16: the checked path), at an odd offset, with an odd pitch, and transposed;
    shapes of whole tiles only and of whole and partial ones; the buffer's elements outside the
    view stay untouched."""
    fam = getattr(K, family(act))
    odtypes = [torch.float32, torch.bfloat16] if act == "none" else [torch.bfloat16]
    for m, n, k in [(256, 512, 64), (384, 520, 136)]:
        x, w, b = operands(torch, gen, m, n, k)
        for odtype in odtypes:
            for label, buf, out, cols in out_layouts(torch, m, n, odtype):
                fam(x, w, b, out)
                torch.cuda.synchronize()
                what = f"{family(act)} {m}x{n}x{k} -> {odtype}, out {label}"
                check(torch, out, x, w, b, act, what)
                assert_outside_untouched(torch, buf, cols, what)


@pytest.mark.parametrize("act", ["none", "gelu"])
def test_bias_alignment(torch: Any, gen: Any, act: str) -> None:
    """The bias at an offset of 1 element (2-byte aligned: the sm_90a kernels read each
    thread's bias of a whole tile slice element by element) and of 2 (4-byte aligned: a pair
    per load), on whole and partial tiles; the elements around it are NaN, so that a read past
    either end shows."""
    fam = getattr(K, family(act))
    for m, n, k in [(256, 512, 64), (384, 520, 136)]:
        x, w, b = operands(torch, gen, m, n, k)
        for off in (1, 2):
            buf = torch.full((n + 4,), float("nan"), dtype=torch.bfloat16, device="cuda")
            buf[off : off + n] = b
            bias = buf[off : off + n]
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            fam(x, w, bias, out)
            torch.cuda.synchronize()
            check(torch, out, x, w, b, act, f"{family(act)} {m}x{n}x{k}, bias at offset {off}")


@pytest.mark.parametrize("act", ACTS)
def test_portable_kernels(torch: Any, gen: Any, portable: Any, act: str) -> None:
    """The portable kernels by name, on every layout they take: C order, transposed x, w and
    out, a column slice at an odd offset (no TMA on any of them), small grids."""
    odtypes = [torch.float32, torch.bfloat16] if act == "none" else [torch.bfloat16]
    for m, n, k in [(1, 1, 1), (129, 257, 136), (200, 300, 67)]:
        x, w, b = operands(torch, gen, m, n, k)
        xt = x.t().contiguous().t()  # (m, k) with column-major strides
        wide = torch.randn(n, k + 3, generator=gen, device="cuda").to(torch.bfloat16)
        ws = wide[:, 1 : k + 1]  # a column slice at an odd offset
        for odtype in odtypes:
            suffix = "bf16_f32" if odtype == torch.float32 else "bf16"
            kern = getattr(portable, f"{family(act)}_{suffix}")
            for xv, wv, label in [(x, w, "C"), (xt, w, "x transposed"), (x, ws, "w slice")]:
                for grid in (None, 1, 3):
                    out = torch.full((n, m), float("nan"), dtype=odtype, device="cuda").t()
                    kw = {} if grid is None else {"grid": grid}
                    kern(xv, wv, b, out, **kw)
                    torch.cuda.synchronize()
                    check(torch, out, xv, wv, b, act, f"{kern} {m}x{n}x{k} {label} grid {grid}")


def test_cupy_arrays(cupy: Any, torch: Any, gen: Any) -> None:
    """CuPy operands (bfloat16 is not a CuPy dtype: the torch tensors' memory, seen through
    the CUDA Array Interface by ferrocuda, the f32 output a CuPy array)."""
    x, w, b = operands(torch, gen, 300, 200, 128)
    out = cupy.full((300, 200), cupy.nan, cupy.float32)
    K.linear_bias(x, w, b, out)
    cupy.cuda.runtime.deviceSynchronize()
    check(torch, torch.as_tensor(out, device="cuda"), x, w, b, "none", "cupy out")


def test_adversarial_values(torch: Any, gen: Any) -> None:
    """Large magnitudes (sums in the thousands: GELU/SiLU of large negative sums → 0, a bias
    near bf16's largest value), a NaN in the bias (its column NaN), zero inputs."""
    m, n, k = 130, 260, 64
    x, w, b = operands(torch, gen, m, n, k, scale=30.0)
    b[5] = float("nan")
    b[7] = 1e38
    for act in ACTS:
        out = torch.full((m, n), 0.5, dtype=torch.bfloat16, device="cuda")
        getattr(K, family(act))(x, w, b, out)
        torch.cuda.synchronize()
        check(torch, out, x, w, b, act, f"{family(act)} large values")
        assert bool(out[:, 5].isnan().all()), f"{act}: NaN bias column"
    zeros = torch.zeros_like(x)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    K.linear_bias_relu(zeros, w, b, out)
    torch.cuda.synchronize()
    check(torch, out, zeros, w, b, "relu", "relu of the bias alone")


def test_bad_arguments(torch: Any) -> None:
    bf = torch.bfloat16
    x, w = torch.ones(4, 8, dtype=bf, device="cuda"), torch.ones(6, 8, dtype=bf, device="cuda")
    out = torch.empty(4, 6, dtype=bf, device="cuda")
    b = torch.ones(6, dtype=bf, device="cuda")
    with pytest.raises(ValueError, match=r"argument `bias`.*one element per row of w"):
        K.linear_bias_gelu(x, w, torch.ones(5, dtype=bf, device="cuda"), out)
    with pytest.raises(ValueError, match=r"x and w must have the same number of columns"):
        K.linear_bias_gelu(x, torch.ones(6, 9, dtype=bf, device="cuda"), b, out)
    with pytest.raises(ValueError, match=r"out must have x's row count"):
        K.linear_bias_gelu(x, w, b, torch.empty(5, 6, dtype=bf, device="cuda"))
    with pytest.raises(ValueError, match=r"argument `out`.*overlaps argument `bias`"):
        K.linear_bias_gelu(x[:1], w, b, b.view(1, 6))
    with pytest.raises(TypeError, match="no variant"):
        K.linear_bias_gelu(x, w, b, torch.empty(4, 6, dtype=torch.float32, device="cuda"))
    with pytest.raises(TypeError, match="no variant"):
        K.linear_bias(x.float(), w, b, out)
