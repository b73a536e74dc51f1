"""The hostile-interface corpus (``hostile_corpus.py``): exact exceptions, on any machine and
on a GPU with real allocations.

Without a GPU every entry goes through ``ferrocuda.validate_interface(obj, name="arg")`` and
through a kernel launch: a malformed argument must be refused *before* the launch looks for
the driver, so the launch raises the entry's exception, not ``ferrocuda.CudaError``.

On a GPU (tests marked ``gpu``) the same launches run with every pointer inside one real
``cudaMalloc`` allocation, poisoned beforehand: a refused launch must leave it untouched.
A second group describes real allocations wrongly — one element or one byte past the end,
pointers into the middle, host memory, freed memory, another device's memory.

Exception types are checked exactly (``type(e) is X``): ferrocuda raises the built-in types
themselves, never subclasses. Exceptions of the producer's own code propagate as the very type
the producer raised (``Case.producer``).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import numpy as np
import pytest

import ferrocuda
from conftest import CAIProducer, cai
from ferrocuda import validate_interface
from hostile_corpus import (
    CORPUS,
    FAKE_BASE,
    HOST_BUFFER,
    OFF_A,
    OFF_B,
    REGION,
    Case,
)

POISON = 0xA5
MIB = 1 << 20


def _params(cases: Any, validating: bool = False) -> Any:
    out = []
    for c in cases:
        marks = []
        # A bug of a well-formed interface (validate == "accept") is in its launch only.
        if c.bug and not (validating and c.validate == "accept"):
            marks.append(pytest.mark.xfail(strict=True, reason=f"ferrocuda bug: {c.bug}"))
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


VALIDATED = [c for c in CORPUS if c.validate != "skip"]
LAUNCHED = [c for c in CORPUS if c.launch is not None]


def _check(e: BaseException, case: Case, arg: str, named: bool = True) -> None:
    """``e`` is exactly what ``case`` promises for argument ``arg``."""
    assert type(e) is case.exc, (
        f"{case.id}: expected {case.exc.__name__}, got {type(e).__name__}: {e}"
    )
    msg = str(e)
    assert case.match in msg, f"{case.id}: {case.match!r} not in {msg!r}"
    if case.producer:
        # The producer's exception, unchanged; reading the interface attribute adds a note.
        if case.note and sys.version_info >= (3, 11):
            notes = getattr(e, "__notes__", [])
            assert any(f"argument `{arg}`" in n for n in notes), notes
        return
    if named:
        assert msg.startswith(f"argument `{arg}`: "), msg
    if case.key is not None:
        assert f"{case.protocol}['{case.key}']: " in msg, msg


def _raised(fn: Any) -> BaseException:
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 - the point is to catch whatever comes
        return e
    pytest.fail("no exception raised")


# ---- the corpus itself ----------------------------------------------------------------------


def test_corpus_size_and_unique_ids() -> None:
    ids = [c.id for c in CORPUS]
    assert len(CORPUS) >= 100
    assert len(set(ids)) == len(ids), [i for i in ids if ids.count(i) > 1]
    for c in CORPUS:
        assert c.description and c.match, c.id
        assert c.validate in ("refuse", "accept", "skip"), c.id
        assert c.launch is None or c.launch_arg is not None, c.id
        if c.producer:
            assert c.validate == "refuse"
        else:
            assert c.exc in (TypeError, ValueError, NotImplementedError, OverflowError), c.id


def test_corpus_covers_every_kind() -> None:
    kinds = {c.exc for c in CORPUS if not c.producer}
    assert kinds == {TypeError, ValueError, NotImplementedError, OverflowError}
    keys = {c.key for c in CORPUS}
    assert {
        "version",
        "shape",
        "typestr",
        "data",
        "strides",
        "descr",
        "mask",
        "stream",
        "offset",
    } <= keys
    assert any(c.protocol == "__sycl_usm_array_interface__" for c in CORPUS)


# ---- without a GPU: validate_interface and launches ------------------------------------------


@pytest.mark.parametrize("case", _params(VALIDATED, validating=True))
def test_validate(case: Case) -> None:
    x = case.factory(FAKE_BASE)
    if case.validate == "accept":
        got = validate_interface(x, "arg")
        assert isinstance(got, dict) and "shape" in got
        return
    _check(_raised(lambda: validate_interface(x, "arg")), case, "arg")


@pytest.mark.parametrize("case", _params(c for c in LAUNCHED if not c.gpu))
def test_launch(case: Case) -> None:
    """The launch refuses the argument, before looking for a driver (made-up pointers)."""
    assert case.launch is not None and case.launch_arg is not None
    x = case.factory(FAKE_BASE)
    e = _raised(lambda: case.launch(x, FAKE_BASE))  # type: ignore[misc]
    _check(e, case, case.launch_arg, named=case.launch_named)


def test_argument_errors_come_before_no_driver() -> None:
    """The control: a well-formed launch gets as far as the driver."""
    if ferrocuda.driver_available():
        pytest.skip("a driver is present: made-up pointers are refused as not device memory")
    a, b, out = (CAIProducer(cai(ptr=FAKE_BASE + o)) for o in (OFF_A, OFF_B, 0))
    with pytest.raises(ferrocuda.CudaError, match="no CUDA driver"):
        ferrocuda.kernels.add(a, b, out)


# ---- on a GPU: the corpus over a real, poisoned allocation ----------------------------------


def _raw(cp: Any, nbytes: int) -> tuple[int, Any]:
    """A ``cudaMalloc`` allocation outside CuPy's pool, and a uint8 CuPy view of it.

    A 2 MiB spacer allocation follows it (freed with it by :func:`_free`): the driver tends to
    place allocations next to each other, and an extent running past the end must run into
    memory that is no argument of the launch — else the overlap check, which comes before
    the pointer checks, refuses it first. Allocate the launch's other arrays *before*.
    """
    ptr = cp.cuda.runtime.malloc(nbytes)
    _SPACERS[ptr] = cp.cuda.runtime.malloc(2 * MIB)
    mem = cp.cuda.UnownedMemory(ptr, nbytes, None)
    view = cp.ndarray((nbytes,), cp.uint8, cp.cuda.MemoryPointer(mem, 0))
    return ptr, view


_SPACERS: dict = {}


def _free(cp: Any, ptr: int) -> None:
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.free(ptr)
    cp.cuda.runtime.free(_SPACERS.pop(ptr))


def _f32_at(cp: Any, view: Any, offset: int, n: int) -> Any:
    """A float32 CuPy view of ``n`` elements at byte ``offset`` of ``view``."""
    return view[offset : offset + 4 * n].view(cp.float32)


def _untouched(cp: Any, view: Any) -> int:
    """The number of bytes of ``view`` that lost their poison."""
    cp.cuda.runtime.deviceSynchronize()
    return int((view != POISON).sum())


@pytest.fixture(scope="module")
def region(cupy: Any) -> Any:
    ptr, view = _raw(cupy, REGION)
    yield ptr, view
    _free(cupy, ptr)


@pytest.mark.gpu
@pytest.mark.parametrize("case", _params(LAUNCHED))
def test_launch_real_memory(case: Case, cupy: Any, region: Any) -> None:
    """Every launch of the corpus with its pointers in a real allocation: refused, and the
    allocation (and the host buffer some entries point at) keeps its poison."""
    base, view = region
    view.fill(POISON)
    HOST_BUFFER.view(np.uint8).fill(POISON)
    assert case.launch is not None and case.launch_arg is not None
    x = case.factory(base)
    e = _raised(lambda: case.launch(x, base))  # type: ignore[misc]
    _check(e, case, case.launch_arg, named=case.launch_named)
    assert _untouched(cupy, view) == 0, f"{case.id}: a refused launch wrote to the allocation"
    assert (HOST_BUFFER.view(np.uint8) == POISON).all()


# ---- on a GPU: descriptions of real allocations -------------------------------------------


def _driver_range(ptr: int) -> tuple[int, int] | None:
    """``(start, size)`` of the allocation holding ``ptr``, as the driver reports it."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    start = ctypes.c_uint64()
    size = ctypes.c_size_t()
    f = cuda.cuPointerGetAttribute
    f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
    # CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11, CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12
    if f(ctypes.byref(start), 11, ptr) != 0 or f(ctypes.byref(size), 12, ptr) != 0:
        return None
    return start.value, size.value


def _refused(cp: Any, view: Any, launch: Any, exc: type, *fragments: str) -> str:
    view.fill(POISON)
    with pytest.raises(exc) as info:
        launch()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, (f, msg)
    assert _untouched(cp, view) == 0, "a refused launch wrote to the allocation"
    return msg


@pytest.mark.gpu
def test_one_element_past_the_allocation(cupy: Any) -> None:
    cp = cupy
    n = 2 * MIB // 4 + 1
    a, b = cp.ones(n, cp.float32), cp.ones(n, cp.float32)
    out_ok = cp.zeros(n, cp.float32)
    ptr, view = _raw(cp, 2 * MIB)
    try:
        out = CAIProducer(cai(shape=(n,), ptr=ptr))
        _refused(
            cp,
            view,
            lambda: ferrocuda.kernels.add(a, b, out),
            ValueError,
            "argument `out`: ",
            "outside the allocation",
        )
        # The same extent as an input: the kernel would read past the end.
        inp = CAIProducer(cai(shape=(n,), ptr=ptr))
        _refused(
            cp,
            view,
            lambda: ferrocuda.kernels.add(a, inp, out_ok),
            ValueError,
            "argument `b`: ",
            "outside the allocation",
        )
        assert not bool(out_ok.any()), "the refused launch wrote its output"
    finally:
        _free(cp, ptr)


@pytest.mark.gpu
def test_one_byte_past_the_allocation(cupy: Any) -> None:
    """An allocation of 2 MiB - 1 bytes, described as 2 MiB of float32: one byte too many."""
    cp = cupy
    size = 2 * MIB - 1
    n = 2 * MIB // 4
    a, b = cp.ones(n, cp.float32), cp.ones(n, cp.float32)
    ptr, view = _raw(cp, size)
    try:
        rng = _driver_range(ptr)
        if rng is None:
            pytest.skip("cannot query the driver's allocation range through ctypes")
        if rng != (ptr, size):
            pytest.skip(
                f"the driver reports the allocation as {rng}, not ({ptr}, {size}): a "
                "one-byte overrun is not visible at its granularity"
            )
        out = CAIProducer(cai(shape=(n,), ptr=ptr))
        _refused(
            cp,
            view,
            lambda: ferrocuda.kernels.add(a, b, out),
            ValueError,
            "argument `out`: ",
            "outside the allocation",
        )
        # One element fewer fits, and the kernel computes it.
        fits = CAIProducer(cai(shape=(n - 1,), ptr=ptr))
        view.fill(POISON)
        ferrocuda.kernels.add(a[:-1], b[:-1], fits)
        cp.cuda.runtime.deviceSynchronize()
        assert bool((_f32_at(cp, view, 0, n - 1) == 2).all())
        assert bool((view[4 * (n - 1) :] == POISON).all())
    finally:
        _free(cp, ptr)


@pytest.mark.gpu
def test_pointer_into_the_middle(cupy: Any, rng: np.random.Generator) -> None:
    cp = cupy
    n = 1024
    a = cp.asarray(rng.standard_normal(n).astype(np.float32))
    b = cp.asarray(rng.standard_normal(n).astype(np.float32))
    ptr, view = _raw(cp, 2 * MIB)
    try:
        # Fits: [ptr + 1 MiB, ptr + 1 MiB + 4 KiB).
        view.fill(POISON)
        mid = MIB
        ferrocuda.kernels.add(a, b, CAIProducer(cai(shape=(n,), ptr=ptr + mid)))
        cp.cuda.runtime.deviceSynchronize()
        assert bool((_f32_at(cp, view, mid, n) == a + b).all())
        assert bool((view[:mid] == POISON).all()) and bool((view[mid + 4 * n :] == POISON).all())
        # Ends 2 KiB past the allocation.
        late = 2 * MIB - 2048
        _refused(
            cp,
            view,
            lambda: ferrocuda.kernels.add(a, b, CAIProducer(cai(shape=(n,), ptr=ptr + late))),
            ValueError,
            "argument `out`: ",
            "outside the allocation",
        )
        # A reversed view from the middle that fits, and one reaching below the start.
        view.fill(POISON)
        x = CAIProducer(cai(shape=(n,), ptr=ptr + mid, strides=(-4,)))
        ferrocuda.kernels.add_index(x)  # x[i] += i
        cp.cuda.runtime.deviceSynchronize()
        poison_f32 = np.frombuffer(bytes([POISON] * 4), np.float32)[0]
        got = cp.asnumpy(_f32_at(cp, view, mid - 4 * (n - 1), n))[::-1]
        assert np.array_equal(got, (poison_f32 + np.arange(n, dtype=np.float32)).astype(np.float32))
        low = CAIProducer(cai(shape=(n,), ptr=ptr + 4 * (n - 2), strides=(-4,)))
        _refused(
            cp,
            view,
            lambda: ferrocuda.kernels.add_index(low),
            ValueError,
            "argument `x`: ",
            "outside the allocation",
        )
    finally:
        _free(cp, ptr)


@pytest.mark.gpu
def test_views_of_one_allocation(cupy: Any, rng: np.random.Generator) -> None:
    """Arrays of one launch inside one allocation are checked against it once (a later array
    wholly inside an allocation found for an earlier one needs no driver call); one that starts
    inside it but ends past either end is still refused, naming it, nothing written."""
    cp = cupy
    n = 1024
    ha = rng.standard_normal(n).astype(np.float32)
    hb = rng.standard_normal(n).astype(np.float32)
    ptr, view = _raw(cp, 2 * MIB)
    try:
        view.fill(POISON)
        mid = MIB
        a, b = _f32_at(cp, view, mid, n), _f32_at(cp, view, mid + 4 * n, n)
        a[...] = cp.asarray(ha)
        b[...] = cp.asarray(hb)
        out = _f32_at(cp, view, mid + 8 * n, n)
        ferrocuda.kernels.add(a, b, out)
        cp.cuda.runtime.deviceSynchronize()
        assert np.array_equal(cp.asnumpy(out), ha + hb)
        assert bool((view[:mid] == POISON).all()) and bool((view[mid + 12 * n :] == POISON).all())

        def inputs() -> tuple[Any, Any]:
            # _refused re-poisons the allocation: the inputs are views of it, re-read each time.
            return _f32_at(cp, view, mid, n), _f32_at(cp, view, mid + 4 * n, n)

        # `out` starts in the allocation `a` and `b` were found in and ends 4 bytes past it.
        late = CAIProducer(cai(shape=(n,), ptr=ptr + 2 * MIB - 4 * n + 4))
        _refused(
            cp,
            view,
            lambda: ferrocuda.kernels.add(*inputs(), late),
            ValueError,
            "argument `out`: ",
            "outside the allocation",
        )
        # Reversed from inside the allocation to 4 bytes below its start.
        low = CAIProducer(cai(shape=(n,), ptr=ptr + 4 * (n - 2), strides=(-4,)))
        _refused(
            cp,
            view,
            lambda: ferrocuda.kernels.add(*inputs(), low),
            ValueError,
            "argument `out`: ",
            "outside the allocation",
        )
        # An input after `a`: inside the allocation at its start, past it at its end.
        over = CAIProducer(cai(shape=(n,), ptr=ptr + 2 * MIB - 4 * n + 4))
        _refused(
            cp,
            view,
            lambda: ferrocuda.kernels.add(inputs()[0], over, _f32_at(cp, view, 0, n)),
            ValueError,
            "argument `b`: ",
            "outside the allocation",
        )
    finally:
        _free(cp, ptr)


@pytest.mark.gpu
def test_host_pointer_disguised_as_device_memory(cupy: Any) -> None:
    cp = cupy
    n = 1024
    host = np.full(n, 7.0, np.float32)
    a, b = cp.ones(n, cp.float32), cp.ones(n, cp.float32)
    disguised = CAIProducer(cai(shape=(n,), ptr=host.ctypes.data))
    with pytest.raises(ValueError) as info:
        ferrocuda.kernels.add(a, b, disguised)
    msg = str(info.value)
    assert (
        msg.startswith("argument `out`: __cuda_array_interface__['data']: ")
        and "not CUDA device memory" in msg
    ), msg
    assert (host == 7.0).all()
    # Page-locked host memory is known to the driver, and still not device memory.
    pinned = cp.cuda.alloc_pinned_memory(4 * n)
    arr = np.frombuffer(pinned, np.float32, n)
    arr[:] = 7.0
    with pytest.raises(ValueError, match=r"not CUDA device memory .memory type 1: page-locked"):
        ferrocuda.kernels.add(a, b, CAIProducer(cai(shape=(n,), ptr=pinned.ptr)))
    assert (arr == 7.0).all()


@pytest.mark.gpu
def test_freed_allocation(cupy: Any) -> None:
    """A pointer whose ``cudaMalloc`` allocation was freed: the driver no longer knows it."""
    cp = cupy
    n = 1024
    a, b = cp.ones(n, cp.float32), cp.ones(n, cp.float32)
    cp.cuda.runtime.deviceSynchronize()
    ptr = cp.cuda.runtime.malloc(2 * MIB)
    cp.cuda.runtime.free(ptr)
    # Nothing is allocated between the free and the launch.
    with pytest.raises(ValueError) as info:
        ferrocuda.kernels.add(a, b, CAIProducer(cai(shape=(n,), ptr=ptr)))
    msg = str(info.value)
    assert msg.startswith("argument `out`: __cuda_array_interface__['data']: "), msg
    assert "not CUDA device memory (memory type 0: unknown to the driver" in msg, msg


@pytest.mark.gpu
def test_other_device_memory(cupy: Any) -> None:
    cp = cupy
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two CUDA devices")
    n = 1024
    a, b = cp.ones(n, cp.float32), cp.full(n, 2, cp.float32)
    with cp.cuda.Device(1):
        other = cp.full(n, 7, cp.float32)
        a1, b1 = cp.ones(n, cp.float32), cp.full(n, 2, cp.float32)
    with pytest.raises(ValueError) as info:
        ferrocuda.kernels.add(a, b, other)
    msg = str(info.value)
    assert msg.startswith("argument `out`: ") and "must be on one device" in msg, msg
    with pytest.raises(ValueError, match="must be on one device"):
        ferrocuda.kernels.add(a1, b, CAIProducer(other.__cuda_array_interface__))
    with cp.cuda.Device(1):
        cp.cuda.runtime.deviceSynchronize()
        assert bool((other == 7).all())
    # All on device 1: the launch runs there.
    ferrocuda.kernels.add(a1, b1, other)
    with cp.cuda.Device(1):
        cp.cuda.runtime.deviceSynchronize()
        assert bool((other == 3).all())


@pytest.mark.gpu
def test_torch_other_device(torch: Any) -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    n = 1024
    a0 = torch.ones(n, device="cuda:0")
    a1, b1 = torch.ones(n, device="cuda:1"), torch.full((n,), 2.0, device="cuda:1")
    out = torch.full((n,), 7.0, device="cuda:1")
    with pytest.raises(ValueError, match="must be on one device"):
        ferrocuda.kernels.add(a0, b1, out)
    torch.cuda.synchronize(1)
    assert bool((out == 7).all())
    # All on device 1, current device 0: the launch runs on device 1, on torch's current
    # stream of device 1.
    ferrocuda.kernels.add(a1, b1, out)
    torch.cuda.synchronize(1)
    assert bool((out == 3).all())
    # Produced on a side stream of device 1 and launched inside it: the launch follows it.
    s = torch.cuda.Stream(device=1)
    with torch.cuda.stream(s):
        y = a1 * 5
        ferrocuda.kernels.add(y, b1, out)
    s.synchronize()
    assert bool((out == 7).all())


@pytest.mark.gpu
def test_float64_scalar_from_a_huge_int(cupy: Any) -> None:
    cp = cupy
    x = cp.ones(4, cp.float64)
    y = cp.zeros(4, cp.float64)
    ferrocuda.kernels.saxpy_f64(2**200, x, y)
    cp.cuda.runtime.deviceSynchronize()
    got = cp.asnumpy(y)
    assert (got == float(2**200)).all(), f"y = 2**200 * 1 + 0 computed as {got[0]!r}"
