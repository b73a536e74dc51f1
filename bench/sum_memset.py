#!/usr/bin/env python3
"""`sum` f32 as built (its workspaces persist between launches: no zero-fill before a call)
beside the same calls each preceded by a zero-fill of the workspace's bytes on the stream
(what the launcher did before the workspaces persisted: a `cuMemsetD8Async` and its gap),
and CUB's reduction (`cupy.sum`). CUDA events around `--calls` back-to-back calls per trial,
median of `--trials` trials, the variants interleaved trial by trial; every result checked
against float64 `math.fsum` within 64·ε·Σ|x| (the kernel's bound).

Usage (on the GPU machine, the wheel importable): python3 bench/sum_memset.py
    [--log2 20,24,28] [--calls 50] [--trials 9]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2", default="20,24,28")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--trials", type=int, default=9)
    args = ap.parse_args()

    import cupy as cp
    import numpy as np

    import ferrocuda

    K = ferrocuda.kernels
    stream = cp.cuda.Stream(non_blocking=True)
    # The bytes the launcher zero-filled before each call: the ticket and one partial per
    # block of the automatic grid (a few KiB); a memset of any size this small costs its
    # node and gap, not its bytes.
    fill = cp.zeros(64 << 10, cp.uint8)
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    with stream:
        for lg in (int(v) for v in args.log2.split(",")):
            if not one_size(cp, np, K, stream, fill, lg, args.calls, args.trials):
                return 1
    return 0


def one_size(cp, np, K, stream, fill, lg: int, calls: int, trials: int) -> bool:
    """Times and checks the three variants at 2^lg elements; False if a result is wrong."""
    n = 1 << lg
    host = np.random.default_rng(lg).standard_normal(n).astype(np.float32)
    x = cp.asarray(host)
    out = cp.full(1, cp.nan, cp.float32)
    exact = math.fsum(host.astype(np.float64))
    tol = 64 * 2.0**-24 * float(np.abs(host.astype(np.float64)).sum())

    def ours() -> None:
        K.sum(x, out)

    def ours_fill() -> None:
        cp.cuda.runtime.memsetAsync(fill.data.ptr, 0, 8192, stream.ptr)
        K.sum(x, out)

    def cub() -> None:
        cp.sum(x, out=out.reshape(()))

    variants = {"ferrocuda sum": ours, "  + memset before each": ours_fill, "cupy.sum (CUB)": cub}
    for name, f in variants.items():
        out.fill(cp.nan)
        f()
        stream.synchronize()
        got = float(out.get()[0])
        if not abs(got - exact) <= tol:
            print(f"{name} at 2^{lg}: {got} against {exact} (tolerance {tol})")
            return False
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(trials):
        for name, f in variants.items():
            f()
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(stream)
            for _ in range(calls):
                f()
            b.record(stream)
            b.synchronize()
            times[name].append(cp.cuda.get_elapsed_time(a, b) * 1e3 / calls)
    base = statistics.median(times["ferrocuda sum"])
    print(f"2^{lg} f32: median µs per call (min-max), CUDA events over {calls} calls")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(
            f"  {name:24s} {med:9.2f} ({min(ts):.2f}-{max(ts):.2f})  "
            f"{med / base:6.3f}× ferrocuda's time"
        )
    return True


if __name__ == "__main__":
    sys.exit(main())
