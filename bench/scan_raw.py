#!/usr/bin/env python3
"""`cumsum_f32` launched raw from one or more cubins, beside CUB's DeviceScan, in one process:
what a build's scan costs with its statuses zero-filled before every call (a memset on the
stream, as the launcher did before persistent workspaces) and without (the statuses kept from
the call before, as the launcher does now for `#[kernel(persist(…))]`). CUDA events, `--calls`
calls per trial, median of `--trials` trials, the variants interleaved trial by trial; every
variant's output checked against float64 `numpy.cumsum` on a prefix.

Usage (on the GPU machine): python3 bench/scan_raw.py NAME=path.cubin[:zero] [...]
    [--log2 28,24] [--calls 20] [--trials 7]
`:zero`: a build from before the persistent statuses (zero-filled calls only).
A cubin from `ptxas -arch=sm_90 ferrocuda_kernels.ptx` (the bundle's PTX) of any build whose
`cumsum_f32` takes (x: Slice<f32>, out: SliceMut<f32>, status: Scratch<u64>) with tiles of 8192.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TILE = 8192


class Pair(ctypes.Structure):
    """`Slice`, `SliceMut` and `Scratch`: a pointer and a length."""

    _fields_ = [("ptr", ctypes.c_uint64), ("len", ctypes.c_uint64)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cubins", nargs="+", help="NAME=path.cubin")
    ap.add_argument("--log2", default="28,24")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--trials", type=int, default=7)
    a = ap.parse_args()

    import cupy as cp
    import numpy as np

    from bench_gallery import _cub_scan

    drv = cp.cuda.driver
    cp.zeros(1)  # the device's primary context, current on this thread
    funcs = {}
    for spec in a.cubins:
        name, path = spec.split("=", 1)
        zero_only = path.endswith(":zero")
        path = path.removesuffix(":zero")
        with open(path, "rb") as f:
            mod = drv.moduleLoadData(f.read())
        funcs[name] = (mod, drv.moduleGetFunction(mod, "cumsum_f32"), zero_only)
    cub = _cub_scan(cp)
    stream = cp.cuda.Stream(non_blocking=True)
    for lg in (int(v) for v in a.log2.split(",")):
        n = 1 << lg
        tiles = -(-n // TILE)
        x = cp.random.standard_normal(n, dtype=cp.float32)
        out = cp.empty_like(x)
        y = x.copy()
        words = tiles + 1
        status = cp.zeros(words, cp.uint64)
        args = (Pair * 3)(Pair(x.data.ptr, n), Pair(out.data.ptr, n), Pair(status.data.ptr, words))
        ptrs = (ctypes.c_void_p * 3)(*[ctypes.addressof(args[i]) for i in range(3)])

        def launch(f: int, tiles: int = tiles, ptrs: Any = ptrs) -> None:
            drv.launchKernel(f, tiles, 1, 1, 128, 1, 1, 0, stream.ptr, ctypes.addressof(ptrs), 0)

        def variant(f: int, fill: bool, status: Any = status, words: int = words):
            def one_call() -> None:
                if fill:
                    status.data.memset_async(0, 8 * words, stream)
                launch(f)

            return one_call

        cases = {}
        for name, (_, f, zero_only) in funcs.items():
            cases[f"{name} zero-filled"] = variant(f, True)
            if not zero_only:
                cases[f"{name} kept"] = variant(f, False)
        if cub is not None:

            def cub_call(y: Any = y) -> None:
                with stream:
                    cub(y)

            cases["CUB DeviceScan (in place)"] = cub_call
        want = np.cumsum(cp.asnumpy(x[: 1 << 16]).astype(np.float64))
        for name, call in cases.items():
            if "CUB" in name:
                continue
            status.fill(0)
            stream.synchronize()
            for _ in range(3):  # the kept statuses' later launches too
                out.fill(float("nan"))
                call()
            stream.synchronize()
            got = cp.asnumpy(out[: 1 << 16]).astype(np.float64)
            err = np.max(np.abs(got - want) / (1 + np.abs(want)))
            assert np.isfinite(got).all() and err < 1e-2, (name, err)
        times: dict[str, list[float]] = {k: [] for k in cases}
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        for _ in range(a.trials):
            for name, call in cases.items():
                call()  # warm
                start.record(stream)
                for _ in range(a.calls):
                    call()
                stop.record(stream)
                stop.synchronize()
                times[name].append(cp.cuda.get_elapsed_time(start, stop) * 1e3 / a.calls)
        base = statistics.median(times.get("CUB DeviceScan (in place)", [float("nan")]))
        print(f"2^{lg}: {a.calls} calls x {a.trials} trials, median (min-max) per call")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(
                f"  {name:<34} {m:8.1f} us ({min(ts):.1f}-{max(ts):.1f})"
                f"  {8 * n / m / 1e3:6.0f} GB/s  CUB/this {base / m:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
