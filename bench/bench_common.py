"""Shared parts of the benchmark harness (``python_bench.py``): constants, results, repetitions,
the interleaved launch timing, and the GPU-time measurement of one row.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
import time

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


ADD_INDEX_VIEWS = [
    # key, label, base shape from logical (A, B, C), how to view it
    ("contiguous", "contiguous", lambda A, B, C: (A, B, C), lambda x: x),
    (
        "t210",
        "transpose(2,1,0) of (C,B,A)",
        lambda A, B, C: (C, B, A),
        lambda x: x.transpose(2, 1, 0),
    ),
    (
        "t021",
        "transpose(0,2,1) of (A,C,B)",
        lambda A, B, C: (A, C, B),
        lambda x: x.transpose(0, 2, 1),
    ),
    ("step_outer", "[::2, :, :] of (2A,B,C)", lambda A, B, C: (2 * A, B, C), lambda x: x[::2]),
    (
        "step_inner",
        "[:, :, ::2] of (A,B,2C)",
        lambda A, B, C: (A, B, 2 * C),
        lambda x: x[:, :, ::2],
    ),
]


FC_VARIANTS = [
    ("sync=None (env default)", "none", {}),
    ("sync='default'", "default", {"sync": "default"}),
    ("sync='event'", "event", {"sync": "event"}),
    ("sync='off'", "off", {"sync": "off"}),
    ("sync=None, check_pointers=False", "nocheck", {"check_pointers": False}),
]


# Bound launches (``launch = fk.add.bind(a, b, out, **kw)``, then ``launch()``): what a loop
# pays per launch once the arguments are read and checked.
BOUND_VARIANTS = [
    ("sync=None (env default)", "none", {}),
    ("sync='default'", "default", {"sync": "default"}),
    ("sync='event'", "event", {"sync": "event"}),
    ("sync='off'", "off", {"sync": "off"}),
]


def bound_launch_rows(
    res, reps, producer, tag, launcher, args, sync, check_for, variants=None, **kw
):
    """One row per bound-launch variant: ``launcher.bind(*args, **kw, **variant)`` timed per
    ``launch()``; `check_for(call)` makes the row's output check. Rows are skipped, with a
    note, on a ferrocuda without ``bind``."""
    if not hasattr(launcher, "bind"):
        res.note("launch", "%s has no bind(): bound-launch rows skipped" % (launcher,))
        return
    side = " side stream," if "stream" in kw else ""
    for label, key, vkw in variants or BOUND_VARIANTS:
        try:
            call = launcher.bind(*args, **dict(kw, **vkw))
        except Exception as e:  # noqa: BLE001 - recorded as the row's error
            res.note(
                "launch", "%s bind(%s) failed: %s: %s" % (producer, label, type(e).__name__, e)
            )
            continue
        launch_row(
            res,
            reps,
            producer,
            "ferrocuda add, bound,%s %s" % (side, label),
            "fc_%s_bound_%s%s" % (tag, "side_" if side else "", key),
            call,
            sync,
            check_for(call),
        )


def log(*parts):
    print("[bench]", *parts, file=sys.stderr, flush=True)


def quantile(sorted_xs, q):
    pos = q * (len(sorted_xs) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(xs):
    s = sorted(xs)
    return {
        "median": quantile(s, 0.5),
        "min": s[0],
        "p10": quantile(s, 0.1),
        "p90": quantile(s, 0.9),
    }


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
    __slots__ = ("batch_fn", "calls", "fn", "per", "row", "sync")

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
            res.note(
                section,
                "%s (%s) failed in warm-up: %s"
                % (t.row["path"], t.row["producer"], t.row["error"]),
            )
    log("timing %d launch paths interleaved: %d rounds" % (len(live), reps.batches))
    # Each round runs every path once, in an order shuffled afresh (seeded: the same sequence
    # each run), so that no path always follows the same neighbour or sits at the same place
    # in the round. Each path's per-round times are kept (`per_round_us`, in round order):
    # the report's paired ratios divide two paths' times of the same round.
    order_rng = random.Random(16)
    for _ in range(reps.batches):
        order = list(live)
        order_rng.shuffle(order)
        for t in order:
            calls = t.calls or reps.calls
            try:
                t0 = clock()
                t.batch(calls)
                t.sync()
                t.per.append((clock() - t0) / calls / 1e3)
            except Exception as e:  # noqa: BLE001
                t.row["error"] = "%s: %s" % (type(e).__name__, e)
                res.note(
                    section,
                    "%s (%s) failed: %s" % (t.row["path"], t.row["producer"], t.row["error"]),
                )
                live.remove(t)
    for t in live:
        st = summarize(t.per)
        t.row.update(
            {
                "us_per_call": st["median"],
                "min_us": st["min"],
                "p10_us": st["p10"],
                "p90_us": st["p90"],
                "calls_per_batch": t.calls or reps.calls,
                "batches": len(t.per),
                "interleaved_with": len(live),
                "per_round_us": [round(x, 4) for x in t.per]
                if len(t.per) == reps.batches
                else None,
            }
        )
        log("launch %-9s %-56s %8.2f us" % (t.row["producer"], t.row["path"], st["median"]))


def launch_row(
    res, reps, producer, path, key, fn, sync, check=None, calls=None, info=False, batch_fn=None
):
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
            bad.size,
            i,
            got.ravel()[i] if i >= 0 else None,
            expected.ravel()[i] if i >= 0 else None,
        )

    return check


def sizes_from(args):
    return [1 << k for k in range(args.min_log2, args.max_log2 + 1)]


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


SPIN_CAP_US = 200_000.0


def gpu_seconds(clock, call, reps, trials):
    """Median GPU seconds per `call(i)` (i = 0..reps-1), the batch queued behind a spin."""
    for i in range(min(reps, 3)):
        call(i)
    clock.record(clock.e1)
    clock.wait()
    base_us = 300.0 + 40.0 * reps
    # A spin that the GPU finished before the batch was queued ("early") is lengthened, up to
    # SPIN_CAP_US, and starts again from base_us each trial: a call that synchronizes with the
    # host (cupy.bincount reads the maximum) always finds the spin done, and a spin grown
    # geometrically across trials would run for minutes.
    spin_us = base_us
    per, starved, respun = [], 0, 0
    for _ in range(trials):
        spin_us = base_us
        for _attempt in range(5):
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
            spin_us = min(spin_us * 4, SPIN_CAP_US)
        else:
            starved += 1
        per.append(clock.elapsed_ms() / 1e3 / reps)
    return summarize(per), {"starved_trials": starved, "respins": respun, "spin_us": spin_us}


def reps_for(bytes_per_call, target_s=0.01):
    est = bytes_per_call / 2.5e12
    return int(max(3, min(200, round(target_s / est))))


def n_sets(bytes_per_call, l2_bytes):
    """Buffer sets to rotate through so that one pass touches >= 4x L2 (at most 64)."""
    return max(1, min(64, math.ceil(4 * l2_bytes / float(bytes_per_call))))


def sample_index(np, n, seed=3):
    idx = np.random.default_rng(seed).integers(0, n, SAMPLE)
    return np.concatenate([idx, np.array([0, n - 1])])


def bw_row(
    res, section, impl, label, n, bytes_per_call, clock, call, reps_n, trials, check, extra=None
):
    row = {
        "impl": impl,
        "label": label,
        "n": n,
        "log2n": round(math.log2(n)) if n else 0,
        "bytes_per_call": bytes_per_call,
    }
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
        row.update(
            {
                "s_per_call": st["median"],
                "gbps": bytes_per_call / st["median"] / 1e9,
                "gbps_best": bytes_per_call / st["min"] / 1e9,
                "reps": reps_n,
                "trials": trials,
            }
        )
        if info["starved_trials"]:
            res.note(
                section,
                "%s n=%d: %d trial(s) may include host-bound gaps"
                % (label, n, info["starved_trials"]),
            )
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
        bad.size,
        got.size,
        bad[0],
        got[bad[0]],
        want[bad[0]],
    )


def gpu_ms(torch, fn, reps, trials):
    """GPU milliseconds per call of ``fn`` (torch CUDA events): (median, min, max) over
    ``trials`` batches of ``reps`` calls, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times), min(times), max(times)


# ---- pictures of a run's JSON (bench/plot_*.py; matplotlib, imported only there)


def load_rows(paths, keep):
    """The rows of the JSON files ``paths`` (each ``{"device": …, "rows": […]}``, as the
    benchmark scripts write them) that ``keep`` accepts, and the device the last one names."""
    rows, device = [], ""
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        rows.extend(r for r in run["rows"] if keep(r))
        device = run.get("device", device)
    return rows, device


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, title, out):
    """Titles, lays out and writes ``fig`` to the PNG ``out``."""
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
