"""Device placement on several GPUs (python/README.md, "Several GPUs"):

* arrays on device N launch on device N, whatever device is current;
* arrays of two devices in one call are refused, naming the arguments and their devices;
* the caller's current CUDA context — CuPy's ``Device(n)``, torch's ``cuda:n``, or none at
  all — is the same after any ferrocuda call as before it.

The cases that need two GPUs skip on one, saying so; the others run on any GPU.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ferrocuda
from ferrocuda import kernels

pytestmark = pytest.mark.gpu


def current_context() -> int:
    """The calling thread's current CUDA context (``cuCtxGetCurrent``; 0 for none)."""
    ctx = ctypes.c_void_p()
    rc = ctypes.CDLL("libcuda.so.1").cuCtxGetCurrent(ctypes.byref(ctx))
    assert rc == 0, f"cuCtxGetCurrent failed: {rc}"
    return ctx.value or 0


def in_new_thread(fn: Callable[[], Any]) -> Any:
    """Runs `fn` in a new thread (no current context yet) and returns its result."""
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(_capture(fn)))
    t.start()
    t.join(120)
    assert not t.is_alive(), "the thread did not finish in 120 s"
    kind, value = box[0]
    if kind == "error":
        raise value
    return value


def _capture(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
        return ("error", e)


@pytest.fixture
def two_gpus(cupy: Any) -> Any:
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one GPU only: two-GPU case skipped")
    return cupy


# ---- any GPU ------------------------------------------------------------------------------


def test_a_thread_without_a_context_keeps_none(cupy: Any) -> None:
    """A thread that never chose a device still has none after allocating, copying,
    launching and freeing through ferrocuda alone: each call binds the device's context for
    its own duration only."""

    def work() -> Any:
        seen = [current_context()]
        d = ferrocuda.DeviceArray.from_numpy(np.arange(10.0))
        seen.append(current_context())
        kernels.add(d, d, d)
        seen.append(current_context())
        host = d.to_numpy()
        seen.append(current_context())
        del d
        seen.append(current_context())
        return seen, host

    seen, host = in_new_thread(work)
    assert seen == [0] * 5, f"current context after each step: {seen}"
    assert np.array_equal(host, 2 * np.arange(10.0))


def test_cupy_arrays_from_another_thread(cupy: Any) -> None:
    """CuPy arrays made in one thread, launched on from another: right result, and the
    other thread's current device is still device 0 afterwards."""
    cp = cupy
    a, b = cp.arange(1000, dtype=cp.float32), cp.ones(1000, cp.float32)
    out = cp.empty_like(a)
    cp.cuda.runtime.deviceSynchronize()

    def work() -> int:
        kernels.add(a, b, out)
        cp.cuda.runtime.deviceSynchronize()
        return int(cp.cuda.runtime.getDevice())

    assert in_new_thread(work) == 0
    assert bool(cp.all(out == a + b))


def test_the_callers_context_is_kept(cupy: Any) -> None:
    cp = cupy
    x = cp.zeros(100, cp.int32)
    ctx = current_context()
    assert ctx != 0, "CuPy's allocation made device 0's context current"
    kernels.initialize_array(x)
    d = ferrocuda.DeviceArray.empty((4,), "float32")
    ferrocuda.synchronize()
    del d
    assert current_context() == ctx
    assert bool(cp.all(x == cp.arange(100, dtype=cp.int32)))


# ---- two GPUs -----------------------------------------------------------------------------


def test_arrays_on_device_1_launch_there_and_device_0_stays_current(two_gpus: Any) -> None:
    cp = two_gpus
    with cp.cuda.Device(1):
        a1 = cp.arange(4099, dtype=cp.float32)
        b1 = cp.full(4099, 0.5, cp.float32)
        out1 = cp.full(4099, np.nan, cp.float32)
    cp.cuda.Device(0).use()
    ctx0 = current_context()
    kernels.add(a1, b1, out1)
    assert cp.cuda.runtime.getDevice() == 0 and current_context() == ctx0
    with cp.cuda.Device(1):
        cp.cuda.runtime.deviceSynchronize()
        assert bool(cp.all(out1 == a1 + b1))
    # The other way round: device 1 current, arrays on device 0.
    a0, out0 = cp.arange(100, dtype=cp.float64), cp.zeros(100, cp.float64)
    with cp.cuda.Device(1):
        ctx1 = current_context()
        kernels.add(a0, a0, out0)
        assert cp.cuda.runtime.getDevice() == 1 and current_context() == ctx1
    cp.cuda.runtime.deviceSynchronize()
    assert bool(cp.all(out0 == 2 * a0))


def test_device_arrays_on_device_1_leave_device_0_current(two_gpus: Any) -> None:
    cp = two_gpus
    cp.cuda.Device(0).use()
    ctx0 = current_context()
    d = ferrocuda.DeviceArray.from_numpy(np.arange(8.0), device=1)
    e = ferrocuda.DeviceArray.empty((8,), "float64", device=1)
    assert current_context() == ctx0
    kernels.add(d, d, e)
    assert current_context() == ctx0
    assert np.array_equal(e.to_numpy(), 2 * np.arange(8.0))
    assert (d.device, e.device) == (1, 1) and current_context() == ctx0
    ferrocuda.synchronize(device=1)
    del d, e  # frees on device 1
    assert current_context() == ctx0 and cp.cuda.runtime.getDevice() == 0


def test_torch_current_device_is_kept(two_gpus: Any, torch: Any) -> None:
    torch.cuda.set_device(0)
    x1 = torch.arange(1000, dtype=torch.float32, device="cuda:1")
    out1 = torch.empty_like(x1)
    kernels.add(x1, x1, out1)
    assert torch.cuda.current_device() == 0
    torch.cuda.synchronize(1)
    assert torch.equal(out1, 2 * x1)
    x0 = torch.ones(10, device="cuda:0")
    out0 = torch.zeros_like(x0)
    with torch.cuda.device(1):
        kernels.add(x0, x0, out0)
        assert torch.cuda.current_device() == 1
    torch.cuda.synchronize(0)
    assert torch.equal(out0, torch.full_like(x0, 2))


def test_mixed_devices_are_refused_naming_arguments_and_devices(two_gpus: Any) -> None:
    cp = two_gpus
    a0 = cp.ones(64, cp.float32)
    with cp.cuda.Device(1):
        b1 = cp.ones(64, cp.float32)
        out1 = cp.full(64, 7, cp.float32)
    with pytest.raises(ValueError) as info:
        kernels.add(a0, b1, out1)
    assert str(info.value) == (
        "argument `b`: array is on device 1 but `a` is on device 0: all arrays of a launch "
        "must be on one device"
    ), str(info.value)
    d0 = ferrocuda.DeviceArray.from_numpy(np.ones(64, np.float32))
    with pytest.raises(
        ValueError, match="argument `out`: array is on device 1 but `a` is on device 0"
    ):
        kernels.add(d0, d0, out1)
    with cp.cuda.Device(1):
        cp.cuda.runtime.deviceSynchronize()
        assert bool(cp.all(out1 == 7)), "a refused launch wrote its output"
