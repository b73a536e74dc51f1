#!/usr/bin/env python3
"""Where a gap of `cumsum` against CUB's DeviceScan lies, outside Nsight Compute: ferrocuda's
f32 scan at 2^28 out of place and in place, CUB's scan in place, a D2D copy of the same bytes,
and a memset of the scan's tile statuses (one word per tile of 8192 and one), each timed with
CUDA events (20 calls, median of 7 trials) at the GPU's own clocks; then ours and CUB's at
smaller sizes (2^16, 2^20, 2^24: 200 calls per trial), where the launches' overheads weigh.

Usage (on the GPU machine, the wheel importable): python3 bench/scan_split.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    import cupy as cp
    import numpy as np

    import ferrocuda
    from bench_gallery import _cub_scan

    k = ferrocuda.kernels
    n = 1 << 28
    x = cp.random.standard_normal(n, dtype=cp.float32)
    out = cp.empty_like(x)
    y = x.copy()
    ws = cp.empty(n // 8192 + 1, cp.uint64)
    cub = _cub_scan(cp)

    def timed(f, reps=20, trials=7):
        for _ in range(3):
            f()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        per = []
        for _ in range(trials):
            e0.record()
            for _ in range(reps):
                f()
            e1.record()
            e1.synchronize()
            per.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3 / reps)
        return float(np.median(per))

    rows = [
        ("ferrocuda cumsum x -> out", lambda: k.cumsum(x, out)),
        ("ferrocuda cumsum in place", lambda: k.cumsum(y, y)),
        ("copy x -> out (D2D)", lambda: out.__setitem__(slice(None), x)),
        (f"memset {ws.size} u64 (the statuses)", lambda: ws.fill(0)),
    ]
    if cub is not None:
        rows.insert(2, ("CUB DeviceScan in place", lambda: cub(y)))
    for name, f in rows:
        print(f"{name:40s} {timed(f):9.1f} us", flush=True)
    for logn in (16, 20, 24):
        xs = cp.random.standard_normal(1 << logn, dtype=cp.float32)
        outs, ys = cp.empty_like(xs), xs.copy()
        ours = timed(lambda xs=xs, outs=outs: k.cumsum(xs, outs), reps=200)
        line = f"2^{logn}: ferrocuda cumsum {ours:8.1f} us"
        if cub is not None:
            theirs = timed(lambda ys=ys: cub(ys), reps=200)
            line += f", CUB {theirs:8.1f} us ({theirs / ours:.3f}x)"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
