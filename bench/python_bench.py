#!/usr/bin/env python3
"""ferrocuda benchmark harness: the Python paths, side by side with CuPy, PyTorch and Numba.

What it measures (one H100, one run; see BENCHMARKS.md for the method and the goals):

* **launch** -- host wall time per call of `out = a + b` on 3 float32 arrays of 1024 elements:
  ferrocuda in each sync mode (arrays from CuPy, PyTorch, ferrocuda's own DeviceArray; and,
  in the Numba child process, Numba device arrays), CuPy ``RawKernel`` (same add, CUDA C
  compiled by CuPy), ``cupy.add(out=)``, ``torch.add(out=)``, a Numba ``@cuda.jit`` kernel on
  Numba / CuPy / torch arrays, the cost of just reading the array interfaces, and the raw
  ``cuLaunchKernel`` floor in this same process (``bench/floor.cu`` built as a library,
  ``--floor-lib``). Method: every path's output is checked first; then warm-up, then rounds:
  in each round every path runs one batch of many back-to-back calls followed by one device
  synchronization (interleaved, so that a drift of the host -- clocks, core migration -- hits
  every path alike); per-call time = batch time / calls; median over rounds.
* **bandwidth** -- GPU time (CUDA events) of ferrocuda ``add`` at 2^20 .. 2^28 float32 against
  ``cupy.add``, a CuPy ``RawKernel`` add, ``torch.add``, device-to-device copies (CuPy memcpy,
  ``torch.Tensor.copy_``) and Numba (child process); ``initialize_array`` against
  ``cudaMemsetAsync`` (and CuPy ``fill``); ``add_index`` on a contiguous 3-D array against
  transposed and step-sliced views with the same element count (and CuPy ``view += 1`` on the
  same views as a peer). Bytes are counted as reads + writes of the elements the operation
  uses. Every measured batch is queued behind a GPU spin kernel, so the GPU runs the batch back
  to back and host launch overhead cannot leak into the GPU time (a batch whose start event had
  already completed when the host finished queueing is redone with a longer spin). Buffer sets
  are rotated until one pass touches >= 4x the L2 cache.
* every measured path's output is checked once against NumPy (fully for small arrays, on a
  random sample of 65,536 elements for large ones).

Output: the full results as JSON (``--json``, default ``$OUT/bench.json``) and, printed last,
Markdown tables with the ratios (vs the raw-driver floor of ``bench/floor.cu``, vs CuPy
``RawKernel`` and vs ``torch.add``) and the goals of issue 5. The floor and Rust results come in
as JSON-lines files (``--floor``, ``--rust``) and are merged into the same JSON and tables.

The Numba part runs in a subprocess whose ``PYTHONPATH`` starts with the directory named by
``FERROCUDA_NUMBA_SITE`` (a NumPy < 2.5 that Numba needs); it is skipped, with a note, when the
variable is unset or the child fails. Every peer section skips gracefully (with a note in the
table) when its library is missing or fails.

Usage: python3 bench/python_bench.py [--floor F.jsonl] [--rust R.jsonl] [--json OUT.json]
                                     [--quick] [--sections launch,bandwidth,init,add_index,numba]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from functools import partial

LAUNCH_N = 1024
SAMPLE = 65536  # elements compared with NumPy for large arrays
FULL_CHECK_MAX = 1 << 22  # arrays up to this size are compared in full
ADD_INDEX_SHAPE = (256, 512, 1024)  # 2^27 float32 = 512 MiB, far beyond L2
CHILD_TAG = "NUMBA_CHILD_JSON "

RAW_ADD_SRC = r"""
extern "C" __global__ void add_f32(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) out[i] = a[i] + b[i];
}
"""

SPIN_SRC = r"""
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


def log(*parts):
    print("[bench]", *parts, file=sys.stderr, flush=True)


def quantile(sorted_xs, q):
    pos = q * (len(sorted_xs) - 1)
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(xs):
    s = sorted(xs)
    return {"median": quantile(s, 0.5), "min": s[0], "p10": quantile(s, 0.1), "p90": quantile(s, 0.9)}


class Budget:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


class Results:
    """Everything measured, plus notes; serializable as JSON."""

    def __init__(self):
        self.data = {
            "machine": {},
            "floor": [],
            "rust": [],
            "launch": [],
            "bandwidth": [],
            "init": [],
            "add_index": [],
            "goals": [],
            "notes": [],
        }

    def note(self, section, msg):
        log("note [%s]: %s" % (section, msg))
        self.data["notes"].append({"section": section, "note": msg})

    def add(self, section, row):
        self.data[section].append(row)


# ---------------------------------------------------------------------------------------------
# Host-side timing (launch overhead)


class Reps:
    def __init__(self, quick):
        self.calls = 200 if quick else 1000
        self.batches = 10 if quick else 30
        self.warmup = 100 if quick else 500
        self.trials = 3 if quick else 7


# Launch rows are checked when they are declared and timed together at the end of their
# section (`interleaved`), one batch of each in turn per round.
_QUEUE = None


class _Timed:
    __slots__ = ("row", "fn", "sync", "calls", "batch_fn", "per")

    def __init__(self, row, fn, sync, calls, batch_fn):
        self.row, self.fn, self.sync, self.calls, self.batch_fn = row, fn, sync, calls, batch_fn
        self.per = []

    def batch(self, calls):
        if self.batch_fn is not None:
            self.batch_fn(calls)
        else:
            fn = self.fn
            for _ in range(calls):
                fn()


class interleaved:
    """Context manager: the launch rows declared inside are timed on exit, interleaved."""

    def __init__(self, res, reps, section="launch"):
        self.res, self.reps, self.section = res, reps, section

    def __enter__(self):
        global _QUEUE
        _QUEUE = []
        return self

    def __exit__(self, *exc):
        global _QUEUE
        queue, _QUEUE = _QUEUE, None
        time_interleaved(self.res, self.reps, queue, self.section)
        return False


def time_interleaved(res, reps, queue, section):
    clock = time.perf_counter_ns
    live = []
    for t in queue:  # warm-up, and drop a path that fails here
        try:
            t.batch(reps.warmup)
            t.sync()
            live.append(t)
        except Exception as e:  # noqa: BLE001
            t.row["error"] = "%s: %s" % (type(e).__name__, e)
            res.note(section, "%s (%s) failed in warm-up: %s" % (
                t.row["path"], t.row["producer"], t.row["error"]))
    log("timing %d launch paths interleaved: %d rounds" % (len(live), reps.batches))
    for _ in range(reps.batches):
        for t in list(live):
            calls = t.calls or reps.calls
            try:
                t0 = clock()
                t.batch(calls)
                t.sync()
                t.per.append((clock() - t0) / calls / 1e3)
            except Exception as e:  # noqa: BLE001
                t.row["error"] = "%s: %s" % (type(e).__name__, e)
                res.note(section, "%s (%s) failed: %s" % (t.row["path"], t.row["producer"],
                                                          t.row["error"]))
                live.remove(t)
    for t in live:
        st = summarize(t.per)
        t.row.update({
            "us_per_call": st["median"], "min_us": st["min"], "p10_us": st["p10"],
            "p90_us": st["p90"], "calls_per_batch": t.calls or reps.calls,
            "batches": len(t.per), "interleaved_with": len(live),
        })
        log("launch %-9s %-56s %8.2f us" % (t.row["producer"], t.row["path"], st["median"]))


def launch_row(res, reps, producer, path, key, fn, sync, check=None, calls=None, info=False,
               batch_fn=None):
    """Checks `fn` once (if `check` is given) and queues it for timing (inside `interleaved`,
    which fills in the row's figures); records one launch row."""
    row = {"producer": producer, "path": path, "key": key, "info_only": info}
    try:
        if check is not None:
            ok, detail = check()
            row["checked"] = bool(ok)
            if not ok:
                row["check_detail"] = detail
                res.note("launch", "%s (%s): WRONG OUTPUT: %s" % (path, producer, detail))
        if _QUEUE is None:
            raise RuntimeError("launch_row outside `interleaved`")
        _QUEUE.append(_Timed(row, fn, sync, calls, batch_fn))
    except Exception as e:  # noqa: BLE001 - every path may fail on its own
        row["error"] = "%s: %s" % (type(e).__name__, e)
        res.note("launch", "%s (%s) failed: %s" % (path, producer, row["error"]))
    res.add("launch", row)
    return row


def make_check(np, poison, call, sync, read, expected):
    def check():
        poison()
        sync()  # the poison must land first even when `call` is unordered (sync='off')
        call()
        sync()
        got = read()
        if got.shape == expected.shape and np.array_equal(got, expected):
            return True, ""
        bad = np.flatnonzero(got.ravel() != expected.ravel())
        i = int(bad[0]) if bad.size else -1
        return False, "%d mismatches, first at %d: got %r want %r" % (
            bad.size, i, got.ravel()[i] if i >= 0 else None, expected.ravel()[i] if i >= 0 else None)
    return check


FC_VARIANTS = [
    ("sync=None (env default)", "none", {}),
    ("sync='default'", "default", {"sync": "default"}),
    ("sync='event'", "event", {"sync": "event"}),
    ("sync='off'", "off", {"sync": "off"}),
    ("sync=None, check_pointers=False", "nocheck", {"check_pointers": False}),
]


def fc_launch_rows(res, reps, np, fk, producer, tag, a, b, out, sync, poison, read, expected,
                   side_stream=None):
    """ferrocuda.kernels.add in each sync mode on one producer's arrays."""
    for label, key, kw in FC_VARIANTS:
        call = partial(fk.add, a, b, out, **kw)
        launch_row(res, reps, producer, "ferrocuda add, " + label, "fc_%s_%s" % (tag, key), call,
                   sync, make_check(np, poison, call, sync, read, expected))
    direct = getattr(fk, "add_f32", None)
    if direct is not None:  # the kernel itself, without the family's dtype/rank dispatch
        call = partial(direct, a, b, out, sync="default")
        launch_row(res, reps, producer, "ferrocuda kernels.add_f32 (no dispatch), sync='default'",
                   "fc_%s_kernel_default" % tag, call, sync,
                   make_check(np, poison, call, sync, read, expected))
    if side_stream is None:
        return
    # On a side stream the producer's stream is foreign: the sync modes now differ.
    stream_arg, last = None, None
    cands = [side_stream] + [getattr(side_stream, attr) for attr in ("ptr", "cuda_stream", "handle")
                             if isinstance(getattr(side_stream, attr, None), int)]
    for cand in cands:
        try:
            fk.add(a, b, out, stream=cand)
            sync()
            stream_arg = cand
            break
        except Exception as e:  # noqa: BLE001
            last = e
    if stream_arg is None:
        res.note("launch", "ferrocuda add(stream=<side stream>) not accepted (%s); side-stream "
                           "rows skipped" % (last,))
        return
    for label, key, kw in FC_VARIANTS[1:]:
        call = partial(fk.add, a, b, out, stream=stream_arg, **kw)
        launch_row(res, reps, producer, "ferrocuda add, side stream, " + label,
                   "fc_%s_side_%s" % (tag, key), call, sync,
                   make_check(np, poison, call, sync, read, expected))


def section_launch(res, reps, mods):
    with interleaved(res, reps):
        floor_rows(res, reps, mods.get("floor_lib"), mods.get("ptx"))
        declare_launch_rows(res, reps, mods)


def floor_rows(res, reps, lib_path, ptx):
    """The raw cuLaunchKernel floor in this process (bench/floor.cu built with -DFLOOR_LIB)."""
    if not lib_path or not ptx:
        res.note("launch", "no --floor-lib/--ptx: no in-process floor (the goals use the "
                           "floor process's figure)")
        return
    import ctypes
    try:
        lib = ctypes.CDLL(lib_path)
        for f in ("floor_open", "floor_launch", "floor_synchronize", "floor_check"):
            getattr(lib, f).restype = ctypes.c_int
        r = lib.floor_open(ptx.encode())
        if r != 0:
            raise RuntimeError("floor_open(%s) returned %d" % (ptx, r))
    except Exception as e:  # noqa: BLE001
        res.note("launch", "in-process floor unavailable: %s: %s" % (type(e).__name__, e))
        return

    def ok(r, what):
        if r != 0:
            raise RuntimeError("%s returned %d" % (what, r))

    def sync():
        ok(lib.floor_synchronize(), "floor_synchronize")

    def check():
        r = lib.floor_check()
        return r == 0, "" if r == 0 else "floor_check returned %d" % r

    for which, key, path in ((0, "floor_inproc_add_f32", "cuLaunchKernel add_f32 (C, this "
                              "process, legacy stream)"),
                             (1, "floor_inproc_empty", "cuLaunchKernel empty kernel (C, this "
                              "process, legacy stream)")):
        launch_row(res, reps, "C driver", path, key, None, sync,
                   check if which == 0 else None,
                   batch_fn=partial(lambda w, n: ok(lib.floor_launch(n, w), "floor_launch"),
                                    which))


def declare_launch_rows(res, reps, mods):
    np, cp, torch, ferrocuda = mods["numpy"], mods["cupy"], mods["torch"], mods["ferrocuda"]
    fk = getattr(ferrocuda, "kernels", None) if ferrocuda is not None else None
    rng = np.random.default_rng(1)
    ha = rng.standard_normal(LAUNCH_N).astype(np.float32)
    hb = rng.standard_normal(LAUNCH_N).astype(np.float32)
    expected = ha + hb

    def noop():
        return None
    launch_row(res, reps, "-", "harness: Python loop + a no-op call", "harness_noop", noop,
               noop, info=True)

    # --- CuPy producer
    if cp is None:
        res.note("launch", "CuPy unavailable: CuPy rows skipped")
    else:
        try:
            a, b, out = cp.asarray(ha), cp.asarray(hb), cp.empty(LAUNCH_N, cp.float32)
            sync = cp.cuda.runtime.deviceSynchronize
            poison = partial(out.fill, float("nan"))
            read = partial(cp.asnumpy, out)
            if fk is not None:
                side = cp.cuda.Stream(non_blocking=True)
                fc_launch_rows(res, reps, np, fk, "cupy", "cupy", a, b, out, sync, poison, read,
                               expected, side_stream=side)
            raw = cp.RawKernel(RAW_ADD_SRC, "add_f32")
            call = partial(raw, (LAUNCH_N // 256,), (256,), (a, b, out, np.int64(LAUNCH_N)))
            launch_row(res, reps, "cupy", "CuPy RawKernel add (CUDA C)", "rawkernel_cupy", call,
                       sync, make_check(np, poison, call, sync, read, expected))
            call = partial(cp.add, a, b, out=out)
            launch_row(res, reps, "cupy", "cupy.add(a, b, out=out)", "cupy_add", call, sync,
                       make_check(np, poison, call, sync, read, expected))

            def cai3():
                return (a.__cuda_array_interface__, b.__cuda_array_interface__,
                        out.__cuda_array_interface__)
            launch_row(res, reps, "cupy", "read 3 __cuda_array_interface__ dicts", "cai_cupy",
                       cai3, sync, info=True)
        except Exception as e:  # noqa: BLE001
            res.note("launch", "CuPy section failed: %s: %s" % (type(e).__name__, e))

    # --- PyTorch producer
    if torch is None:
        res.note("launch", "PyTorch unavailable: torch rows skipped")
    else:
        try:
            ta = torch.from_numpy(ha).cuda()
            tb = torch.from_numpy(hb).cuda()
            tout = torch.empty(LAUNCH_N, dtype=torch.float32, device="cuda")
            sync = torch.cuda.synchronize
            poison = partial(tout.fill_, float("nan"))

            def read():
                return tout.cpu().numpy()
            if fk is not None:
                # A tensor's producer stream is torch's current stream (the default one here),
                # which is also the launch stream: every sync mode has nothing to order, so no
                # side-stream rows here.
                fc_launch_rows(res, reps, np, fk, "torch", "torch", ta, tb, tout, sync, poison,
                               read, expected)
            call = partial(torch.add, ta, tb, out=tout)
            launch_row(res, reps, "torch", "torch.add(a, b, out=out)", "torch_add", call, sync,
                       make_check(np, poison, call, sync, read, expected))

            def cai3t():
                return (ta.__cuda_array_interface__, tb.__cuda_array_interface__,
                        tout.__cuda_array_interface__)
            launch_row(res, reps, "torch", "read 3 __cuda_array_interface__ dicts", "cai_torch",
                       cai3t, sync, info=True)
        except Exception as e:  # noqa: BLE001
            res.note("launch", "torch section failed: %s: %s" % (type(e).__name__, e))

    # --- ferrocuda's own DeviceArray
    if fk is not None:
        try:
            arrs = [to_fc_device_array(ferrocuda, x) for x in (ha, hb, np.zeros_like(ha))]
            if cp is not None:
                sync = cp.cuda.runtime.deviceSynchronize
            elif torch is not None:
                sync = torch.cuda.synchronize
            else:
                raise RuntimeError("no library to synchronize/read back with (need CuPy or torch)")
            read, poison = fc_reader(ferrocuda, np, cp, torch, arrs[2])
            call = partial(fk.add, *arrs)
            launch_row(res, reps, "ferrocuda", "ferrocuda add, DeviceArray, sync=None",
                       "fc_fcarray_none", call, sync,
                       make_check(np, poison, call, sync, read, expected))
            call = partial(fk.add, *arrs, check_pointers=False)
            launch_row(res, reps, "ferrocuda", "ferrocuda add, DeviceArray, check_pointers=False",
                       "fc_fcarray_nocheck", call, sync,
                       make_check(np, poison, call, sync, read, expected))
        except Exception as e:  # noqa: BLE001
            res.note("launch", "ferrocuda.DeviceArray rows skipped: %s: %s" % (type(e).__name__, e))


def to_fc_device_array(ferrocuda, host):
    """A ferrocuda.DeviceArray holding `host`, through whichever constructor the package has."""
    DA = getattr(ferrocuda, "DeviceArray", None)
    attempts = []
    if DA is not None:
        for name in ("from_numpy", "from_host", "from_array", "upload"):
            if hasattr(DA, name):
                attempts.append(partial(getattr(DA, name), host))
        attempts.append(partial(DA, host))
    for name in ("to_device", "asarray", "array"):
        if hasattr(ferrocuda, name):
            attempts.append(partial(getattr(ferrocuda, name), host))
    errors = []
    for f in attempts:
        try:
            x = f()
            cai = getattr(x, "__cuda_array_interface__", None)
            if cai is not None and tuple(cai["shape"]) == tuple(host.shape):
                return x
            errors.append("%r gave %r" % (f, type(x).__name__))
        except Exception as e:  # noqa: BLE001
            errors.append("%s: %s" % (type(e).__name__, e))
    raise RuntimeError("no way found to build a ferrocuda.DeviceArray from a NumPy array (%s)"
                       % "; ".join(errors[-3:]))


def fc_reader(ferrocuda, np, cp, torch, x):
    """(read, poison) for a ferrocuda DeviceArray, through CuPy's CAI import if possible."""
    if cp is not None:
        view = cp.asarray(x)  # zero-copy through __cuda_array_interface__
        return partial(cp.asnumpy, view), partial(view.fill, float("nan"))
    view = torch.as_tensor(x, device="cuda")
    return (lambda: view.cpu().numpy()), partial(view.fill_, float("nan"))


# ---------------------------------------------------------------------------------------------
# GPU time (bandwidth)


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


def calibrate(clock):
    """Spin units per microsecond, from timing a spin between two events."""
    units = 2_000_000
    rate = None
    for _ in range(3):
        clock.record(clock.e0)
        clock.spin_cycles(units)
        clock.record(clock.e1)
        clock.wait()
        ms = clock.elapsed_ms()
        if ms > 0:
            rate = units / (ms * 1e3)
    return rate or 1000.0


def gpu_seconds(clock, call, reps, trials):
    """Median GPU seconds per `call(i)` (i = 0..reps-1), the batch queued behind a spin."""
    for i in range(min(reps, 3)):
        call(i)
    clock.record(clock.e1)
    clock.wait()
    spin_us = 300.0 + 40.0 * reps
    per, starved, respun = [], 0, 0
    for _ in range(trials):
        for attempt in range(5):
            clock.spin_cycles(spin_us * clock.cycles_per_us)
            clock.record(clock.e0)
            for i in range(reps):
                call(i)
            clock.record(clock.e1)
            early = clock.done(clock.e0)  # GPU already past the spin: it may have idled
            clock.wait()
            if not early:
                break
            respun += 1
            spin_us *= 4
        else:
            starved += 1
        per.append(clock.elapsed_ms() / 1e3 / reps)
    return summarize(per), {"starved_trials": starved, "respins": respun, "spin_us": spin_us}


def reps_for(bytes_per_call, target_s=0.01):
    est = bytes_per_call / 2.5e12
    return int(max(3, min(200, round(target_s / est))))


def n_sets(bytes_per_call, l2_bytes):
    """Buffer sets to rotate through so that one pass touches >= 4x L2 (at most 64)."""
    return max(1, min(64, int(math.ceil(4 * l2_bytes / float(bytes_per_call)))))


def sample_index(np, n, seed=3):
    idx = np.random.default_rng(seed).integers(0, n, SAMPLE)
    return np.concatenate([idx, np.array([0, n - 1])])


def bw_row(res, section, impl, label, n, bytes_per_call, clock, call, reps_n, trials, check,
           extra=None):
    row = {"impl": impl, "label": label, "n": n, "log2n": int(round(math.log2(n))) if n else 0,
           "bytes_per_call": bytes_per_call}
    if extra:
        row.update(extra)
    try:
        ok, detail = check() if check else (None, "")
        row["checked"] = ok
        if ok is False:
            row["check_detail"] = detail
            res.note(section, "%s n=%d: WRONG OUTPUT: %s" % (label, n, detail))
        st, info = gpu_seconds(clock, call, reps_n, trials)
        row.update(info)
        row.update({"s_per_call": st["median"], "gbps": bytes_per_call / st["median"] / 1e9,
                    "gbps_best": bytes_per_call / st["min"] / 1e9, "reps": reps_n,
                    "trials": trials})
        if info["starved_trials"]:
            res.note(section, "%s n=%d: %d trial(s) may include host-bound gaps" % (
                label, n, info["starved_trials"]))
        log("%-9s %-40s n=2^%-2d %8.1f GB/s" % (section, label, row["log2n"], row["gbps"]))
    except Exception as e:  # noqa: BLE001
        row["error"] = "%s: %s" % (type(e).__name__, e)
        res.note(section, "%s n=%d failed: %s" % (label, n, row["error"]))
    res.add(section, row)
    return row


def compare(np, got, want):
    if np.array_equal(got, want):
        return True, ""
    bad = np.flatnonzero(got != want)
    return False, "%d/%d mismatches, first at sample %d: got %r want %r" % (
        bad.size, got.size, bad[0], got[bad[0]], want[bad[0]])


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
            res.note("bandwidth", "time budget exhausted: sizes from 2^%d on skipped"
                     % int(math.log2(n)))
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
                    impls.append(("fc_add_cupy", "ferrocuda add (CuPy arrays)",
                                  lambda i: fk.add(*sets[i % k_add])))
                impls.append(("cupy_add", "cupy.add(out=)",
                              lambda i: cp.add(sets[i % k_add][0], sets[i % k_add][1],
                                               out=sets[i % k_add][2])))
                grid = (int(min((n + 255) // 256, 1 << 30)),)
                n64 = np.int64(n)
                impls.append(("rawkernel_add", "CuPy RawKernel add",
                              lambda i: raw(grid, (256,), sets[i % k_add] + (n64,))))
                for key, label, call in impls:
                    check = cupy_check_add(np, cp, a0, b0, o0, n)
                    call(0)
                    bw_row(res, "bandwidth", key, label, n, add_bytes, clock, call, r_add,
                           reps.trials, check, extra)
                sets = a0 = b0 = o0 = impls = check = None  # release the buffers
                # device-to-device copy (cudaMemcpyAsync)
                csets = [(rs.standard_normal(n, dtype=cp.float32) if i == 0 else
                          cp.ones(n, cp.float32), cp.empty(n, cp.float32)) for i in range(k_copy)]

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
                bw_row(res, "bandwidth", "copy_cupy", "D2D copy (CuPy memcpy)", n, copy_bytes,
                       clock, copy_call, r_copy, reps.trials, copy_check, {"sets": k_copy})
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
                impls = [("torch_add", "torch.add(out=)",
                          lambda i: torch.add(tsets[i % k_add][0], tsets[i % k_add][1],
                                              out=tsets[i % k_add][2]))]
                if fk is not None:
                    impls.append(("fc_add_torch", "ferrocuda add (torch tensors)",
                                  lambda i: fk.add(*tsets[i % k_add])))
                for key, label, call in impls:
                    tsets[0][2].fill_(float("nan"))
                    call(0)
                    bw_row(res, "bandwidth", key, label, n, add_bytes, clock, call, r_add,
                           reps.trials, tcheck, {"sets": k_add})
                tsets = impls = None  # release the buffers
                csets = [(torch.randn(n, device="cuda", generator=g) if i == 0 else
                          torch.ones(n, device="cuda"), torch.empty(n, device="cuda"))
                         for i in range(k_copy)]

                def tcopy(i):
                    src, dst = csets[i % k_copy]
                    dst.copy_(src)

                def tcopy_check():
                    torch.cuda.synchronize()
                    src = csets[0][0]
                    return _torch_cmp(np, torch, csets[0][1],
                                      lambda idx: (src if idx is None else src[idx]).cpu().numpy(),
                                      n)
                csets[0][1].fill_(float("nan"))
                tcopy(0)
                bw_row(res, "bandwidth", "copy_torch", "D2D copy (torch copy_)", n, copy_bytes,
                       clock, tcopy, r_copy, reps.trials, tcopy_check, {"sets": k_copy})
                csets = None  # release the buffers
            except Exception as e:  # noqa: BLE001
                res.note("bandwidth", "torch rows at n=%d failed: %s: %s" % (n, type(e).__name__, e))
            torch.cuda.empty_cache()


def section_init(res, reps, mods, sizes, l2_bytes, budget, clock):
    np, cp, ferrocuda = mods["numpy"], mods["cupy"], mods["ferrocuda"]
    fk = getattr(ferrocuda, "kernels", None) if ferrocuda is not None else None
    if cp is None:
        res.note("init", "CuPy unavailable: initialize_array / memset section skipped")
        return
    for n in sizes:
        if budget.left() < 15:
            res.note("init", "time budget exhausted: sizes from 2^%d on skipped" % int(math.log2(n)))
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
                impls.append(("fc_init", "ferrocuda initialize_array",
                              lambda i: fk.initialize_array(xs[i % k]), arange_want))
            impls.append(("memset_cupy", "cudaMemsetAsync (CuPy memset_async)",
                          lambda i: xs[i % k].data.memset_async(0, nbytes), const_want(0)))
            impls.append(("fill_cupy", "CuPy x.fill(7) (a kernel)",
                          lambda i: xs[i % k].fill(7), const_want(7)))
            for key, label, call, want in impls:
                xs[0].fill(-1)
                call(0)
                bw_row(res, "init", key, label, n, nbytes, clock, call, r, reps.trials,
                       readback(want), {"sets": k})
            xs = impls = None  # release the buffers
        except Exception as e:  # noqa: BLE001
            res.note("init", "n=%d failed: %s: %s" % (n, type(e).__name__, e))
        cp.get_default_memory_pool().free_all_blocks()


ADD_INDEX_VIEWS = [
    # key, label, base shape from logical (A, B, C), how to view it
    ("contiguous", "contiguous", lambda A, B, C: (A, B, C), lambda x: x),
    ("t210", "transpose(2,1,0) of (C,B,A)", lambda A, B, C: (C, B, A),
     lambda x: x.transpose(2, 1, 0)),
    ("t021", "transpose(0,2,1) of (A,C,B)", lambda A, B, C: (A, C, B),
     lambda x: x.transpose(0, 2, 1)),
    ("step_outer", "[::2, :, :] of (2A,B,C)", lambda A, B, C: (2 * A, B, C), lambda x: x[::2]),
    ("step_inner", "[:, :, ::2] of (A,B,2C)", lambda A, B, C: (A, B, 2 * C),
     lambda x: x[:, :, ::2]),
]


def section_add_index(res, reps, mods, budget, clock, shape):
    np, cp, ferrocuda = mods["numpy"], mods["cupy"], mods["ferrocuda"]
    fk = getattr(ferrocuda, "kernels", None) if ferrocuda is not None else None
    if cp is None:
        res.note("add_index", "CuPy unavailable: add_index section skipped (it builds views with "
                              "CuPy)")
        return
    A, B, C = shape
    n = A * B * C
    # 1. Exact check of every view kind against NumPy on a small shape (untouched elements too).
    small = (6, 10, 14)
    checks = {}
    if fk is not None:
        for key, label, base_shape, view in ADD_INDEX_VIEWS:
            try:
                hbase = np.random.default_rng(5).integers(-50, 50, base_shape(*small)).astype(
                    np.float32)
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
                res.note("add_index", "%s: small-shape check vs NumPy failed: %s" % (
                    label, checks[key][1]))
    nbytes = 8 * n  # read + write of every element of the view
    r = reps_for(nbytes)
    for key, label, base_shape, view in ADD_INDEX_VIEWS:
        if budget.left() < 10:
            res.note("add_index", "time budget exhausted: %s and later views skipped" % label)
            break
        try:
            base = cp.zeros(base_shape(A, B, C), cp.float32)
            v = view(base)
            extra = {"view": key, "shape": list(v.shape),
                     "strides_elems": [s // 4 for s in v.strides]}
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
                bw_row(res, "add_index", "fc_add_index", "ferrocuda add_index " + label, n,
                       nbytes, clock, lambda i, v=v: fk.add_index(v), r, reps.trials,
                       big_check, extra)

            def cupy_inc(i, v=v):
                v += 1.0
            bw_row(res, "add_index", "cupy_inplace_add", "CuPy view += 1 " + label, n, nbytes,
                   clock, cupy_inc, r, reps.trials, None, extra)
            base = v = None  # release the buffers
        except Exception as e:  # noqa: BLE001
            res.note("add_index", "%s failed: %s: %s" % (label, type(e).__name__, e))
        cp.get_default_memory_pool().free_all_blocks()


# ---------------------------------------------------------------------------------------------
# Numba (child process)


def numba_child(args):
    """Runs in a subprocess with NumPy < 2.5 first on sys.path; prints one JSON line."""
    res = Results()
    out = {"versions": {}}
    reps = Reps(args.quick)
    try:
        import numpy as np
        out["versions"]["numpy"] = np.__version__
        import numba
        from numba import cuda
        out["versions"]["numba"] = numba.__version__
        try:
            import numba_cuda  # noqa: F401
            out["versions"]["numba_cuda"] = getattr(numba_cuda, "__version__", "?")
        except Exception:  # noqa: BLE001
            pass
        if not cuda.is_available():
            raise RuntimeError("numba.cuda.is_available() is False")
    except Exception as e:  # noqa: BLE001
        res.note("numba", "Numba unusable in the child: %s: %s" % (type(e).__name__, e))
        out.update(res.data)
        print(CHILD_TAG + json.dumps(out), flush=True)
        return 0

    @cuda.jit
    def nb_add(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] + b[i]

    def nb_launch(a, b, o, n):
        nb_add[(n + 255) // 256, 256](a, b, o)

    rng = np.random.default_rng(1)
    ha = rng.standard_normal(LAUNCH_N).astype(np.float32)
    hb = rng.standard_normal(LAUNCH_N).astype(np.float32)
    expected = ha + hb
    sync = cuda.synchronize
    da, db = cuda.to_device(ha), cuda.to_device(hb)
    dout = cuda.device_array(LAUNCH_N, np.float32)
    nan = np.full(LAUNCH_N, np.nan, np.float32)
    poison = partial(dout.copy_to_device, nan)
    read = dout.copy_to_host

    def launch(a, b, o):
        return lambda: nb_add[4, 256](a, b, o)
    with interleaved(res, reps, "numba"):
        call = launch(da, db, dout)
        launch_row(res, reps, "numba", "Numba @cuda.jit add, Numba device arrays", "numba_numba",
                   call, sync, make_check(np, poison, call, sync, read, expected))
        try:
            import ferrocuda
            fk = ferrocuda.kernels
            for label, key, kw in (FC_VARIANTS[0], FC_VARIANTS[3], FC_VARIANTS[4]):
                call = partial(fk.add, da, db, dout, **kw)
                launch_row(res, reps, "numba", "ferrocuda add, " + label, "fc_numba_" + key, call,
                           sync, make_check(np, poison, call, sync, read, expected))
        except Exception as e:  # noqa: BLE001
            res.note("numba", "ferrocuda on Numba arrays skipped: %s: %s" % (type(e).__name__, e))
        fewer = reps
        try:
            import cupy as cp
            ca, cb, cout = cp.asarray(ha), cp.asarray(hb), cp.empty(LAUNCH_N, cp.float32)
            call = launch(ca, cb, cout)
            launch_row(res, fewer, "cupy", "Numba @cuda.jit add, CuPy arrays", "numba_cupy", call,
                       sync, make_check(np, partial(cout.fill, float("nan")), call, sync,
                                        partial(cp.asnumpy, cout), expected))
        except Exception as e:  # noqa: BLE001
            res.note("numba", "Numba on CuPy arrays skipped: %s: %s" % (type(e).__name__, e))
        try:
            import torch
            ta, tb = torch.from_numpy(ha).cuda(), torch.from_numpy(hb).cuda()
            tout = torch.empty(LAUNCH_N, dtype=torch.float32, device="cuda")
            call = launch(ta, tb, tout)
            launch_row(res, fewer, "torch", "Numba @cuda.jit add, torch tensors", "numba_torch",
                       call, sync, make_check(np, partial(tout.fill_, float("nan")), call, sync,
                                              lambda: tout.cpu().numpy(), expected))
        except Exception as e:  # noqa: BLE001
            res.note("numba", "Numba on torch tensors skipped: %s: %s" % (type(e).__name__, e))

    # Bandwidth: the Numba add kernel on Numba device arrays.
    if "bandwidth" in args.sections:
        try:
            clock = NumbaClock(cuda, np)
            budget = Budget(args.budget_s)
            for n in sizes_from(args):
                if budget.left() < 10:
                    res.note("bandwidth", "Numba: time budget exhausted at 2^%d" % int(math.log2(n)))
                    break
                nbytes = 12 * n
                k = n_sets(nbytes, args.l2_bytes)
                hsa = np.random.default_rng(7).random(n, dtype=np.float32)
                hsb = np.random.default_rng(8).random(n, dtype=np.float32)
                ones = np.ones(n, np.float32) if k > 1 else None
                sets = [(cuda.to_device(hsa if i == 0 else ones),
                         cuda.to_device(hsb if i == 0 else ones),
                         cuda.device_array(n, np.float32)) for i in range(k)]
                sets[0][2].copy_to_device(np.full(n, np.nan, np.float32))

                def nb_call(i, n=n, k=k, sets=sets):
                    a, b, o = sets[i % k]
                    nb_launch(a, b, o, n)

                def nb_check(n=n, sets=sets, hsa=hsa, hsb=hsb):
                    sync()
                    got = sets[0][2].copy_to_host()
                    if n <= FULL_CHECK_MAX:
                        return compare(np, got, hsa + hsb)
                    idx = sample_index(np, n)
                    return compare(np, got[idx], hsa[idx] + hsb[idx])
                nb_call(0)
                bw_row(res, "bandwidth", "numba_add", "Numba add kernel (Numba arrays)", n,
                       nbytes, clock, nb_call, reps_for(nbytes), reps.trials, nb_check,
                       {"sets": k})
                sets = None  # release the buffers
        except Exception as e:  # noqa: BLE001
            res.note("bandwidth", "Numba bandwidth failed: %s: %s" % (type(e).__name__, e))
    out.update(res.data)
    print(CHILD_TAG + json.dumps(out), flush=True)
    return 0


def run_numba_child(res, args, budget):
    site = os.environ.get("FERROCUDA_NUMBA_SITE", "")
    if not site:
        res.note("numba", "FERROCUDA_NUMBA_SITE is not set: Numba rows skipped (Numba needs "
                          "NumPy < 2.5 first on PYTHONPATH)")
        return
    if not os.path.isdir(site):
        res.note("numba", "FERROCUDA_NUMBA_SITE=%s is not a directory: Numba rows skipped" % site)
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("NUMBA_DISABLE_PERFORMANCE_WARNINGS", "1")
    timeout = max(30.0, min(args.numba_timeout, budget.left() - 5))
    cmd = [sys.executable, os.path.abspath(__file__), "--numba-child",
           "--min-log2", str(args.min_log2), "--max-log2", str(args.max_log2),
           "--sections", ",".join(args.sections), "--l2-bytes", str(args.l2_bytes),
           "--budget-s", str(max(10.0, timeout - 20))]
    if args.quick:
        cmd.append("--quick")
    log("numba child: PYTHONPATH starts with %s (timeout %.0f s)" % (site, timeout))
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        res.note("numba", "Numba child timed out after %.0f s" % timeout)
        return
    for line in p.stderr.splitlines():
        print("  [numba child] " + line, file=sys.stderr)
    payload = None
    for line in p.stdout.splitlines():
        if line.startswith(CHILD_TAG):
            payload = json.loads(line[len(CHILD_TAG):])
        else:
            print("  [numba child] " + line, file=sys.stderr)
    if payload is None:
        res.note("numba", "Numba child exited %d without results: %s" % (
            p.returncode, " | ".join(p.stderr.strip().splitlines()[-3:])))
        return
    res.data["machine"]["numba_child_versions"] = payload.get("versions", {})
    for section in ("launch", "bandwidth"):
        res.data[section].extend(payload.get(section, []))
    res.data["notes"].extend(payload.get("notes", []))


# ---------------------------------------------------------------------------------------------
# Report


def read_jsonl(path, res, section):
    rows = []
    if not path:
        return rows
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError as e:
        res.note(section, "cannot read %s: %s" % (path, e))
    if not rows:
        res.note(section, "no %s results (%s)" % (section, path))
    return rows


def fmt(x, digits=2):
    if x is None:
        return "—"
    return ("%." + str(digits) + "f") % x


def ratio(x, y):
    if x is None or y is None or y == 0:
        return None
    return x / y


def by_key(rows, key_field="key"):
    d = {}
    for r in rows:
        k = r.get(key_field)
        if k is not None and r.get("us_per_call") is not None:
            d[k] = r
    return d


def us(row):
    return None if row is None else row.get("us_per_call")


def bw_lookup(rows, impl, log2n):
    for r in rows:
        if r.get("impl") == impl and r.get("log2n") == log2n and r.get("gbps") is not None:
            return r
    return None


def floor_of(data):
    """(µs, what) of the floor the ratios use: the in-process, interleaved one when measured,
    else the floor process's `launch_add_f32`."""
    inproc = us(by_key(data["launch"]).get("floor_inproc_add_f32"))
    if inproc is not None:
        return inproc, "C `cuLaunchKernel` of the same add_f32 in this process, interleaved " \
                       "with the other rows (`floor_inproc_add_f32`)"
    floor = {r.get("name"): r for r in data["floor"]}
    return us(floor.get("launch_add_f32")), "C `cuLaunchKernel` of the same add_f32 " \
                                            "(floor process, `launch_add_f32`)"


def compute_goals(data):
    goals = []
    floor_us, _ = floor_of(data)
    launch = by_key(data["launch"])
    # "Default mode" = sync='default' named explicitly (sync=None follows the environment).
    fc_cupy = us(launch.get("fc_cupy_default") or launch.get("fc_cupy_none"))
    raw = us(launch.get("rawkernel_cupy"))
    fc_torch = us(launch.get("fc_torch_default") or launch.get("fc_torch_none"))
    tadd = us(launch.get("torch_add"))

    def goal(name, value, target, ok, unit=""):
        status = "n/a" if ok is None else ("PASS" if ok else "MISS")
        goals.append({"goal": name, "measured": value, "target": target, "status": status,
                      "unit": unit})

    r1 = ratio(fc_cupy, floor_us)
    goal("Python, 3 CuPy arrays, default mode: ≤ 1.7× raw cuLaunchKernel floor (add_f32)", r1,
         "≤ 1.70×", None if r1 is None else r1 <= 1.7, "×")
    goal("Python, 3 CuPy arrays, default mode: below CuPy RawKernel", ratio(fc_cupy, raw),
         "< 1.00×", None if fc_cupy is None or raw is None else fc_cupy < raw, "×")
    goal("Python, 3 torch tensors, default mode: no slower than torch.add(out=)",
         ratio(fc_torch, tadd), "≤ 1.00×", None if fc_torch is None or tadd is None
         else fc_torch <= tadd, "×")
    fc_bw = bw_lookup(data["bandwidth"], "fc_add_cupy", 28)
    t_bw = bw_lookup(data["bandwidth"], "torch_add", 28)
    rb = ratio(fc_bw and fc_bw["gbps"], t_bw and t_bw["gbps"])
    goal("add at 2^28 float32: ≥ 1.0× torch.add bandwidth", rb, "≥ 1.00×",
         None if rb is None else rb >= 1.0, "×")
    ai = {r.get("view"): r for r in data["add_index"]
          if r.get("impl") == "fc_add_index" and r.get("gbps") is not None}
    cont = ai.get("contiguous")
    for key, label, _, _ in ADD_INDEX_VIEWS[1:]:
        rv = ratio(ai[key]["gbps"] if key in ai else None, cont["gbps"] if cont else None)
        why = (" (inner-axis step 2: half of every 32-byte sector is unused, so ~0.5× is "
               "the hardware bound)" if key == "step_inner" else "")
        goal("add_index 3-D %s: ≥ 0.8× contiguous%s" % (label, why), rv, "≥ 0.80×",
             None if rv is None else rv >= 0.8, "×")
    return goals


def render(data):
    out = []
    p = out.append
    m = data["machine"]
    p("")
    p("# ferrocuda benchmarks")
    p("")
    p("Machine: %s | driver %s | %s | Python %s | NumPy %s | CuPy %s | torch %s | ferrocuda %s" % (
        m.get("gpu", "?"), m.get("driver", "?"), m.get("cuda_runtime", ""), m.get("python", "?"),
        m.get("numpy", "—"), m.get("cupy", "—"), m.get("torch", "—"), m.get("ferrocuda", "—")))
    nv = m.get("numba_child_versions")
    if nv:
        p("Numba child: %s" % ", ".join("%s %s" % kv for kv in sorted(nv.items())))
    floor_us, floor_what = floor_of(data)
    launch = by_key(data["launch"])
    raw = us(launch.get("rawkernel_cupy"))
    tadd = us(launch.get("torch_add"))

    p("")
    p("## Launch overhead: 3 × float32[1024], host µs per call (median of rounds)")
    p("")
    p("Ratios: × floor = vs %s; × RawKernel = vs CuPy RawKernel; × torch.add = vs "
      "`torch.add(out=)`. The Python rows of one process are timed interleaved (one batch of "
      "each per round); the `C driver` rows without `this process` and the Rust rows come from "
      "their own processes, run before." % floor_what)
    p("")
    p("| who | path | µs/call | p10–p90 | × floor | × RawKernel | × torch.add | checked |")
    p("| --- | --- | ---: | ---: | ---: | ---: | ---: | :---: |")
    for r in data["floor"]:
        if r.get("name") == "device" or r.get("us_per_call") is None:
            continue
        u = r["us_per_call"]
        p("| C driver | %s | %s | %s–%s | %s | %s | %s | %s |" % (
            r["name"], fmt(u, 3), fmt(r.get("p10_us"), 3), fmt(r.get("p90_us"), 3),
            fmt(ratio(u, floor_us)), fmt(ratio(u, raw)), fmt(ratio(u, tadd)),
            "ok" if "add" in r["name"] else ""))
    for r in data["rust"]:
        u = r.get("us_per_launch")
        if u is None:
            continue
        p("| Rust | add_f32 %s | %s | %s–%s | %s | %s | %s | %s |" % (
            r.get("name"), fmt(u, 3), fmt(r.get("p10_us"), 3), fmt(r.get("p90_us"), 3),
            fmt(ratio(u, floor_us)), fmt(ratio(u, raw)), fmt(ratio(u, tadd)),
            "ok" if r.get("checked") else "—"))
    for r in data["launch"]:
        u = r.get("us_per_call")
        chk = {True: "ok", False: "**WRONG**"}.get(r.get("checked"), "—")
        if u is None:
            p("| %s | %s | %s | | | | | |" % (r.get("producer"), r.get("path"),
                                          "failed: " + r.get("error", "?")[:60]))
            continue
        p("| %s | %s | %s | %s–%s | %s | %s | %s | %s |" % (
            r.get("producer"), r.get("path") + (" (info)" if r.get("info_only") else ""),
            fmt(u, 3), fmt(r.get("p10_us"), 3), fmt(r.get("p90_us"), 3),
            fmt(ratio(u, floor_us)), fmt(ratio(u, raw)), fmt(ratio(u, tadd)), chk))

    def bw_table(title, rows, note):
        if not rows:
            return
        sizes = sorted({r["log2n"] for r in rows if r.get("log2n") is not None})
        impls = []
        for r in rows:
            if r["impl"] not in [i for i, _ in impls]:
                impls.append((r["impl"], r["label"]))
        p("")
        p("## " + title)
        p("")
        if note:
            p(note)
            p("")
        p("| impl | " + " | ".join("2^%d" % s for s in sizes) + " | checked |")
        p("| --- | " + " | ".join("---:" for _ in sizes) + " | :---: |")
        for impl, label in impls:
            cells, checked = [], set()
            for s in sizes:
                r = next((x for x in rows if x["impl"] == impl and x["log2n"] == s), None)
                if r is not None:
                    checked.add(r.get("checked"))
                cells.append(fmt(r.get("gbps"), 0) if r and r.get("gbps") else "—")
            chk = "**WRONG**" if False in checked else ("ok" if True in checked else "—")
            p("| %s | %s | %s |" % (label, " | ".join(cells), chk))

    bw_table("Bandwidth: out = a + b, float32, GB/s (2 reads + 1 write; copy: 1 read + 1 write)",
             data["bandwidth"], "GPU time by CUDA events over a batch queued behind a spin "
             "kernel; median of trials; buffers rotated to ≥ 4× L2.")
    fa = bw_lookup(data["bandwidth"], "fc_add_cupy", 28)
    ta = bw_lookup(data["bandwidth"], "torch_add", 28)
    if fa and ta:
        p("")
        p("ferrocuda add / torch.add at 2^28: **%.3f×**" % (fa["gbps"] / ta["gbps"]))
    bw_table("initialize_array vs memset, int32, GB/s (1 write)", data["init"], "")

    ai = [r for r in data["add_index"] if r.get("gbps") is not None]
    if data["add_index"]:
        p("")
        p("## add_index on 3-D float32 views, GB/s (1 read + 1 write per element)")
        p("")
        p("| view | shape | strides (elements) | ferrocuda GB/s | × contiguous | CuPy `+= 1` GB/s"
          " | × contiguous | checked |")
        p("| --- | --- | --- | ---: | ---: | ---: | ---: | :---: |")
        fc = {r["view"]: r for r in ai if r["impl"] == "fc_add_index"}
        cu = {r["view"]: r for r in ai if r["impl"] == "cupy_inplace_add"}
        for key, label, _, _ in ADD_INDEX_VIEWS:
            f, c = fc.get(key), cu.get(key)
            any_r = f or c
            if any_r is None:
                continue
            chk = {True: "ok", False: "**WRONG**"}.get(f.get("checked") if f else None, "—")
            p("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                label, tuple(any_r.get("shape", [])), tuple(any_r.get("strides_elems", [])),
                fmt(f and f["gbps"], 0), fmt(ratio(f and f["gbps"], fc.get("contiguous", {}).get("gbps"))),
                fmt(c and c["gbps"], 0), fmt(ratio(c and c["gbps"], cu.get("contiguous", {}).get("gbps"))),
                chk))

    p("")
    p("## Goals (issue 5)")
    p("")
    p("| goal | measured | target | status |")
    p("| --- | ---: | ---: | :---: |")
    for g in data["goals"]:
        p("| %s | %s | %s | %s |" % (g["goal"], fmt(g["measured"], 3) + (g["unit"] if
                                     g["measured"] is not None else ""), g["target"], g["status"]))
    if data["notes"]:
        p("")
        p("## Notes")
        p("")
        for n in data["notes"]:
            p("- [%s] %s" % (n["section"], n["note"]))
    p("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------


def try_import(name, res):
    try:
        return __import__(name)
    except Exception as e:  # noqa: BLE001
        res.note("setup", "import %s failed: %s: %s" % (name, type(e).__name__, e))
        return None


def sizes_from(args):
    return [1 << k for k in range(args.min_log2, args.max_log2 + 1)]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    out_dir = os.environ.get("OUT")
    ap.add_argument("--json", default=os.path.join(out_dir, "bench.json") if out_dir else "bench.json")
    ap.add_argument("--floor", default=None, help="JSON lines of bench/floor.cu")
    ap.add_argument("--rust", default=None, help="JSON lines of the Rust launch bench")
    ap.add_argument("--floor-lib", default=None,
                    help="bench/floor.cu built with -DFLOOR_LIB (the floor in this process)")
    ap.add_argument("--ptx", default=None, help="the bundled PTX, for --floor-lib")
    ap.add_argument("--gpu-info", default=None, help="nvidia-smi CSV line (name, driver, memory)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, sizes up to 2^24")
    ap.add_argument("--min-log2", type=int, default=20)
    ap.add_argument("--max-log2", type=int, default=None)
    ap.add_argument("--sections", default="launch,bandwidth,init,add_index,numba")
    ap.add_argument("--budget-s", type=float, default=330.0,
                    help="wall-clock budget for the measurements (later sizes are skipped)")
    ap.add_argument("--numba-timeout", type=float, default=150.0)
    ap.add_argument("--l2-bytes", type=int, default=0, help="L2 size (default: from the device)")
    ap.add_argument("--table-only", action="store_true",
                    help="measure nothing: merge --floor/--rust and print the tables")
    ap.add_argument("--numba-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.max_log2 is None:
        args.max_log2 = 24 if args.quick else 28
    args.sections = [s for s in args.sections.split(",") if s]
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.numba_child:
        if not args.l2_bytes:
            args.l2_bytes = 50 << 20
        return numba_child(args)
    res = Results()
    budget = Budget(args.budget_s)
    m = res.data["machine"]
    m.update({"python": platform.python_version(), "host": platform.node(),
              "args": vars(args).copy(), "sync_env": os.environ.get(
                  "FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC")})
    if args.gpu_info and os.path.exists(args.gpu_info):
        with open(args.gpu_info) as f:
            parts = [x.strip() for x in f.read().strip().split(",")]
        if parts and parts[0]:
            m["gpu"] = parts[0]
            if len(parts) > 1:
                m["driver"] = parts[1]
            if len(parts) > 2:
                m["memory"] = parts[2]
    res.data["floor"] = read_jsonl(args.floor, res, "floor") if args.floor else []
    res.data["rust"] = [r for r in read_jsonl(args.rust, res, "rust") if r.get("bench") ==
                        "rust_launch"] if args.rust else []
    for r in res.data["floor"]:
        if r.get("name") == "device":
            m.setdefault("gpu", r.get("device"))
            m.setdefault("driver", r.get("driver_version"))
            m["sm_count"] = r.get("sm_count")

    if not args.table_only:
        mods = {}
        mods["numpy"] = try_import("numpy", res)
        if mods["numpy"] is None:
            res.note("setup", "NumPy is required for the Python sections; none measured")
        else:
            mods["cupy"] = try_import("cupy", res)
            mods["torch"] = try_import("torch", res)
            if mods["torch"] is not None and not mods["torch"].cuda.is_available():
                res.note("setup", "torch.cuda.is_available() is False: torch rows skipped")
                mods["torch"] = None
            mods["floor_lib"], mods["ptx"] = args.floor_lib, args.ptx
            mods["ferrocuda"] = try_import("ferrocuda", res)
            if mods["ferrocuda"] is not None and not hasattr(mods["ferrocuda"], "kernels"):
                res.note("setup", "ferrocuda has no `kernels` module: ferrocuda rows skipped")
                mods["ferrocuda"] = None
            for k in ("numpy", "cupy", "torch", "ferrocuda"):
                if mods.get(k) is not None:
                    m[k] = getattr(mods[k], "__version__", "?")
            if mods.get("ferrocuda") is not None and mods.get("cupy") is not None:
                src = getattr(getattr(mods["ferrocuda"], "_ferrocuda", None),
                              "_cupy_stream_source", None)
                if src is not None:
                    m["cupy_stream_source"] = src()
            cp = mods["cupy"]
            if cp is not None:
                try:
                    props = cp.cuda.runtime.getDeviceProperties(0)
                    name = props.get("name", b"")
                    m["gpu_cupy"] = name.decode() if isinstance(name, bytes) else str(name)
                    m.setdefault("gpu", m["gpu_cupy"])
                    if not args.l2_bytes and props.get("l2CacheSize"):
                        args.l2_bytes = int(props["l2CacheSize"])
                    m["cuda_runtime"] = "CUDA runtime %d" % cp.cuda.runtime.runtimeGetVersion()
                except Exception as e:  # noqa: BLE001
                    res.note("setup", "device properties: %s" % e)
            if not args.l2_bytes:
                args.l2_bytes = 50 << 20  # H100
            m["l2_bytes"] = args.l2_bytes
            reps = Reps(args.quick)
            steps = [
                ("launch", lambda: section_launch(res, reps, mods)),
            ]
            clock = None
            if any(s in args.sections for s in ("bandwidth", "init", "add_index")):
                try:
                    if cp is not None:
                        clock = CupyClock(cp, mods["numpy"])
                    elif mods["torch"] is not None:
                        clock = TorchClock(mods["torch"])
                    else:
                        res.note("setup", "neither CuPy nor torch: no GPU timer, GPU-time "
                                          "sections skipped")
                    if clock is not None:
                        m["spin_units_per_us"] = clock.cycles_per_us
                except Exception as e:  # noqa: BLE001
                    res.note("setup", "GPU timer failed: %s: %s" % (type(e).__name__, e))
            if clock is not None:
                sizes = sizes_from(args)
                steps += [
                    ("bandwidth", lambda: section_bandwidth(res, reps, mods, sizes, args.l2_bytes,
                                                            budget, clock)),
                    ("init", lambda: section_init(res, reps, mods, sizes, args.l2_bytes, budget,
                                                  clock)),
                    ("add_index", lambda: section_add_index(
                        res, reps, mods, budget, clock,
                        (64, 128, 256) if args.quick else ADD_INDEX_SHAPE)),
                ]
            steps.append(("numba", lambda: run_numba_child(res, args, budget)))
            for name, fn in steps:
                if name not in args.sections:
                    continue
                log("=== section %s (%.0f s of budget left)" % (name, budget.left()))
                try:
                    fn()
                except Exception as e:  # noqa: BLE001
                    res.note(name, "section crashed: %s: %s\n%s" % (
                        type(e).__name__, e, traceback.format_exc(limit=3)))
    res.data["goals"] = compute_goals(res.data)
    try:
        d = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(d):
            os.makedirs(d)
        with open(args.json, "w") as f:
            json.dump(res.data, f, indent=1, default=str)
        log("wrote %s" % args.json)
    except OSError as e:
        res.note("output", "cannot write %s: %s" % (args.json, e))
    sys.stderr.flush()
    print(render(res.data), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
