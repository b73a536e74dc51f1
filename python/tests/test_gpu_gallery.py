"""The gallery kernels (reductions, histogram, softmax, matmul, stencil, scans, activations)
against NumPy references, on CuPy, PyTorch, Numba, JAX and ferrocuda arrays (GPU).

Outputs are poisoned before every launch and every element is checked. Inputs: random
(seed printed by the ``rng`` fixture) and adversarial (NaN, ±inf, all values in one histogram
bin or on bin edges, K = 1 and K = 0 products, 1×1 stencils, empty, odd and non-power-of-two
sizes). Tolerances are stated next to each check with their reason.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ferrocuda
from backends import BACKENDS, Backend, make_backend
from scale import libraries

pytestmark = pytest.mark.gpu

K = ferrocuda.kernels
SIZES = [0, 1, 7, 255, 1000, 4097, (1 << 20) + 3]
EPS = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}


@pytest.fixture(params=libraries(list(BACKENDS)))
def backend(request: Any) -> Backend:
    return make_backend(request, request.param)


@pytest.fixture
def out_backend(request: Any, backend: Backend) -> Backend:
    """Outputs live in the input's library when it is writable, else in ferrocuda arrays."""
    return backend if backend.writable else make_backend(request, "ferrocuda")


@pytest.fixture
def cp(request: Any) -> Any:
    return request.getfixturevalue("cupy")


def run(
    b_in: Backend,
    b_out: Backend,
    f: Any,
    ins: tuple[np.ndarray, ...],
    outs: tuple[np.ndarray, ...],
    *scalars: Any,
    **kw: Any,
) -> tuple[np.ndarray, ...]:
    """Launches ``f(*ins, *outs, *scalars)`` with inputs from ``b_in`` and poisoned outputs
    from ``b_out``; returns the outputs as NumPy arrays."""
    din = [b_in.asarray(x) for x in ins]
    dout = [b_out.poisoned(o.shape, o.dtype) for o in outs]
    f(*[b_in.arg(d) for d in din], *[b_out.arg(d) for d in dout], *scalars, **kw)
    b_out.synchronize()
    return tuple(b_out.to_numpy(d) for d in dout)


def random(rng: np.random.Generator, shape: Any, dtype: str) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt == np.uint8:
        return rng.integers(0, 256, size=shape, dtype=dt)
    return rng.integers(-(2**30), 2**30, size=shape, dtype=dt)


def same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bitwise-equal values (NaN equal to NaN)."""
    assert got.shape == want.shape, what
    ok = (got == want) | (np.isnan(got) & np.isnan(want)) if got.dtype.kind == "f" else got == want
    assert ok.all(), (
        f"{what}: {int((~ok).sum())} of {ok.size} differ, first {np.argwhere(~ok)[:5].tolist()}"
    )


def close(got: np.ndarray, want: np.ndarray, tol: Any, what: str) -> None:
    """|got − want| <= tol elementwise (tol broadcast), NaN exactly where ``want`` has NaN."""
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(want64)
    assert (np.isnan(got64) == nan).all(), f"{what}: NaN positions differ"
    err = np.abs(got64 - want64)
    err[nan] = 0
    inf = np.isinf(want64)
    assert (got64[inf] == want64[inf]).all(), f"{what}: infinities differ"
    err[inf] = 0
    bad = err > tol
    if bad.any():
        # The worst element relative to its own tolerance (not the largest absolute error).
        t = np.broadcast_to(tol, err.shape)
        at = np.unravel_index(int(np.where(bad, err / t, 0.0).argmax()), err.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} beyond tolerance; worst at {at}: got "
            f"{got64[at]!r}, want {want64[at]!r}, error {err[at]!r} > tolerance {t[at]!r}"
        )


# ---- sum, min, max ------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_sum_min_max(
    backend: Backend, out_backend: Backend, rng: np.random.Generator, n: int, dtype: str
) -> None:
    x = random(rng, n, dtype)
    acc = np.int64 if dtype == "int32" else np.dtype(dtype)
    (s,) = run(backend, out_backend, K.sum, (x,), (np.zeros(1, acc),))
    if np.dtype(dtype).kind == "f":
        # Each result is a tree of sums over ≤ 64 levels (per-thread chains of a few
        # elements, block trees, the partials' tree): |error| ≤ 64·ε·Σ|x|.
        close(
            s,
            np.array([math.fsum(x.astype(np.float64))]),
            64 * EPS[dtype] * np.abs(x.astype(np.float64)).sum() + 1e-300,
            "sum",
        )
        # Deterministic for a given size on one device.
        (s2,) = run(backend, out_backend, K.sum, (x,), (np.zeros(1, acc),))
        same(s2, s, "sum run twice")
    else:
        same(s, np.array([x.astype(np.int64).sum()], dtype=acc), "sum")
    if n == 0:
        with pytest.raises(ValueError, match="x"):
            K.min(backend.arg(backend.asarray(x)), out_backend.poisoned((1,), dtype))
        return
    (lo,) = run(backend, out_backend, K.min, (x,), (np.zeros(1, dtype),))
    (hi,) = run(backend, out_backend, K.max, (x,), (np.zeros(1, dtype),))
    same(lo, np.array([x.min()]), "min")
    same(hi, np.array([x.max()]), "max")


def test_workspaces_kept_per_stream(cp: Any, rng: np.random.Generator) -> None:
    """The reductions' and the scan's workspaces are kept per stream between launches: sizes
    that grow and shrink on one stream (the kept workspace grows: a stream-ordered free of
    the old one), more streams than the launcher keeps workspaces for (the others allocate
    each time), exact int32 sums each checked against NumPy into poisoned outputs."""
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(20)]
    sizes = [1, 1000, 3 << 20, 17, 5 << 20, 2, 1 << 16]
    host = {n: rng.integers(-1000, 1000, n, dtype=np.int32) for n in sizes}
    for s in streams:
        with s:
            for n in sizes:
                x = cp.asarray(host[n])
                out = cp.full(1, -(2**62), cp.int64)
                K.sum(x, out)
                cs = cp.full(n, -7, cp.int64)
                K.cumsum(x, cs)
                same(cp.asnumpy(out), np.array([host[n].astype(np.int64).sum()]), f"sum of {n}")
                same(cp.asnumpy(cs), np.cumsum(host[n].astype(np.int64)), f"cumsum of {n}")


def test_workspaces_threads_on_one_stream(cp: Any, rng: np.random.Generator) -> None:
    """Host threads launching reductions on one stream at once: each launch finds the
    ticket counter at zero (the stream orders the launches; each one's last block resets the
    counter, and a launch that saw another's count would never finish its sum and leave the
    poisoned output); every result checked after the stream drains."""
    import threading

    stream = cp.cuda.Stream(non_blocking=True)
    n_threads, per_thread = 4, 60
    data = [rng.integers(-1000, 1000, 50_000 + 997 * t, dtype=np.int32) for t in range(n_threads)]
    errors: list = []
    results: list = [None] * n_threads

    def work(t: int) -> None:
        try:
            with stream:
                x = cp.asarray(data[t])
                outs = [cp.full(1, -(2**62), cp.int64) for _ in range(per_thread)]
                for o in outs:
                    K.sum(x, o)
                results[t] = outs
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    stream.synchronize()
    for t in range(n_threads):
        want = data[t].astype(np.int64).sum()
        got = np.array([int(o[0]) for o in results[t]])
        assert (got == want).all(), f"thread {t}: {int((got != want).sum())} of {per_thread} wrong"


def test_workspaces_captured_and_kept(cp: Any, rng: np.random.Generator) -> None:
    """A sum captured in a graph owns its workspace (a graph memory node): replays stay right
    while direct launches on the capturing stream grow and reuse that stream's kept one."""
    stream = cp.cuda.Stream(non_blocking=True)
    small = rng.integers(-1000, 1000, 4096, dtype=np.int32)
    big = rng.integers(-1000, 1000, 6 << 20, dtype=np.int32)
    with stream:
        xs, xb = cp.asarray(small), cp.asarray(big)
        out_g, out_d = cp.full(1, -1, cp.int64), cp.full(1, -1, cp.int64)
        K.sum(xs, out_d)  # a kept workspace exists before the capture
        stream.begin_capture()
        K.sum(xb, out_g)
        graph = stream.end_capture()
        for i in range(5):
            out_g.fill(-1)
            out_d.fill(-1)
            graph.launch()
            K.sum(xb if i % 2 else xs, out_d)  # grows the kept workspace at i = 1
            stream.synchronize()
            same(cp.asnumpy(out_g), np.array([big.astype(np.int64).sum()]), f"replay {i}")
            want = (big if i % 2 else small).astype(np.int64).sum()
            same(cp.asnumpy(out_d), np.array([want]), f"direct {i}")


def test_reduction_workspaces_persist_between_launches(cp: Any, rng: np.random.Generator) -> None:
    """The reductions' ticket and partials persist between launches on a stream (no
    zero-fill: each launch's last block sets the ticket back to zero), and so do the
    cooperative normalize's grid barrier and partials (each barrier leaves the counter's low
    bits as it found them; a second launch in a row starts with its top bit set):
    back-to-back launches with no synchronization between them — the same kernel with grids
    of 1, 3, 1000 (normalize: at most 64) and the automatic one (the partials shrink and grow
    under the ticket and the barrier), sum, min, max and normalize of four dtypes taking the
    stream's workspace from each other, a scan (another persistent kernel) and a graph replay
    in between — each into a poisoned output, every result checked after the stream drains
    (integers exact; float sums within 64·ε·Σ|x|, min and max exact, normalize within its
    additions' depth)."""
    stream = cp.cuda.Stream(non_blocking=True)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    sizes = [1 << 20, 1, 100_003, 5 << 20, 7, 1 << 20, 4097]
    grids = [None, 1, 3, 1000, None, 64, None]
    checks: list = []

    def launch(f: Any, name: str, host: np.ndarray, g: Any, acc: Any, what: str) -> None:
        x = cp.asarray(host)
        dt = np.dtype(acc)
        out = cp.full(1, cp.nan if dt.kind == "f" else np.iinfo(dt).min + 3, dt)
        if g is None:
            f(x, out)
        else:
            f(x, out, grid=g)
        checks.append((name, host, out, what))

    with stream:
        xg_host = rng.integers(-1000, 1000, 3 << 20, dtype=np.int32)
        xg = cp.asarray(xg_host)
        out_g = cp.full(1, -1, cp.int64)
        stream.begin_capture()
        K.sum(xg, out_g)
        graph = stream.end_capture()
        for r in range(2):
            for i, (n, g) in enumerate(zip(sizes, grids, strict=True)):
                for dtype in ("float32", "int32", "float64", "int64"):
                    host = random(rng, n, dtype)
                    acc = np.int64 if dtype == "int32" else np.dtype(dtype)
                    what = (r, n, g, dtype)
                    # The same kernel twice in a row: the second finds the first's reset.
                    launch(K.sum, "sum", host, g, acc, (*what, "sum"))
                    launch(K.sum, "sum", host, None if g else 5, acc, (*what, "sum again"))
                    launch(K.min, "min", host, g, dtype, (*what, "min"))
                    launch(K.max, "max", host, g, dtype, (*what, "max"))
                    if dtype in ("float32", "float64"):
                        # Twice in a row: the second starts where the first left the barrier.
                        pos = (rng.random(n) + 0.5).astype(dtype)
                        for again in ("normalize", "normalize again"):
                            out = cp.full(n, cp.nan, dtype)
                            if g is None:
                                # One resident wave: at least a warp per SM.
                                K.normalize(cp.asarray(pos), out)
                                depth = 66 + -(-n // (4 * 32 * sms))
                            else:
                                K.normalize(cp.asarray(pos), out, grid=min(g, 64), block=256)
                                depth = 66 + -(-n // (4 * 256 * min(g, 64)))
                            checks.append(("normalize", pos, out, (*what, again, depth)))
                if i == 2:
                    cs = cp.full(4097, -7, cp.int64)
                    K.cumsum(cp.asarray(xg_host[:4097]), cs)
                    checks.append(("cumsum", xg_host[:4097], cs, (r, "cumsum")))
                if i == 4:
                    out_g.fill(-1)
                    graph.launch()
                    launch(K.sum, "sum", xg_host, None, np.int64, (r, "after the replay"))
    stream.synchronize()
    same(cp.asnumpy(out_g), np.array([xg_host.astype(np.int64).sum()]), "replay")
    for name, host, out, what in checks:
        got = cp.asnumpy(out)
        if name == "cumsum":
            same(got, np.cumsum(host.astype(np.int64)), f"{what}")
        elif name == "normalize":
            want = host.astype(np.float64) / math.fsum(host.astype(np.float64))
            close(got, want, what[-1] * EPS[host.dtype.name] * want, f"{what}")
        elif name in ("min", "max"):
            same(got, np.array([getattr(host, name)()]), f"{what}")
        elif host.dtype.kind == "f":
            exact = math.fsum(host.astype(np.float64))
            tol = 64 * EPS[host.dtype.name] * np.abs(host.astype(np.float64)).sum() + 1e-300
            close(got, np.array([exact]), tol, f"{what}")
        else:
            same(got, np.array([host.astype(np.int64).sum()]), f"{what}")


# ---- normalize: one cooperative launch against sum + div_by --------------------------------


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normalize(
    backend: Backend, out_backend: Backend, rng: np.random.Generator, n: int, dtype: str
) -> None:
    """``normalize`` (one cooperative launch: partial sums, a grid-wide barrier, the
    division) and its two-launch version ``sum`` + ``div_by``, against NumPy's ``x / x.sum()``
    computed exactly."""
    x = rng.random(n).astype(dtype) + np.asarray(0.5, dtype)  # positive: Σ|x| = Σx
    (one,) = run(backend, out_backend, K.normalize, (x,), (np.zeros(n, dtype),))
    (s,) = run(backend, out_backend, K.sum, (x,), (np.zeros(1, dtype),))
    (two,) = run(backend, out_backend, K.div_by, (x, s), (np.zeros(n, dtype),))
    if n == 0:
        assert one.shape == two.shape == (0,)
        return
    want = x.astype(np.float64) / math.fsum(x.astype(np.float64))
    # The sum is a tree of at most 64 levels (|error| ≤ 64·ε·Σx), the division rounds once.
    tol = 66 * EPS[dtype] * np.abs(want)
    close(one, want, tol, "normalize")
    close(two, want, tol, "sum + div_by")
    # Bitwise reproducible on one device.
    (again,) = run(backend, out_backend, K.normalize, (x,), (np.zeros(n, dtype),))
    same(again, one, "normalize run twice")


def test_normalize_special_values_and_grids(cp: Any, rng: np.random.Generator) -> None:
    """A zero sum gives ±inf and NaN, a NaN gives NaN everywhere (NumPy's ``x / x.sum()``);
    a caller's grid up to one resident wave works; a larger one is a ValueError naming the
    kernel and the wave, raised before anything runs."""
    b = make_backend_cupy(cp)
    x = np.array([1.0, -1.0, 0.0, 2.0, -2.0], np.float32)
    (got,) = run(b, b, K.normalize, (x,), (np.zeros(5, np.float32),))
    with np.errstate(divide="ignore", invalid="ignore"):
        same(got, x / np.float32(0.0), "zero sum")
    x = np.array([1.0, np.nan, 3.0], np.float64)
    (got,) = run(b, b, K.normalize, (x,), (np.zeros(3),))
    assert np.isnan(got).all()
    x = rng.random(50_000).astype(np.float32) + np.float32(0.5)
    want = x.astype(np.float64) / math.fsum(x.astype(np.float64))
    dx = cp.asarray(x)
    for grid, block in [(1, 256), ((3, 2), 96), (8, 1024)]:
        out = cp.full(x.size, cp.nan, cp.float32)
        K.normalize_f32[grid, block](dx, out)
        # A small grid: each thread adds a longer chain (four accumulators over its share).
        threads = math.prod(grid if isinstance(grid, tuple) else (grid,)) * block
        depth = 66 + -(-x.size // (4 * threads))
        close(cp.asnumpy(out), want, depth * EPS["float32"] * want, f"grid {grid}")
    out = cp.full(x.size, cp.nan, cp.float32)
    with pytest.raises(ValueError, match=r"normalize_f32.*cooperative.*at most \d+"):
        K.normalize_f32[1 << 20, 256](dx, out)
    cp.cuda.get_current_stream().synchronize()
    assert bool(cp.isnan(out).all()), "a refused launch wrote"


def test_normalize_bound_and_captured(cp: Any, rng: np.random.Generator) -> None:
    """The cooperative launch bound once and launched again, and captured in a CUDA graph
    (its grid barrier a graph-owned workspace, zero-filled per replay)."""
    stream = cp.cuda.Stream(non_blocking=True)
    x = rng.random(100_000).astype(np.float32) + np.float32(0.5)
    want = x.astype(np.float64) / math.fsum(x.astype(np.float64))
    with stream:
        dx = cp.asarray(x)
        out = cp.full(x.size, cp.nan, cp.float32)
        bound = K.normalize.bind(dx, out)
        for i in range(2):
            out.fill(cp.nan)
            bound()
            stream.synchronize()
            close(cp.asnumpy(out), want, 66 * EPS["float32"] * want, f"bound launch {i}")
        stream.begin_capture()
        K.normalize(dx, out)
        graph = stream.end_capture()
        for i in range(3):
            out.fill(cp.nan)
            graph.launch()
            stream.synchronize()
            close(cp.asnumpy(out), want, 66 * EPS["float32"] * want, f"graph replay {i}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reductions_special_values(cp: Any, dtype: str) -> None:
    cases = {
        "nan": np.array([1.0, np.nan, -3.0] * 1000, dtype),
        "inf": np.array([1.0, np.inf, -3.0] * 1000, dtype),
        "inf-inf": np.array([np.inf, -np.inf] + [1.0] * 5000, dtype),
        "-inf": np.full(3001, -np.inf, dtype),
        "one value": np.full(10007, 0.5, dtype),
    }
    b = make_backend_cupy(cp)
    for name, x in cases.items():
        for fam, ref in ((K.sum, np.sum), (K.min, np.min), (K.max, np.max)):
            (got,) = run(b, b, fam, (x,), (np.zeros(1, dtype),))
            with np.errstate(invalid="ignore"):
                want = np.array([ref(x.astype(np.float64))], dtype)
            close(
                got,
                want,
                1e-6 * max(1.0, float(np.abs(x[np.isfinite(x)]).sum())),
                f"{fam.name} of {name}",
            )


def make_backend_cupy(cp: Any) -> Backend:
    return BACKENDS["cupy"][1](cp)


def test_reduction_requirements(cp: Any) -> None:
    x = cp.ones(10, cp.float32)
    with pytest.raises(ValueError, match="out"):
        K.sum(x, cp.zeros(2, cp.float32))
    with pytest.raises(TypeError):
        K.sum(x, cp.zeros(1, cp.float64))


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (1, 1), (7, 13), (100, 4097), (3, 9000)])
def test_sum_rows(
    backend: Backend, out_backend: Backend, rng: np.random.Generator, shape: tuple[int, int]
) -> None:
    x = random(rng, shape, "float32")
    (got,) = run(backend, out_backend, K.sum_rows, (x,), (np.zeros(shape[0], np.float32),))
    # Four accumulators per thread, then a shuffle or block tree: ≤ (cols/32 + 16)·ε·Σ|x|.
    tol = (shape[1] / 32 + 16) * EPS["float32"] * np.abs(x.astype(np.float64)).sum(axis=1) + 1e-30
    close(got, x.astype(np.float64).sum(axis=1), tol, "sum_rows")


def test_sum_rows_views(cp: Any, rng: np.random.Generator) -> None:
    base = cp.asarray(random(rng, (64, 300), "float64"))
    for name, v in (("transposed", base.T), ("step", base[::3, 1::2]), ("reversed", base[::-1])):
        out = cp.full(v.shape[0], cp.nan)
        K.sum_rows(v, out)
        want = cp.asnumpy(v).sum(axis=1)
        close(cp.asnumpy(out), want, 1e-12 * np.abs(cp.asnumpy(v)).sum(axis=1) + 1e-300, name)


# ---- histogram ----------------------------------------------------------------------------


def np_hist(x: np.ndarray, nbins: int, lo: float, hi: float) -> np.ndarray:
    return np.histogram(x, bins=nbins, range=(lo, hi))[0].astype(np.int64)


HIST_CASES = [
    ("uint8", 256, 0.0, 256.0),
    ("uint8", 10, 3.5, 200.25),
    ("uint8", 300, 0.0, 255.0),
    ("int32", 1000, -1000.0, 1000.0),
    ("int32", 9000, -(2.0**30), 2.0**30),
    ("float32", 7, -2.0, 2.0),
    ("float32", 256, 0.1, 0.7),
    ("float64", 33, -3.0, 3.0),
]


@pytest.mark.parametrize("n", [0, 1, 1000, (1 << 20) + 5])
@pytest.mark.parametrize("dtype,nbins,lo,hi", HIST_CASES)
def test_histogram(
    backend: Backend,
    out_backend: Backend,
    rng: np.random.Generator,
    n: int,
    dtype: str,
    nbins: int,
    lo: float,
    hi: float,
) -> None:
    x = random(rng, n, dtype)
    if dtype == "int32":
        x = (x // 2**19).astype(np.int32)  # mostly inside the range
    (got,) = run(backend, out_backend, K.histogram, (x,), (np.zeros(nbins, np.int64),), lo, hi)
    same(got, np_hist(x, nbins, lo, hi), "histogram")


def test_histogram_edges_and_special_values(cp: Any, rng: np.random.Generator) -> None:
    b = make_backend_cupy(cp)
    # Every value in one bin (the privatized counters' worst case), and on edges.
    for x, nb, lo, hi in [
        (np.full(1 << 20, 77, np.uint8), 256, 0.0, 256.0),
        (np.full(100003, 255, np.uint8), 255, 0.0, 255.0),  # hi itself: the last bin
        (np.arange(256, dtype=np.uint8), 256, 0.0, 255.0),
        (np.linspace(-1, 1, 10001).astype(np.float32), 20, -1.0, 1.0),  # many exact edges
        (
            np.array(
                [0.1, 0.2, 0.3, 0.7, 0.70000005, np.nextafter(np.float32(0.7), 0)] * 999, np.float32
            ),
            6,
            0.1,
            0.7,
        ),
        (
            np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, -1.0, 2.0, -2.0] * 1111, np.float32),
            4,
            -1.0,
            1.0,
        ),
        (np.array([np.nan, 1e308, -1e308, 0.5], np.float64), 3, 0.0, 1.0),
        (np.array([-5, 5, 0, 4, -4, 7], np.int32), 5, -5.0, 5.0),
    ]:
        nbins = nb
        (got,) = run(b, b, K.histogram, (x,), (np.zeros(nbins, np.int64),), lo, hi)
        same(
            got, np_hist(x, nbins, lo, hi), f"histogram of {x[:6]} ({nbins} bins over [{lo}, {hi}])"
        )
    # Random float32 values near many non-representable edges.
    x = (rng.random(1 << 20) * 0.6 + 0.1).astype(np.float32)
    (got,) = run(b, b, K.histogram, (x,), (np.zeros(997, np.int64),), 0.1, 0.7)
    same(got, np_hist(x, 997, 0.1, 0.7), "histogram near edges")


@pytest.mark.parametrize("block", [None, 256, 96, 64, 32])
@pytest.mark.parametrize("grid", [None, 1, 7, 5000])
def test_histogram_u8_schedules(cp: Any, rng: np.random.Generator, block: Any, grid: Any) -> None:
    """uint8 data on any block and grid: one block walking the whole array, more blocks than
    16-byte vectors, blocks that are not a multiple of the counters' replicas; one value
    everywhere (every increment on one counter), random bytes, views that start and end off the
    16-byte vectors, 256 bins (no table) and 10 (through the table)."""
    kw = {k: v for k, v in (("block", block), ("grid", grid)) if v is not None}
    n = (1 << 20) + 37
    base = cp.asarray(rng.integers(0, 256, n, dtype=np.uint8))
    same_value = cp.full(n, 200, cp.uint8)
    for x in (base, base[3:-5], same_value, same_value[1:-1], base[:17], base[5:6]):
        for nbins, lo, hi in ((256, 0.0, 256.0), (10, 3.5, 200.25)):
            bins = cp.full(nbins, -1, cp.int64)  # poisoned: the launcher zero-fills
            K.histogram(x, bins, lo, hi, **kw)
            same(
                cp.asnumpy(bins),
                np_hist(cp.asnumpy(x), nbins, lo, hi),
                f"uint8 {x.size} values {kw} {nbins} bins",
            )


def test_histogram_bad_arguments(cp: Any) -> None:
    x = cp.arange(10, dtype=cp.uint8)
    with pytest.raises(ValueError, match="bins"):
        K.histogram(x, cp.zeros(0, cp.int64), 0.0, 1.0)
    with pytest.raises(ValueError, match="lo"):
        K.histogram(x, cp.zeros(4, cp.int64), 1.0, 1.0)
    with pytest.raises(ValueError, match="lo"):
        K.histogram(x, cp.zeros(4, cp.int64), 2.0, 1.0)
    with pytest.raises(ValueError, match="hi"):
        K.histogram(x, cp.zeros(4, cp.int64), 0.0, math.inf)
    with pytest.raises(ValueError, match="bins"):
        K.histogram(x, cp.zeros(8, cp.int64)[::2], 0.0, 1.0)


# ---- softmax ------------------------------------------------------------------------------


def np_softmax(x: np.ndarray, log: bool) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m = x.max(axis=1, keepdims=True) if x.shape[1] else np.zeros((x.shape[0], 1))
        e = np.exp(x - m)
        s = e.sum(axis=1, keepdims=True)
        return (x - m - np.log(s)) if log else e / s


SOFTMAX_SHAPES = [
    (0, 4),
    (3, 0),
    (1, 1),
    (5, 7),
    (33, 1024),
    (7, 4096),
    (9, 100),
    (3, 5000),
    (2, 70001),
]


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES)
def test_softmax(
    backend: Backend,
    out_backend: Backend,
    rng: np.random.Generator,
    shape: tuple[int, int],
    dtype: str,
    log: bool,
) -> None:
    if dtype == "float16" and backend.name not in ("cupy", "torch"):
        pytest.skip("float16 arrays from CuPy and torch only")
    x = (random(rng, shape, "float64") * 4).astype(dtype)
    f = K.log_softmax if log else K.softmax
    (got,) = run(backend, out_backend, f, (x,), (np.zeros(shape, dtype),))
    want = np_softmax(x, log)
    close(got, want, softmax_tol(x, want, log, dtype), f"{f.name} {dtype} {shape}")


def softmax_tol(x: np.ndarray, want: np.ndarray, log: bool, dtype: str) -> np.ndarray:
    """The error bound of the kernel's arithmetic in its computing type (f32 for float16).

    softmax: ``v − m`` rounds (½ε relative, which ``exp`` turns into ½ε·|v − m| relative),
    libdevice ``exp`` (≤ 2 ulp), the row sum (≤ log2(n)·ε relative with the tree of the block
    reduction), the reciprocal and the product (½ ulp each). log-softmax: ``v − (m + ln s)``,
    absolute errors of a few ulps of |v|, |m| and ln s. float16 adds the final rounding: ½ ulp,
    and half the subnormal spacing (2^-25) below 2^-14, where most of a wide row's values lie.
    """
    e = EPS["float32" if dtype == "float16" else dtype]
    x = x.astype(np.float64)
    n = max(x.shape[1], 2)
    with np.errstate(invalid="ignore", over="ignore"):
        m = x.max(axis=1, keepdims=True) if x.shape[1] else np.zeros((x.shape[0], 1))
        if log:
            s = np.log(np.exp(x - m).sum(axis=1, keepdims=True))
            tol = 8 * e * (np.abs(x) + np.abs(m) + np.abs(s) + np.abs(want) + 1.0)
        else:
            tol = e * (np.abs(x - m) + np.log2(n) + 8) * np.abs(want)
    if dtype == "float16":
        tol = tol + EPS["float16"] * np.abs(want) + 2.0**-25
    return np.nan_to_num(tol, nan=0.0) + 1e-300


@pytest.mark.parametrize("log", [False, True])
def test_softmax_special_values_and_views(cp: Any, log: bool) -> None:
    f = K.log_softmax if log else K.softmax
    x = np.array(
        [
            [1.0, 2.0, 3.0, 4.0] * 8,
            [1.0, np.nan, 3.0, 4.0] * 8,
            [1.0, np.inf, 3.0, 4.0] * 8,
            [-np.inf] * 32,
            [-np.inf, 0.0, -np.inf, 1.0] * 8,
            [1000.0, -1000.0, 999.0, 0.0] * 8,
        ],
        np.float32,
    )
    for cols in (32, 31):  # the warp schedule, then the streaming one (unaligned rows)
        xs = np.ascontiguousarray(x[:, :cols])
        out = cp.full(xs.shape, cp.nan, cp.float32)
        f(cp.asarray(xs), out)
        close(
            cp.asnumpy(out),
            np_softmax(xs, log).astype(np.float32),
            1e-5,
            f"special rows, {cols} columns",
        )
    # Transposed and stepped views, and in place.
    base = cp.asarray(np.random.default_rng(1).standard_normal((300, 70)).astype(np.float32))
    for v in (base.T, base[::2, ::3]):
        out = cp.full(v.shape, cp.nan, cp.float32)
        f(v, out)
        close(cp.asnumpy(out), np_softmax(cp.asnumpy(v), log), 1e-5, "view")
    y = base.copy()
    f(y, y)
    close(cp.asnumpy(y), np_softmax(cp.asnumpy(base), log), 1e-5, "in place")


@pytest.mark.parametrize(
    "shape, block, grid",
    [
        ((32768, 1024), None, 4096),  # a warp per row: 8 rows per 256-thread block
        ((32768, 1024), 128, 8192),
        ((1001, 7), None, 126),
        ((1001, 31), None, 126),  # unaligned rows stream (block schedule), 8 rows per block
        ((1001, 7), 96, 334),
        ((1001, 7), 48, 1001),  # 48 threads: not whole warps, a block per row
        ((40, 4096), None, 40),  # longer rows: a block each
        ((3, 70001), None, 3),
        ((1, 5), None, 1),
    ],
)
def test_softmax_grid_follows_rows(
    cp: Any, rng: np.random.Generator, shape: tuple[int, int], block: Any, grid: int
) -> None:
    """The automatic grid (``grid = "rows"``) gives every row its warp or block, whatever the
    block; the results hold for each schedule it lands on."""
    x = cp.asarray((random(rng, shape, "float64") * 4).astype(np.float32))
    out = cp.full(shape, cp.nan, cp.float32)
    kw = {} if block is None else {"block": block}
    bound = K.softmax.bind(x, out, **kw)
    assert bound.grid == (grid, 1, 1)
    bound()
    want = np_softmax(cp.asnumpy(x), False)
    close(
        cp.asnumpy(out),
        want,
        softmax_tol(cp.asnumpy(x), want, False, "float32"),
        f"softmax {shape} block {block}",
    )


# ---- matmul -------------------------------------------------------------------------------


MATMUL_SHAPES = [
    (1, 1, 1),
    (127, 1, 129),
    (129, 7, 130),
    (128, 128, 128),
    (256, 300, 200),
    (3, 0, 5),
    (0, 4, 3),
    (513, 33, 257),
    (129, 9, 513),
]


def matmul_tol(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float
) -> np.ndarray:
    """K + 2 roundings of f32 fused multiply-adds: |error| ≤ (K + 2)·ε·(|α|·|A||B| + |β||C|)."""
    k = a.shape[1]
    mag = abs(alpha) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    if beta != 0:
        mag = mag + abs(beta) * np.abs(c.astype(np.float64))
    return (k + 2) * EPS["float32"] * mag + 1e-30


@pytest.mark.parametrize("shape", MATMUL_SHAPES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-0.5, 2.0)])
def test_matmul(
    backend: Backend,
    out_backend: Backend,
    rng: np.random.Generator,
    shape: tuple[int, int, int],
    alpha: float,
    beta: float,
) -> None:
    m, k, n = shape
    a, b = random(rng, (m, k), "float32"), random(rng, (k, n), "float32")
    c0 = random(rng, (m, n), "float32")
    dc = out_backend.asarray(c0 if beta != 0 else np.full((m, n), np.nan, np.float32))
    K.matmul(
        backend.arg(backend.asarray(a)),
        backend.arg(backend.asarray(b)),
        out_backend.arg(dc),
        alpha,
        beta,
    )
    out_backend.synchronize()
    got = out_backend.to_numpy(dc)
    want = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + (
        beta * c0.astype(np.float64) if beta != 0 else 0
    )
    close(got, want, matmul_tol(a, b, c0, alpha, beta), f"matmul {shape} α={alpha} β={beta}")


def test_matmul_layouts_and_fallback(cp: Any, rng: np.random.Generator) -> None:
    A = random(rng, (300, 260), "float32")
    B = random(rng, (260, 190), "float32")
    col = lambda x: cp.asarray(np.ascontiguousarray(x.T)).T  # a column-major view  # noqa: E731
    views = {
        "row-major": (cp.asarray(A), cp.asarray(B)),
        "A column-major": (col(A), cp.asarray(B)),
        "B column-major": (cp.asarray(A), col(B)),
        "both column-major": (col(A), col(B)),
    }
    # 256-thread blocks: 128×256 tiles, or two 128-thread groups of 128×128 tiles each (both
    # operands contiguous along k); 128-thread blocks: one such group; other blocks: the
    # simple loop. Grids of fewer blocks than tiles (each block walks several; one group of a
    # block past the last tile) and of more.
    for name, (da, db) in views.items():
        for block, grid in [
            (None, None),
            (None, 1),
            (None, 3),
            (None, 40),
            (128, None),
            (128, 3),
            (64, None),
            (32, 7),
        ]:
            c = cp.full((300, 190), cp.nan, cp.float32)
            K.matmul(da, db, c, 1.0, 0.0, block=block, grid=grid)
            close(
                cp.asnumpy(c),
                A.astype(np.float64) @ B.astype(np.float64),
                matmul_tol(A, B, A[:, :1], 1.0, 0.0),
                f"{name}, block {block}, grid {grid}",
            )
    # An odd count of 128×128 tiles (3): the last step of a block's two groups has one past
    # the last tile, and a 1-row, 1-column and K = 1 corner.
    for m, k, n in [(300, 260, 100), (1, 1, 1), (129, 1, 3)]:
        a, b = random(rng, (m, k), "float32"), random(rng, (n, k), "float32").T
        for block in (None, 128):
            c = cp.full((m, n), cp.nan, cp.float32)
            K.matmul(cp.asarray(a), col(b), c, 1.0, 0.0, block=block)
            close(
                cp.asnumpy(c),
                a.astype(np.float64) @ b.astype(np.float64),
                matmul_tol(a, b, a[:, :1], 1.0, 0.0),
                f"x @ w.T {m}×{k}×{n}, block {block}",
            )
    # Stepped views (element loads), an offset (misaligned) view, a strided output.
    big_a = cp.asarray(random(rng, (601, 521), "float32"))
    big_b = cp.asarray(random(rng, (521, 380), "float32"))
    a, b = big_a[1::2, ::2], big_b[::2, 1::2]
    c_base = cp.full((300, 400), cp.nan, cp.float32)
    c = c_base[:, 1:191]
    K.matmul(a, b, c, 2.0, 0.0)
    an, bn = cp.asnumpy(a), cp.asnumpy(b)
    close(
        cp.asnumpy(c),
        2.0 * (an.astype(np.float64) @ bn.astype(np.float64)),
        matmul_tol(an, bn, an[:, :1], 2.0, 0.0),
        "views",
    )
    assert (
        np.isnan(cp.asnumpy(c_base[:, 0])).all() and np.isnan(cp.asnumpy(c_base[:, 191:])).all()
    ), "wrote outside the view"
    # A grid of fewer blocks than tiles (each block walks several), and of more.
    for grid in (1, 3, 40):
        c = cp.full((300, 600), cp.nan, cp.float32)
        B2 = random(rng, (260, 600), "float32")
        K.matmul(cp.asarray(A), cp.asarray(B2), c, 1.0, 0.0, grid=grid)
        close(
            cp.asnumpy(c),
            A.astype(np.float64) @ B2.astype(np.float64),
            matmul_tol(A, B2, A[:, :1], 1.0, 0.0),
            f"grid {grid}",
        )
    # Larger blocks are refused (max_threads = 256), as is less shared memory than the tiles'
    # (`shared_bytes`); c untouched.
    c = cp.full((300, 190), cp.nan, cp.float32)
    with pytest.raises(ValueError, match=r"needs 50688 bytes of dynamic shared memory"):
        K.matmul(cp.asarray(A), cp.asarray(B), c, 1.0, 0.0, shared_mem=50684)
    with pytest.raises(ValueError, match=r"compiled for at most 256"):
        K.matmul(cp.asarray(A), cp.asarray(B), c, 1.0, 0.0, block=512)
    assert np.isnan(cp.asnumpy(c)).all(), "a refused launch wrote c"


def test_matmul_bad_arguments(cp: Any) -> None:
    a, b = cp.ones((4, 3), cp.float32), cp.ones((5, 6), cp.float32)
    with pytest.raises(ValueError, match=r"argument `a`.*inner dimensions"):
        K.matmul(a, b, cp.zeros((4, 6), cp.float32), 1.0, 0.0)
    with pytest.raises(ValueError, match="c"):
        K.matmul(a, cp.ones((3, 6), cp.float32), cp.zeros((4, 5), cp.float32), 1.0, 0.0)
    sq = cp.ones((4, 4), cp.float32)
    with pytest.raises(ValueError, match=r"argument `c`.*c must not be a"):
        K.matmul(sq, cp.ones((4, 4), cp.float32), sq, 1.0, 0.0)


# ---- stencil5 -----------------------------------------------------------------------------


def np_stencil(x: np.ndarray) -> np.ndarray:
    """The zero-padded Laplacian, summed left to right in the element type."""
    p = np.pad(x, 1)
    return p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - x.dtype.type(4) * x


@pytest.mark.parametrize(
    "shape", [(0, 0), (1, 1), (1, 8), (5, 1), (3, 3), (67, 131), (130, 256), (257, 1024), (65, 136)]
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_stencil5(
    backend: Backend,
    out_backend: Backend,
    rng: np.random.Generator,
    shape: tuple[int, int],
    dtype: str,
) -> None:
    x = random(rng, shape, dtype)
    (got,) = run(backend, out_backend, K.stencil5, (x,), (np.zeros(shape, dtype),))
    same(got, np_stencil(x), f"stencil5 {shape}")


def test_stencil5_views(cp: Any, rng: np.random.Generator) -> None:
    base = cp.asarray(random(rng, (200, 300), "float32"))
    for name, v in (("transposed", base.T), ("stepped", base[::2, 1::3]), ("offset", base[1:, 1:])):
        out = cp.full(v.shape, cp.nan, cp.float32)
        K.stencil5(v, out)
        same(cp.asnumpy(out), np_stencil(cp.asnumpy(v)), name)
    with pytest.raises(ValueError, match=r"argument `out`.*out must not be x"):
        K.stencil5(base, base)


# ---- cumsum -------------------------------------------------------------------------------


# Around the tiles of the 64-bit (2048), widening (4096) and 32-bit (8192) scans, and longer.
SCAN_SIZES = [0, 1, 7, 2047, 2048, 4095, 4096, 4097, 8191, 8192, 8193]
SCAN_SIZES += [100000, (1 << 20) + 3, (1 << 22) + 1]


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize(
    "dtype,out_dtype",
    [
        ("float32", "float32"),
        ("float64", "float64"),
        ("int32", "int32"),
        ("int32", "int64"),
        ("int64", "int64"),
    ],
)
@pytest.mark.parametrize("n", SCAN_SIZES)
def test_cumsum(
    backend: Backend,
    out_backend: Backend,
    rng: np.random.Generator,
    n: int,
    dtype: str,
    out_dtype: str,
    exclusive: bool,
) -> None:
    x = random(rng, n, dtype)
    f = K.cumsum_exclusive if exclusive else K.cumsum
    (got,) = run(backend, out_backend, f, (x,), (np.zeros(n, out_dtype),))
    if np.dtype(dtype).kind == "i":
        want = np.cumsum(x, dtype=out_dtype)  # wraps like the kernel
        if exclusive:
            want = np.concatenate([np.zeros(min(n, 1), out_dtype), want[:-1]]) if n else want
        same(got, want, f"cumsum {dtype}->{out_dtype}")
        return
    x64 = x.astype(np.float64)
    want = np.cumsum(x64)
    mag = np.cumsum(np.abs(x64))
    if exclusive:
        want = np.concatenate([[0.0], want[:-1]])[:n]
        mag = np.concatenate([[0.0], mag[:-1]])[:n]
    # A tree of sums (vector, warp, block, look-back chain): ≤ (2·log2(n) + 16)·ε·Σ|x|.
    tol = (2 * math.log2(max(n, 2)) + 16) * EPS[dtype] * mag + 1e-30
    close(got, want, tol, f"cumsum {dtype}")


def test_cumsum_block_grid_and_in_place(cp: Any, rng: np.random.Generator) -> None:
    x = random(rng, 5000, "int32")
    out = cp.full(5000, -7, cp.int64)
    # The declared block (256 threads for 64-bit sums, 128 for 32-bit ones) is the only one.
    with pytest.raises(ValueError, match=r"requires block \(256, 1, 1\)"):
        K.cumsum(cp.asarray(x), out, block=96)
    K.cumsum(cp.asarray(x), out, block=256)
    same(cp.asnumpy(out), np.cumsum(x, dtype=np.int64), "block 256")
    out32 = cp.full(5000, -7, cp.int32)
    with pytest.raises(ValueError, match=r"requires block \(128, 1, 1\)"):
        K.cumsum(cp.asarray(x), out32, block=256)
    # 32-bit sums (one status word per tile): a grid of fewer blocks than tiles, wrapping.
    xw = rng.integers(-(2**31), 2**31, 100003, dtype=np.int64).astype(np.int32)
    out32 = cp.full(100003, -7, cp.int32)
    K.cumsum(cp.asarray(xw), out32, grid=3)
    same(cp.asnumpy(out32), np.cumsum(xw, dtype=np.int32), "int32, 3 blocks")
    K.cumsum_exclusive(cp.asarray(xw), out32, grid=1)
    want = np.concatenate([[0], np.cumsum(xw, dtype=np.int32)[:-1]]).astype(np.int32)
    same(cp.asnumpy(out32), want, "int32 exclusive, 1 block")
    # Any grid: fewer blocks than tiles take several tiles each.
    out = cp.full(5000, -7, cp.int64)
    K.cumsum_exclusive(cp.asarray(x), out, grid=1)
    same(
        cp.asnumpy(out),
        np.concatenate([[0], np.cumsum(x, dtype=np.int64)[:-1]]),
        "exclusive, 1 block",
    )
    y = cp.asarray(random(rng, 300001, "int64"))
    want = np.cumsum(cp.asnumpy(y))
    K.cumsum(y, y, grid=7)
    same(cp.asnumpy(y), want, "in place, 7 blocks")
    with pytest.raises(ValueError, match="out"):
        K.cumsum(cp.zeros(5, cp.float32), cp.zeros(4, cp.float32))


def test_cumsum_statuses_persist_between_launches(cp: Any, rng: np.random.Generator) -> None:
    """The scans' tile statuses persist between launches on a stream (no zero-fill, each
    status tagged with its launch's epoch): back-to-back launches with no synchronization
    between them — large after small after large (stale statuses of the larger launch's tail
    must be ignored), grids of one block, fewer blocks than tiles, one per tile and more,
    inclusive and exclusive, 32- and 64-bit, other scratch kernels (``sum``) in between, and a
    graph replayed among direct launches — each into a poisoned output, every element checked
    against NumPy (int32 sums: exact, wrapping) after the stream drains."""
    stream = cp.cuda.Stream(non_blocking=True)
    plan = []
    sizes = [5 << 20, 8193, 1, 5 << 20, 3 << 20, 100_003, 5 << 20, 2, 8192]
    grids = [None, 1, 3, None, 1000, None, 7, None, 4]
    for i, (n, g) in enumerate(zip(sizes, grids, strict=True)):
        for kind in ("int32", "int64"):
            plan.append((n, g, kind, i % 3 == 2))
    graph = None
    with stream:
        xg = cp.asarray(rng.integers(-(2**31), 2**31, 1 << 20, dtype=np.int64).astype(np.int32))
        out_g = cp.full(1 << 20, -7, cp.int32)
        stream.begin_capture()
        K.cumsum(xg, out_g)
        graph = stream.end_capture()
        launched = []
        for r in range(2):
            for n, g, kind, excl in plan:
                if kind == "int32":
                    host = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
                else:
                    host = rng.integers(-(2**62), 2**62, n, dtype=np.int64)
                x = cp.asarray(host)
                out = cp.full(n, -7, x.dtype)
                f = K.cumsum_exclusive if excl else K.cumsum
                if g is None:
                    f(x, out)
                else:
                    f(x, out, grid=g)
                launched.append((host, out, excl, (r, n, g, kind)))
                if n == 8193:
                    total = cp.full(1, -1, cp.int64)
                    K.sum(x, total)  # another kernel's launch with a workspace in between
                    launched.append((host, total, None, (r, "sum")))
            out_g.fill(-7)
            graph.launch()
            out_d = cp.full(1 << 20, -7, cp.int32)
            K.cumsum(xg, out_d)  # a direct launch right after the replay, on the same stream
            launched.append((cp.asnumpy(xg), out_d, False, (r, "after the replay")))
    stream.synchronize()
    same(cp.asnumpy(out_g), np.cumsum(cp.asnumpy(xg), dtype=np.int32), "replay")
    for host, out, excl, what in launched:
        if excl is None:
            same(cp.asnumpy(out), np.array([host.astype(np.int64).sum()]), f"{what}")
            continue
        want = np.cumsum(host, dtype=host.dtype)
        if excl:
            want = np.concatenate([np.zeros(1, host.dtype), want[:-1]])
        same(cp.asnumpy(out), want, f"{what}")


# ---- activations and axpy ------------------------------------------------------------------


def np_act(name: str, x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    if name == "gelu":
        return 0.5 * x * (1 + erf(x / math.sqrt(2)))
    if name == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    with np.errstate(over="ignore"):
        return x / (1 + np.exp(-x))


def act_f32_tol(x: np.ndarray, want: np.ndarray) -> np.ndarray:
    """The activations' float32 bound: libdevice's functions (≤ 2 ulp) and a few roundings,
    8 ulp of the result and of the argument (the cancellation near 0)."""
    return 8 * EPS["float32"] * (np.abs(want) + np.abs(x.astype(np.float64)))


def act_tol(x: np.ndarray, want: np.ndarray, dtype: str) -> np.ndarray:
    """The activations' bound for float32 or float16 storage (``act_f32_tol``, then for
    float16 one rounding: ½ ulp, and half the subnormal spacing). Also used by
    ``test_gpu_layouts.py``."""
    tol = act_f32_tol(x, want) + 1e-30
    if dtype == "float16":
        tol = tol + EPS["float16"] * np.abs(want) + 2.0**-24
    return tol


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("n", [0, 1, 7, 1000, 4099])
def test_activations(cp: Any, rng: np.random.Generator, name: str, dtype: str, n: int) -> None:
    x = (rng.standard_normal(n) * 4).astype(dtype)
    x[: min(n, 4)] = np.array([0.0, -30.0, 30.0, np.nan][: min(n, 4)], dtype)
    b = make_backend_cupy(cp)
    (got,) = run(b, b, getattr(K, name), (x,), (np.zeros(n, dtype),))
    want = np_act(name, x)
    close(got, want, act_tol(x, want, dtype), f"{name} {dtype}")


def test_activations_any_block(cp: Any, rng: np.random.Generator) -> None:
    """The activations take any block size (no launch bounds) and compute the same values
    with each, the vector loop's tail and grid-stride iterations included."""
    x = cp.asarray((rng.standard_normal(100003) * 4).astype(np.float32))
    xs = cp.asnumpy(x).astype(np.float64)
    for name in ("gelu", "gelu_tanh", "silu"):
        want = np_act(name, xs)
        tol = act_tol(xs, want, "float32")
        for block, grid in ((32, 7), (256, None), (1024, 3)):
            out = cp.full_like(x, cp.nan)
            getattr(K, name)(x, out, block=block, **({} if grid is None else {"grid": grid}))
            close(cp.asnumpy(out), want, tol, f"{name} block {block} grid {grid}")


def test_activations_on_torch(torch: Any) -> None:
    x = torch.randn(10007, device="cuda") * 3
    for name, ref in (
        ("gelu", lambda t: torch.nn.functional.gelu(t)),
        ("gelu_tanh", lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
        ("silu", torch.nn.functional.silu),
    ):
        out = torch.full_like(x, float("nan"))
        getattr(K, name)(x, out)
        torch.testing.assert_close(out, ref(x), rtol=2e-6, atol=2e-7)


# ---- bfloat16 (softmax, log_softmax, activations, axpy) ------------------------------------------
#
# Inputs from PyTorch (bfloat16 tensors, read through the tensor fast path) and JAX (read-only
# bfloat16 arrays; outputs in ferrocuda arrays); references in float64 from the inputs' exact
# values (ml_dtypes' bfloat16 on the host), or bit-exact where the kernel's one f32 rounding
# then one bf16 rounding can be reproduced (axpy).


def bf16_host(rng: np.random.Generator, shape: Any, scale: float) -> np.ndarray:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(ml_dtypes.bfloat16)


def torch_bf16(torch: Any, h: np.ndarray) -> Any:
    """The bfloat16 host array ``h`` as a CUDA tensor (bits copied)."""
    return torch.from_numpy(np.ascontiguousarray(h).view(np.int16)).cuda().view(torch.bfloat16)


def torch_bf16_to_host(torch: Any, t: Any) -> np.ndarray:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return t.contiguous().view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)


def softmax_bf16_tol(x: np.ndarray, want: np.ndarray, log: bool) -> np.ndarray:
    """The float32 bound of the kernel's arithmetic (``softmax_tol``: for log-softmax it grows
    with the row maximum |m|, since ``v − (m + ln s)`` cancels near the maximum), then one
    rounding to bfloat16 (½ ulp: 2^-8 relative; 2^-134 below bfloat16's normal range)."""
    return softmax_tol(x, want, log, "float32") + EPS["bfloat16"] * np.abs(want) + 2.0**-134


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize(
    "shape", [(0, 4), (1, 1), (5, 7), (33, 1024), (7, 4096), (3, 5000), (2, 70001)]
)
def test_softmax_bf16_torch(
    torch: Any, rng: np.random.Generator, shape: tuple[int, int], log: bool
) -> None:
    f = K.log_softmax if log else K.softmax
    xh = bf16_host(rng, shape, 4.0)
    x = torch_bf16(torch, xh)
    out = torch.full(shape, float("nan"), dtype=torch.bfloat16, device="cuda")
    f(x, out)
    got = torch_bf16_to_host(torch, out)
    want = np_softmax(xh.astype(np.float64), log)
    close(got, want, softmax_bf16_tol(xh, want, log), f"{f.name} bfloat16 {shape}")
    # Transposed (strided rows: the streaming schedule) and in place.
    if shape[0] > 1 and shape[1] > 1:
        v = x.T
        out = torch.full(v.shape, float("nan"), dtype=torch.bfloat16, device="cuda")
        f(v, out)
        want_t = np_softmax(xh.T.astype(np.float64), log)
        close(
            torch_bf16_to_host(torch, out),
            want_t,
            softmax_bf16_tol(xh.T, want_t, log),
            "transposed",
        )
        f(x, x)
        close(torch_bf16_to_host(torch, x), want, softmax_bf16_tol(xh, want, log), "in place")


@pytest.mark.parametrize("log", [False, True])
def test_softmax_bf16_jax(jax: Any, rng: np.random.Generator, log: bool) -> None:
    f = K.log_softmax if log else K.softmax
    jnp = jax.numpy
    for shape in ((9, 100), (33, 1024), (3, 5000)):
        xh = bf16_host(rng, shape, 4.0)
        x = jnp.asarray(xh)
        x.block_until_ready()
        out = ferrocuda.DeviceArray.empty(shape, "bfloat16")
        f(x, out)
        got = out.to_numpy()
        assert got.dtype == xh.dtype
        want = np_softmax(xh.astype(np.float64), log)
        close(got, want, softmax_bf16_tol(xh, want, log), f"{f.name} jax bfloat16 {shape}")


def act_bf16_tol(x: np.ndarray, want: np.ndarray) -> np.ndarray:
    # The f32 tolerance, then one rounding to bfloat16 (½ ulp; 2^-133 is bfloat16's smallest
    # subnormal).
    return act_f32_tol(x, want) + EPS["bfloat16"] * np.abs(want) + 2.0**-133


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu"])
def test_activations_bf16_torch(torch: Any, rng: np.random.Generator, name: str) -> None:
    refs = {
        "gelu": lambda t: torch.nn.functional.gelu(t),
        "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
        "silu": torch.nn.functional.silu,
    }
    for n in (0, 1, 7, 1000, 4099, (1 << 20) + 3):
        xh = bf16_host(rng, n, 4.0)
        xh[: min(n, 4)] = np.array([0.0, -30.0, 30.0, np.nan][: min(n, 4)], np.float32).astype(
            xh.dtype
        )
        x = torch_bf16(torch, xh)
        out = torch.full((n,), float("nan"), dtype=torch.bfloat16, device="cuda")
        getattr(K, name)(x, out)
        got = torch_bf16_to_host(torch, out)
        want = np_act(name, xh.astype(np.float64))
        close(got, want, act_bf16_tol(xh, want), f"{name} bfloat16 n={n}")
        # PyTorch computes in f32 too and rounds once: equal, or one bf16 ulp apart where the
        # two f32 results straddle a rounding boundary.
        torch.testing.assert_close(
            out.float(), refs[name](x).float(), rtol=2.0**-7, atol=2.0**-126, equal_nan=True
        )


def test_activations_bf16_jax(jax: Any, rng: np.random.Generator) -> None:
    jnp = jax.numpy
    xh = bf16_host(rng, 10_007, 4.0)
    x = jnp.asarray(xh)
    x.block_until_ready()
    for name in ("gelu", "gelu_tanh", "silu"):
        out = ferrocuda.DeviceArray.empty(xh.shape, "bfloat16")
        getattr(K, name)(x, out)
        want = np_act(name, xh.astype(np.float64))
        close(out.to_numpy(), want, act_bf16_tol(xh, want), f"{name} jax bfloat16")


def test_axpy_bf16(torch: Any, jax: Any, rng: np.random.Generator) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    # 0.75·x is exact in f32 (bfloat16 has 8 significant bits), so the kernel's fma rounds the
    # same f32 value NumPy's product-then-sum does; both then round once to bfloat16.
    for n in (0, 1, 7, 1001, (1 << 20) + 3):
        xh, yh = bf16_host(rng, n, 1.0), bf16_host(rng, n, 1.0)
        want = (0.75 * xh.astype(np.float32) + yh.astype(np.float32)).astype(ml_dtypes.bfloat16)
        y = torch_bf16(torch, yh)
        K.axpy(0.75, torch_bf16(torch, xh), y)
        assert np.array_equal(torch_bf16_to_host(torch, y).view(np.uint16), want.view(np.uint16)), (
            f"torch n={n}"
        )
        # A read-only JAX x, a ferrocuda y.
        x = jax.numpy.asarray(xh)
        x.block_until_ready()
        dy = ferrocuda.DeviceArray.from_numpy(yh)
        K.axpy(0.75, x, dy)
        assert np.array_equal(dy.to_numpy().view(np.uint16), want.view(np.uint16)), f"jax n={n}"


def test_axpy_f16(torch: Any) -> None:
    for n in (0, 1, 7, 1001, (1 << 20) + 3):
        x = torch.randn(n, device="cuda", dtype=torch.float16)
        y = torch.randn(n, device="cuda", dtype=torch.float16)
        want = (0.75 * x.float() + y.float()).half()
        K.axpy(0.75, x, y)
        torch.testing.assert_close(y, want, rtol=0, atol=0)
