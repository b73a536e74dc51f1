#!/usr/bin/env python3
"""Several GPUs: what a ferrocuda launch costs and moves on one GPU and on two, and what Dask
adds per task — the measured inputs of the scale model in BENCHMARKS.md ("Beyond one GPU").

Sections (each skipped with a note where its GPUs or libraries are missing):

* **launch** -- host µs per call of ``kernels.add`` on three CuPy float32[1024] arrays, timed
  interleaved as in ``python_bench.py`` (batches of back-to-back calls and one synchronization;
  median over rounds): arrays on device 0 with device 0 current (the one-GPU row of
  BENCHMARKS.md); arrays on device 1 with device 0 current (each launch binds device 1's
  context and restores device 0's); arrays on device 1 with device 1 current.
* **threads** -- two threads launching at once, each on its own GPU's arrays (or both on GPU 0
  with one GPU): µs per call in each thread and launches per second in all.
* **bandwidth** -- ``add`` at 2^28 float32 (2^26 with ``--quick``), GPU time by CUDA events
  behind a spin kernel (as ``python_bench.py``): device 0 alone, device 1 alone, and both at
  once (both batches queued behind equal spins; aggregate = bytes of both / the longer time).
* **dask** -- wall time per chunk of ``elementwise(kernels.add, x, x)`` (examples/
  dask_kernels.py) on chunks of ones made on the GPU, of which one element per chunk comes
  back: over many tiny chunks (the engine's cost per task; three tasks per chunk) and over
  large ones (GB/s through the engine), on the threaded scheduler and on a two-process
  ``LocalCluster`` (both on GPU 0).

Usage: python3 bench/multi_gpu.py [--quick] [--json OUT.json] [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from bench_common import Budget, Reps, Results, calibrate, interleaved, launch_row, log, summarize

HERE = Path(__file__).resolve().parent
# The example next to the tests (.gpu/python/examples on the GPU machine, python/examples here).
EXAMPLES = [HERE.parent / "python" / "examples"]


def add_rows(res, reps, cp, np, fk, devices):
    """The launch rows: one per (arrays' device, current device) pair."""
    n = 1024
    with interleaved(res, reps, section="launch"):
        for arrays_on, current in devices:
            with cp.cuda.Device(arrays_on):
                a = cp.arange(n, dtype=cp.float32)
                b = cp.ones(n, cp.float32)
                out = cp.empty_like(a)
            want = np.arange(n, dtype=np.float32) + 1

            def call(a=a, b=b, out=out, current=current):
                cp.cuda.Device(current).use()
                fk.add(a, b, out)

            def sync(arrays_on=arrays_on):
                with cp.cuda.Device(arrays_on):
                    cp.cuda.runtime.deviceSynchronize()

            def check(out=out, call=call, sync=sync, want=want, arrays_on=arrays_on):
                # Poisoned on the array's own device, and finished before the launch: a fill
                # issued under another current device runs on that device's stream (peer
                # access), unordered with the launch on the arrays' device.
                with cp.cuda.Device(arrays_on):
                    out.fill(np.nan)
                    cp.cuda.runtime.deviceSynchronize()
                call()
                sync()
                got = cp.asnumpy(out)
                return bool(np.array_equal(got, want)), "" if np.array_equal(got, want) else repr(
                    got[:4]
                )

            def batch(calls, a=a, b=b, out=out, current=current):
                cp.cuda.Device(current).use()
                add = fk.add
                for _ in range(calls):
                    add(a, b, out)

            launch_row(
                res,
                reps,
                "cupy",
                f"add, arrays on device {arrays_on}, device {current} current",
                f"dev{arrays_on}_cur{current}",
                call,
                sync,
                check=check,
                batch_fn=batch,
            )
        cp.cuda.Device(0).use()


def thread_rows(res, reps, cp, np, fk, devices):
    """Two threads launching at once, thread i on `devices[i]`'s arrays."""
    n, calls = 1024, reps.calls
    arrays = []
    for d in devices:
        with cp.cuda.Device(d):
            arrays.append(
                (cp.arange(n, dtype=cp.float32), cp.ones(n, cp.float32), cp.empty(n, cp.float32))
            )
    per = [[] for _ in devices]
    barrier = threading.Barrier(len(devices))

    def worker(i):
        d = devices[i]
        cp.cuda.Device(d).use()
        a, b, out = arrays[i]
        for r in range(reps.warmup // calls + 1 + reps.batches):
            barrier.wait(60)
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                fk.add(a, b, out)
            cp.cuda.runtime.deviceSynchronize()
            if r > reps.warmup // calls:
                per[i].append((time.perf_counter_ns() - t0) / calls / 1e3)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(devices))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for i, d in enumerate(devices):
        ok = bool(np.array_equal(cp.asnumpy(arrays[i][2]), np.arange(n, dtype=np.float32) + 1))
        st = summarize(per[i]) if per[i] else None
        row = {
            "thread": i,
            "device": d,
            "devices": list(devices),
            "checked": ok,
            "us_per_call": st and st["median"],
            "p10_us": st and st["p10"],
            "p90_us": st and st["p90"],
        }
        res.data.setdefault("threads", []).append(row)
        log("threads: thread %d on device %d: %s us/call" % (i, d, st and round(st["median"], 3)))


class DeviceClock:
    """CUDA events and a spin kernel on device `d`'s current (legacy) stream."""

    def __init__(self, cp, d):
        from bench_common import SPIN_SRC

        self.cp, self.d = cp, d
        with cp.cuda.Device(d):
            self.e0, self.e1 = cp.cuda.Event(), cp.cuda.Event()
            self.kernel = cp.RawKernel(SPIN_SRC, "spin")
            self.cycles_per_us = calibrate(self)

    def spin_cycles(self, cycles):
        with self.cp.cuda.Device(self.d):
            self.kernel((1,), (1,), (self.cp.int64(int(cycles)),))

    def record(self, e):
        with self.cp.cuda.Device(self.d):
            e.record()

    def done(self, e):
        return bool(e.done)

    def wait(self):
        self.e1.synchronize()

    def elapsed_ms(self):
        return float(self.cp.cuda.get_elapsed_time(self.e0, self.e1))


def bandwidth_rows(res, reps, cp, np, fk, log2n, devices, together):
    """GB/s of add at 2^log2n on each of `devices` (at once when `together`)."""
    n = 1 << log2n
    sets, clocks = {}, {}
    for d in devices:
        with cp.cuda.Device(d):
            sets[d] = (
                cp.random.random(n, dtype=cp.float32),
                cp.random.random(n, dtype=cp.float32),
                cp.empty(n, cp.float32),
            )
        clocks[d] = DeviceClock(cp, d)
    calls = 20
    per = {d: [] for d in devices}
    for _ in range(reps.trials):
        for d in devices:  # both spins first, so that both batches start about together
            clocks[d].spin_cycles(2000 * clocks[d].cycles_per_us)
            clocks[d].record(clocks[d].e0)
            if not together:
                a, b, out = sets[d]
                for _ in range(calls):
                    fk.add(a, b, out)
                clocks[d].record(clocks[d].e1)
                clocks[d].wait()
                per[d].append(clocks[d].elapsed_ms() / 1e3 / calls)
        if together:
            for d in devices:
                a, b, out = sets[d]
                for _ in range(calls):
                    fk.add(a, b, out)
                clocks[d].record(clocks[d].e1)
            for d in devices:
                clocks[d].wait()
                per[d].append(clocks[d].elapsed_ms() / 1e3 / calls)
    for d in devices:
        a, b, out = sets[d]
        with cp.cuda.Device(d):
            ok = bool(cp.all(out == a + b))
    bytes_per = 12 * n
    rows = []
    for d in devices:
        st = summarize(per[d])
        rows.append(
            {
                "device": d,
                "together_with": [x for x in devices if x != d] if together else [],
                "log2n": log2n,
                "s_per_call": st["median"],
                "gbps": bytes_per / st["median"] / 1e9,
                "checked": ok,
            }
        )
    if together:
        slowest = max(r["s_per_call"] for r in rows)
        rows.append(
            {
                "device": "all",
                "devices": list(devices),
                "log2n": log2n,
                "gbps": len(devices) * bytes_per / slowest / 1e9,
                "checked": ok,
            }
        )
    for r in rows:
        res.data.setdefault("bandwidth", []).append(r)
        log(
            "bandwidth: device %s%s: %.0f GB/s"
            % (r["device"], " (together)" if together else "", r["gbps"])
        )


def _device_ones(block_info=None):
    """A chunk of ones made on the worker's GPU (no data in the graph)."""
    import cupy as cp

    return cp.ones(block_info[None]["chunk-shape"], cp.float32)


def _first(block):
    """A chunk's first element (so that only one element per chunk comes back)."""
    return block[:1]


def dask_rows(res, quick, timeout):
    """Wall time per chunk of the example's elementwise add through Dask: per chunk, three
    tasks (ones made on the GPU, ``kernels.add``, the first element taken) and one element
    back, so the figure is the engine's cost plus the kernels'."""
    for p in EXAMPLES:
        sys.path.insert(0, str(p))
    import dask.array as da
    import dask_kernels as ex
    import numpy as np

    from ferrocuda import kernels

    cases = [("tiny", 1 << 10, 512 if quick else 2048), ("large", 1 << 24, 8 if quick else 32)]

    def measure(compute, label):
        for kind, n_chunk, chunks in cases:
            x = da.map_blocks(
                _device_ones,
                chunks=((n_chunk,) * chunks,),
                dtype=np.float32,
                meta=ex._meta(np.float32, 1),
            )
            y = ex.elementwise(kernels.add, x, x).map_blocks(_first, chunks=((1,) * chunks,))
            compute(y)  # warm-up: workers import, kernels load
            ts = []
            for _ in range(3):
                t0 = time.perf_counter()
                (got,) = compute(y)
                ts.append(time.perf_counter() - t0)
            ok = bool(np.all(ex.to_host(got) == 2.0))
            st = summarize(ts)
            row = {
                "scheduler": label,
                "case": kind,
                "chunk_elements": n_chunk,
                "chunks": chunks,
                "s": st["median"],
                "us_per_chunk": st["median"] / chunks * 1e6,
                "gbps_through_engine": 12 * n_chunk * chunks / st["median"] / 1e9,
                "checked": ok,
            }
            res.data.setdefault("dask", []).append(row)
            log(
                "dask %-22s %-5s %5d chunks of %8d: %9.1f us/chunk, %7.1f GB/s"
                % (label, kind, chunks, n_chunk, row["us_per_chunk"], row["gbps_through_engine"])
            )

    measure(ex.threaded(4), "threads (4)")
    try:
        import distributed
    except ImportError:
        res.note("dask", "distributed not installed: the LocalCluster rows skipped")
        return
    with ex.local_cluster(2, timeout) as cluster, distributed.Client(cluster, timeout=timeout) as c:
        measure(ex.on_client(c, timeout), "LocalCluster (2 procs)")


def table(res):
    lines = [
        "",
        "#### Launch cost on several GPUs (µs per call, CuPy float32[1024], interleaved)",
        "",
        "| path | µs/call | p10–p90 | checked |",
        "| --- | ---: | ---: | :---: |",
    ]
    for r in res.data["launch"]:
        if "us_per_call" in r:
            lines.append(
                "| %s | %.3f | %.3f–%.3f | %s |"
                % (
                    r["path"],
                    r["us_per_call"],
                    r["p10_us"],
                    r["p90_us"],
                    "ok" if r.get("checked") else "WRONG",
                )
            )
    for r in res.data.get("threads", []):
        lines.append(
            "| thread %d of %d, device %d, launching at once | %s | %s | %s |"
            % (
                r["thread"],
                len(r["devices"]),
                r["device"],
                "%.3f" % r["us_per_call"] if r["us_per_call"] else "-",
                "%.3f–%.3f" % (r["p10_us"], r["p90_us"]) if r["us_per_call"] else "-",
                "ok" if r["checked"] else "WRONG",
            )
        )
    lines += [
        "",
        "#### add bandwidth (GB/s, GPU time)",
        "",
        "| device(s) | n | GB/s | checked |",
        "| --- | ---: | ---: | :---: |",
    ]
    for r in res.data.get("bandwidth", []):
        who = (
            "both at once (aggregate)"
            if r["device"] == "all"
            else "device %s%s"
            % (r["device"], " (both busy)" if r.get("together_with") else " alone")
        )
        lines.append(
            "| %s | 2^%d | %.0f | %s |"
            % (who, r["log2n"], r["gbps"], "ok" if r["checked"] else "WRONG")
        )
    if res.data.get("dask"):
        lines += [
            "",
            "#### Dask: elementwise add through the engine",
            "",
            "| scheduler | chunks × elements | µs per chunk | GB/s | checked |",
            "| --- | --- | ---: | ---: | :---: |",
        ]
        for r in res.data["dask"]:
            lines.append(
                "| %s | %d × %d | %.1f | %.1f | %s |"
                % (
                    r["scheduler"],
                    r["chunks"],
                    r["chunk_elements"],
                    r["us_per_chunk"],
                    r["gbps_through_engine"],
                    "ok" if r["checked"] else "WRONG",
                )
            )
    for note in res.data["notes"]:
        lines.append("* note [%s]: %s" % (note["section"], note["note"]))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "/tmp"), "multi_gpu.json"))
    ap.add_argument("--budget", type=float, default=float(os.environ.get("BENCH_BUDGET_S", "360")))
    args = ap.parse_args()
    budget, res, reps = Budget(args.budget), Results(), Reps(args.quick)
    import cupy as cp
    import numpy as np

    import ferrocuda

    fk = ferrocuda.kernels
    count = cp.cuda.runtime.getDeviceCount()
    res.data["machine"] = {
        "gpus": [cp.cuda.runtime.getDeviceProperties(d)["name"].decode() for d in range(count)],
        "ferrocuda": ferrocuda.__version__,
    }
    two = count >= 2
    if not two:
        res.note(
            "launch", "one GPU only: the two-GPU rows are to be measured on a machine with two"
        )
    steps = [
        (
            "launch",
            lambda: add_rows(res, reps, cp, np, fk, [(0, 0)] + ([(1, 0), (1, 1)] if two else [])),
        ),
        ("threads", lambda: thread_rows(res, reps, cp, np, fk, [0, 1] if two else [0, 0])),
        (
            "bandwidth",
            lambda: bandwidth_rows(res, reps, cp, np, fk, 26 if args.quick else 28, [0], False),
        ),
    ]
    if two:
        steps += [
            (
                "bandwidth",
                lambda: bandwidth_rows(res, reps, cp, np, fk, 26 if args.quick else 28, [1], False),
            ),
            (
                "bandwidth",
                lambda: bandwidth_rows(
                    res, reps, cp, np, fk, 26 if args.quick else 28, [0, 1], True
                ),
            ),
        ]
    steps.append(("dask", lambda: dask_rows(res, args.quick, 120.0)))
    for section, step in steps:
        if budget.left() < 30:
            res.note(section, "time budget exhausted: skipped")
            continue
        try:
            step()
        except ImportError as e:
            res.note(section, "skipped: %s" % e)
        except Exception as e:  # noqa: BLE001 - one failing section must not hide the others
            traceback.print_exc()
            res.note(section, "failed: %s: %s" % (type(e).__name__, e))
    with open(args.json, "w") as f:
        json.dump(res.data, f, indent=1)
    print(table(res))
    wrong = [
        r
        for sec in ("launch", "threads", "bandwidth", "dask")
        for r in res.data.get(sec, [])
        if r.get("checked") is False
    ]
    return 1 if wrong or any("failed" in n["note"] for n in res.data["notes"]) else 0


if __name__ == "__main__":
    sys.exit(main())
