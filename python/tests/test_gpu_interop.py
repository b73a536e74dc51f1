"""DeviceArray round trips through CuPy, PyTorch, Numba and JAX; ownership of imported
arrays; DLPack capsule lifetimes (GPU)."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import ferrocuda
from backends import DLPackOnly

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels
DTYPES = [
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4)])
def test_device_array_numpy_round_trip(
    gpu: None, rng: np.random.Generator, dtype: str, shape: Any
) -> None:
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    d = ferrocuda.DeviceArray.from_numpy(x)
    assert d.shape == x.shape and d.dtype == x.dtype and d.size == x.size and d.ndim == x.ndim
    assert d.nbytes == x.nbytes and d.device == 0
    if x.size:
        assert d.strides == x.strides
    back = d.to_numpy()
    assert back.dtype == x.dtype and np.array_equal(back, x)
    assert np.array_equal(d.copy_to_host(), x)
    iface = d.__cuda_array_interface__
    assert iface["version"] == 3 and iface["shape"] == x.shape and iface["strides"] is None
    assert iface["typestr"] == x.dtype.str and iface["data"] == (d.ptr, False)
    assert iface["descr"] == [("", x.dtype.str)] and iface["stream"] == d.stream
    assert d.__dlpack_device__() == (2, 0)


def test_device_array_from_non_contiguous_and_lists(gpu: None) -> None:
    x = np.arange(24, dtype=np.float64).reshape(4, 6)
    assert np.array_equal(ferrocuda.DeviceArray.from_numpy(x.T[::2]).to_numpy(), x.T[::2])
    assert np.array_equal(
        ferrocuda.DeviceArray.from_numpy([[1, 2], [3, 4]]).to_numpy(), [[1, 2], [3, 4]]
    )
    e = ferrocuda.DeviceArray.empty((2, 3), np.int16)
    assert e.shape == (2, 3) and e.dtype == np.int16 and len(e) == 2
    assert "DeviceArray(shape=[2, 3], dtype=int16" in repr(e)
    with pytest.raises(TypeError, match="not supported by DeviceArray"):
        ferrocuda.DeviceArray.empty(3, "complex64")
    with pytest.raises(TypeError, match="not supported by DeviceArray"):
        ferrocuda.DeviceArray.from_numpy(np.zeros(3, np.complex128))
    # The 16-bit floats are supported.
    h = ferrocuda.DeviceArray.from_numpy(np.arange(5, dtype=np.float16) / 4)
    assert h.dtype == np.float16 and np.array_equal(
        h.to_numpy(), np.arange(5, dtype=np.float16) / 4
    )
    assert ferrocuda.DeviceArray.empty(3, "bfloat16").shape == (3,)


def test_cupy_round_trip(cupy: Any) -> None:
    cp = cupy
    x = np.arange(100, dtype=np.float32)
    d = ferrocuda.DeviceArray.from_numpy(x)
    c = cp.asarray(d)  # CAI, zero-copy
    assert c.data.ptr == d.ptr and cp.array_equal(c, cp.asarray(x))
    c[0] = 42
    assert d.to_numpy()[0] == 42
    del d
    gc.collect()
    assert float(c[1]) == 1.0  # CuPy keeps the DeviceArray alive
    d2 = ferrocuda.DeviceArray.from_numpy(x)
    c2 = cp.from_dlpack(d2)
    assert c2.data.ptr == d2.ptr
    back = ferrocuda.as_cuda_array(c2)
    assert back.ptr == d2.ptr and back.owner is c2


def test_torch_round_trip(torch: Any) -> None:
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    d = ferrocuda.DeviceArray.from_numpy(x)
    t = torch.as_tensor(d, device="cuda")  # CAI
    assert t.data_ptr() == d.ptr and t.shape == (3, 4)
    assert torch.equal(t.cpu(), torch.from_numpy(x))
    t2 = torch.from_dlpack(d)  # DLPack (torch passes its current stream)
    assert t2.data_ptr() == d.ptr
    del d
    gc.collect()
    assert int(t2.sum()) == int(x.sum())  # the capsule keeps the DeviceArray alive
    # and back: torch -> ferrocuda through CAI and DLPack
    out = torch.zeros(12, dtype=torch.int64, device="cuda")
    K.add(t2.reshape(-1), DLPackOnly(t.reshape(-1)), out)
    assert torch.equal(out.cpu(), torch.from_numpy(2 * x.reshape(-1)))


def test_dlpack_export_orders_the_consumer_stream(torch: Any, cupy: Any) -> None:
    side = cupy.cuda.Stream(non_blocking=True)
    d = ferrocuda.DeviceArray.empty((1 << 20,), "float32", stream=side)
    K.fill_slow(d, 3.0, 20_000_000)  # runs on d's stream
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.from_dlpack(d)  # s must wait for the fill on `side`
        total = t.sum()
    s.synchronize()
    assert float(total) == 3.0 * (1 << 20)


def test_numba_round_trip(numba_cuda: Any) -> None:
    cuda = numba_cuda
    x = np.arange(10, dtype=np.float64)
    d = ferrocuda.DeviceArray.from_numpy(x)
    n = cuda.as_cuda_array(d)
    assert np.array_equal(n.copy_to_host(), x)
    nd = cuda.to_device(x)
    out = cuda.device_array(10, np.float64)
    K.add(nd, n, out)
    assert np.array_equal(out.copy_to_host(), 2 * x)
    fa = ferrocuda.as_cuda_array(nd)
    assert fa.shape == (10,)


def test_jax_round_trip(jax: Any) -> None:
    jnp = jax.numpy
    x = np.arange(16, dtype=np.float32)
    d = ferrocuda.DeviceArray.from_numpy(x)
    j = jnp.from_dlpack(d)
    assert np.array_equal(np.asarray(j), x)
    j2 = jax.dlpack.from_dlpack(d)
    assert np.array_equal(np.asarray(j2), x)
    # JAX arrays as inputs, through the CAI and through DLPack only
    a = jnp.arange(16, dtype=jnp.float32)
    a.block_until_ready()
    out = ferrocuda.DeviceArray.empty((16,), "float32")
    K.add(a, DLPackOnly(a), out)
    assert np.array_equal(out.to_numpy(), 2 * x)
    fa = ferrocuda.as_cuda_array(DLPackOnly(a))
    assert fa.readonly in (True, False) and fa.shape == (16,)


# ---- ownership -----------------------------------------------------------------------------------


def test_as_cuda_array_keeps_the_producer_alive_cupy(cupy: Any) -> None:
    cp = cupy
    n = 1 << 16
    a = cp.arange(n, dtype=cp.float32)
    fa = ferrocuda.as_cuda_array(a)
    del a
    gc.collect()
    junk = [cp.full(n, -1.0, cp.float32) for _ in range(8)]  # would reuse freed memory
    out = cp.empty(n, cp.float32)
    K.add(fa, fa, out)
    assert cp.array_equal(out, 2 * cp.arange(n, dtype=cp.float32))
    del junk
    assert cp.asarray(fa).data.ptr == fa.ptr  # re-exported CAI


def test_as_cuda_array_keeps_the_producer_alive_torch(torch: Any) -> None:
    n = 1 << 16
    t = torch.arange(n, dtype=torch.float64, device="cuda")
    fa = ferrocuda.as_cuda_array(t)
    del t
    gc.collect()
    junk = [torch.full((n,), -1.0, dtype=torch.float64, device="cuda") for _ in range(8)]
    out = torch.empty(n, dtype=torch.float64, device="cuda")
    K.add(fa, fa, out)
    assert torch.equal(out, 2 * torch.arange(n, dtype=torch.float64, device="cuda"))
    del junk


def test_from_cuda_array_interface_keeps_owner(cupy: Any) -> None:
    cp = cupy
    a = cp.arange(1000, dtype=cp.int32)
    fa = ferrocuda.from_cuda_array_interface(a.__cuda_array_interface__, owner=a)
    del a
    gc.collect()
    junk = [cp.full(1000, -1, cp.int32) for _ in range(8)]
    out = cp.empty(1000, cp.int32)
    K.add(fa, fa, out)
    assert cp.array_equal(out, 2 * cp.arange(1000, dtype=cp.int32))
    del junk


def test_dlpack_capsules_released_after_the_kernel(torch: Any) -> None:
    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    out = torch.empty_like(x)
    for _ in range(5):
        K.add(DLPackOnly(x), DLPackOnly(x), out)
    ferrocuda.synchronize()
    assert ferrocuda._ferrocuda._pending_releases() == 0
    assert torch.equal(out, 2 * x)


def test_unknown_pointer_refused(cupy: Any) -> None:
    # A pointer the driver does not know is refused before any launch (ValueError, not a crash).
    bogus = {"shape": (4,), "typestr": "<f4", "data": (0x10_0000_0000, False), "version": 3}

    class P:
        __cuda_array_interface__ = bogus

    out = cupy.empty(4, cupy.float32)
    with pytest.raises(
        ValueError,
        match=r"argument `a`: __cuda_array_interface__\['data'\]: "
        r"pointer .* is not CUDA device memory",
    ):
        K.add(P(), P(), out)


class _Dict:
    """Exposes a given interface dict, to compare with the torch fast path."""

    def __init__(self, iface: dict) -> None:
        self.__cuda_array_interface__ = iface


def test_torch_fast_path_matches_the_interface(torch: Any) -> None:
    # ferrocuda reads exact torch.Tensor fields directly; the result must equal what the
    # tensor's own __cuda_array_interface__ describes, for every layout.
    base = torch.arange(2 * 3 * 4, device="cuda", dtype=torch.float32).reshape(2, 3, 4)
    cases = [
        base,
        base.transpose(0, 2),
        base[:, ::2, 1:],
        base[1],
        base[:0],
        torch.zeros((), device="cuda", dtype=torch.int64),
        torch.ones(5, device="cuda", dtype=torch.complex64),
        torch.ones(7, device="cuda", dtype=torch.uint8)[::3],
        torch.ones(4, 1, device="cuda", dtype=torch.float64).expand(4, 6),
    ]
    for t in cases:
        fast = ferrocuda.validate_interface(t, name="t")
        slow = ferrocuda.validate_interface(_Dict(t.__cuda_array_interface__), name="t")
        for key in ("shape", "strides", "typestr", "readonly", "size"):
            if key in fast or key in slow:
                assert fast.get(key) == slow.get(key), (key, t.shape, t.stride(), fast, slow)
        # torch's interface names no stream; ferrocuda takes torch's current stream (the
        # legacy default stream here) as the producer's.
        assert slow["stream"] is None and fast["stream"] == 1
        assert fast == ferrocuda._ferrocuda._describe_generic(t, name="t")
        if t.numel():
            assert fast["ptr"] == slow["ptr"] == t.data_ptr()


def test_torch_fast_path_keeps_the_interface_refusals(torch: Any) -> None:
    g = torch.ones(4, device="cuda", requires_grad=True)
    with pytest.raises(Exception, match="grad"):
        ferrocuda.validate_interface(g, name="g")
    out = torch.empty(4, device="cuda")
    with pytest.raises(Exception, match="grad"):
        ferrocuda.kernels.add(g, g, out)
    z = torch.ones(3, device="cuda", dtype=torch.complex64).conj()
    with pytest.raises(ValueError, match="conjugate"):
        ferrocuda.validate_interface(z, name="z")
    # A subclass takes the generic path (it may override the getter) and still works.
    p = torch.nn.Parameter(torch.ones(3, device="cuda"), requires_grad=False)
    b = torch.full((3,), 2.0, device="cuda")
    o = torch.full((3,), float("nan"), device="cuda")
    ferrocuda.kernels.add(p, b, o)
    torch.cuda.synchronize()
    assert o.tolist() == [3.0, 3.0, 3.0]
