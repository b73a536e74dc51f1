"""Every element-wise family on every layout an array can have (GPU).

Families: ``add``, ``saxpy`` and the gallery's ``gelu``, ``gelu_tanh``, ``silu`` and ``axpy``.
Each has a contiguous, vectorised kernel and strided variants (1-D to 4-D views of any
strides); the family launcher runs the contiguous kernel when every array is C-contiguous and a
strided one otherwise. Layouts, for 1-D to 4-D arrays: contiguous, step 2 on every axis, every
axis reversed, transposed, a broadcast input (stride 0, as ``cupy.broadcast_to`` and
``torch.expand`` export it), and a mix (``add(a[::2], b[1::2][::-1], out[::3])``). Libraries:
CuPy, PyTorch (CUDA Array Interface and DLPack), Numba and JAX, each where it can express the
layout without copying (else skipped with the reason).

Each case checks, against NumPy applied to the same views of host copies:

* the result, exactly where the arithmetic is exact (``add``; ``saxpy`` and ``axpy`` round like
  NumPy's float32/float16 arithmetic) and within the activations' documented accuracy;
* that it is bit for bit what the family's contiguous kernel gives on contiguous copies;
* every element of the output's allocation: outputs are poisoned (NaN or an integer sentinel)
  before the launch, and elements outside the output view must keep their value.

Refusals (outputs whose elements overlap, outputs partially overlapping an input) and in-place
launches (the output is an input) on strided views are checked on CuPy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import ferrocuda
from backends import Backend, CupyBackend, DLPackOnly, make_backend, poison_value, require
from scale import libraries
from test_gpu_gallery import act_tol, np_act  # the activations' reference and bound

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels

# ---- layouts ---------------------------------------------------------------------------------

#: ("slice", slices) | ("T",) | ("broadcast", shape): how a view is made from its base.
Op = tuple[Any, ...]


@dataclass(frozen=True)
class Placement:
    """An array of some shape as a view: the base allocation's shape, then the operations."""

    base: tuple[int, ...]
    ops: tuple[Op, ...]


def placement(kind: str, shape: tuple[int, ...]) -> Placement:
    nd = len(shape)

    def every(s: slice) -> Op:
        return ("slice", (s,) * nd)

    if kind == "contiguous":
        return Placement(shape, ())
    if kind == "step2":
        return Placement(tuple(2 * n for n in shape), (every(slice(None, None, 2)),))
    if kind == "step3_last":
        last = (slice(None),) * (nd - 1) + (slice(None, None, 3),)
        return Placement((*shape[:-1], 3 * shape[-1]), (("slice", last),))
    if kind == "negative":
        return Placement(shape, (every(slice(None, None, -1)),))
    if kind == "odd_reversed":  # b[1::2][::-1]
        return Placement(
            tuple(2 * n for n in shape), (every(slice(1, None, 2)), every(slice(None, None, -1)))
        )
    if kind == "transposed":
        return Placement(tuple(reversed(shape)), (("T",),))
    if kind == "broadcast":
        return Placement((1, *shape[1:]), (("broadcast", tuple(shape)),))
    raise AssertionError(kind)


#: layout -> (placements of the read-only inputs, in order; placement of the written array)
LAYOUTS: dict[str, tuple[tuple[str, ...], str]] = {
    "contiguous": (("contiguous", "contiguous"), "contiguous"),
    "step2": (("step2", "step2"), "step2"),
    "negative": (("negative", "negative"), "negative"),
    "transposed": (("transposed", "transposed"), "transposed"),
    "broadcast": (("broadcast", "broadcast"), "contiguous"),
    "mixed": (("step2", "odd_reversed"), "step3_last"),
}

SHAPES = {1: (1000,), 2: (37, 53), 3: (6, 7, 9), 4: (3, 4, 5, 6)}


def np_view(a: np.ndarray, ops: Sequence[Op]) -> np.ndarray:
    for op in ops:
        if op[0] == "slice":
            a = a[op[1]]
        elif op[0] == "T":
            a = a.transpose()
        else:
            a = np.broadcast_to(a, op[1])
    return a


def device_view(b: Backend, a: Any, ops: Sequence[Op]) -> Any:
    """The same view of device array ``a`` in ``b``'s library (skips where it cannot make one
    without copying)."""
    if ops:
        require(b.views, f"{b.name}: cannot make this view of an array without a copy")
    torch_like = b.name.startswith("torch")
    for op in ops:
        if op[0] == "slice":
            if any(s.step is not None and s.step < 0 for s in op[1]):
                require(b.negative_strides, f"{b.name}: no negative strides")
            a = a[op[1]]
        elif op[0] == "T":
            require(b.name != "numba", "Numba's DeviceNDArray.transpose returns a copy, not a view")
            a = a.permute(*reversed(range(a.dim()))) if torch_like else a.transpose()
        elif torch_like:
            a = a.expand(*op[1])
        else:
            require(b.name == "cupy", f"{b.name}: no broadcast (zero-stride) device arrays")
            a = b.cp.broadcast_to(a, op[1])  # type: ignore[attr-defined]
    return a


# ---- families --------------------------------------------------------------------------------

ALPHA = 0.75  # exact in every float type: products with it round once


@dataclass(frozen=True)
class Family:
    name: str
    #: The first is tested on every library, rank and layout; the others on CuPy, 2-D.
    dtypes: tuple[str, ...]
    #: Read-only array inputs before the written one.
    inputs: int
    #: The written array is read too (``y = α·x + y``).
    in_place: bool = False
    #: The scalar first argument, if any.
    scalar: float | None = None
    #: Exact result from the inputs (and the written array's values), else None.
    exact: Callable[..., np.ndarray] | None = None


def _saxpy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (np.asarray(ALPHA, x.dtype) * x + y).astype(x.dtype)


def _axpy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # The product is exact in float32; the kernel's fma rounds the sum once, as this does.
    return (np.float32(ALPHA) * x.astype(np.float32) + y.astype(np.float32)).astype(x.dtype)


FAMILIES: dict[str, Family] = {
    "add": Family(
        "add", ("float32", "float16", "float64", "int32", "int64"), 2, exact=lambda a, b: a + b
    ),
    "saxpy": Family(
        "saxpy", ("float32", "float16", "float64"), 1, in_place=True, scalar=ALPHA, exact=_saxpy
    ),
    "gelu": Family("gelu", ("float32", "float16"), 1),
    "gelu_tanh": Family("gelu_tanh", ("float32", "float16"), 1),
    "silu": Family("silu", ("float32", "float16"), 1),
    "axpy": Family("axpy", ("float16",), 1, in_place=True, scalar=ALPHA, exact=_axpy),
}

LIBS = ["cupy", "torch", "torch-dlpack", "numba", "jax"]


def random(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (2.0 * rng.standard_normal(shape)).astype(dt)
    return rng.integers(-(2**30), 2**30, size=shape, dtype=dt)


def bits(a: np.ndarray) -> np.ndarray:
    """The array's elements as unsigned integers of the same width (exact comparison)."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


# ---- one case --------------------------------------------------------------------------------


@dataclass
class Case:
    """One launch: host inputs (views of host bases), the written array's host base and
    placement, and the device objects."""

    family: Family
    dtype: str
    hosts: list[np.ndarray]
    out_base: np.ndarray
    out_place: Placement
    args: list[Any]
    out_device: Any
    out_backend: Backend


def build(
    request: Any,
    rng: np.random.Generator,
    lib: str,
    fam: Family,
    dtype: str,
    layout: str,
    shape: tuple[int, ...],
) -> Case:
    b = make_backend(request, lib)
    ob = b if b.writable else make_backend(request, "ferrocuda")
    in_kinds, out_kind = LAYOUTS[layout]
    hosts: list[np.ndarray] = []
    args: list[Any] = [] if fam.scalar is None else [fam.scalar]
    for kind in in_kinds[: fam.inputs]:
        p = placement(kind, shape)
        base = random(rng, p.base, dtype)
        hosts.append(np_view(base, p.ops))
        args.append(exported(b, device_view(b, b.asarray(base), p.ops)))
    p = placement(out_kind, shape)
    out_base = (
        random(rng, p.base, dtype) if fam.in_place else np.full(p.base, poison_value(dtype), dtype)
    )
    out_device = ob.asarray(out_base)
    args.append(exported(ob, device_view(ob, out_device, p.ops)))
    return Case(fam, dtype, hosts, out_base, p, args, out_device, ob)


def exported(b: Backend, view: Any) -> Any:
    """What is passed for ``view``; a DLPack-only wrapper is skipped when the library cannot
    export the view through DLPack at all (not a ferrocuda limitation)."""
    arg = b.arg(view)
    if isinstance(arg, DLPackOnly):
        try:
            arg.x.__dlpack__()
        except Exception as e:  # noqa: BLE001 - any refusal of the producer's
            pytest.skip(f"{b.name}: the library does not export this view through DLPack: {e!r}")
    return arg


def contiguous_result(request: Any, case: Case, lib: str) -> np.ndarray:
    """The family on contiguous copies of the same values: its contiguous kernel's result."""
    b = make_backend(request, lib)
    args: list[Any] = [] if case.family.scalar is None else [case.family.scalar]
    for h in case.hosts:
        args.append(b.arg(b.asarray(np.ascontiguousarray(h))))
    view = np_view(case.out_base, case.out_place.ops)
    out = case.out_backend.asarray(np.ascontiguousarray(view))
    args.append(case.out_backend.arg(out))
    getattr(K, case.family.name)(*args)
    return case.out_backend.to_numpy(out)


def check(request: Any, case: Case, lib: str, what: str) -> None:
    fam, dtype = case.family, case.dtype
    getattr(K, fam.name)(*case.args)
    got_base = case.out_backend.to_numpy(case.out_device)
    got = np_view(got_base, case.out_place.ops)
    before = np_view(case.out_base, case.out_place.ops)
    ins = case.hosts + ([before] if fam.in_place else [])
    if fam.exact is not None:
        want = fam.exact(*ins)
        bad = bits(got) != bits(want)
        assert not bad.any(), (
            f"{what}: {int(bad.sum())} of {bad.size} differ from NumPy; "
            f"first at {np.argwhere(bad)[:5].tolist()}"
        )
    else:
        want = np_act(fam.name, ins[0])
        err = np.abs(got.astype(np.float64) - want)
        tol = act_tol(ins[0], want, dtype)
        assert (err <= tol).all(), (
            f"{what}: {int((err > tol).sum())} beyond tolerance; worst {float((err - tol).max())}"
        )
    # Bit for bit the contiguous kernel's result.
    same = bits(got) == bits(contiguous_result(request, case, lib))
    assert same.all(), (
        f"{what}: differs from the contiguous kernel at {np.argwhere(~same)[:5].tolist()}"
    )
    # Nothing outside the output view was written.
    outside = np.ones(case.out_place.base, bool)
    np_view(outside, case.out_place.ops)[...] = False
    kept = bits(got_base)[outside] == bits(case.out_base)[outside]
    assert kept.all(), f"{what}: {int((~kept).sum())} elements outside the output view were written"


# ---- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("lib", libraries(LIBS))
def test_layouts(
    request: Any, rng: np.random.Generator, lib: str, family: str, layout: str, ndim: int
) -> None:
    fam = FAMILIES[family]
    dtype = fam.dtypes[0]
    case = build(request, rng, lib, fam, dtype, layout, SHAPES[ndim])
    check(request, case, lib, f"{family} {dtype} {ndim}-D {layout} on {lib}")


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize(
    "family_dtype", [(f, d) for f, fam in FAMILIES.items() for d in fam.dtypes[1:]]
)
def test_layouts_of_every_dtype(
    request: Any, rng: np.random.Generator, family_dtype: tuple[str, str], layout: str
) -> None:
    family, dtype = family_dtype
    case = build(request, rng, "cupy", FAMILIES[family], dtype, layout, SHAPES[2])
    check(request, case, "cupy", f"{family} {dtype} 2-D {layout} on cupy")


@pytest.mark.parametrize("layout", ["step2", "negative", "broadcast", "mixed"])
def test_large_strided_launches(request: Any, rng: np.random.Generator, layout: str) -> None:
    """2^22 + 3 elements: many blocks, every thread walking many positions."""
    case = build(request, rng, "cupy", FAMILIES["add"], "float32", layout, ((1 << 22) + 3,))
    check(request, case, "cupy", f"add float32 2^22+3 {layout}")


@pytest.mark.parametrize("family", ["add", "gelu", "silu"])
@pytest.mark.parametrize("layout", ["step2", "negative", "transposed"])
def test_in_place_on_strided_views(
    cupy: Any, rng: np.random.Generator, family: str, layout: str
) -> None:
    """The output is exactly an input: each element is read and written by one thread."""
    shape = SHAPES[3]
    p = placement(layout, shape)
    base = random(rng, p.base, "float32")
    d = cupy.asarray(base)
    x = device_view(CupyBackend(cupy), d, p.ops)
    host = np_view(base, p.ops)
    if family == "add":
        K.add(x, x, x)
        want = host + host
        assert np.array_equal(bits(np_view(cupy.asnumpy(d), p.ops)), bits(want))
    else:
        getattr(K, family)(x, x)
        want = np_act(family, host)
        got = np_view(cupy.asnumpy(d), p.ops)
        assert (np.abs(got - want) <= act_tol(host, want, "float32")).all()
    outside = np.ones(p.base, bool)
    np_view(outside, p.ops)[...] = False
    assert np.array_equal(cupy.asnumpy(d)[outside], base[outside])


def test_strided_outputs_that_overlap_are_refused(cupy: Any) -> None:
    cp = cupy
    a = cp.arange(64, dtype=cp.float32)
    row = cp.full((1, 16), cp.nan, cp.float32)
    # A broadcast output: its 4 rows are one row in memory.
    with pytest.raises(ValueError, match=r"argument `out`: output array has overlapping elements"):
        K.add(a[:64].reshape(4, 16), a[::-1].reshape(4, 16), cp.broadcast_to(row, (4, 16)))
    with pytest.raises(ValueError, match=r"argument `out`: output array has overlapping elements"):
        K.gelu(a[:16], cp.broadcast_to(row[0, :1], (16,)))
    assert bool(cp.isnan(row).all())
    # An output partially overlapping an input (shifted and reversed): refused, untouched.
    buf = cp.full(64, cp.nan, cp.float32)
    with pytest.raises(ValueError, match=r"argument `out`: output `out` overlaps argument `a`"):
        K.add(buf[:32:2], a[:16], buf[33:2:-2])
    assert bool(cp.isnan(buf).all())
    with pytest.raises(ValueError, match=r"output `y` overlaps argument `x`"):
        K.saxpy(ALPHA, buf[:32], buf[1:33][::-1])


def test_bfloat16_layouts_match_the_contiguous_kernels(
    torch: Any, rng: np.random.Generator
) -> None:
    """bfloat16 (PyTorch only: NumPy has no bfloat16): every family's strided variants give
    bit for bit what its contiguous kernel gives (test_gpu_gallery.py checks those)."""
    for family in ("add", "saxpy", "gelu", "gelu_tanh", "silu", "axpy"):
        fam = FAMILIES[family]
        for make in (lambda t: t[::2, 1::3], lambda t: t.t(), lambda t: t[:1, :12].expand(8, 12)):
            srcs = [
                make(torch.randn(16, 36, device="cuda").to(torch.bfloat16))
                for _ in range(fam.inputs)
            ]
            srcs = [s if s.shape == (8, 12) else s[:8, :12] for s in srcs]
            base = torch.randn(24, 36, device="cuda").to(torch.bfloat16)
            out = base[::3, ::3]  # (8, 12), stepped
            before = base.clone()
            ref = out.contiguous()
            scalar = [] if fam.scalar is None else [fam.scalar]
            getattr(K, family)(*scalar, *[s.contiguous() for s in srcs], ref)
            getattr(K, family)(*scalar, *srcs, out)
            assert torch.equal(out.view(torch.int16), ref.view(torch.int16)), family
            mask = torch.ones_like(base, dtype=torch.bool)
            mask[::3, ::3] = False
            assert torch.equal(base[mask].view(torch.int16), before[mask].view(torch.int16)), family
