"""GPU tests of the launch shape from Python, and of the 16-bit float types end to end.

* Every configuration form (keywords, Numba-style brackets, ``shared_mem=``) launches
  correctly; a block, grid or dynamic shared memory size over the kernel's or the device's
  limit is a ``ValueError`` naming the kernel and the limit, and nothing is launched (the
  poisoned output is untouched).
* ``shared_reverse_f32`` runs with 64 KiB and 200 KiB of dynamic shared memory (opted in by
  the launcher) and is exact.
* The automatic 2-D / 3-D grids of ``index_grid`` cover every element of odd shapes and of a
  transposed view.
* float16 from CuPy and PyTorch, bfloat16 from PyTorch (fast path) and from JAX (through
  DLPack, and through its ``"<V2"`` interface), into ``add`` and ``saxpy``, against
  references computed on the host with NumPy (bfloat16 rounded to nearest even by hand, or by
  ml_dtypes), scalars rounded once from Python floats.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ferrocuda
from backends import DLPackOnly

K = ferrocuda.kernels
pytestmark = pytest.mark.gpu

POISON = np.float32(-7.25e30)


# ---- references ------------------------------------------------------------------------------


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to nearest (ties to even) bfloat16, as uint16 bits."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bits (exact)."""
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def chunk_reversed(x: np.ndarray, cap: int) -> np.ndarray:
    return np.concatenate([x[i : i + cap][::-1] for i in range(0, len(x), cap)])


# ---- configuration forms and limits -----------------------------------------------------------


def test_configuration_forms_launch(cupy: Any) -> None:
    cp = cupy
    n = 10_000
    a = cp.arange(n, dtype=cp.float32)
    b = cp.ones(n, dtype=cp.float32)
    want = cp.arange(n, dtype=cp.float32) + 1
    forms = [
        lambda o: K.add(a, b, o, grid=4, block=256),
        lambda o: K.add(a, b, o, grid=(2, 3), block=(32, 4, 2)),
        lambda o: K.add(a, b, o, shared_mem=65536),
        lambda o: K.add[4, 256](a, b, o),
        lambda o: K.add[(1, 1, 1), (1024,)](a, b, o),
        lambda o: K.add[8, 128, None, 100_000](a, b, o),
        lambda o: K.add[np.int64(3), np.uint32(96), 1](a, b, o),
    ]
    for i, launch in enumerate(forms):
        out = cp.full(n, POISON, dtype=cp.float32)
        launch(out)
        assert bool((out == want).all()), f"form {i}"


@pytest.mark.parametrize(
    "kw,fragments",
    [
        ({"block": 2048}, ["kernel `add_f32`", "MAX_BLOCK_DIM_X"]),
        ({"block": (64, 32)}, ["kernel `add_f32`", "2048 threads", "at most"]),
        ({"block": (1, 1, 128)}, ["kernel `add_f32`", "MAX_BLOCK_DIM_Z"]),
        ({"grid": (1, 65536)}, ["kernel `add_f32`", "MAX_GRID_DIM_Y"]),
        ({"shared_mem": 2**31}, ["kernel `add_f32`", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]),
    ],
)
def test_over_a_limit_nothing_is_launched(cupy: Any, kw: Any, fragments: Any) -> None:
    cp = cupy
    a = cp.ones(4096, dtype=cp.float32)
    out = cp.full(4096, POISON, dtype=cp.float32)
    with pytest.raises(ValueError) as info:
        K.add(a, a, out, **kw)
    for f in fragments:
        assert f in str(info.value), str(info.value)
    cp.cuda.runtime.deviceSynchronize()
    assert bool((out == POISON).all()), "a refused launch wrote its output"


def test_kernel_declarations_are_enforced(cupy: Any) -> None:
    cp = cupy
    x = cp.full((8, 8), -5, dtype=cp.int32)
    with pytest.raises(ValueError, match=r"kernel `index_grid_2d` requires block \(32, 8, 1\)"):
        K.index_grid[1, (16, 16)](x)
    x3 = cp.full((4, 4, 4), -5, dtype=cp.int32)
    with pytest.raises(ValueError, match=r"max_threads = 128"):
        K.index_grid(x3, block=(16, 16))
    y = cp.full(1024, POISON, dtype=cp.float32)
    with pytest.raises(ValueError, match=r"float32.*4 bytes each"):
        K.shared_reverse(cp.ones(1024, dtype=cp.float32), y, shared_mem=4094)
    cp.cuda.runtime.deviceSynchronize()
    assert bool((x == -5).all()) and bool((x3 == -5).all()) and bool((y == POISON).all())


@pytest.mark.parametrize("kib", [16, 64, 200])
def test_dynamic_shared_memory(cupy: Any, rng: np.random.Generator, kib: int) -> None:
    cp = cupy
    n = 1_000_003
    host = rng.standard_normal(n).astype(np.float32)
    x = cp.asarray(host)
    cap = kib * 1024 // 4
    want = chunk_reversed(host, cap)
    for launch in (
        lambda y: K.shared_reverse(x, y, shared_mem=kib * 1024),
        lambda y: K.shared_reverse[5, 256, None, kib * 1024](x, y),
    ):
        y = cp.full(n, POISON, dtype=cp.float32)
        launch(y)
        assert np.array_equal(cp.asnumpy(y), want)


# ---- N-D automatic grids ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [(1, 1), (7, 33), (333, 1000), (1025, 3), (3, 5, 7), (2, 65, 33), (70, 1, 1)]
)
def test_nd_grid_covers_every_element(cupy: Any, shape: Any) -> None:
    cp = cupy
    x = cp.full(shape, -5, dtype=cp.int32)
    K.index_grid(x)
    assert np.array_equal(cp.asnumpy(x), np.arange(np.prod(shape), dtype=np.int32).reshape(shape))


def test_nd_grid_on_a_transposed_view(cupy: Any) -> None:
    cp = cupy
    base = cp.full((7, 33), -5, dtype=cp.int32)
    K.index_grid(base.T)
    assert np.array_equal(cp.asnumpy(base.T), np.arange(33 * 7, dtype=np.int32).reshape(33, 7))


# ---- 16-bit floats ---------------------------------------------------------------------------


def test_float16_from_cupy(cupy: Any, rng: np.random.Generator) -> None:
    cp = cupy
    n = 100_003
    a = (rng.standard_normal(n) * 100).astype(np.float16)
    b = rng.standard_normal(n).astype(np.float16)
    out = cp.full(n, np.float16(-1.5))
    K.add(cp.asarray(a), cp.asarray(b), out)
    assert np.array_equal(cp.asnumpy(out).view(np.uint16), (a + b).view(np.uint16))
    alpha = float(rng.uniform(-4, 4))
    y = cp.asarray(b)
    K.saxpy(alpha, cp.asarray(a), y)
    want = np.float16(alpha) * a + b  # NumPy rounds the double once, and every operation
    assert np.array_equal(cp.asnumpy(y).view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize(
    "name,alpha,want",
    [
        # 1 + 2**-11 + 2**-40 is above the midpoint between 1 and the next float16 by less
        # than float32 resolves: rounding once gives the upper value (through float32, 1.0).
        ("float16", 1 + 2**-11 + 2**-40, 1 + 2**-10),
        ("bfloat16", 1 + 2**-8 + 2**-30, 1 + 2**-7),
        # Exactly on the midpoint: ties to even.
        ("float16", 1 + 2**-11, 1.0),
        ("bfloat16", 1 + 2**-8, 1.0),
    ],
)
def test_scalars_round_once(torch: Any, name: str, alpha: float, want: float) -> None:
    dt = getattr(torch, name)
    x = torch.ones(16, dtype=dt, device="cuda")
    y = torch.zeros(16, dtype=dt, device="cuda")
    K.saxpy(alpha, x, y)
    assert bool((y.float() == want).all()), y


def test_float16_and_bfloat16_from_torch(torch: Any, rng: np.random.Generator) -> None:
    n = 65_537
    xs = (rng.standard_normal(n) * 50).astype(np.float32)
    ys = rng.standard_normal(n).astype(np.float32)
    # float16: NumPy's own arithmetic is the reference.
    a16, b16 = xs.astype(np.float16), ys.astype(np.float16)
    a, b = torch.from_numpy(a16).cuda(), torch.from_numpy(b16).cuda()
    out = torch.full((n,), -1.5, dtype=torch.float16, device="cuda")
    K.add(a, b, out)
    assert np.array_equal(out.cpu().numpy().view(np.uint16), (a16 + b16).view(np.uint16))
    # bfloat16: operands and references rounded by hand from float32 (exact sums and products
    # of bfloat16 values, rounded once).
    abits, bbits = bf16_bits(xs), bf16_bits(ys)
    ab = torch.from_numpy(abits.view(np.int16)).cuda().view(torch.bfloat16)
    bb = torch.from_numpy(bbits.view(np.int16)).cuda().view(torch.bfloat16)
    outb = torch.full((n,), -1.5, dtype=torch.bfloat16, device="cuda")
    K.add(ab, bb, outb)
    got = outb.view(torch.int16).cpu().numpy().view(np.uint16)
    assert np.array_equal(got, bf16_bits(bf16_values(abits) + bf16_values(bbits)))
    # Strided views through the fast path: every other element of a 2-D tensor's column.
    two = ab[: (n // 2) * 2].reshape(-1, 2)
    col = torch.empty(two.shape[0], dtype=torch.bfloat16, device="cuda")
    K.add(two[:, 0].contiguous(), two[:, 1].contiguous(), col)
    flat = abits[: (n // 2) * 2].reshape(-1, 2)
    want = bf16_bits(bf16_values(flat[:, 0]) + bf16_values(flat[:, 1]))
    assert np.array_equal(col.view(torch.int16).cpu().numpy().view(np.uint16), want)


def test_bfloat16_torch_fast_path_matches_dlpack(torch: Any) -> None:
    base = torch.arange(4 * 6 * 8, device="cuda").reshape(4, 6, 8).to(torch.bfloat16)
    for v in [base, base.transpose(0, 2), base[::2, 1:, ::3], base[1]]:
        fast = ferrocuda.validate_interface(v)
        via_dlpack = ferrocuda.validate_interface(DLPackOnly(v))
        assert fast["dtype"] == "bfloat16"
        for key in ("dtype", "shape", "strides", "ptr", "typestr"):
            assert fast[key] == via_dlpack[key], (key, fast, via_dlpack)
    assert ferrocuda._ferrocuda._fast_paths()[1], "the torch fast path switched itself off"


def test_bfloat16_from_jax(jax: Any, rng: np.random.Generator) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    jnp = jax.numpy
    n = 10_007
    xs = (rng.standard_normal(n) * 20).astype(np.float32)
    ys = rng.standard_normal(n).astype(np.float32)
    x = jnp.asarray(xs, dtype=jnp.bfloat16)
    y = jnp.asarray(ys, dtype=jnp.bfloat16)
    x.block_until_ready()
    y.block_until_ready()
    hx, hy = np.asarray(x), np.asarray(y)
    want = (hx.astype(np.float32) + hy.astype(np.float32)).astype(ml_dtypes.bfloat16)
    # Through DLPack only, and through JAX's own interface ("<V2").
    for a, b in ((DLPackOnly(x), DLPackOnly(y)), (x, y)):
        out = ferrocuda.DeviceArray.empty((n,), "bfloat16")
        K.add(a, b, out)
        got = out.to_numpy()
        assert got.dtype == ml_dtypes.bfloat16
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
        # And back into JAX through DLPack.
        back = np.asarray(jax.dlpack.from_dlpack(out))
        assert back.dtype == jnp.bfloat16 and np.array_equal(
            back.view(np.uint16), want.view(np.uint16)
        )


def test_half_device_arrays_round_trip(gpu: None, rng: np.random.Generator) -> None:
    a = (rng.standard_normal(1000) * 8).astype(np.float16)
    d = ferrocuda.DeviceArray.from_numpy(a)
    out = ferrocuda.DeviceArray.empty((1000,), np.float16)
    K.add(d, d, out)
    assert np.array_equal(out.to_numpy().view(np.uint16), (a + a).view(np.uint16))
    ml_dtypes = pytest.importorskip("ml_dtypes")
    h = a.astype(np.float32).astype(ml_dtypes.bfloat16)
    db = ferrocuda.DeviceArray.from_numpy(h)
    assert db.dtype == ml_dtypes.bfloat16
    outb = ferrocuda.DeviceArray.empty((1000,), "bfloat16")
    K.add(db, db, outb)
    want = (h.astype(np.float32) * 2).astype(ml_dtypes.bfloat16)
    assert np.array_equal(outb.to_numpy().view(np.uint16), want.view(np.uint16))
