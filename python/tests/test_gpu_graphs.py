"""ferrocuda launches inside CUDA graph captures (GPU).

A launch on a capturing stream must become a node of the graph and replay correctly in every
sync mode; what a graph cannot record must be refused with a clear error that leaves the
capture valid (``torch.cuda.graph`` then ends its capture cleanly, and the error propagates);
and ferrocuda's host-blocking calls on unrelated streams must not invalidate a capture in
``global`` mode, on this thread or another (the rules: ``ferrocuda_host::stream::capture``).

Method: inputs are integer-valued floats, so results are exact; outputs are poisoned (NaN) before
every replay and checked to be still poisoned right after the capture (a captured launch runs
nothing); replays get new input data copied into the captured buffers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

import ferrocuda
from backends import DLPackOnly, WithStream
from scale import UNDER_SANITIZER, reps

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels
MODES = ["default", "event", "off"]
N = 1 << 16
LOOP = 50
NAN = float("nan")
#: torch.cuda._sleep cycles: tens of milliseconds on an H100.
SLEEP = 50_000_000


def ints(rng: np.random.Generator, n: int = N) -> np.ndarray:
    return rng.integers(-1000, 1000, n).astype(np.float32)


class _Handle:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __cuda_stream__(self) -> Any:
        return (0, self.ptr)


def cupy_view_of(cp: Any, ptr: int) -> Any:
    """CuPy's stream object for a stream it did not create (torch's capture stream)."""
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(_Handle(ptr))
    return cp.cuda.ExternalStream(ptr)


def chain(a: Any, b: Any, bufs: list[Any], **kw: Any) -> None:
    """``bufs[i] = a + (i + 1) * b``, one launch per step: the order of the captured launches
    matters, so a wrong graph shows."""
    K.add(a, b, bufs[0], **kw)
    for i in range(1, len(bufs)):
        K.add(bufs[i - 1], b, bufs[i], **kw)


def check_chain(na: np.ndarray, nb: np.ndarray, got: list[np.ndarray]) -> None:
    for i in (0, len(got) // 2, len(got) - 1):
        np.testing.assert_array_equal(got[i], na + np.float32(i + 1) * nb, err_msg=f"step {i}")


# ---- torch.cuda.graph --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_torch_graph_of_a_launch_loop(torch: Any, rng: np.random.Generator, mode: str) -> None:
    t = torch
    a, b = t.zeros(N, device="cuda"), t.zeros(N, device="cuda")
    bufs = [t.full((N,), NAN, device="cuda") for _ in range(LOOP)]
    chain(a, b, bufs[:2], sync=mode)  # warm-up, outside the capture
    t.cuda.synchronize()
    for x in bufs:
        x.fill_(NAN)
    g = t.cuda.CUDAGraph()
    with t.cuda.graph(g):  # torch tensors name torch's current stream: the capture stream
        chain(a, b, bufs, sync=mode)
    t.cuda.synchronize()
    assert all(bool(t.isnan(x).all()) for x in bufs), "a captured launch ran during the capture"
    for _ in range(reps(4, 2)):
        na, nb = ints(rng), ints(rng)
        a.copy_(t.from_numpy(na))
        b.copy_(t.from_numpy(nb))
        for x in bufs:
            x.fill_(NAN)
        g.replay()
        t.cuda.synchronize()
        check_chain(na, nb, [x.cpu().numpy() for x in bufs])


@pytest.mark.parametrize("mode", MODES)
def test_cupy_arrays_in_a_torch_graph(
    torch: Any, cupy: Any, rng: np.random.Generator, mode: str
) -> None:
    """CuPy arrays inside ``torch.cuda.graph``, with CuPy's current stream set to torch's capture
    stream (so that CuPy's interface names it)."""
    t, cp = torch, cupy
    cap = t.cuda.Stream()
    on_cap = cupy_view_of(cp, cap.cuda_stream)
    a, b = cp.zeros(N, cp.float32), cp.zeros(N, cp.float32)
    bufs = [cp.full(N, NAN, cp.float32) for _ in range(LOOP)]
    with on_cap:
        chain(a, b, bufs[:2], sync=mode)
    cp.cuda.Device().synchronize()
    for x in bufs:
        x.fill(NAN)
    cp.cuda.Device().synchronize()
    g = t.cuda.CUDAGraph()
    with t.cuda.graph(g, stream=cap), on_cap:
        chain(a, b, bufs, sync=mode)
    cp.cuda.Device().synchronize()
    assert all(bool(cp.isnan(x).all()) for x in bufs), "a captured launch ran during the capture"
    for _ in range(reps(4, 2)):
        na, nb = ints(rng), ints(rng)
        a.set(na)
        b.set(nb)
        for x in bufs:
            x.fill(NAN)
        cp.cuda.Device().synchronize()
        g.replay()
        t.cuda.synchronize()
        check_chain(na, nb, [cp.asnumpy(x) for x in bufs])


@pytest.mark.parametrize("mode", MODES)
def test_producer_outside_the_capture(
    torch: Any, cupy: Any, rng: np.random.Generator, mode: str
) -> None:
    """CuPy arrays on CuPy's own default stream, launched on torch's capture stream: that stream
    cannot be ordered inside the graph — refused in the ``default`` and ``event`` modes (the
    capture stays valid), captured unordered in ``off``."""
    t, cp = torch, cupy
    x, y = cp.asarray(ints(rng)), cp.asarray(ints(rng))
    out = cp.full(N, NAN, cp.float32)
    ta = t.from_numpy(ints(rng)).cuda()
    tout = t.full((N,), NAN, device="cuda")
    K.add(x, y, out)
    K.add(ta, ta, tout)
    out.fill(NAN)
    tout.fill_(NAN)
    cp.cuda.Device().synchronize()
    t.cuda.synchronize()
    g = t.cuda.CUDAGraph()
    with t.cuda.graph(g):
        cap = t.cuda.current_stream()
        K.add(ta, ta, tout)  # captured in every mode (the graph is never empty)
        if mode == "off":
            K.add(x, y, out, stream=cap, sync=mode)
        else:
            with pytest.raises(
                NotImplementedError, match=r"argument `a`.*not part of that capture"
            ):
                K.add(x, y, out, stream=cap, sync=mode)
            assert t.cuda.is_current_stream_capturing()
    g.replay()
    t.cuda.synchronize()
    np.testing.assert_array_equal(tout.cpu().numpy(), 2 * ta.cpu().numpy())
    got = cp.asnumpy(out)
    if mode == "off":
        np.testing.assert_array_equal(got, cp.asnumpy(x) + cp.asnumpy(y))
    else:
        assert np.isnan(got).all(), "the refused launch was captured"


@pytest.mark.parametrize("mode", ["default", "event"])
def test_side_stream_producer_respected_at_replay(
    torch: Any, rng: np.random.Generator, mode: str
) -> None:
    """A slow producer on a side stream joined to the capture writes the input; the captured
    event edge makes every replay's kernel wait for it."""
    got, want = _side_stream_replays(torch, rng, mode, reps(5, 2))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.skipif(UNDER_SANITIZER, reason="a deliberate race: the sanitizer serializes kernels")
def test_side_stream_control_off_mode_races(torch: Any, rng: np.random.Generator) -> None:
    """Control: the same graph in the ``off`` mode has no edge, so the kernel reads the input
    while the side branch still sleeps (the test above is not vacuous)."""
    got, want = _side_stream_replays(torch, rng, "off", 5)
    assert any(not np.array_equal(g, w) for g, w in zip(got, want, strict=True)), "no race observed"


def _side_stream_replays(torch: Any, rng: np.random.Generator, mode: str, replays: int) -> Any:
    t = torch
    side = t.cuda.Stream()
    src, x, y = (t.zeros(N, device="cuda") for _ in range(3))
    out = t.full((N,), NAN, device="cuda")
    K.add(WithStream(x, side.cuda_stream), y, out, stream=t.cuda.current_stream(), sync=mode)
    t.cuda.synchronize()
    g = t.cuda.CUDAGraph()
    with t.cuda.graph(g):
        cap = t.cuda.current_stream()
        side.wait_stream(cap)  # fork: the side stream joins the capture
        with t.cuda.stream(side):
            t.cuda._sleep(SLEEP)
            x.copy_(src)
        K.add(WithStream(x, side.cuda_stream), y, out, stream=cap, sync=mode)
        cap.wait_stream(side)  # join
    got, want = [], []
    for _ in range(replays):
        ns, ny = ints(rng), ints(rng)
        src.copy_(t.from_numpy(ns))
        y.copy_(t.from_numpy(ny))
        x.fill_(NAN)
        out.fill_(NAN)
        g.replay()
        t.cuda.synchronize()
        got.append(out.cpu().numpy())
        want.append(ns + ny)
    return got, want


def test_host_array_refused_during_a_torch_capture(torch: Any, rng: np.random.Generator) -> None:
    """A NumPy argument inside ``torch.cuda.graph``: ``NotImplementedError`` saying why; nothing
    was staged, the capture is still valid, and launches before and after it are captured.
    Propagating out of ``torch.cuda.graph``, the error leaves the capture ended cleanly."""
    t = torch
    na, nb = ints(rng), ints(rng)
    a, b = t.from_numpy(na).cuda(), t.from_numpy(nb).cuda()
    o1, o2, o3 = (t.full((N,), NAN, device="cuda") for _ in range(3))
    host = np.ones(N, np.float32)
    K.add(a, b, o1)
    o1.fill_(NAN)
    t.cuda.synchronize()
    g = t.cuda.CUDAGraph()
    with t.cuda.graph(g):
        K.add(a, b, o1)
        with (
            pytest.warns(ferrocuda.PerformanceWarning),
            pytest.raises(NotImplementedError, match="cannot be arguments of a launch captured"),
        ):
            K.add(host, b, o2)
        assert t.cuda.is_current_stream_capturing()
        K.add(o1, b, o3)
    g.replay()
    t.cuda.synchronize()
    np.testing.assert_array_equal(o1.cpu().numpy(), na + nb)
    np.testing.assert_array_equal(o3.cpu().numpy(), na + 2 * nb)
    assert bool(t.isnan(o2).all())

    o1.fill_(NAN)
    g2 = t.cuda.CUDAGraph()
    with pytest.warns(ferrocuda.PerformanceWarning), pytest.raises(NotImplementedError):
        with t.cuda.graph(g2):
            K.add(a, b, o1)
            K.add(host, b, o2)
    assert not t.cuda.is_current_stream_capturing()
    g2.replay()  # the capture ended with the launch before the error
    t.cuda.synchronize()
    np.testing.assert_array_equal(o1.cpu().numpy(), na + nb)


@pytest.mark.parametrize("mode", MODES)
def test_sum_and_histogram_in_a_torch_graph(
    torch: Any, rng: np.random.Generator, mode: str
) -> None:
    """Kernels with a scratch workspace (``sum``: allocation, zero-fill and free become memory
    nodes) and a zeroed output (``histogram``: a memset node), replayed on new data: each
    replay starts from zeroed bins and a fresh workspace."""
    t = torch
    nbins = 64
    x = t.zeros(N, device="cuda")
    total = t.full((1,), NAN, device="cuda")
    bins = t.full((nbins,), -1, dtype=t.int64, device="cuda")
    K.sum(x, total, sync=mode)
    K.histogram(x, bins, 0.0, 1.0, sync=mode)
    t.cuda.synchronize()
    g = t.cuda.CUDAGraph()
    with t.cuda.graph(g):
        K.sum(x, total, sync=mode)
        K.histogram(x, bins, 0.0, 1.0, sync=mode)
    for _ in range(reps(4, 2)):
        nx = rng.random(N, dtype=np.float32)
        x.copy_(t.from_numpy(nx))
        total.fill_(NAN)
        bins.fill_(-1)
        g.replay()
        t.cuda.synchronize()
        np.testing.assert_allclose(total.cpu().numpy()[0], nx.sum(dtype=np.float64), rtol=1e-4)
        want = np.histogram(nx, bins=nbins, range=(0.0, 1.0))[0]
        np.testing.assert_array_equal(bins.cpu().numpy(), want)


# ---- CuPy's Stream.begin_capture ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("blocking", [False, True], ids=["non_blocking", "blocking"])
def test_cupy_stream_capture(
    cupy: Any, rng: np.random.Generator, mode: str, blocking: bool
) -> None:
    """CuPy's own capture (relaxed mode), on a non-blocking stream and on a blocking one —
    during which the legacy default stream is unusable: a launch on it, and a synchronization
    of it, are refused and the capture goes on."""
    cp = cupy
    s = cp.cuda.Stream(non_blocking=not blocking)
    with s:
        a, b = cp.zeros(N, cp.float32), cp.zeros(N, cp.float32)
        bufs = [cp.full(N, NAN, cp.float32) for _ in range(LOOP)]
        chain(a, b, bufs[:2], sync=mode)
        for x in bufs:
            x.fill(NAN)
        s.synchronize()
        s.begin_capture()
        try:
            chain(a, b, bufs, sync=mode)  # CuPy's interface names `s`, the capturing stream
            if blocking:
                with pytest.raises(NotImplementedError, match="legacy default stream"):
                    K.add(a, b, bufs[0], stream=1, sync=mode)
                with pytest.raises(NotImplementedError, match="legacy default stream"):
                    ferrocuda.synchronize()
        finally:
            graph = s.end_capture()
        s.synchronize()
        assert all(bool(cp.isnan(x).all()) for x in bufs), "a captured launch ran"
        for _ in range(reps(4, 2)):
            na, nb = ints(rng), ints(rng)
            a.set(na, stream=s)
            b.set(nb, stream=s)
            for x in bufs:
                x.fill(NAN)
            graph.launch(stream=s)
            s.synchronize()
            check_chain(na, nb, [cp.asnumpy(x, stream=s) for x in bufs])


def test_host_array_refused_during_a_cupy_capture(cupy: Any, rng: np.random.Generator) -> None:
    cp = cupy
    s = cp.cuda.Stream(non_blocking=True)
    na, nb = ints(rng), ints(rng)
    with s:
        a, b = cp.asarray(na), cp.asarray(nb)
        o1, o2 = cp.full(N, NAN, cp.float32), cp.full(N, NAN, cp.float32)
        K.add(a, b, o1)
        o1.fill(NAN)
        s.synchronize()
        s.begin_capture()
        try:
            K.add(a, b, o1)
            with (
                pytest.warns(ferrocuda.PerformanceWarning),
                pytest.raises(
                    NotImplementedError, match="cannot be arguments of a launch captured"
                ),
            ):
                K.add(np.ones(N, np.float32), b, o2)
        finally:
            graph = s.end_capture()  # the capture is still valid: this does not raise
        graph.launch(stream=s)
        s.synchronize()
        np.testing.assert_array_equal(cp.asnumpy(o1), na + nb)
        assert bool(cp.isnan(o2).all())


@pytest.mark.parametrize("mode", MODES)
def test_sum_and_histogram_in_a_cupy_capture(
    cupy: Any, rng: np.random.Generator, mode: str
) -> None:
    cp = cupy
    nbins = 64
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.zeros(N, cp.float32)
        total = cp.full(1, NAN, cp.float32)
        bins = cp.full(nbins, -1, cp.int64)
        K.sum(x, total, sync=mode)
        K.histogram(x, bins, 0.0, 1.0, sync=mode)
        s.synchronize()
        s.begin_capture()
        try:
            K.sum(x, total, sync=mode)
            K.histogram(x, bins, 0.0, 1.0, sync=mode)
        finally:
            graph = s.end_capture()
        for _ in range(reps(4, 2)):
            nx = rng.random(N, dtype=np.float32)
            x.set(nx, stream=s)
            total.fill(NAN)
            bins.fill(-1)
            graph.launch(stream=s)
            s.synchronize()
            np.testing.assert_allclose(cp.asnumpy(total)[0], nx.sum(dtype=np.float64), rtol=1e-4)
            want = np.histogram(nx, bins=nbins, range=(0.0, 1.0))[0]
            np.testing.assert_array_equal(cp.asnumpy(bins), want)


# ---- ferrocuda's own arrays, DLPack ------------------------------------------------------------


def test_device_arrays_and_dlpack_under_capture(torch: Any) -> None:
    """Allocating a DeviceArray on the capturing stream is refused; exporting one whose stream
    is outside the capture to a consumer on the capturing stream is refused; the same stream,
    and a launch in the ``off`` mode, are captured; dropping an array of the capturing stream
    leaves the capture valid."""
    t = torch
    cap = t.cuda.Stream()
    host = np.arange(N, dtype=np.float32)
    outside = ferrocuda.DeviceArray.from_numpy(host)  # the legacy default stream
    own = ferrocuda.DeviceArray.empty(N, "float32", stream=cap)
    doomed = ferrocuda.DeviceArray.empty(16, "float32", stream=cap)
    K.add(outside, outside, own, stream=cap, sync="off")
    cap.synchronize()
    g = t.cuda.CUDAGraph()
    with t.cuda.graph(g, stream=cap):
        with pytest.raises(NotImplementedError, match="allocate a DeviceArray"):
            ferrocuda.DeviceArray.empty(16, "float32", stream=cap)
        with pytest.raises(NotImplementedError, match="not part of that capture"):
            t.from_dlpack(outside)  # torch asks for the capture stream
        with pytest.raises(NotImplementedError, match="not part of that capture"):
            K.add(outside, outside, own, stream=cap, sync="default")
        view = t.from_dlpack(own)  # the array's own stream: nothing to order
        K.add(outside, outside, own, stream=cap, sync="off")
        view.mul_(3.0)
        del doomed
        assert t.cuda.is_current_stream_capturing()
    g.replay()
    t.cuda.synchronize()
    np.testing.assert_array_equal(own.to_numpy(), 6 * host)


# ---- host-blocking calls next to a global-mode capture ---------------------------------------


def test_host_syncs_elsewhere_leave_a_global_capture_valid(
    torch: Any, cupy: Any, rng: np.random.Generator
) -> None:
    """While this thread captures in torch's default ``global`` mode, ferrocuda work on
    streams outside the capture — a ``default``-mode host synchronization of a producer stream,
    ``ferrocuda.synchronize``, DLPack capsules polled for release — runs on this thread and on
    another one without invalidating the capture (those calls run in the relaxed capture
    mode)."""
    t, cp = torch, cupy
    na, nb = ints(rng), ints(rng)
    a, b = t.from_numpy(na).cuda(), t.from_numpy(nb).cuda()
    o1, o2 = t.full((N,), NAN, device="cuda"), t.full((N,), NAN, device="cuda")
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    x, y = cp.asarray(ints(rng)), cp.asarray(ints(rng))
    outs = [cp.full(N, NAN, cp.float32) for _ in range(2)]
    dev = ferrocuda.DeviceArray.from_numpy(cp.asnumpy(x), stream=s1)
    cp.cuda.Device().synchronize()

    def unrelated_work(out: Any) -> None:
        for _ in range(3):
            K.add(
                WithStream(x, s1.ptr),
                WithStream(y, s1.ptr),
                WithStream(out, s2.ptr),
                stream=s2.ptr,
                sync="default",
            )  # host-synchronizes s1
            K.add(
                DLPackOnly(dev),
                WithStream(y, s2.ptr),
                WithStream(out, s2.ptr),
                stream=s2.ptr,
                sync="default",
            )  # a capsule held with a fence
            ferrocuda.synchronize(s2.ptr)  # polls the fence, synchronizes s2
        ferrocuda._ferrocuda._pending_releases()

    unrelated_work(outs[0])  # warm-up, outside the capture
    started, finished = threading.Event(), threading.Event()
    errors: list = []

    def other_thread() -> None:
        started.wait(timeout=60)
        try:
            unrelated_work(outs[1])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finished.set()

    worker = threading.Thread(target=other_thread)
    worker.start()
    g = t.cuda.CUDAGraph()
    with t.cuda.graph(g):  # capture_error_mode="global"
        K.add(a, b, o1)
        unrelated_work(outs[0])  # this thread, outside its own capture
        started.set()
        assert finished.wait(timeout=120), "the other thread did not finish"
        K.add(o1, b, o2)
    worker.join()
    assert not errors, errors
    g.replay()
    t.cuda.synchronize()
    np.testing.assert_array_equal(o2.cpu().numpy(), na + 2 * nb)
    want = cp.asnumpy(x) + cp.asnumpy(y)
    for out in outs:
        np.testing.assert_array_equal(cp.asnumpy(out), want)


# ---- the first launch of a process inside a capture -----------------------------------------

_TORCH_FIRST = """
import torch, ferrocuda
a = torch.arange(4096, dtype=torch.float32, device="cuda")
out = torch.full_like(a, float("nan"))
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):  # global mode; ferrocuda loads its context and module here
    ferrocuda.kernels.add(a, a, out)
    ferrocuda.kernels.sum(a, out[:1])
g.replay()
torch.cuda.synchronize()
assert torch.equal(out[1:], 2 * a[1:]) and float(out[0]) == float(a.sum()), out
print("ok")
"""

_CUPY_BLOCKING_FIRST = """
import cupy as cp, ferrocuda
a = cp.arange(4096, dtype=cp.float32)
out = cp.full_like(a, cp.nan)
cp.cuda.Device().synchronize()
s = cp.cuda.Stream()  # blocking: the legacy stream is unusable during its capture
with s:
    s.begin_capture(cp.cuda.runtime.streamCaptureModeGlobal)
    ferrocuda.kernels.add(a, a, out)
    g = s.end_capture()
g.launch(stream=s)
s.synchronize()
assert bool((out == 2 * a).all())
print("ok")
"""


@pytest.mark.parametrize("env_mode", ["1", "event", "0"])
@pytest.mark.parametrize("script", ["torch", "cupy_blocking"])
def test_first_launch_of_a_process_inside_a_capture(
    request: Any, script: str, env_mode: str
) -> None:
    """A fresh process whose first ferrocuda launch is inside a capture: the primary context,
    the module, its trap record and (for ``sum``) the workspace pool are set up in the relaxed
    capture mode, the trap record's address written through a private non-blocking stream —
    in each process-wide sync mode (``FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC``)."""
    request.getfixturevalue("torch" if script == "torch" else "cupy")  # skips without it
    code = _TORCH_FIRST if script == "torch" else _CUPY_BLOCKING_FIRST
    env = dict(os.environ, FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC=env_mode)
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
