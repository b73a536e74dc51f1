"""The ``attention`` and ``attention_lse`` families (scaled dot-product attention, forward,
FlashAttention-style on the tensor cores) on the GPU, each test run on the sm_90a kernels and
the portable ones, bf16 and f16: every element against a float64 reference with the error
bound of the arithmetic — causal and not, head dimensions 64 and 128 and the widths padded up
to them (32, 96), sequence lengths that are not multiples of the tiles, queries and keys of
different lengths, the (B, S, H, D) projection layout seen as (B, H, S, D), persistent grids of
any size, large scores, the log-sum-exp, grouped-query attention (``k`` and ``v`` with fewer
heads); bad arguments refused naming what is wrong (GPU; skipped without one)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ferrocuda
from attention_ref import lse_reference, reference
from conftest import assert_elements, bundled_without_parts

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels


def sm90(torch: Any) -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the attention kernel is built for sm_90a (H100/H200)")


def check(torch: Any, got: Any, q: Any, k: Any, v: Any, scale: float, causal: bool, what: str):
    want, tol = reference(torch, q, k, v, scale, causal)
    g = got.double()
    assert_elements((g - want).abs() <= tol, got, want, tol, what)


@pytest.fixture(scope="module")
def portable(tmp_path_factory: Any) -> Any:
    """The bundled module without its sm_90a part: ``attention`` is then the portable
    ``mma.sync`` kernel alone (any strides, any GPU from sm_80)."""
    return bundled_without_parts(tmp_path_factory.mktemp("portable"))


class Attention:
    """The kernels under test: ``self(q, k, v, out, scale, causal)`` (the ``attention``
    family or kernel), ``self.lse(q, k, v, out, lse, scale, causal)`` (``attention_lse``),
    and the element type of their inputs."""

    def __init__(self, call: Any, lse: Any, dtype: Any) -> None:
        self.call, self.lse, self.dtype = call, lse, dtype

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(*args, **kwargs)


@pytest.fixture(
    params=[
        ("sm90", "bf16"),
        ("sm90", "f16"),
        ("portable", "bf16"),
        ("portable", "f16"),
    ],
    ids=lambda p: "-".join(p),
)
def attention(request: Any, torch: Any) -> Attention:
    """The families as an H100 runs them (the sm_90a kernels), and the portable kernels by
    name; bf16 and f16."""
    kind, dt = request.param
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
    if kind == "sm90":
        sm90(torch)
        return Attention(K.attention, K.attention_lse, dtype)
    m = request.getfixturevalue("portable")
    return Attention(getattr(m, f"attention_{dt}"), getattr(m, f"attention_lse_{dt}"), dtype)


@pytest.fixture
def gen(torch: Any, rng: np.random.Generator) -> Any:
    g = torch.Generator(device="cuda")
    g.manual_seed(int(rng.integers(1 << 62)))
    return g


def qkv(
    torch: Any,
    gen: Any,
    b: int,
    h: int,
    sq: int,
    skv: int,
    d: int,
    mag: float = 1.0,
    dtype: Any = None,
):
    def r(s: int) -> Any:
        x = torch.randn(b, h, s, d, generator=gen, device="cuda") * mag
        return x.to(dtype or torch.bfloat16)

    return r(sq), r(skv), r(skv)


SHAPES = [
    # (B, H, S_q, S_kv, D)
    (1, 1, 1, 1, 64),
    (2, 3, 128, 128, 64),
    (1, 2, 200, 333, 128),
    (2, 2, 1000, 1000, 128),
    (1, 1, 77, 50, 32),
    (1, 2, 130, 260, 96),
    (1, 1, 513, 129, 64),
    (3, 1, 64, 700, 128),
]


@pytest.mark.parametrize("causal", [False, True])
def test_family_on_torch(torch: Any, gen: Any, attention: Any, causal: bool) -> None:
    for b, h, sq, skv, d in SHAPES:
        q, k, v = qkv(torch, gen, b, h, sq, skv, d, dtype=attention.dtype)
        scale = 1.0 / math.sqrt(d)
        out = torch.full_like(q, float("nan"))
        attention(q, k, v, out, scale, int(causal))
        torch.cuda.synchronize()
        check(torch, out, q, k, v, scale, causal, f"{(b, h, sq, skv, d)} causal={causal}")


def test_agrees_with_torch_sdpa(torch: Any, gen: Any) -> None:
    """Beside the float64 reference, the peer: torch's FlashAttention backend on the same
    inputs. (Not torch's own pick: on an H100 that is cuDNN's kernel, in which
    compute-sanitizer's racecheck reports hazards of its own.)"""
    sm90(torch)
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for causal in (False, True):
        q, k, v = qkv(torch, gen, 2, 4, 1024, 1024, 128)
        out = torch.empty_like(q)
        K.attention(q, k, v, out, 1.0 / math.sqrt(128), int(causal))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            peer = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
        diff = (out.float() - peer.float()).abs().max().item()
        assert diff < 0.02, f"causal={causal}: max |ours - sdpa| = {diff}"


GQA_SHAPES = [
    # (B, H, H_kv, S_q, S_kv, D)
    (2, 8, 2, 200, 333, 128),
    (1, 6, 1, 130, 260, 64),
    (1, 12, 4, 513, 129, 96),
    (3, 4, 2, 1, 700, 32),
]


def grouped(
    torch: Any, gen: Any, dtype: Any, b: int, h: int, hkv: int, sq: int, skv: int, d: int
) -> tuple[Any, list[tuple[Any, Any, str]]]:
    """A random ``q`` (B, H, S_q, D) and ``k``, ``v`` (B, H_kv, S_kv, D) twice: contiguous, and
    as the two halves of one packed (B, H_kv, S_kv, 2·D) array (a fused key/value
    projection's layout)."""
    q = torch.randn(b, h, sq, d, generator=gen, device="cuda").to(dtype)
    kv = torch.randn(b, hkv, skv, 2 * d, generator=gen, device="cuda").to(dtype)
    return q, [
        (kv[..., :d].contiguous(), kv[..., d:].contiguous(), "contiguous"),
        (kv[..., :d], kv[..., d:], "packed"),
    ]


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query(torch: Any, gen: Any, attention: Any, causal: bool) -> None:
    """Grouped-query attention (``H_kv`` dividing ``H``; multi-query: ``H_kv = 1``): query head
    ``h`` reads key/value head ``h // (H / H_kv)``; every element of ``out`` and ``lse``
    against float64 with ``k`` and ``v`` repeated per query head — and ``k`` and ``v`` as the
    two halves of one packed (B, H_kv, S, 2·D) array, the layout of a fused key/value
    projection."""
    for b, h, hkv, sq, skv, d in GQA_SHAPES:
        what = f"{(b, h, hkv, sq, skv, d)} causal={causal}"
        q, kvs = grouped(torch, gen, attention.dtype, b, h, hkv, sq, skv, d)
        scale = 1.0 / math.sqrt(d)
        for k, v, how in kvs:
            out = torch.full_like(q, float("nan"))
            attention(q, k, v, out, scale, int(causal))
            torch.cuda.synchronize()
            check(torch, out, q, k, v, scale, causal, f"{what} {how}")
        lse = torch.full((b, h, sq), float("nan"), device="cuda")
        out = torch.full_like(q, float("nan"))
        attention.lse(q, k, v, out, lse, scale, int(causal))
        torch.cuda.synchronize()
        check(torch, out, q, k, v, scale, causal, f"{what} with lse")
        want, tol = lse_reference(torch, q, k, scale, causal)
        assert_elements((lse.double() - want).abs() <= tol, lse, want, tol, f"lse {what}")


def test_grouped_query_agrees_with_torch_sdpa(torch: Any, gen: Any) -> None:
    """Grouped-query attention beside torch's own (``enable_gqa=True``), the head mapping
    included: swapping two key/value heads must change the result the same way for both."""
    sm90(torch)
    F = torch.nn.functional
    b, h, hkv, s, d = 2, 16, 4, 1024, 128
    for causal in (False, True):
        q = torch.randn(b, h, s, d, generator=gen, device="cuda").to(torch.bfloat16)
        k = torch.randn(b, hkv, s, d, generator=gen, device="cuda").to(torch.bfloat16)
        v = torch.randn(b, hkv, s, d, generator=gen, device="cuda").to(torch.bfloat16)
        for perm in ([0, 1, 2, 3], [1, 0, 3, 2]):
            kp, vp = k[:, perm].contiguous(), v[:, perm].contiguous()
            out = torch.empty_like(q)
            K.attention(q, kp, vp, out, 1.0 / math.sqrt(d), int(causal))
            peer = F.scaled_dot_product_attention(q, kp, vp, is_causal=causal, enable_gqa=True)
            torch.cuda.synchronize()
            diff = (out.float() - peer.float()).abs().max().item()
            assert diff < 0.02, f"causal={causal} heads {perm}: max |ours - sdpa| = {diff}"


def test_projection_layout_and_strided_out(torch: Any, gen: Any, attention: Any) -> None:
    """q, k, v as the views a model has after its projection — (B, S, H, D) memory seen as
    (B, H, S, D), rows of one head H·D apart — and out a view of the same kind."""
    b, h, s, d = 2, 4, 300, 64
    scale = 0.125

    def proj() -> Any:
        x = torch.randn(b, s, h, d, generator=gen, device="cuda").to(attention.dtype)
        return x.transpose(1, 2)

    q, k, v = proj(), proj(), proj()
    assert not q.is_contiguous()
    for causal in (False, True):
        out = torch.full((b, s, h, d), float("nan"), dtype=attention.dtype, device="cuda")
        out = out.transpose(1, 2)
        attention(q, k, v, out, scale, int(causal))
        torch.cuda.synchronize()
        check(torch, out, q, k, v, scale, causal, f"projection layout causal={causal}")
    # An out whose columns are not contiguous (element stores).
    wide = torch.full((b, h, s, 2 * d), float("nan"), dtype=attention.dtype, device="cuda")
    out = wide[..., ::2]
    attention(q, k, v, out, scale, 0)
    torch.cuda.synchronize()
    check(torch, out, q, k, v, scale, False, "out with column stride 2")
    assert bool(wide[..., 1::2].isnan().all()), "a store outside out"


def test_grids_and_scales(torch: Any, gen: Any, attention: Any) -> None:
    """Persistent blocks: a grid of 1, 3 or 1000 blocks gives the same result (each item once,
    the rings' phases kept across items); scales of either sign and a large one (scores in
    the hundreds: the running maximum keeps the exponentials finite; 0: every allowed key
    weighted alike)."""
    q, k, v = qkv(torch, gen, 2, 3, 300, 260, 128, dtype=attention.dtype)
    for grid in (1, 3, 1000):
        for causal in (False, True):
            out = torch.full_like(q, float("nan"))
            attention(q, k, v, out, 0.09, int(causal), grid=grid)
            torch.cuda.synchronize()
            check(torch, out, q, k, v, 0.09, causal, f"grid {grid} causal={causal}")
    for scale in (-0.3, 8.0, 0.0):
        out = torch.full_like(q, float("nan"))
        attention(q, k, v, out, scale, 1)
        torch.cuda.synchronize()
        assert bool(out.isfinite().all()), f"scale {scale}: non-finite output"
        check(torch, out, q, k, v, scale, True, f"scale {scale}")


def test_large_values(torch: Any, gen: Any, attention: Any) -> None:
    q, k, v = qkv(torch, gen, 1, 2, 256, 384, 64, mag=20.0, dtype=attention.dtype)
    out = torch.full_like(q, float("nan"))
    attention(q, k, v, out, 1.0, 0)
    torch.cuda.synchronize()
    check(torch, out, q, k, v, 1.0, False, "scores in the thousands")


def test_bad_arguments(torch: Any) -> None:
    sm90(torch)
    bf = torch.bfloat16

    def t(*shape: int, dtype: Any = bf) -> Any:
        return torch.zeros(*shape, dtype=dtype, device="cuda")

    q, k, v, out = t(1, 2, 64, 64), t(1, 2, 80, 64), t(1, 2, 80, 64), t(1, 2, 64, 64)
    with pytest.raises(ValueError, match=r"head dimension \(q.shape\[3\]\) must be at most 256"):
        K.attention(t(1, 2, 64, 264), t(1, 2, 80, 264), t(1, 2, 80, 264), t(1, 2, 64, 264), 1.0, 0)
    with pytest.raises(ValueError, match=r"v must have k's sequence length"):
        K.attention(q, k, t(1, 2, 81, 64), out, 1.0, 0)
    q3, out3 = t(1, 3, 64, 64), t(1, 3, 64, 64)
    heads = r"q's number of heads \(shape\[1\]\) must be a multiple of k's"
    with pytest.raises(ValueError, match=heads):
        K.attention(q3, k, v, out3, 1.0, 0)
    with pytest.raises(ValueError, match=heads):
        K.attention(q, t(1, 4, 80, 64), t(1, 4, 80, 64), out, 1.0, 0)
    with pytest.raises(ValueError, match=r"v must have k's number of heads"):
        K.attention(q, t(1, 1, 80, 64), v, out, 1.0, 0)
    with pytest.raises(ValueError, match=r"out must have q's shape"):
        K.attention(q, k, v, t(1, 2, 63, 64), 1.0, 0)
    with pytest.raises(ValueError, match=r"causal must be 0 or 1"):
        K.attention(q, k, v, out, 1.0, 2)
    with pytest.raises(TypeError, match=r"family `attention` has no variant for \(float32 4-D"):
        K.attention(q.float(), k.float(), v.float(), out.float(), 1.0, 0)
    with pytest.raises(TypeError, match=r"family `attention` has no variant for \(bfloat16 4-D"):
        K.attention(q, k.half(), v.half(), out.half(), 1.0, 0)
    lse = t(1, 2, 64, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"lse must have shape \(B, H, S_q\) of q"):
        K.attention_lse(q, k, v, out, t(1, 2, 65, dtype=torch.float32), 1.0, 0)
    with pytest.raises(ValueError, match=r"must be at least 1 with lse"):
        z = t(1, 2, 64, 0)
        K.attention_lse(z, t(1, 2, 80, 0), t(1, 2, 80, 0), z, lse, 1.0, 0)
    with pytest.raises(TypeError, match=r"family `attention_lse` has no variant"):
        K.attention_lse(q, k, v, out, lse.double(), 1.0, 0)


def test_lse(torch: Any, gen: Any, attention: Any) -> None:
    """``attention_lse``: ``out`` as ``attention``'s, and each query row's log-sum-exp of its
    scaled scores over the keys it sees, every element against float64 — odd shapes, both
    masks, scales of either sign, an ``lse`` with strides (rows of another array)."""
    for (b, h, sq, skv, d), scale in [
        ((1, 2, 200, 333, 128), 0.088),
        ((2, 1, 77, 50, 64), -0.3),
        ((1, 3, 513, 129, 96), 2.0),
    ]:
        q, k, v = qkv(torch, gen, b, h, sq, skv, d, dtype=attention.dtype)
        for causal in (False, True):
            out = torch.full_like(q, float("nan"))
            wide = torch.full((b, h, sq, 3), float("nan"), device="cuda")
            lse = wide[..., 1]
            attention.lse(q, k, v, out, lse, scale, int(causal))
            torch.cuda.synchronize()
            what = f"{(b, h, sq, skv, d)} scale={scale} causal={causal}"
            check(torch, out, q, k, v, scale, causal, what)
            want, tol = lse_reference(torch, q, k, scale, causal)
            assert_elements((lse.double() - want).abs() <= tol, lse, want, tol, f"lse {what}")
            assert bool(wide[..., 0::2].isnan().all()), "a store outside lse"


def test_no_keys(torch: Any, gen: Any) -> None:
    """``S_kv = 0``: every query sees no key — ``out`` zeros, ``lse`` −∞ (the family's
    portable kernel: TMA takes no empty array)."""
    for dtype in (torch.bfloat16, torch.float16):
        q, k, v = qkv(torch, gen, 2, 2, 70, 0, 64, dtype=dtype)
        out = torch.full_like(q, float("nan"))
        lse = torch.full((2, 2, 70), float("nan"), device="cuda")
        K.attention_lse(q, k, v, out, lse, 0.125, 0)
        torch.cuda.synchronize()
        assert bool((out == 0).all()), f"{dtype}: out not zeros"
        assert bool((lse == float("-inf")).all()), f"{dtype}: lse not -inf"


def test_the_family_falls_back_to_the_portable_kernel(torch: Any, gen: Any) -> None:
    """Arrays the sm_90a kernel's tensor maps cannot take — a head dimension with a stride, a
    row pitch that is no multiple of 16 bytes — go to the portable kernel, same results."""
    sm90(torch)
    b, h, s, d = 1, 2, 150, 64
    wide = torch.randn(b, h, s, 2 * d, generator=gen, device="cuda").to(torch.bfloat16)
    q = wide[..., ::2]
    odd = torch.randn(b, h, s, d + 3, generator=gen, device="cuda").to(torch.bfloat16)
    k = odd[..., :d]
    v = torch.randn(b, h, s, d, generator=gen, device="cuda").to(torch.bfloat16)
    for causal in (False, True):
        out = torch.full_like(v, float("nan"))
        K.attention(q, k, v, out, 0.125, int(causal))
        torch.cuda.synchronize()
        check(torch, out, q, k, v, 0.125, causal, f"strided q, odd-pitch k, causal={causal}")


WIDE_SHAPES = [
    # (B, H, H_kv, S_q, S_kv, D): Gemma's 256, dimensions between 128 and 256, one query row,
    # partial key tiles, grouped-query heads; D not a multiple of 8 (rows that `cp.async` cannot
    # copy: the key tiles' element loads).
    (1, 2, 2, 128, 128, 256),
    (1, 2, 1, 70, 99, 250),
    (1, 3, 3, 40, 50, 131),
    (2, 4, 2, 200, 333, 256),
    (1, 2, 1, 1, 77, 256),
    (1, 3, 3, 130, 65, 136),
    (1, 2, 2, 77, 200, 200),
    (1, 2, 1, 64, 129, 160),
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_wide_head_dimensions(torch: Any, gen: Any, portable: Any, dt: str, causal: bool) -> None:
    """Head dimensions above 128 (up to 256): the family runs the wide kernels — the only
    ones whose conditions hold: on an H100 the sm_90a one (``attention_{bf16,f16}_wide_sm90``)
    wherever TMA takes ``q``, ``k`` and ``v``, the portable ``_wide`` one otherwise and on
    every other GPU — contiguous or packed ``k`` and ``v``; every element of ``out`` and
    ``lse`` against float64. And the wide kernels by name: the portable one from the module
    without its sm_90a part (on an H100 the bundled module's launcher would run an sm_90a
    kernel where one takes the arguments), and on an H100 the sm_90a one, a head dimension of
    64 too: they take every D ≤ 256."""
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
    wide = getattr(portable, f"attention_{dt}_wide")
    wide_lse = getattr(portable, f"attention_lse_{dt}_wide")
    h100 = torch.cuda.get_device_capability() >= (9, 0)
    for b, h, hkv, sq, skv, d in [*WIDE_SHAPES, (1, 2, 2, 100, 100, 64)]:
        what = f"{(b, h, hkv, sq, skv, d)} {dt} causal={causal}"
        q, kvs = grouped(torch, gen, dtype, b, h, hkv, sq, skv, d)
        scale = 1.0 / math.sqrt(d)
        for k, v, how in kvs:
            calls = [(K.attention, K.attention_lse, "family")] if d > 128 else []
            calls.append((wide, wide_lse, "by name"))
            if h100:
                sm90_wide = getattr(K, f"attention_{dt}_wide_sm90")
                sm90_wide_lse = getattr(K, f"attention_lse_{dt}_wide_sm90")
                calls.append((sm90_wide, sm90_wide_lse, "sm_90a by name"))
            for attention, attention_lse, by in calls:
                out = torch.full_like(q, float("nan"))
                attention(q, k, v, out, scale, int(causal))
                torch.cuda.synchronize()
                check(torch, out, q, k, v, scale, causal, f"{what} {how} {by}")
                lse = torch.full((b, h, sq), float("nan"), device="cuda")
                out = torch.full_like(q, float("nan"))
                attention_lse(q, k, v, out, lse, scale, int(causal))
                torch.cuda.synchronize()
                check(torch, out, q, k, v, scale, causal, f"{what} {how} {by} with lse")
                want, tol = lse_reference(torch, q, k, scale, causal)
                ok = (lse.double() - want).abs() <= tol
                assert_elements(ok, lse, want, tol, f"lse {what} {how} {by}")
