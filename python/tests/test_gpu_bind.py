"""Bound launches on the GPU: ``launch = launcher.bind(...)`` then ``launch()`` in a loop.

* every array library (CuPy, PyTorch, Numba, ferrocuda's DeviceArray, JAX read-only inputs,
  and DLPack-only wrappers of torch and JAX arrays): one bind, many launches, the output
  poisoned and the writable inputs rewritten before each, every element against NumPy;
* the producer's current stream is read again per launch: a torch tensor or CuPy array bound
  outside any stream context, launched inside ``with torch.cuda.stream(s)`` / ``with s:``
  behind a slow producer on ``s``, sees the producer's values (the launch goes on ``s``);
  with an explicit launch stream the new producer stream is ordered by the plan (default and
  event modes), both before the kernel and after it (the producer's later overwrite waits);
* memory that moved: a tensor ``resize_``-d or ``set_`` to other storage since bind, a CuPy
  array given another shape (N-D and 1-D) or whose ``MemoryPointer`` was moved in place, a
  Numba-style interface that now names other memory — the launch raises ``ValueError`` naming
  the argument and writes nothing; same memory (a shrink and restore within the storage, the
  pointer moved back) launches; a bound CuPy array's ``MemoryPointer`` is held until the
  bound launch dies;
* lifetimes: the bound object keeps its arguments alive after the caller dropped every
  reference and the allocator was churned; they die with it;
* the bound launch in a CUDA graph captured by torch (event and off modes, every array on the
  capture stream: the launch follows torch's current stream into the capture).
"""

from __future__ import annotations

import gc
import sys
import threading
import weakref
from typing import Any

import numpy as np
import pytest

import ferrocuda
from backends import BACKENDS, Backend, make_backend
from scale import libraries, reps

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels
N = 4099
BIG = 1 << 20
#: fill_slow iterations: a few tens of milliseconds on an H100.
SLOW = 20_000_000
#: torch.cuda._sleep cycles: tens of milliseconds.
SLEEP = 50_000_000


@pytest.fixture(params=libraries(list(BACKENDS)))
def backend(request: Any) -> Backend:
    return make_backend(request, request.param)


def fill(b: Backend, a: Any, value: float) -> None:
    """Sets every element of ``a`` (float32, of library ``b``) to ``value`` in place."""
    if b.name.startswith("cupy"):
        a.fill(value)
    elif b.name.startswith("torch"):
        a.fill_(value)
    elif b.name == "numba":
        a.copy_to_device(np.full(a.shape, value, np.float32))
    else:  # DeviceArray: no fill of its own; another bundled kernel writes it
        K.fill_slow(a, value, 0)
    b.synchronize()


# ---- every library, many launches ---------------------------------------------------------------


def test_repeated_launches_on_every_library(
    request: Any, backend: Backend, rng: np.random.Generator
) -> None:
    out_b = backend if backend.writable else make_backend(request, "ferrocuda")
    ha = rng.standard_normal(N).astype(np.float32)
    hb = rng.standard_normal(N).astype(np.float32)
    a, b = backend.asarray(ha), backend.asarray(hb)
    out = out_b.poisoned((N,), np.float32)
    args = (backend.arg(a), backend.arg(b), out_b.arg(out))
    launch = K.add.bind(*args)
    assert launch.name == "add_f32"
    assert all(x is y for x, y in zip(launch.args, args, strict=True))
    for t in range(reps(50, 5)):
        if backend.writable:
            fill(backend, a, float(t))
            ha = np.full(N, t, np.float32)
        fill(out_b, out, float("nan"))
        launch()
        out_b.synchronize()
        np.testing.assert_array_equal(out_b.to_numpy(out), ha + hb, err_msg=f"launch {t}")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_family_selects_the_variant_once(cupy: Any, dtype: str) -> None:
    cp = cupy
    a = cp.arange(1000, dtype=dtype)
    out = cp.zeros_like(a)
    launch = K.add.bind(a, a, out)
    short = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}[dtype]
    assert launch.name == f"add_{short}"
    assert launch.args == (a, a, out)
    assert launch.device == 0 and launch.sync == ferrocuda.normalize_sync()
    assert launch.grid is not None and launch.block is not None
    assert repr(launch).startswith(f"<ferrocuda.BoundLaunch {launch.name} ")
    for _ in range(3):
        out.fill(-1)
        launch()
        assert bool((out == 2 * a).all())


def test_configuration_and_scalars_are_bound(cupy: Any) -> None:
    cp = cupy
    x = cp.arange(BIG, dtype=cp.float32)
    y = cp.ones(BIG, cp.float32)
    launch = K.saxpy.bind(np.float32(2.5), x, y, grid=3, block=64, sync="event")
    assert (launch.name, launch.grid, launch.block, launch.sync) == (
        "saxpy_f32",
        (3, 1, 1),
        (64, 1, 1),
        "event",
    )
    for k in range(1, 4):
        launch()  # y = 2.5 x + y, accumulating
        cp.cuda.Device().synchronize()
        assert bool((y == 1 + k * 2.5 * x).all()), k


def test_bound_extras_repeat_on_new_data(cupy: Any, rng: np.random.Generator) -> None:
    """Kernels with extras, bound once: ``sum`` (a scratch workspace), ``histogram`` (a zeroed
    output and two scalars) and ``cumsum`` (a scan with its workspace). Their parameters are
    packed at bind; each launch zero-fills and provides its workspace again. Twenty launches,
    each on new data into poisoned outputs, every one against NumPy."""
    cp = cupy
    n, nbins, lo, hi = 100_003, 37, -2.0, 2.0
    x = cp.empty(n, cp.int32)
    f = cp.empty(n, cp.float32)
    total, scan, bins = cp.empty(1, cp.int64), cp.empty(n, cp.int64), cp.empty(nbins, cp.int64)
    launches = [K.sum.bind(x, total), K.cumsum.bind(x, scan), K.histogram.bind(f, bins, lo, hi)]
    assert [b.name for b in launches] == ["sum_i32", "cumsum_i32_i64", "histogram_f32"]
    for t in range(20):
        hx = rng.integers(-1000, 1000, n, dtype=np.int32)
        hf = (rng.standard_normal(n) * 1.5).astype(np.float32)
        x.set(hx)
        f.set(hf)
        total.fill(-(2**62))
        scan.fill(-7)
        bins.fill(-1)
        for launch in launches:
            launch()
        assert int(total.get()[0]) == int(hx.astype(np.int64).sum()), t
        assert np.array_equal(scan.get(), np.cumsum(hx.astype(np.int64))), t
        want = np.histogram(hf, bins=nbins, range=(lo, hi))[0].astype(np.int64)
        assert np.array_equal(bins.get(), want), (t, bins.get(), want)


def test_empty_arrays_launch_nothing(cupy: Any) -> None:
    a = cupy.empty(0, cupy.float32)
    launch = K.add.bind(a, a, a)
    assert launch.grid is None and launch.block is None
    launch()
    launch()


def test_a_bound_launch_takes_no_arguments(cupy: Any) -> None:
    a = cupy.ones(8, cupy.float32)
    launch = K.add.bind(a, a, a)
    with pytest.raises(TypeError, match=r"takes no arguments \(got 3\)"):
        launch(a, a, a)
    with pytest.raises(TypeError, match=r"takes no arguments \(got 1\)"):
        launch(stream=1)


# ---- the producer's current stream --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "event", "off"])
def test_torch_launch_follows_the_current_stream(torch: Any, mode: str) -> None:
    """Bound on torch's default stream, launched inside ``with torch.cuda.stream(s)``: the
    launch goes on ``s`` (every tensor's producer stream), behind ``s``'s slow producer."""
    x = torch.zeros(BIG, device="cuda")
    y = torch.arange(BIG, dtype=torch.float32, device="cuda")
    out = torch.full((BIG,), float("nan"), device="cuda")
    launch = K.add.bind(x, y, out, sync=mode)
    torch.cuda.synchronize()
    for t in range(reps(5, 2)):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep(SLEEP)
            x.fill_(float(t + 7))
            launch()
            out_now = out.clone()  # on s, after the kernel
        torch.cuda.synchronize()
        assert torch.equal(out_now, y + (t + 7)), f"trial {t}: the launch overtook s's producer"


@pytest.mark.parametrize("mode", ["default", "event"])
def test_torch_explicit_stream_orders_the_new_producer_stream(torch: Any, mode: str) -> None:
    other = torch.cuda.Stream()
    x = torch.zeros(BIG, device="cuda")
    y = torch.arange(BIG, dtype=torch.float32, device="cuda")
    out = torch.full((BIG,), float("nan"), device="cuda")
    launch = K.add.bind(x, y, out, stream=other, sync=mode)
    torch.cuda.synchronize()
    for t in range(reps(5, 2)):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):  # the tensors' producer stream is now s, foreign to `other`
            torch.cuda._sleep(SLEEP)
            x.fill_(float(t + 7))
            launch()
        torch.cuda.synchronize()
        assert torch.equal(out, y + (t + 7)), f"{mode}: trial {t}: the launch overtook s's producer"


@pytest.mark.parametrize("mode", ["default", "event", "off"])
def test_cupy_launch_follows_the_current_stream(cupy: Any, mode: str) -> None:
    cp = cupy
    x = cp.zeros(BIG, cp.float32)
    y = cp.arange(BIG, dtype=cp.float32)
    out = cp.full(BIG, cp.nan, cp.float32)
    launch = K.add.bind(x, y, out, sync=mode)
    cp.cuda.Device().synchronize()
    for t in range(reps(5, 2)):
        s = cp.cuda.Stream(non_blocking=True)
        K.fill_slow(x, float(t + 7), SLOW, stream=s)
        with s:  # CuPy exports s for every array: the launch goes on s, after the fill
            launch()
        s.synchronize()
        assert bool((out == y + (t + 7)).all()), f"trial {t}: the launch overtook s's producer"


@pytest.mark.parametrize("mode", ["default", "event"])
def test_cupy_new_producer_stream_waits_for_the_kernel(cupy: Any, mode: str) -> None:
    """The second half of the plan, per launch: the producer stream of the launch (CuPy's
    current stream then) waits for the kernel, which runs late on the bound stream."""
    cp = cupy
    cons = cp.cuda.Stream(non_blocking=True)
    x = cp.full(BIG, 7.0, cp.float32)
    y = cp.arange(BIG, dtype=cp.float32)
    out = cp.full(BIG, cp.nan, cp.float32)
    delay = cp.zeros(BIG, cp.float32)
    launch = K.add.bind(x, y, out, stream=cons, sync=mode)
    cp.cuda.Device().synchronize()
    for t in range(reps(5, 2)):
        prod = cp.cuda.Stream(non_blocking=True)
        x.fill(7.0)
        out.fill(cp.nan)
        cp.cuda.Device().synchronize()
        K.fill_slow(delay, 1.0, SLOW, stream=cons)  # the bound stream is busy for a while
        with prod:
            launch()
            x.fill(-1.0)  # must wait for the add
        cp.cuda.Device().synchronize()
        assert bool((out == y + 7).all()), (
            f"{mode}: trial {t}: the producer ran ahead of the kernel"
        )


# ---- memory that moved ---------------------------------------------------------------------------


def test_torch_resize_after_bind_is_refused(torch: Any) -> None:
    a = torch.ones(N, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    launch = K.add.bind(a, a, out)
    launch()
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * a)
    out.resize_(4 * N)  # reallocates the storage: the bound pointer is stale
    out.fill_(-3.0)
    with pytest.raises(
        ValueError, match=r"argument `out`: the Tensor changed since it was bound.*bind again"
    ):
        launch()
    torch.cuda.synchronize()
    assert bool((out == -3.0).all())  # nothing was written
    out.resize_(N)  # the right shape again, but still the new storage
    with pytest.raises(ValueError, match="argument `out`"):
        launch()
    launch = K.add.bind(a, a, out)  # bound again: the new storage
    launch()
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * a)


def test_torch_shrink_and_restore_in_place_keeps_the_memory(torch: Any) -> None:
    a = torch.ones(N, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    launch = K.add.bind(a, a, out)
    ptr = out.data_ptr()
    out.resize_(N // 2)
    with pytest.raises(ValueError, match="argument `out`"):
        launch()  # another shape
    out.resize_(N)  # within the storage: the same memory and layout as bound
    assert out.data_ptr() == ptr
    out.fill_(float("nan"))
    launch()
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * a)


@pytest.mark.parametrize("how", ["set_", "data", "as_strided_", "transpose_"])
def test_torch_storage_or_layout_swapped_is_refused(torch: Any, how: str) -> None:
    out = torch.zeros((64, 64), device="cuda")
    launch = K.add_index.bind(out)
    launch()
    other = torch.full((64, 64), 5.0, device="cuda")
    if how == "set_":
        out.set_(other)  # same shape, other storage
    elif how == "data":
        out.data = other
    elif how == "as_strided_":
        out.as_strided_((64, 64), (1, 64))
    else:
        out.transpose_(0, 1)
    with pytest.raises(ValueError, match="argument `x`: the Tensor changed since it was bound"):
        launch()
    torch.cuda.synchronize()
    assert bool((other == 5.0).all())


def test_cupy_shape_set_after_bind_is_refused(cupy: Any) -> None:
    cp = cupy
    y = cp.zeros((64, 64), cp.float32)
    launch = K.add_index.bind(y)
    y.shape = (32, 128)  # CuPy's in-place reshape
    with pytest.raises(ValueError, match="argument `x`: the ndarray changed since it was bound"):
        launch()


def _index_added(cp: Any, y: Any, times: int) -> bool:
    """Whether 1-D ``y`` (zeros when bound) holds ``times`` × its index."""
    cp.cuda.runtime.deviceSynchronize()
    want = (times * np.arange(y.size, dtype=np.float32)).astype(np.float32)
    return bool(np.array_equal(cp.asnumpy(y).reshape(-1), want))


def test_cupy_1d_reshaped_or_moved_after_bind_is_refused(cupy: Any) -> None:
    """A bound 1-D CuPy array is re-read by ``ndim`` and ``data.ptr``: the in-place reshape
    to 2-D (same size) and a ``MemoryPointer`` moved in place are refused, naming the
    argument, with nothing written; undone, the launches go on, on the bound memory."""
    cp = cupy
    n = 4096
    y = cp.zeros(n, cp.float32)
    launch = K.add_index.bind(y)  # y[i] += i
    launch()
    assert _index_added(cp, y, 1)
    y.shape = (8, n // 8)
    with pytest.raises(ValueError, match="argument `x`: the ndarray changed since it was bound"):
        launch()
    y.shape = (n,)
    assert _index_added(cp, y, 1)  # nothing written by the refused launch
    launch()
    assert _index_added(cp, y, 2)
    p = y.data
    p += 4  # CuPy's MemoryPointer.__iadd__ moves y's own pointer
    assert y.data.ptr == p.ptr
    with pytest.raises(ValueError, match="argument `x`: the ndarray changed since it was bound"):
        launch()
    p -= 4
    assert _index_added(cp, y, 2)
    launch()
    assert _index_added(cp, y, 3)


def test_cupy_bound_memory_pointer_is_held(cupy: Any) -> None:
    """The bound launch holds a CuPy array's bound ``MemoryPointer`` (hence its allocation,
    whatever is later done to the array object): one reference more while bound, dropped with
    the bound launch. (CuPy's public API cannot give an existing array other memory: ``data``
    is read-only, and calling ``__init__`` again leaves it as it was.)"""
    cp = cupy
    n = 4096
    y = cp.zeros(n, cp.float32)
    mp = y.data
    before = sys.getrefcount(mp)
    launch = K.add_index.bind(y)  # y[i] += i
    assert sys.getrefcount(mp) == before + 1
    launch()
    assert _index_added(cp, y, 1)
    del launch
    gc.collect()
    assert sys.getrefcount(mp) == before


class _Movable:
    """A hand-made CAI producer over a CuPy array whose interface can be pointed elsewhere."""

    def __init__(self, target: Any) -> None:
        self.target = target

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.target.__cuda_array_interface__


def test_other_producers_are_read_again(cupy: Any) -> None:
    cp = cupy
    a = cp.ones(N, cp.float32)
    out = cp.full(N, cp.nan, cp.float32)
    m = _Movable(out)
    launch = K.add.bind(a, a, m)
    launch()
    cp.cuda.Device().synchronize()
    assert bool((out == 2).all())
    m.target = cp.full(N, 5.0, cp.float32)  # now names other memory
    with pytest.raises(ValueError, match="argument `out`: the _Movable changed since it was bound"):
        launch()
    cp.cuda.Device().synchronize()
    assert bool((m.target == 5.0).all())


def test_numba_stream_of_the_interface_is_followed(numba_cuda: Any) -> None:
    cuda = numba_cuda
    s = cuda.stream()
    x = cuda.to_device(np.zeros(BIG, np.float32), stream=s)
    y = cuda.to_device(np.arange(BIG, dtype=np.float32), stream=s)
    out = cuda.to_device(np.full(BIG, np.nan, np.float32), stream=s)
    s.synchronize()
    launch = K.add.bind(x, y, out, sync="event")
    K.fill_slow(x, 7.0, SLOW, stream=s)
    launch()  # on s, the arrays' stream (their interfaces name it)
    s.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(BIG, dtype=np.float32) + 7)


# ---- lifetimes -----------------------------------------------------------------------------------


def _full(lib: str, mod: Any, value: float) -> Any:
    if lib == "torch":
        return mod.full((BIG,), value, device="cuda")
    if lib == "cupy":
        return mod.full(BIG, value, mod.float32)
    return ferrocuda.DeviceArray.from_numpy(np.full(BIG, value, np.float32))


def _to_numpy(lib: str, mod: Any, x: Any) -> np.ndarray:
    if lib == "torch":
        mod.cuda.synchronize()
        return x.cpu().numpy()
    if lib == "cupy":
        mod.cuda.Device().synchronize()
        return mod.asnumpy(x)
    return x.to_numpy()


@pytest.mark.parametrize("lib", ["torch", "cupy", "ferrocuda"])
def test_the_bound_launch_keeps_its_arguments_alive(request: Any, lib: str) -> None:
    """Arguments (and a ``stream=`` object) made in a function that returns only the bound
    launch: after a collection and a churn of the allocator, which would hand freed blocks of
    this size out again, every launch still reads and writes the bound memory."""
    mod: Any = request.getfixturevalue(lib) if lib != "ferrocuda" else None

    def bound() -> Any:
        a, out = _full(lib, mod, 3.0), _full(lib, mod, float("nan"))
        return K.add.bind(a, a, out, stream=mod.cuda.Stream() if lib == "torch" else None)

    launch = bound()
    gc.collect()
    junk: list[Any] = [_full(lib, mod, -1.0) for _ in range(8)]
    for _ in range(reps(20, 3)):
        launch()
    assert (_to_numpy(lib, mod, launch.args[2]) == 6.0).all()
    assert all((_to_numpy(lib, mod, j) == -1.0).all() for j in junk)


def test_arguments_die_with_the_bound_launch(gpu: None) -> None:
    a = ferrocuda.DeviceArray.from_numpy(np.ones(N, np.float32))
    out = ferrocuda.DeviceArray.empty((N,), "float32")
    refs = [weakref.ref(a), weakref.ref(out)]
    launch = K.add.bind(a, a, out)
    del a, out
    gc.collect()
    assert all(r() is not None for r in refs)
    launch()
    assert (launch.args[2].to_numpy() == 2).all()
    del launch
    gc.collect()
    assert all(r() is None for r in refs)


def test_launch_from_threads(cupy: Any) -> None:
    cp = cupy
    a = cp.arange(BIG, dtype=cp.float32)
    outs = [cp.full(BIG, cp.nan, cp.float32) for _ in range(4)]
    launches = [K.add.bind(a, a, o, sync="event") for o in outs]
    errors: list = []

    def work(i: int) -> None:
        try:
            cp.cuda.Device(0).use()
            s = cp.cuda.Stream(non_blocking=True)
            with s:  # each thread's own current stream
                for _ in range(reps(200, 10)):
                    launches[i]()
            s.synchronize()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    cp.cuda.Device().synchronize()
    for o in outs:
        assert bool((o == 2 * a).all())


# ---- CUDA graphs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["event", "off"])
def test_captured_in_a_torch_cuda_graph(torch: Any, mode: str) -> None:
    """Every tensor on torch's current stream: inside ``torch.cuda.graph`` that is the capture
    stream, so the launch is captured (the plan has nothing to order and nothing blocks)."""
    a = torch.zeros(BIG, device="cuda")
    b = torch.arange(BIG, dtype=torch.float32, device="cuda")
    out = torch.full((BIG,), float("nan"), device="cuda")
    launch = K.add.bind(a, b, out, sync=mode)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up off the default stream, as torch's docs ask
        launch()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(3):
            launch()
    for t in range(3):
        a.fill_(float(t))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, b + t), t
