"""The ``gallery`` section of the benchmark harness (``python_bench.py``): the gallery kernels
side by side with their peers (CUB through CuPy, cuBLAS, PyTorch) at the issue's sizes, GPU
time by CUDA events (warm-up, median of trials, each batch queued behind a spin kernel,
inputs rotated beyond L2 where one call touches less than 4× L2, never zero data), plus the
per-call wall time of small sizes from Python (launch overhead included).

Every ferrocuda row's output is checked once against a reference before it is timed (a wrong
result is a note and a ``checked: false`` row, never a crash); every row is independent (one
failing peer or op is a note). Rows go to ``res.data["gallery"]`` and the table
``render_gallery`` prints.
"""

from __future__ import annotations

import math
import os
import time
import traceback

from bench_common import gpu_seconds, log, n_sets, reps_for, summarize

STENCIL_SRC = r"""
extern "C" __global__ void stencil5(const float* x, float* out, int rows, int cols) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= rows || j >= cols) return;
    long c = (long)i * cols + j;
    float up = i > 0 ? x[c - cols] : 0.f, down = i + 1 < rows ? x[c + cols] : 0.f;
    float left = j > 0 ? x[c - 1] : 0.f, right = j + 1 < cols ? x[c + 1] : 0.f;
    out[c] = up + down + left + right - 4.f * x[c];
}
"""


class Ctx:
    """What every op needs: the libraries, the clock, the result sink, the budget."""

    def __init__(self, res, reps, mods, clock, l2_bytes, budget, quick):
        self.res, self.reps, self.clock = res, reps, clock
        self.np, self.cp, self.torch = mods["numpy"], mods.get("cupy"), mods.get("torch")
        self.fc = mods.get("ferrocuda")
        self.l2, self.budget, self.quick = l2_bytes, budget, quick
        self.trials = 3 if quick else 7

    def note(self, msg):
        self.res.note("gallery", msg)

    def row(self, op, shape, impl, fn, nbytes=None, flops=None, check=None, sets=1):
        """Times ``fn(i)`` (i cycles over buffer sets) and records a row."""
        row = {"op": op, "shape": shape, "impl": impl, "bytes": nbytes, "flops": flops}
        if self.budget.left() < 5:
            row["error"] = "skipped: out of time budget"
            self.res.data["gallery"].append(row)
            return row
        try:
            if check is not None:
                ok, detail = check()
                row["checked"] = ok
                if not ok:
                    row["check_detail"] = detail
                    self.note("%s %s (%s): WRONG OUTPUT: %s" % (op, shape, impl, detail))
            per_call = nbytes if nbytes else (flops / 20.0 if flops else 1e8)
            target = 0.02 if not self.quick else 0.005
            reps = max(3, min(100, reps_for(per_call, target)))
            # One timed call first: a peer far slower than the bytes suggest (atomics contending
            # on 256 bins) gets fewer repetitions and trials, so that it cannot eat the budget.
            sync = self.cp.cuda.Device().synchronize
            fn(0)  # warm-up: a first call may compile (CuPy) or allocate
            sync()
            t0 = time.perf_counter()
            fn(0)
            sync()
            probe = time.perf_counter() - t0
            trials = self.trials
            if probe * reps > target:
                reps = max(1, int(target / probe))
            if probe * reps * trials > 0.1 * max(self.budget.left(), 1.0):
                trials = 3
            reps = int(math.ceil(reps / sets) * sets)
            row["probe_s"] = probe
            st, info = gpu_seconds(self.clock, fn, reps, trials)
            row.update(info)
            row["s_per_call"] = st["median"]
            row["us"] = st["median"] * 1e6
            if nbytes:
                row["gbps"] = nbytes / st["median"] / 1e9
            if flops:
                row["tflops"] = flops / st["median"] / 1e12
            log(
                "gallery %-10s %-14s %-34s %9.1f us %s"
                % (
                    op,
                    shape,
                    impl,
                    row["us"],
                    ("%.0f GB/s" % row["gbps"])
                    if nbytes
                    else ("%.1f TFLOPS" % row.get("tflops", 0)),
                )
            )
        except Exception as e:  # noqa: BLE001
            row["error"] = "%s: %s" % (type(e).__name__, e)
            self.note("%s %s (%s) failed: %s" % (op, shape, impl, row["error"]))
        self.res.data["gallery"].append(row)
        return row


def _sample_check(np, got, want, rtol, atol):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        return False, "%d/%d mismatches; first at %d: %r vs %r" % (
            bad.sum(),
            bad.size,
            i,
            got.flat[i],
            want.flat[i],
        )
    return True, ""


def d2d(cx, dst, src):
    """A device-to-device memcpy of ``src``'s bytes (``cudaMemcpyAsync``)."""
    return lambda i: dst.data.copy_from_device_async(src.data, src.nbytes)


def bench_sum(cx, n):
    cp, np, torch, K = cx.cp, cx.np, cx.torch, cx.fc.kernels
    x = cp.random.standard_normal(n, dtype=cp.float32)
    out = cp.empty(1, cp.float32)
    want = float(cp.sum(x, dtype=cp.float64))

    def check():
        K.sum(x, out)
        return _sample_check(np, cp.asnumpy(out), [want], 1e-4, 1e-2)

    shape = "2^%d" % int(math.log2(n))
    cx.row("sum", shape, "ferrocuda sum", lambda i: K.sum(x, out), nbytes=4 * n, check=check)
    cx.row("sum", shape, "cupy.sum (CUB)", lambda i: cp.sum(x, out=out[0]), nbytes=4 * n)
    if torch is not None:
        tx, to = torch.as_tensor(x, device="cuda"), torch.empty((), device="cuda")
        cx.row("sum", shape, "torch.sum", lambda i: torch.sum(tx, dim=0, out=to), nbytes=4 * n)
    cx.row("sum", shape, "D2D copy (read+write)", d2d(cx, cp.empty_like(x), x), nbytes=8 * n)


def bench_normalize(cx, n):
    """``out = x / x.sum()``: ferrocuda's one cooperative launch (partial sums, a grid-wide
    barrier, the division) against its own two launches (``sum`` then ``div_by``) and the
    peers' (a sum, then a division). Bytes: ``x`` read twice, ``out`` written once."""
    cp, np, torch, K = cx.cp, cx.np, cx.torch, cx.fc.kernels
    x = cp.random.random(n, dtype=cp.float32) + cp.float32(0.5)
    out, s = cp.empty_like(x), cp.empty(1, cp.float32)
    sample = cp.asnumpy(x[:4096]).astype(np.float64)
    want = sample / float(cp.sum(x, dtype=cp.float64))

    def check_with(launch):
        def check():
            launch()
            return _sample_check(np, cp.asnumpy(out[:4096]), want, 1e-5, 0)

        return check

    def one(i):
        K.normalize(x, out)

    def two(i):
        K.sum(x, s)
        K.div_by(x, s, out)

    shape = "2^%d" % int(math.log2(n))
    nb = 12 * n
    cx.row(
        "normalize",
        shape,
        "ferrocuda normalize (one cooperative launch)",
        one,
        nbytes=nb,
        check=check_with(lambda: one(0)),
    )
    cx.row(
        "normalize",
        shape,
        "two launches: ferrocuda sum + div_by",
        two,
        nbytes=nb,
        check=check_with(lambda: two(0)),
    )
    cx.row(
        "normalize", shape, "cupy x / x.sum()", lambda i: cp.divide(x, x.sum(), out=out), nbytes=nb
    )
    if torch is not None:
        tx, to = torch.as_tensor(x, device="cuda"), torch.as_tensor(out, device="cuda")
        cx.row(
            "normalize",
            shape,
            "torch x / x.sum()",
            lambda i: torch.div(tx, tx.sum(), out=to),
            nbytes=nb,
        )


def bench_histogram(cx, n):
    cp, np, torch, K = cx.cp, cx.np, cx.torch, cx.fc.kernels
    x = cp.random.randint(0, 256, n, dtype=cp.uint8)
    bins = cp.empty(256, cp.int64)
    want = cp.asnumpy(cp.bincount(x, minlength=256))

    def check():
        K.histogram(x, bins, 0.0, 256.0)
        return _sample_check(np, cp.asnumpy(bins), want, 0, 0)

    shape = "u8 2^%d/256" % int(math.log2(n))
    cx.row(
        "histogram",
        shape,
        "ferrocuda histogram",
        lambda i: K.histogram(x, bins, 0.0, 256.0),
        nbytes=n,
        check=check,
    )
    try:
        from cupy._core import _accelerator

        saved = _accelerator.get_routine_accelerators()
        _accelerator.set_routine_accelerators(["cub"])
        try:
            cx.row(
                "histogram",
                shape,
                "cupy.histogram (CUB HistogramEven)",
                lambda i: cp.histogram(x, bins=256, range=(0, 256)),
                nbytes=n,
            )
        finally:
            _accelerator.set_routine_accelerators(saved)
    except Exception as e:  # noqa: BLE001
        cx.note("CUB accelerator not available: %s" % e)
        cx.row(
            "histogram",
            shape,
            "cupy.histogram",
            lambda i: cp.histogram(x, bins=256, range=(0, 256)),
            nbytes=n,
        )
    cx.row("histogram", shape, "cupy.bincount", lambda i: cp.bincount(x, minlength=256), nbytes=n)
    if torch is not None:
        tx = torch.as_tensor(x, device="cuda")
        cx.row(
            "histogram",
            shape,
            "torch.bincount",
            lambda i: torch.bincount(tx, minlength=256),
            nbytes=n,
        )
        tf = tx.float()
        cx.row(
            "histogram",
            shape,
            "torch.histc (float32 copy of the data)",
            lambda i: torch.histc(tf, bins=256, min=0, max=256),
            nbytes=n,
        )
    cx.row("histogram", shape, "D2D copy (read+write)", d2d(cx, cp.empty_like(x), x), nbytes=2 * n)


def bench_softmax(cx, rows, cols):
    cp, np, torch, K = cx.cp, cx.np, cx.torch, cx.fc.kernels
    nb = 8 * rows * cols
    sets = n_sets(nb, cx.l2)
    xs = [cp.random.standard_normal((rows, cols), dtype=cp.float32) for _ in range(sets)]
    outs = [cp.empty_like(x) for x in xs]

    def check():
        K.softmax(xs[0], outs[0])
        r = cp.asnumpy(xs[0][:64]).astype(np.float64)
        e = np.exp(r - r.max(axis=1, keepdims=True))
        return _sample_check(
            np, cp.asnumpy(outs[0][:64]), e / e.sum(axis=1, keepdims=True), 1e-5, 1e-9
        )

    shape = "%dx%d" % (rows, cols)
    cx.row(
        "softmax",
        shape,
        "ferrocuda softmax",
        lambda i: K.softmax(xs[i % sets], outs[i % sets]),
        nbytes=nb,
        check=check,
        sets=sets,
    )
    if torch is not None:
        tx = [torch.as_tensor(x, device="cuda") for x in xs]
        cx.row(
            "softmax",
            shape,
            "torch.softmax",
            lambda i: torch.softmax(tx[i % sets], dim=-1),
            nbytes=nb,
            sets=sets,
        )


def bench_matmul(cx, m, k, n):
    cp, np, torch, K = cx.cp, cx.np, cx.torch, cx.fc.kernels
    a = cp.random.standard_normal((m, k), dtype=cp.float32)
    b = cp.random.standard_normal((k, n), dtype=cp.float32)
    c = cp.empty((m, n), cp.float32)

    def check():
        K.matmul(a, b, c, 1.0, 0.0)
        ra, rb = cp.asnumpy(a[:16]).astype(np.float64), cp.asnumpy(b).astype(np.float64)
        want = ra @ rb
        tol = (k + 2) * 2.0**-24 * (np.abs(ra) @ np.abs(rb))
        ok = (np.abs(cp.asnumpy(c[:16]) - want) <= tol).all()
        return bool(ok), "" if ok else "beyond (K+2)·ε·|A||B|"

    shape = "%dx%dx%d" % (m, k, n)
    flops = 2.0 * m * n * k
    cx.row(
        "matmul",
        shape,
        "ferrocuda matmul",
        lambda i: K.matmul(a, b, c, 1.0, 0.0),
        flops=flops,
        check=check,
    )
    cx.row(
        "matmul", shape, "cupy.matmul (cuBLAS SGEMM)", lambda i: cp.matmul(a, b, out=c), flops=flops
    )
    if torch is not None:
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            ta, tb, tc = (torch.as_tensor(v, device="cuda") for v in (a, b, c))
            cx.row(
                "matmul",
                shape,
                "torch.matmul (TF32 off)",
                lambda i: torch.matmul(ta, tb, out=tc),
                flops=flops,
            )
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old


def bench_stencil(cx, rows, cols):
    cp, np, K = cx.cp, cx.np, cx.fc.kernels
    x = cp.random.standard_normal((rows, cols), dtype=cp.float32)
    out = cp.empty_like(x)
    nb = 8 * rows * cols

    def check():
        K.stencil5(x, out)
        xs = cp.asnumpy(x[:66, :130])
        p = np.pad(xs, 1)
        want = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - np.float32(4) * xs
        return _sample_check(np, cp.asnumpy(out[:65, :129]), want[:65, :129], 0, 0)

    shape = "%dx%d" % (rows, cols)
    cx.row(
        "stencil5",
        shape,
        "ferrocuda stencil5",
        lambda i: K.stencil5(x, out),
        nbytes=nb,
        check=check,
    )
    cx.row("stencil5", shape, "D2D copy (read+write)", d2d(cx, cp.empty_like(x), x), nbytes=nb)
    raw = cp.RawKernel(STENCIL_SRC, "stencil5")
    grid = ((cols + 31) // 32, (rows + 7) // 8)
    cx.row(
        "stencil5",
        shape,
        "CuPy RawKernel (naive 2-D)",
        lambda i: raw(grid, (32, 8), (x, out, np.int32(rows), np.int32(cols))),
        nbytes=nb,
    )


def _cub_scan(cp):
    """CuPy's wrapper of CUB's DeviceScan (an inclusive sum in place, on the current stream),
    or None where this CuPy has none."""
    try:
        from cupy.cuda import cub
    except ImportError:
        return None
    scan, op = getattr(cub, "cub_scan", None), getattr(cub, "CUPY_CUB_CUMSUM", None)
    if scan is None or op is None:
        return None
    return lambda a: scan(a, op)


def bench_cumsum(cx, n):
    cp, np, torch, K = cx.cp, cx.np, cx.torch, cx.fc.kernels
    x = cp.random.standard_normal(n, dtype=cp.float32)
    out = cp.empty_like(x)

    def check():
        K.cumsum(x, out)
        want = np.cumsum(cp.asnumpy(x[: 1 << 16]).astype(np.float64))
        return _sample_check(np, cp.asnumpy(out[: 1 << 16]), want, 1e-4, 1e-2)

    shape = "2^%d" % int(math.log2(n))
    cx.row(
        "cumsum", shape, "ferrocuda cumsum", lambda i: K.cumsum(x, out), nbytes=8 * n, check=check
    )
    cx.row("cumsum", shape, "cupy.cumsum", lambda i: cp.cumsum(x, out=out), nbytes=8 * n)
    # CUB's DeviceScan::InclusiveSum itself, through CuPy's wrapper (cupy.cumsum adds a copy
    # into `out`): an in-place scan of a scratch copy, the same bytes as ferrocuda's x -> out.
    # Checked once on a fresh copy; the timed calls rescan their own output (float additions
    # take the same time whatever the values).
    cub = _cub_scan(cp)
    if cub is not None:
        y = x.copy()

        def check_cub():
            y[...] = x
            cub(y)
            want = np.cumsum(cp.asnumpy(x[: 1 << 16]).astype(np.float64))
            return _sample_check(np, cp.asnumpy(y[: 1 << 16]), want, 1e-4, 1e-2)

        cx.row(
            "cumsum",
            shape,
            "CUB DeviceScan (cupy.cuda.cub, in place)",
            lambda i: cub(y),
            nbytes=8 * n,
            check=check_cub,
        )
    else:
        cx.note("cumsum: CuPy has no cupy.cuda.cub.cub_scan here: no CUB DeviceScan row")
    if torch is not None:
        tx, to = torch.as_tensor(x, device="cuda"), torch.as_tensor(out, device="cuda")
        cx.row("cumsum", shape, "torch.cumsum", lambda i: torch.cumsum(tx, 0, out=to), nbytes=8 * n)


def bench_gelu(cx, n, dtype, tanh=False):
    """GELU (exact, or the tanh approximation) against torch's. float32/float16 data come from
    CuPy, bfloat16 from torch (CuPy has no bfloat16)."""
    cp, np, torch, K = cx.cp, cx.np, cx.torch, cx.fc.kernels
    f = K.gelu_tanh if tanh else K.gelu
    op = "gelu_tanh" if tanh else "gelu"
    if dtype == "bfloat16":
        if torch is None:
            cx.note("%s bfloat16 needs torch: skipped" % op)
            return
        x = torch.randn(n, device="cuda").to(torch.bfloat16)
        out = torch.empty_like(x)
        size, name = 2, "bfloat16"

        def host(a):
            return a[:4096].float().cpu().numpy().astype(np.float64)
    else:
        x = cp.random.standard_normal(n, dtype=cp.float32).astype(dtype)
        out = cp.empty_like(x)
        size, name = x.dtype.itemsize, x.dtype.name

        def host(a):
            return cp.asnumpy(a[:4096]).astype(np.float64)

    def ref(xs):
        if tanh:
            return 0.5 * xs * (1 + np.tanh(math.sqrt(2 / math.pi) * (xs + 0.044715 * xs**3)))
        return 0.5 * xs * (1 + np.vectorize(math.erf, otypes=[np.float64])(xs / math.sqrt(2)))

    def check():
        f(x, out)
        tol = {4: (1e-5, 1e-6), 2: (2e-3, 1e-3)}[size] if name != "bfloat16" else (1.6e-2, 1e-2)
        return _sample_check(np, host(out), ref(host(x)), *tol)

    shape = "%s 2^%d" % (name, int(math.log2(n)))
    cx.row(op, shape, "ferrocuda " + op, lambda i: f(x, out), nbytes=2 * size * n, check=check)
    if torch is not None:
        tx = x if name == "bfloat16" else torch.as_tensor(x, device="cuda")
        approx = "tanh" if tanh else "none"
        cx.row(
            op,
            shape,
            "torch.nn.functional.gelu" + (" (tanh)" if tanh else ""),
            lambda i: torch.nn.functional.gelu(tx, approximate=approx),
            nbytes=2 * size * n,
        )


def small_sizes(cx):
    """Host wall time per call, back to back, one sync per batch (launch overhead included)."""
    cp, torch, K = cx.cp, cx.torch, cx.fc.kernels
    for log2n in (10, 13, 16):
        n = 1 << log2n
        x = cp.random.standard_normal(n, dtype=cp.float32)
        out1, outn = cp.empty(1, cp.float32), cp.empty_like(x)
        x2 = x.reshape(-1, 1024) if n >= 1024 else x.reshape(1, -1)
        o2 = cp.empty_like(x2)
        paths = [
            ("sum", "ferrocuda", lambda: K.sum(x, out1)),
            ("normalize", "ferrocuda (one cooperative launch)", lambda: K.normalize(x, outn)),
            (
                "normalize",
                "ferrocuda sum + div_by (two launches)",
                lambda: (K.sum(x, out1), K.div_by(x, out1, outn)),
            ),
            ("sum", "cupy", lambda: cp.sum(x, out=out1[0])),
            ("cumsum", "ferrocuda", lambda: K.cumsum(x, outn)),
            ("cumsum", "cupy", lambda: cp.cumsum(x, out=outn)),
            ("softmax", "ferrocuda", lambda: K.softmax(x2, o2)),
            ("gelu", "ferrocuda", lambda: K.gelu(x, outn)),
        ]
        if torch is not None:
            tx, t2 = torch.as_tensor(x, device="cuda"), torch.as_tensor(x2, device="cuda")
            to1, ton = torch.empty((), device="cuda"), torch.empty_like(tx)
            paths += [
                ("sum", "torch", lambda: torch.sum(tx, dim=0, out=to1)),
                ("sum", "ferrocuda (torch arrays)", lambda: K.sum(tx, ton[:1])),
                ("cumsum", "torch", lambda: torch.cumsum(tx, 0, out=ton)),
                ("softmax", "torch", lambda: torch.softmax(t2, dim=-1)),
                ("gelu", "torch", lambda: torch.nn.functional.gelu(tx)),
            ]
        for op, impl, fn in paths:
            if cx.budget.left() < 5:
                return
            try:
                for _ in range(50):
                    fn()
                cp.cuda.Device().synchronize()
                per = []
                for _ in range(5 if cx.quick else 15):
                    t0 = time.perf_counter()
                    for _ in range(100):
                        fn()
                    cp.cuda.Device().synchronize()
                    per.append((time.perf_counter() - t0) / 100 * 1e6)
                st = summarize(per)
                cx.res.data["gallery_small"].append(
                    {
                        "op": op,
                        "impl": impl,
                        "log2n": log2n,
                        "us_per_call": st["median"],
                        "p10_us": st["p10"],
                        "p90_us": st["p90"],
                    }
                )
                log(
                    "gallery small %-8s 2^%-2d %-26s %7.2f us/call"
                    % (op, log2n, impl, st["median"])
                )
            except Exception as e:  # noqa: BLE001
                cx.note("small %s 2^%d (%s) failed: %s" % (op, log2n, impl, e))


def section_gallery(res, reps, mods, budget, clock, l2_bytes, quick):
    res.data.setdefault("gallery", [])
    res.data.setdefault("gallery_small", [])
    if mods.get("cupy") is None or mods.get("ferrocuda") is None:
        res.note("gallery", "needs CuPy and ferrocuda: skipped")
        return
    cx = Ctx(res, reps, mods, clock, l2_bytes, budget, quick)
    big = 24 if quick else 28
    ops = [
        ("sum", lambda: bench_sum(cx, 1 << big)),
        ("normalize", lambda: bench_normalize(cx, 1 << big)),
        ("normalize 2^20", lambda: bench_normalize(cx, 1 << 20)),
        ("histogram", lambda: bench_histogram(cx, 1 << big)),
        ("softmax 4096²", lambda: bench_softmax(cx, 4096, 4096)),
        ("softmax 32768×1024", lambda: bench_softmax(cx, 32768 if not quick else 4096, 1024)),
        (
            "matmul",
            lambda: (
                bench_matmul(cx, 4096, 4096, 4096)
                if not quick
                else bench_matmul(cx, 1024, 1024, 1024)
            ),
        ),
        (
            "stencil5",
            lambda: bench_stencil(cx, 8192, 8192) if not quick else bench_stencil(cx, 2048, 2048),
        ),
        ("cumsum", lambda: bench_cumsum(cx, 1 << big)),
        ("gelu f32", lambda: bench_gelu(cx, 1 << big, "float32")),
        ("gelu f16", lambda: bench_gelu(cx, 1 << big, "float16")),
        ("gelu bf16", lambda: bench_gelu(cx, 1 << big, "bfloat16")),
        ("gelu_tanh f32", lambda: bench_gelu(cx, 1 << big, "float32", tanh=True)),
        ("small sizes", lambda: small_sizes(cx)),
    ]
    only = os.environ.get("BENCH_GALLERY_OPS")
    for name, fn in ops:
        if only and not any(name.startswith(o) for o in only.split(",")):
            continue
        if budget.left() < 10:
            res.note("gallery", "%s skipped: out of time budget" % name)
            continue
        log("=== gallery: %s (%.0f s left)" % (name, budget.left()))
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            res.note(
                "gallery",
                "%s crashed: %s: %s\n%s"
                % (name, type(e).__name__, e, traceback.format_exc(limit=3)),
            )
        try:
            mods["cupy"].get_default_memory_pool().free_all_blocks()
            if mods.get("torch") is not None:
                mods["torch"].cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass


GOALS = {
    # op: (peer impls to beat, ratio goal, what is compared)
    "sum": (["cupy.sum (CUB)", "torch.sum"], 1.0, "time"),
    # The one cooperative launch against ferrocuda's own two (and the peers' sum + divide).
    "normalize": (
        ["two launches: ferrocuda sum + div_by", "cupy x / x.sum()", "torch x / x.sum()"],
        1.0,
        "time",
    ),
    "histogram": (
        [
            "cupy.histogram (CUB HistogramEven)",
            "cupy.histogram",
            "cupy.bincount",
            "torch.bincount",
            "torch.histc (float32 copy of the data)",
        ],
        1.0,
        "time",
    ),
    "softmax": (["torch.softmax"], 1.0, "time"),
    "matmul": (["cupy.matmul (cuBLAS SGEMM)", "torch.matmul (TF32 off)"], 0.7, "time"),
    "cumsum": (
        ["CUB DeviceScan (cupy.cuda.cub, in place)", "cupy.cumsum", "torch.cumsum"],
        1.0,
        "time",
    ),
    "gelu": (["torch.nn.functional.gelu"], 1.0, "time"),
    "gelu_tanh": (["torch.nn.functional.gelu (tanh)"], 1.0, "time"),
}


def render_gallery(data):
    rows = data.get("gallery") or []
    if not rows and not data.get("gallery_small"):
        return ""
    out = ["", "## Gallery (GPU time, CUDA events, median)", ""]
    out.append("| op | shape | implementation | µs | GB/s | TFLOPS | vs ferrocuda | checked |")
    out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    mine = {}
    for r in rows:
        if r["impl"].startswith("ferrocuda") and "us" in r:
            mine[(r["op"], r["shape"])] = r["us"]
    for r in rows:
        us = r.get("us")
        rel = ""
        if us and (r["op"], r["shape"]) in mine and not r["impl"].startswith("ferrocuda"):
            rel = "%.2f×" % (us / mine[(r["op"], r["shape"])])
        out.append(
            "| %s | %s | %s | %s | %s | %s | %s | %s |"
            % (
                r["op"],
                r["shape"],
                r["impl"],
                "%.1f" % us if us else r.get("error", "—"),
                "%.0f" % r["gbps"] if r.get("gbps") else "",
                "%.1f" % r["tflops"] if r.get("tflops") else "",
                rel,
                {True: "yes", False: "**NO**"}.get(r.get("checked"), ""),
            )
        )
    out += [
        "",
        "`vs ferrocuda`: the peer's time over ferrocuda's (above 1: ferrocuda is faster).",
        "",
    ]
    out.append("### Gallery goals")
    out.append("")
    out.append(
        "| op | shape | ferrocuda µs | best peer | peer µs | ratio (peer/ours) | goal | met |"
    )
    out.append("| --- | --- | ---: | --- | ---: | ---: | ---: | --- |")
    for (op, shape), t in sorted(mine.items()):
        goal = GOALS.get(op)
        peers = [
            r
            for r in rows
            if r["op"] == op
            and r["shape"] == shape
            and r.get("us")
            and goal
            and r["impl"] in goal[0]
        ]
        copy = [
            r
            for r in rows
            if r["op"] == op
            and r["shape"] == shape
            and r["impl"].startswith("D2D copy")
            and r.get("gbps")
        ]
        if peers:
            best = min(peers, key=lambda r: r["us"])
            ratio = best["us"] / t
            out.append(
                "| %s | %s | %.1f | %s | %.1f | %.2f | ≥ %.2f | %s |"
                % (
                    op,
                    shape,
                    t,
                    best["impl"],
                    best["us"],
                    ratio,
                    goal[1],
                    "yes" if ratio >= goal[1] else "**no**",
                )
            )
        if copy:
            ours = next(
                r
                for r in rows
                if r["op"] == op and r["shape"] == shape and r["impl"].startswith("ferrocuda")
            )
            frac = (ours.get("gbps") or 0) / copy[0]["gbps"]
            want = {"sum": 0.9, "histogram": 0.8, "stencil5": 0.85}.get(op, 0)
            out.append(
                "| %s | %s | %.1f | D2D copy GB/s | %.0f GB/s | %.2f of copy | ≥ %.2f | %s |"
                % (op, shape, t, copy[0]["gbps"], frac, want, "yes" if frac >= want else "**no**")
            )
    small = data.get("gallery_small") or []
    if small:
        out += ["", "### Gallery, small sizes (host wall time per call, back to back)", ""]
        out.append("| op | n | implementation | µs/call |")
        out.append("| --- | ---: | --- | ---: |")
        for r in small:
            out.append(
                "| %s | 2^%d | %s | %.2f |" % (r["op"], r["log2n"], r["impl"], r["us_per_call"])
            )
    return "\n".join(out) + "\n"
