"""The GPU-time sections of the benchmark harness (``python_bench.py``): bandwidth of ``add``,
``initialize_array`` and ``add_index`` against their peers, with CUDA-event clocks.
"""

from __future__ import annotations

import math

from bench_common import (
    ADD_INDEX_VIEWS,
    FULL_CHECK_MAX,
    RAW_ADD_SRC,
    SPIN_SRC,
    bw_row,
    calibrate,
    compare,
    n_sets,
    reps_for,
    sample_index,
)


class CupyClock:
    """Events and a spin kernel on CuPy's current (null = legacy default) stream."""

    def __init__(self, cp, np):
        self.cp, self.np = cp, np
        self.e0, self.e1 = cp.cuda.Event(), cp.cuda.Event()
        self.spin_kernel = cp.RawKernel(SPIN_SRC, "spin")
        self.cycles_per_us = calibrate(self)

    def spin_cycles(self, cycles):
        self.spin_kernel((1,), (1,), (self.np.int64(int(cycles)),))

    def record(self, e):
        e.record()

    def done(self, e):
        return bool(e.done)

    def wait(self):
        self.e1.synchronize()

    def elapsed_ms(self):
        return float(self.cp.cuda.get_elapsed_time(self.e0, self.e1))


class TorchClock:
    """Events and torch.cuda._sleep on torch's current (default = legacy) stream."""

    def __init__(self, torch):
        self.torch = torch
        self.e0 = torch.cuda.Event(enable_timing=True)
        self.e1 = torch.cuda.Event(enable_timing=True)
        self.cycles_per_us = calibrate(self)

    def spin_cycles(self, cycles):
        self.torch.cuda._sleep(int(cycles))

    def record(self, e):
        e.record()

    def done(self, e):
        return bool(e.query())

    def wait(self):
        self.e1.synchronize()

    def elapsed_ms(self):
        return float(self.e0.elapsed_time(self.e1))


class NumbaClock:
    """Numba events and a dependent-FMA spin kernel on the legacy default stream (0)."""

    def __init__(self, cuda, np):
        self.cuda, self.np = cuda, np
        self.e0, self.e1 = cuda.event(timing=True), cuda.event(timing=True)

        @cuda.jit
        def spin(x, iters):
            acc = x[0]
            for _ in range(iters):
                acc = acc * 0.9999999 + 1e-7
            x[0] = acc

        self.kernel = spin
        self.buf = cuda.to_device(np.zeros(1, np.float32))
        self.cycles_per_us = calibrate(self)

    def spin_cycles(self, cycles):
        self.kernel[1, 1](self.buf, self.np.int64(int(cycles)))

    def record(self, e):
        e.record()

    def done(self, e):
        return bool(e.query())

    def wait(self):
        self.e1.synchronize()

    def elapsed_ms(self):
        return float(self.cuda.event_elapsed_time(self.e0, self.e1))


def cupy_check_add(np, cp, a, b, out, n):
    out.fill(float("nan"))
    return lambda: (cp.cuda.runtime.deviceSynchronize(), _cupy_cmp_add(np, cp, a, b, out, n))[1]


def _cupy_cmp_add(np, cp, a, b, out, n):
    if n <= FULL_CHECK_MAX:
        ha, hb, ho = cp.asnumpy(a), cp.asnumpy(b), cp.asnumpy(out)
        return compare(np, ho, ha + hb)
    idx = cp.asarray(sample_index(np, n))
    return compare(np, cp.asnumpy(out[idx]), cp.asnumpy(a[idx]) + cp.asnumpy(b[idx]))


def _torch_cmp(np, torch, got_t, want_fn, n):
    if n <= FULL_CHECK_MAX:
        return compare(np, got_t.cpu().numpy(), want_fn(None))
    idx = torch.from_numpy(sample_index(np, n)).cuda()
    return compare(np, got_t[idx].cpu().numpy(), want_fn(idx))


def section_bandwidth(res, reps, mods, sizes, l2_bytes, budget, clock):
    np, cp, torch, ferrocuda = mods["numpy"], mods["cupy"], mods["torch"], mods["ferrocuda"]
    fk = getattr(ferrocuda, "kernels", None) if ferrocuda is not None else None
    raw = cp.RawKernel(RAW_ADD_SRC, "add_f32") if cp is not None else None
    if cp is None:
        res.note("bandwidth", "CuPy unavailable: CuPy and ferrocuda-on-CuPy rows skipped")
    if torch is None:
        res.note("bandwidth", "PyTorch unavailable: torch rows skipped")
    if fk is None:
        res.note("bandwidth", "ferrocuda unavailable: ferrocuda rows skipped")
    for n in sizes:
        if budget.left() < 20:
            res.note(
                "bandwidth", "time budget exhausted: sizes from 2^%d on skipped" % int(math.log2(n))
            )
            break
        add_bytes, copy_bytes = 12 * n, 8 * n
        r_add, r_copy = reps_for(add_bytes), reps_for(copy_bytes)
        k_add, k_copy = n_sets(add_bytes, l2_bytes), n_sets(copy_bytes, l2_bytes)
        if cp is not None:
            try:
                rs = cp.random.RandomState(7)
                sets = []
                for i in range(k_add):
                    if i == 0:
                        a = rs.standard_normal(n, dtype=cp.float32)
                        b = rs.standard_normal(n, dtype=cp.float32)
                    else:
                        a, b = cp.ones(n, cp.float32), cp.full(n, 2.0, cp.float32)
                    sets.append((a, b, cp.empty(n, cp.float32)))
                a0, b0, o0 = sets[0]
                extra = {"sets": k_add}
                impls = []
                if fk is not None:
                    impls.append(
                        (
                            "fc_add_cupy",
                            "ferrocuda add (CuPy arrays)",
                            lambda i: fk.add(*sets[i % k_add]),
                        )
                    )
                impls.append(
                    (
                        "cupy_add",
                        "cupy.add(out=)",
                        lambda i: cp.add(
                            sets[i % k_add][0], sets[i % k_add][1], out=sets[i % k_add][2]
                        ),
                    )
                )
                grid = (int(min((n + 255) // 256, 1 << 30)),)
                n64 = np.int64(n)
                impls.append(
                    (
                        "rawkernel_add",
                        "CuPy RawKernel add",
                        lambda i: raw(grid, (256,), sets[i % k_add] + (n64,)),
                    )
                )
                for key, label, call in impls:
                    check = cupy_check_add(np, cp, a0, b0, o0, n)
                    call(0)
                    bw_row(
                        res,
                        "bandwidth",
                        key,
                        label,
                        n,
                        add_bytes,
                        clock,
                        call,
                        r_add,
                        reps.trials,
                        check,
                        extra,
                    )
                sets = a0 = b0 = o0 = impls = check = None  # release the buffers
                # device-to-device copy (cudaMemcpyAsync)
                csets = [
                    (
                        rs.standard_normal(n, dtype=cp.float32)
                        if i == 0
                        else cp.ones(n, cp.float32),
                        cp.empty(n, cp.float32),
                    )
                    for i in range(k_copy)
                ]

                def copy_call(i):
                    src, dst = csets[i % k_copy]
                    dst.data.copy_from_device_async(src.data, 4 * n)

                def copy_check():
                    cp.cuda.runtime.deviceSynchronize()
                    src, dst = csets[0]
                    if n <= FULL_CHECK_MAX:
                        return compare(np, cp.asnumpy(dst), cp.asnumpy(src))
                    idx = cp.asarray(sample_index(np, n))
                    return compare(np, cp.asnumpy(dst[idx]), cp.asnumpy(src[idx]))

                csets[0][1].fill(float("nan"))
                copy_call(0)
                bw_row(
                    res,
                    "bandwidth",
                    "copy_cupy",
                    "D2D copy (CuPy memcpy)",
                    n,
                    copy_bytes,
                    clock,
                    copy_call,
                    r_copy,
                    reps.trials,
                    copy_check,
                    {"sets": k_copy},
                )
                csets = None  # release the buffers
            except Exception as e:  # noqa: BLE001
                res.note("bandwidth", "CuPy rows at n=%d failed: %s: %s" % (n, type(e).__name__, e))
            cp.get_default_memory_pool().free_all_blocks()
        if torch is not None:
            try:
                g = torch.Generator(device="cuda")
                g.manual_seed(11)
                tsets = []
                for i in range(k_add):
                    if i == 0:
                        ta = torch.randn(n, device="cuda", dtype=torch.float32, generator=g)
                        tb = torch.randn(n, device="cuda", dtype=torch.float32, generator=g)
                    else:
                        ta = torch.ones(n, device="cuda", dtype=torch.float32)
                        tb = torch.full((n,), 2.0, device="cuda", dtype=torch.float32)
                    tsets.append((ta, tb, torch.empty(n, device="cuda", dtype=torch.float32)))

                def want_add(idx):
                    a, b = tsets[0][0], tsets[0][1]
                    if idx is None:
                        return a.cpu().numpy() + b.cpu().numpy()
                    return a[idx].cpu().numpy() + b[idx].cpu().numpy()

                def tcheck():
                    torch.cuda.synchronize()
                    return _torch_cmp(np, torch, tsets[0][2], want_add, n)

                impls = [
                    (
                        "torch_add",
                        "torch.add(out=)",
                        lambda i: torch.add(
                            tsets[i % k_add][0], tsets[i % k_add][1], out=tsets[i % k_add][2]
                        ),
                    )
                ]
                if fk is not None:
                    impls.append(
                        (
                            "fc_add_torch",
                            "ferrocuda add (torch tensors)",
                            lambda i: fk.add(*tsets[i % k_add]),
                        )
                    )
                for key, label, call in impls:
                    tsets[0][2].fill_(float("nan"))
                    call(0)
                    bw_row(
                        res,
                        "bandwidth",
                        key,
                        label,
                        n,
                        add_bytes,
                        clock,
                        call,
                        r_add,
                        reps.trials,
                        tcheck,
                        {"sets": k_add},
                    )
                tsets = impls = None  # release the buffers
                csets = [
                    (
                        torch.randn(n, device="cuda", generator=g)
                        if i == 0
                        else torch.ones(n, device="cuda"),
                        torch.empty(n, device="cuda"),
                    )
                    for i in range(k_copy)
                ]

                def tcopy(i):
                    src, dst = csets[i % k_copy]
                    dst.copy_(src)

                def tcopy_check():
                    torch.cuda.synchronize()
                    src = csets[0][0]
                    return _torch_cmp(
                        np,
                        torch,
                        csets[0][1],
                        lambda idx: (src if idx is None else src[idx]).cpu().numpy(),
                        n,
                    )

                csets[0][1].fill_(float("nan"))
                tcopy(0)
                bw_row(
                    res,
                    "bandwidth",
                    "copy_torch",
                    "D2D copy (torch copy_)",
                    n,
                    copy_bytes,
                    clock,
                    tcopy,
                    r_copy,
                    reps.trials,
                    tcopy_check,
                    {"sets": k_copy},
                )
                csets = None  # release the buffers
            except Exception as e:  # noqa: BLE001
                res.note(
                    "bandwidth", "torch rows at n=%d failed: %s: %s" % (n, type(e).__name__, e)
                )
            torch.cuda.empty_cache()


def section_init(res, reps, mods, sizes, l2_bytes, budget, clock):
    np, cp, ferrocuda = mods["numpy"], mods["cupy"], mods["ferrocuda"]
    fk = getattr(ferrocuda, "kernels", None) if ferrocuda is not None else None
    if cp is None:
        res.note("init", "CuPy unavailable: initialize_array / memset section skipped")
        return
    for n in sizes:
        if budget.left() < 15:
            res.note(
                "init", "time budget exhausted: sizes from 2^%d on skipped" % int(math.log2(n))
            )
            break
        nbytes = 4 * n
        k = n_sets(nbytes, l2_bytes)
        r = reps_for(nbytes)
        try:
            xs = [cp.empty(n, cp.int32) for _ in range(k)]

            def readback(expect_fn):
                def check():
                    cp.cuda.runtime.deviceSynchronize()
                    if n <= FULL_CHECK_MAX:
                        return compare(np, cp.asnumpy(xs[0]), expect_fn(None))
                    idx = sample_index(np, n)
                    return compare(np, cp.asnumpy(xs[0][cp.asarray(idx)]), expect_fn(idx))

                return check

            def arange_want(idx):
                return np.arange(n, dtype=np.int32) if idx is None else idx.astype(np.int32)

            def const_want(v):
                return lambda idx: np.full(n if idx is None else idx.size, v, np.int32)

            impls = []
            if fk is not None:
                impls.append(
                    (
                        "fc_init",
                        "ferrocuda initialize_array",
                        lambda i: fk.initialize_array(xs[i % k]),
                        arange_want,
                    )
                )
            impls.append(
                (
                    "memset_cupy",
                    "cudaMemsetAsync (CuPy memset_async)",
                    lambda i: xs[i % k].data.memset_async(0, nbytes),
                    const_want(0),
                )
            )
            impls.append(
                (
                    "fill_cupy",
                    "CuPy x.fill(7) (a kernel)",
                    lambda i: xs[i % k].fill(7),
                    const_want(7),
                )
            )
            for key, label, call, want in impls:
                xs[0].fill(-1)
                call(0)
                bw_row(
                    res,
                    "init",
                    key,
                    label,
                    n,
                    nbytes,
                    clock,
                    call,
                    r,
                    reps.trials,
                    readback(want),
                    {"sets": k},
                )
            xs = impls = None  # release the buffers
        except Exception as e:  # noqa: BLE001
            res.note("init", "n=%d failed: %s: %s" % (n, type(e).__name__, e))
        cp.get_default_memory_pool().free_all_blocks()


def section_add_index(res, reps, mods, budget, clock, shape):
    np, cp, ferrocuda = mods["numpy"], mods["cupy"], mods["ferrocuda"]
    fk = getattr(ferrocuda, "kernels", None) if ferrocuda is not None else None
    if cp is None:
        res.note(
            "add_index", "CuPy unavailable: add_index section skipped (it builds views with CuPy)"
        )
        return
    A, B, C = shape
    n = A * B * C
    # 1. Exact check of every view kind against NumPy on a small shape (untouched elements too).
    small = (6, 10, 14)
    checks = {}
    if fk is not None:
        for key, label, base_shape, view in ADD_INDEX_VIEWS:
            try:
                hbase = (
                    np.random.default_rng(5)
                    .integers(-50, 50, base_shape(*small))
                    .astype(np.float32)
                )
                dbase = cp.asarray(hbase)
                fk.add_index(view(dbase))
                cp.cuda.runtime.deviceSynchronize()
                want = hbase.copy()
                hv = view(want)
                hv += np.indices(small).sum(axis=0).astype(np.float32)
                checks[key] = compare(np, cp.asnumpy(dbase).ravel(), want.ravel())
            except Exception as e:  # noqa: BLE001
                checks[key] = (False, "%s: %s" % (type(e).__name__, e))
            if not checks[key][0]:
                res.note(
                    "add_index",
                    "%s: small-shape check vs NumPy failed: %s" % (label, checks[key][1]),
                )
    nbytes = 8 * n  # read + write of every element of the view
    r = reps_for(nbytes)
    for key, label, base_shape, view in ADD_INDEX_VIEWS:
        if budget.left() < 10:
            res.note("add_index", "time budget exhausted: %s and later views skipped" % label)
            break
        try:
            base = cp.zeros(base_shape(A, B, C), cp.float32)
            v = view(base)
            extra = {
                "view": key,
                "shape": list(v.shape),
                "strides_elems": [s // 4 for s in v.strides],
            }
            if fk is not None:

                def big_check(v=v, key=key):
                    cp.cuda.runtime.deviceSynchronize()
                    rng = np.random.default_rng(9)
                    ii, jj, kk = (rng.integers(0, d, 8192) for d in (A, B, C))
                    got = cp.asnumpy(v[cp.asarray(ii), cp.asarray(jj), cp.asarray(kk)])
                    ok, detail = compare(np, got, (ii + jj + kk).astype(np.float32))
                    sm = checks.get(key, (True, ""))
                    return ok and sm[0], (detail or sm[1])

                fk.add_index(v)
                bw_row(
                    res,
                    "add_index",
                    "fc_add_index",
                    "ferrocuda add_index " + label,
                    n,
                    nbytes,
                    clock,
                    lambda i, v=v: fk.add_index(v),
                    r,
                    reps.trials,
                    big_check,
                    extra,
                )

            def cupy_inc(i, v=v):
                v += 1.0

            bw_row(
                res,
                "add_index",
                "cupy_inplace_add",
                "CuPy view += 1 " + label,
                n,
                nbytes,
                clock,
                cupy_inc,
                r,
                reps.trials,
                None,
                extra,
            )
            base = v = None  # release the buffers
        except Exception as e:  # noqa: BLE001
            res.note("add_index", "%s failed: %s: %s" % (label, type(e).__name__, e))
        cp.get_default_memory_pool().free_all_blocks()
