"""Every bundled kernel on every array library, against NumPy references (GPU).

Outputs are poisoned (NaN or an integer sentinel) before each launch and every element is
checked afterwards; inputs are fresh random data (seed printed by the ``rng`` fixture).
Skipped without a CUDA driver, and per library when it is missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ferrocuda
from backends import BACKENDS, Backend, DLPackOnly, make_backend, poison_value, require
from conftest import write_bundled_parts
from scale import libraries

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels
SIZES = [0, 1, 7, 1000, 4097]
ELEMENTWISE_DTYPES = ["float32", "float64", "int32", "int64"]


@pytest.fixture(params=libraries(list(BACKENDS)))
def backend(request: Any) -> Backend:
    return make_backend(request, request.param)


@pytest.fixture
def out_backend(request: Any, backend: Backend) -> Backend:
    """Where outputs live: the same library when it is writable, else ferrocuda's arrays."""
    if backend.writable:
        return backend
    return make_backend(request, "ferrocuda")


def random(rng: np.random.Generator, shape: Any, dtype: str) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    lo, hi = max(info.min, -(2**30)), min(info.max, 2**30)
    return rng.integers(lo, hi, size=shape, dtype=dt)


def check_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, what
    bad = ~(
        (got == want) | (np.isnan(got) & np.isnan(want)) if got.dtype.kind == "f" else (got == want)
    )
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} of {bad.size} elements differ; "
        f"first at {np.argwhere(bad)[:5].tolist()}"
    )


# ---- add -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ELEMENTWISE_DTYPES)
def test_add(
    backend: Backend, out_backend: Backend, rng: np.random.Generator, dtype: str, n: int
) -> None:
    a, b = random(rng, n, dtype), random(rng, n, dtype)
    da, db = backend.asarray(a), backend.asarray(b)
    out = out_backend.poisoned(n, dtype)
    K.add(backend.arg(da), backend.arg(db), out_backend.arg(out))
    check_equal(out_backend.to_numpy(out), a + b, f"add {dtype}[{n}] on {backend.name}")


@pytest.mark.parametrize("dtype", ELEMENTWISE_DTYPES)
def test_add_2d_and_offset_views(backend: Backend, rng: np.random.Generator, dtype: str) -> None:
    require(backend.views and backend.writable, f"{backend.name}: no writable views")
    a, b = random(rng, (33, 17), dtype), random(rng, (33, 17), dtype)
    da, db = backend.asarray(a), backend.asarray(b)
    out = backend.poisoned((33, 17), dtype)
    K.add(backend.arg(da), backend.arg(db), backend.arg(out))  # 2-D C-contiguous is a slice
    check_equal(backend.to_numpy(out), a + b, "2-D add")
    # Contiguous but misaligned for vector loads: start at element 1 and 3.
    base = backend.poisoned(600, dtype)
    x, y = random(rng, 600, dtype), random(rng, 600, dtype)
    dx, dy = backend.asarray(x), backend.asarray(y)
    K.add(backend.arg(dx[1:500]), backend.arg(dy[3:502]), backend.arg(base[2:501]))
    got = backend.to_numpy(base)
    check_equal(got[2:501], x[1:500] + y[3:502], "offset add")
    assert (
        np.isnan(got[:2]).all() if got.dtype.kind == "f" else (got[:2] == poison_value(dtype)).all()
    )


def test_add_non_contiguous(
    backend: Backend, out_backend: Backend, rng: np.random.Generator
) -> None:
    """Non-contiguous arrays run add's strided variant (test_gpu_layouts.py covers every
    family and layout); a stepped output leaves the elements between its own untouched."""
    require(backend.views, f"{backend.name}: no views")
    x = random(rng, 64, "float32")
    a = backend.asarray(x)
    out = out_backend.poisoned(32, "float32")
    K.add(backend.arg(a[::2]), backend.arg(a[:32]), out_backend.arg(out))
    check_equal(out_backend.to_numpy(out), x[::2] + x[:32], "strided input")
    if backend.writable:
        wide = backend.poisoned(64, "float32")
        K.add(backend.arg(a[:32]), backend.arg(a[32:]), backend.arg(wide[::2]))
        got = backend.to_numpy(wide)
        check_equal(got[::2], x[:32] + x[32:], "stepped output")
        assert np.isnan(got[1::2]).all(), "elements between the output's were written"


def test_readonly_output_raises(request: Any, rng: np.random.Generator) -> None:
    """JAX exports its (immutable) arrays read-only through the CAI: refused as outputs.
    Through DLPack, only a versioned capsule can say read-only (a flag); JAX's unversioned
    capsules cannot, so that case is checked only when JAX sends a versioned one."""
    b = make_backend(request, "jax")
    x = b.asarray(random(rng, 16, "float32"))
    out = b.asarray(np.zeros(16, np.float32))
    with pytest.raises(
        ValueError, match=r"argument `out`: __cuda_array_interface__\['data'\]: .*read-only"
    ):
        K.add(x, x, out)
    assert np.array_equal(np.asarray(out), np.zeros(16, np.float32))
    if "dltensor_versioned" in repr(out.__dlpack__(max_version=(1, 0))):
        with pytest.raises(ValueError, match=r"argument `out`: .*read-only"):
            K.add(x, x, DLPackOnly(out))


def test_mixed_libraries(request: Any, rng: np.random.Generator) -> None:
    libs: list[Backend] = []
    for name in BACKENDS:
        try:
            libs.append(make_backend(request, name))
        except pytest.skip.Exception:
            pass
    require(len(libs) >= 2, "fewer than two array libraries")
    n = 1234
    for i, src in enumerate(libs):
        dst = libs[(i + 1) % len(libs)]
        if not dst.writable:
            dst = make_backend(request, "ferrocuda")
        other = libs[(i + 2) % len(libs)]
        a, b = random(rng, n, "float64"), random(rng, n, "float64")
        out = dst.poisoned(n, "float64")
        K.add(src.arg(src.asarray(a)), other.arg(other.asarray(b)), dst.arg(out))
        check_equal(dst.to_numpy(out), a + b, f"{src.name} + {other.name} -> {dst.name}")


# ---- initialize_array, saxpy ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [*SIZES, 1 << 20])
def test_initialize_array(out_backend: Backend, n: int) -> None:
    x = out_backend.poisoned(n, "int32")
    K.initialize_array(out_backend.arg(x))
    check_equal(out_backend.to_numpy(x), np.arange(n, dtype=np.int32), "initialize_array")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_saxpy(
    backend: Backend, out_backend: Backend, rng: np.random.Generator, dtype: str, n: int
) -> None:
    alpha = float(rng.standard_normal())
    x, y = random(rng, n, dtype), random(rng, n, dtype)
    dy = out_backend.asarray(y)
    K.saxpy(alpha, backend.arg(backend.asarray(x)), out_backend.arg(dy))
    want = np.asarray(alpha, dtype=dtype) * x + y
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out_backend.to_numpy(dy), want, rtol=tol, atol=tol)


# ---- add_index: N-D views with any strides ------------------------------------------------------


def index_sum(shape: tuple[int, ...]) -> np.ndarray:
    return sum(np.indices(shape)) if shape else np.zeros((), np.int64)  # type: ignore[return-value]


LAYOUTS = ["contiguous", "transposed", "step", "negative", "zero-size"]


def make_view(b: Backend, base: Any, layout: str, ndim: int) -> tuple[Any, Any]:
    """(device view, the same selection as a function on a NumPy array)."""
    if layout == "contiguous":
        return base, lambda a: a
    if layout == "transposed":
        require(ndim >= 2, "1-D arrays have no transpose")
        perm = tuple(reversed(range(ndim)))
        require(b.name != "numba", "Numba's DeviceNDArray.transpose returns a copy, not a view")
        if b.name.startswith("torch"):
            return base.permute(*perm), lambda a: a.transpose(perm)
        return base.transpose(perm), lambda a: a.transpose(perm)
    if layout == "step":
        sel = tuple(slice(1, None, 2) for _ in range(ndim))
        return base[sel], lambda a: a[sel]
    if layout == "negative":
        require(b.negative_strides, f"{b.name} has no negative strides")
        sel = tuple(slice(None, None, -1) if d % 2 == 0 else slice(None) for d in range(ndim))
        return base[sel], lambda a: a[sel]
    raise AssertionError(layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", ELEMENTWISE_DTYPES)
def test_add_index(
    backend: Backend, rng: np.random.Generator, dtype: str, ndim: int, layout: str
) -> None:
    require(backend.writable, f"{backend.name} arrays are read-only")
    shape = tuple(int(s) for s in rng.integers(2, 9, size=ndim))
    if layout == "zero-size":
        shape = (*shape[:-1], 0)
        layout = "contiguous"
    elif layout != "contiguous":
        require(backend.views, f"{backend.name}: no views")
    host = random(rng, shape, dtype)
    base = backend.asarray(host)
    view, select = make_view(backend, base, layout, ndim)
    K.add_index(backend.arg(view))
    want = host.copy()
    sel = select(want)
    sel += index_sum(sel.shape).astype(dtype)  # writes through the NumPy view into `want`
    check_equal(
        backend.to_numpy(base), want, f"add_index {dtype} {ndim}-D {layout} on {backend.name}"
    )


def test_add_index_rank_dispatch(backend: Backend) -> None:
    require(backend.writable, "read-only")
    x = backend.asarray(np.zeros((2, 3, 4, 5, 2), np.float32))
    with pytest.raises(TypeError, match="no variant"):
        K.add_index(backend.arg(x))


# ---- host (NumPy) arrays, as Numba takes them ----------------------------------------------------


def test_host_arrays_copy_in_and_out(gpu: None, rng: np.random.Generator) -> None:
    a, b = random(rng, 1000, "float32"), random(rng, 1000, "float32")
    out = np.full(1000, np.nan, np.float32)
    with pytest.warns(ferrocuda.PerformanceWarning):
        K.add(a, b, out)
    check_equal(out, a + b, "host add")
    base = random(rng, (6, 8), "int64")
    want = base.copy()
    view = base.T[::2]  # non-contiguous host view: copied contiguous, written back through copyto
    with pytest.warns(ferrocuda.PerformanceWarning):
        K.add_index(view)
    w = want.T[::2]
    w += index_sum(w.shape)
    check_equal(base, want, "host add_index through a view")
    x = np.full(77, -1, np.int32)
    with pytest.warns(ferrocuda.PerformanceWarning):
        K.initialize_array(x)
    check_equal(x, np.arange(77, dtype=np.int32), "host initialize_array")


# ---- launch configuration, user modules ----------------------------------------------------------


def test_explicit_configuration(cupy: Any, rng: np.random.Generator) -> None:
    cp = cupy
    a, b = random(rng, 5000, "float32"), random(rng, 5000, "float32")
    for launcher, kw in [
        (K.add_f32[4, 128], {}),
        (K.add[(2, 1, 1), (64, 2, 1), cp.cuda.Stream.null], {}),
        (K.add, {"grid": 1, "block": 32}),
        (K.add, {"grid": (3,), "block": (96,), "check_pointers": False}),
    ]:
        out = cp.full(5000, cp.nan, cp.float32)
        launcher(cp.asarray(a), cp.asarray(b), out, **kw)
        check_equal(cp.asnumpy(out), a + b, repr(launcher))
    with pytest.raises(ValueError, match="threads"):
        K.add_f32[1, 4096](cp.asarray(a), cp.asarray(b), cp.empty(5000, cp.float32))


def test_keyword_arguments(cupy: Any, rng: np.random.Generator) -> None:
    # Parameters by keyword, in any order, on every way of calling: the same results as by
    # position (outputs poisoned first, every element checked).
    cp = cupy
    n = 3000
    a, b = random(rng, n, "float32"), random(rng, n, "float32")
    da, db = cp.asarray(a), cp.asarray(b)
    calls = [
        lambda out: K.add(da, db, out=out),
        lambda out: K.add(out=out, b=db, a=da),
        lambda out: K.add_f32(da, out=out, b=db, stream=cp.cuda.Stream.null),
        lambda out: K.add[2, 128](da, b=db, out=out),
        lambda out: K.add.bind(da, b=db, out=out)(),
    ]
    for i, call in enumerate(calls):
        out = cp.full(n, cp.nan, cp.float32)
        call(out)
        check_equal(cp.asnumpy(out), a + b, f"call {i}")
    alpha = float(rng.standard_normal())
    y = cp.asarray(b)
    K.saxpy(y=y, x=da, alpha=alpha)
    want = np.float32(alpha) * a + b
    np.testing.assert_allclose(cp.asnumpy(y), want, rtol=1e-6, atol=1e-6)


def test_load_user_module(cupy: Any, tmp_path: Any, rng: np.random.Generator) -> None:
    import json

    cp = cupy
    man = json.loads(ferrocuda.bundled().manifest)
    (tmp_path / "user.ptx").write_text(ferrocuda._ferrocuda._bundled_ptx())
    # The parts built for newer architectures (the sm_90a GEMM) are files of the module too.
    write_bundled_parts(tmp_path, man)
    man["ptx"] = "user.ptx"
    (tmp_path / "user.json").write_text(json.dumps(man))
    m = ferrocuda.load(tmp_path / "user.json")
    a, b = random(rng, 300, "int64"), random(rng, 300, "int64")
    out = cp.full(300, -7, cp.int64)
    m.add(cp.asarray(a), cp.asarray(b), out)
    check_equal(cp.asnumpy(out), a + b, "user module family")
    x = cp.zeros(10, cp.int32)
    m.initialize_array[1, 32](x)
    check_equal(cp.asnumpy(x), np.arange(10, dtype=np.int32), "user module kernel")
