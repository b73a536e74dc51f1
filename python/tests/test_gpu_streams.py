"""Stream ordering, modelled on Numba's CUDA Array Interface tests (GPU).

Numba's tests check, with mocks, that a consumer synchronizes on an imported array's stream
(or not, with ``sync=False`` / the environment switch) and that launches synchronize the
streams of their arguments. Here the same situations run for real, and the ordering is
observed through the data: a producer writes the input on a non-blocking side stream behind a
slow kernel, and the result must still be right in the ``default`` and ``event`` modes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

import ferrocuda
from backends import WithStream
from scale import UNDER_SANITIZER

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels
N = 1 << 20
#: fill_slow iterations: a few tens of milliseconds on an H100.
SLOW = 20_000_000


# ---- producing -----------------------------------------------------------------------------------


def test_produce_no_stream(gpu: None) -> None:
    d = ferrocuda.DeviceArray.empty((3,), "float32")
    assert d.__cuda_array_interface__["stream"] == 1  # the legacy default stream
    assert d.stream == 1


def test_produce_stream(cupy: Any) -> None:
    s = cupy.cuda.Stream(non_blocking=True)
    d = ferrocuda.DeviceArray.empty((3,), "float32", stream=s)
    assert d.__cuda_array_interface__["stream"] == s.ptr == d.stream
    d2 = ferrocuda.DeviceArray.empty((3,), "float32", stream=2)
    assert d2.__cuda_array_interface__["stream"] == 2


# ---- consuming (as_cuda_array) -------------------------------------------------------------------


def test_consume_no_stream(cupy: Any) -> None:
    a = cupy.arange(10)
    fa = ferrocuda.as_cuda_array(WithStream(a, None))
    assert fa.stream is None


def test_consume_stream(cupy: Any) -> None:
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.arange(10)
        fa = ferrocuda.as_cuda_array(a)  # CuPy exports the current stream
    assert fa.stream == s.ptr


def test_consume_sync_waits_for_the_producer(cupy: Any) -> None:
    if ferrocuda.normalize_sync() != "default":
        pytest.skip("import-time host synchronization happens in the default sync mode only")
    cp = cupy
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(N, cp.float32)
    cp.cuda.Device().synchronize()
    K.fill_slow(x, 7.0, SLOW, stream=s)
    t0 = time.perf_counter()
    fa = ferrocuda.as_cuda_array(WithStream(x, s.ptr))  # sync=True: blocks until s is idle
    waited = time.perf_counter() - t0
    assert s.done
    assert fa.stream == s.ptr
    if not UNDER_SANITIZER:  # the sanitizer may run kernels synchronously
        assert waited > 0.001, waited


def test_consume_no_sync(cupy: Any) -> None:
    cp = cupy
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(N, cp.float32)
    cp.cuda.Device().synchronize()
    K.fill_slow(x, 7.0, SLOW, stream=s)
    fa = ferrocuda.as_cuda_array(WithStream(x, s.ptr), sync=False)
    assert fa.stream is None  # dropped: launches do no ordering for it
    if not UNDER_SANITIZER:  # the sanitizer may run kernels synchronously
        assert not s.done  # no host synchronization happened
    s.synchronize()


# ---- launching -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream_kind", ["cupy", "int", "cuda_stream_protocol"])
def test_launch_on_a_non_default_stream(cupy: Any, stream_kind: str) -> None:
    cp = cupy
    s = cp.cuda.Stream(non_blocking=True)
    stream: Any = {"cupy": s, "int": s.ptr, "cuda_stream_protocol": _Proto(s.ptr)}[stream_kind]
    a = cp.arange(N, dtype=cp.float32)
    out = cp.full(N, cp.nan, cp.float32)
    cp.cuda.Device().synchronize()
    K.add(a, a, out, stream=stream)
    s.synchronize()
    assert cp.array_equal(out, 2 * a)


class _Proto:
    def __init__(self, h: int) -> None:
        self.h = h

    def __cuda_stream__(self) -> Any:
        return (0, self.h)


def test_launch_with_torch_stream(torch: Any) -> None:
    s = torch.cuda.Stream()
    a = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        K.add(a, a, out, stream=torch.cuda.current_stream())
    s.synchronize()
    assert torch.equal(out, 2 * a)


@pytest.mark.parametrize("mode", ["default", "event"])
def test_arrays_on_two_streams(cupy: Any, mode: str) -> None:
    cp = cupy
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    x, y = cp.zeros(N, cp.float32), cp.zeros(N, cp.float32)
    out = cp.full(N, cp.nan, cp.float32)
    cp.cuda.Device().synchronize()
    K.fill_slow(x, 3.0, SLOW, stream=s1)
    K.fill_slow(y, 4.0, SLOW // 2, stream=s2)
    K.add(WithStream(x, s1.ptr), WithStream(y, s2.ptr), out, sync=mode)
    cp.cuda.Device().synchronize()
    assert bool((out == 7.0).all())


@pytest.mark.parametrize("mode", ["default", "event"])
@pytest.mark.parametrize("explicit", [False, True])
def test_race_slow_producer_on_side_stream(cupy: Any, mode: str, explicit: bool) -> None:
    """The producer fills the input on a non-blocking side stream behind a slow kernel;
    ferrocuda launches at once, on the producer's stream or on another stream."""
    cp = cupy
    prod, cons = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(N, cp.float32)
    y = cp.arange(N, dtype=cp.float32)
    out = cp.full(N, cp.nan, cp.float32)
    cp.cuda.Device().synchronize()
    K.fill_slow(x, 7.0, SLOW, stream=prod)
    kw = {"stream": cons} if explicit else {}
    K.add(WithStream(x, prod.ptr), y, out, sync=mode, **kw)
    cp.cuda.Device().synchronize()
    assert cp.array_equal(out, y + 7), "ferrocuda's kernel overtook the producer"


@pytest.mark.parametrize("mode", ["default", "event"])
def test_producer_stream_does_not_run_ahead(cupy: Any, mode: str) -> None:
    """The second half of the contract: work the producer enqueues after the launch (here:
    overwriting the input) waits for ferrocuda's kernel, which runs late on another stream."""
    cp = cupy
    prod, cons = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    x = cp.full(N, 7.0, cp.float32)
    y = cp.arange(N, dtype=cp.float32)
    out = cp.full(N, cp.nan, cp.float32)
    delay = cp.zeros(N, cp.float32)
    cp.cuda.Device().synchronize()
    K.fill_slow(delay, 1.0, SLOW, stream=cons)  # the consumer stream is busy for a while
    K.add(WithStream(x, prod.ptr), y, out, stream=cons, sync=mode)
    with prod:
        x.fill(-1.0)  # must wait for the add
    cp.cuda.Device().synchronize()
    assert cp.array_equal(out, y + 7), "the producer's stream ran ahead of ferrocuda's kernel"


@pytest.mark.parametrize("mode", ["default", "event"])
def test_race_torch_sleep_producer(torch: Any, mode: str) -> None:
    side, other = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.zeros(N, device="cuda")
    y = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.full((N,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        x.fill_(7.0)
    # torch's CAI names no stream: the producer's stream is given by the wrapper.
    K.add(WithStream(x, side.cuda_stream), y, out, stream=other, sync=mode)
    torch.cuda.synchronize()
    assert torch.equal(out, y + 7)


def test_race_cupy_rawkernel_producer(cupy: Any) -> None:
    cp = cupy
    spin = cp.RawKernel(
        r"""
        extern "C" __global__ void spin(float* x, long long cycles, float v) {
            long long t0 = clock64();
            while (clock64() - t0 < cycles) { }
            for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)%d;
                 i += (size_t)gridDim.x * blockDim.x) x[i] = v;
        }
        """
        % N,
        "spin",
    )
    prod = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(N, cp.float32)
    out = cp.full(N, cp.nan, cp.float32)
    cp.cuda.Device().synchronize()
    with prod:
        spin((64,), (256,), (x, cp.int64(100_000_000), cp.float32(5.0)))
        K.add(x, x, out, stream=cp.cuda.Stream.null)  # CuPy exports `prod` (current stream)
    cp.cuda.Device().synchronize()
    assert bool((out == 10.0).all())


def test_sync_off_does_not_block(cupy: Any) -> None:
    cp = cupy
    prod = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(N, cp.float32)
    out = cp.empty(N, cp.float32)
    cp.cuda.Device().synchronize()
    K.fill_slow(x, 7.0, SLOW, stream=prod)
    K.add(WithStream(x, prod.ptr), x, out, stream=cp.cuda.Stream.null, sync=False)
    if not UNDER_SANITIZER:  # the sanitizer may run kernels synchronously
        assert not prod.done  # neither a host sync nor anything else waited for the producer
    cp.cuda.Device().synchronize()


def test_event_mode_does_not_block_the_host(cupy: Any) -> None:
    cp = cupy
    prod = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(N, cp.float32)
    out = cp.full(N, cp.nan, cp.float32)
    cp.cuda.Device().synchronize()
    K.fill_slow(x, 7.0, SLOW, stream=prod)
    K.add(WithStream(x, prod.ptr), x, out, stream=cp.cuda.Stream.null, sync="event")
    if not UNDER_SANITIZER:
        assert not prod.done
    cp.cuda.Device().synchronize()
    assert bool((out == 14.0).all())


# ---- threads -------------------------------------------------------------------------------------


def test_concurrent_launches_from_threads(cupy: Any) -> None:
    cp = cupy
    errors: list = []

    def work(seed: int) -> None:
        try:
            cp.cuda.Device(0).use()
            s = cp.cuda.Stream(non_blocking=True)
            with s:
                a = cp.full(10_000, seed, cp.int64)
                out = cp.empty_like(a)
                for _ in range(100):
                    K.add(a, a, out)  # CuPy exports `s`: the launch goes there
                    K.add_index(out.reshape(100, 100))
                s.synchronize()
                want = 2 * seed + np.add.outer(np.arange(100), np.arange(100)).ravel()
                assert (cp.asnumpy(out) == want).all(), seed
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
